//go:build linux && (amd64 || arm64)

package salvage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkExport measures ExportChain against its floor, measured in the
// same run on the same files: one plain read (1 MiB preads) of every
// layer's data extents, each layer once, hidden data included. The chain
// is a 256 MiB volume: a base snapshot three quarters full, and three
// layers above it each rewriting a quarter of the volume in pieces of
// 64 KiB to 1 MiB (about 448 MiB of extents in all).
//
// Metrics: export-MB/s and floor-MB/s are the volume's size divided by
// the best time of each over the iterations (other processes share the
// machine; the best is the least disturbed), so export/floor is the
// floor's time over the export's: 1 means as fast as reading the data
// once. "cold" drops the
// layers' pages from the page cache (posix_fadvise DONTNEED) before each
// floor and each export: the case of an orphan's data, read from the
// device. "warm" reads from the page cache, where the SHA-256 of the image
// (a single sequential hash) bounds the export. The output is a sparse
// file, new for each export; its write-back is not timed (the floor
// writes nothing).
// "cold-discard" writes to an io.WriterAt that drops what it gets, to show
// the export's reading and hashing without the output's cost.
//
// The export must also hash the whole image, holes included, and SHA-256
// is one sequential stream: hash-floor-MB/s is that hash alone over the
// volume's size, in the same run, and export/floors is the larger of the
// two floors' times over the export's. When the layers are cached, the
// hash, not the read, is the export's floor.
func BenchmarkExport(b *testing.B) {
	dir := b.TempDir()
	c := makeBenchChain(b, dir)
	outPath := filepath.Join(b.TempDir(), "image.raw")
	for _, mode := range []string{"cold", "warm", "cold-discard"} {
		b.Run(mode, func(b *testing.B) {
			cold := mode != "warm"
			var floor, hashFloor, export time.Duration
			for b.Loop() {
				b.StopTimer()
				// A new output file each time, as a tool writes one.
				if err := os.Remove(outPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
					b.Fatal(err)
				}
				out, err := os.Create(outPath)
				if err != nil {
					b.Fatal(err)
				}
				var w io.WriterAt = out
				if mode == "cold-discard" {
					w = discardWriter{}
				}
				if cold {
					benchDropCache(b, dir, c, nil)
				}
				floor = bestTime(floor, benchFloor(b, dir, c))
				hashFloor = bestTime(hashFloor, benchHashFloor(c.Size))
				if cold {
					benchDropCache(b, dir, c, nil)
				}
				start := time.Now()
				b.StartTimer()
				if _, err := ExportChain(context.Background(), dir, c, w, ExportOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				export = bestTime(export, time.Since(start))
				benchDropCache(b, dir, c, out) // flush the output, untimed
				out.Close()
				b.StartTimer()
			}
			mb := float64(c.Size) / 1e6
			b.ReportMetric(mb/export.Seconds(), "export-MB/s")
			b.ReportMetric(mb/floor.Seconds(), "floor-MB/s")
			b.ReportMetric(floor.Seconds()/export.Seconds(), "export/floor")
			b.ReportMetric(mb/hashFloor.Seconds(), "hash-floor-MB/s")
			b.ReportMetric(max(floor, hashFloor).Seconds()/export.Seconds(), "export/floors")
		})
	}
}

// benchHashFloor is the time of the SHA-256 of size bytes, hashed from a
// 1 MiB buffer: what hashing the image costs without reading anything.
func benchHashFloor(size int64) time.Duration {
	buf := make([]byte, 1<<20)
	start := time.Now()
	h := sha256.New()
	for left := size; left > 0; left -= int64(len(buf)) {
		h.Write(buf[:min(left, int64(len(buf)))])
	}
	h.Sum(nil)
	return time.Since(start)
}

// bestTime is the shorter of best (0: none yet) and d.
func bestTime(best, d time.Duration) time.Duration {
	if best == 0 || d < best {
		return d
	}
	return best
}

// discardWriter is an io.WriterAt that keeps nothing.
type discardWriter struct{}

func (discardWriter) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// BenchmarkExportMemory4GiB exports a 4 GiB sparse volume with 64 MiB of
// data in a child process (see TestExportMemoryBounded) and reports its
// peak resident set.
func BenchmarkExportMemory4GiB(b *testing.B) {
	dir := b.TempDir()
	makeRSSChain(b, dir)
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o700); err != nil {
		b.Fatal(err)
	}
	var peak int64
	var took time.Duration
	for b.Loop() {
		hwm, _, d := runRSSChild(b, dir)
		peak, took = max(peak, hwm), took+d
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(rssVolumeSize)/1e6*float64(b.N)/took.Seconds(), "child-MB/s")
}

// makeBenchChain writes the benchmark's chain.
func makeBenchChain(b *testing.B, dir string) Chain {
	b.Helper()
	const size = 256 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	c := Chain{Size: size, Layers: []string{"volume-head-004.img", "volume-snap-3.img", "volume-snap-2.img", "volume-snap-1.img"}}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for i, name := range c.Layers {
		var ops []layerOp
		if i == len(c.Layers)-1 {
			for off := int64(0); off < size; off += 1 << 20 {
				if rng.IntN(4) != 0 {
					ops = append(ops, writeAt(off, data))
				}
			}
		} else {
			for written := 0; written < size/4; {
				n := (1 + rng.IntN(16)) << 16
				off := rng.Int64N(size/(64<<10)) * (64 << 10)
				n = int(min(int64(n), size-off))
				ops = append(ops, writeAt(off, data[:n]))
				written += n
			}
		}
		makeLayer(b, filepath.Join(dir, name), size, ops...)
	}
	return c
}

// benchFloor reads every layer's data extents once, found with
// SEEK_DATA/SEEK_HOLE, in 1 MiB preads, and returns the time it took.
func benchFloor(b *testing.B, dir string, c Chain) time.Duration {
	b.Helper()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for _, name := range c.Layers {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		fd := int(f.Fd())
		for pos := int64(0); ; {
			d, err := syscall.Seek(fd, pos, 3)
			if errors.Is(err, syscall.ENXIO) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			h, err := syscall.Seek(fd, d, 4)
			if err != nil {
				b.Fatal(err)
			}
			for off := d; off < h; off += int64(len(buf)) {
				if _, err := f.ReadAt(buf[:min(int64(len(buf)), h-off)], off); err != nil {
					b.Fatal(err)
				}
			}
			pos = h
		}
		f.Close()
	}
	return time.Since(start)
}

// benchDropCache drops the layers' pages (and out's, after flushing it)
// from the page cache.
func benchDropCache(b *testing.B, dir string, c Chain, out *os.File) {
	b.Helper()
	drop := func(f *os.File) {
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		const posixFadvDontneed = 4
		if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, posixFadvDontneed, 0, 0); errno != 0 {
			b.Fatal(fmt.Errorf("posix_fadvise: %w", errno))
		}
	}
	if out != nil {
		drop(out)
		return
	}
	for _, name := range c.Layers {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		drop(f)
		f.Close()
	}
}
