//go:build linux

package salvage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The harness writes replica layers the way the engine lays them out
// (volume-head-NNN.img over volume-snap-*.img, sparse, 4096-byte blocks)
// and reads them back with refImage, a naive block-by-block reader written
// from longhorn-engine's diffDisk.lookup and diffDisk.read: for each block,
// one FIEMAP call per layer from the head down, the bottom (or backing
// file) never probed, pread clipped to the file's size. It shares no code
// with the export.

const blk = ExportBlockSize

// refHasExtent is the engine's per-block probe: FIEMAP on [off, off+4096)
// asking for one extent (go-fibmap's Fiemap with FIEMAP_FLAG_SYNC), encoded
// byte by byte here so that it does not share the export's struct layout.
func refHasExtent(t testing.TB, f *os.File, off int64) bool {
	t.Helper()
	buf := make([]byte, 32+56)
	binary.NativeEndian.PutUint64(buf[0:], uint64(off))
	binary.NativeEndian.PutUint64(buf[8:], blk)
	binary.NativeEndian.PutUint32(buf[16:], 1) // FIEMAP_FLAG_SYNC
	binary.NativeEndian.PutUint32(buf[24:], 1) // fm_extent_count
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), 0xC020660B, uintptr(unsafe.Pointer(&buf[0])))
	if errno != 0 {
		t.Fatalf("FIEMAP %s at %d: %v", f.Name(), off, errno)
	}
	return binary.NativeEndian.Uint32(buf[20:]) > 0
}

// refHasData is the SEEK_DATA view of the same block.
func refHasData(t testing.TB, f *os.File, off int64) bool {
	t.Helper()
	d, err := syscall.Seek(int(f.Fd()), off, 3)
	if errors.Is(err, syscall.ENXIO) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return d < off+blk
}

// refImage reads the whole image as the engine would (seekData: with
// SEEK_DATA instead of FIEMAP), and says for each block where it came
// from (index into the layers, len(Layers) for the backing file).
func refImage(t testing.TB, dir string, c Chain, seekData bool) ([]byte, []int) {
	t.Helper()
	var files []*os.File
	for _, name := range c.Layers {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	if c.BackingFile != "" {
		f, err := os.Open(c.BackingFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	probed := len(c.Layers)
	if c.BackingFile == "" {
		probed--
	}
	img := make([]byte, c.Size)
	var src []int
	for off := int64(0); off < c.Size; off += blk {
		from := len(files) - 1
		if off/blk >= c.Size/blk {
			from = 0 // past the location map: the head
		} else {
			for i := 0; i < probed; i++ {
				has := refHasExtent
				if seekData {
					has = refHasData
				}
				if has(t, files[i], off) {
					from = i
					break
				}
			}
		}
		src = append(src, from)
		info, err := files[from].Stat()
		if err != nil {
			t.Fatal(err)
		}
		end := min(off+blk, c.Size)
		if n := min(end, info.Size()) - off; n > 0 {
			if _, err := files[from].ReadAt(img[off:off+n], off); err != nil {
				t.Fatal(err)
			}
		}
	}
	return img, src
}

// layerOp is one thing done to a layer file.
type layerOp func(t testing.TB, f *os.File)

func writeAt(off int64, p []byte) layerOp {
	return func(t testing.TB, f *os.File) {
		if _, err := f.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
	}
}

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// fallocate preallocates (mode 0, or FALLOC_FL_KEEP_SIZE = 1) or punches
// a hole (FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE = 3).
func fallocate(mode uint32, off, n int64) layerOp {
	return func(t testing.TB, f *os.File) {
		if err := syscall.Fallocate(int(f.Fd()), mode, off, n); err != nil {
			t.Skipf("fallocate mode %d on %s: %v", mode, f.Name(), err)
		}
	}
}

// makeLayer creates dir/name with the given size and applies ops.
func makeLayer(t testing.TB, path string, size int64, ops ...layerOp) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		op(t, f)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// requireFiemap skips a test whose expectations are FIEMAP's where the
// temporary directory's filesystem has none (tmpfs).
func requireFiemap(t *testing.T, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var req exportFiemapRequest
	if _, errno := exportFiemap(f.Fd(), 0, 4096, &req); errno != 0 {
		t.Skipf("the filesystem of %s has no FIEMAP (%v): set TMPDIR to an ext4 or xfs directory", dir, errno)
	}
}

// exportToFile exports into a new file under t.TempDir and returns its
// bytes and the result.
func exportToFile(t *testing.T, dir string, c Chain, opts ExportOptions) ([]byte, ExportResult, os.FileInfo) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), "image.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	res, err := ExportChain(context.Background(), dir, c, out, opts)
	if err != nil {
		t.Fatalf("ExportChain: %v", err)
	}
	info, err := out.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return got, res, info
}

// compareImages fails at the first differing block, naming its source.
func compareImages(t *testing.T, got, want []byte, src []int, c Chain) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("image is %d bytes, want %d", len(got), len(want))
	}
	for off := 0; off < len(want); off += blk {
		end := min(off+blk, len(want))
		if !bytes.Equal(got[off:end], want[off:end]) {
			from := "backing file"
			if s := src[off/blk]; s < len(c.Layers) {
				from = c.Layers[s]
			}
			t.Fatalf("block %d differs: got % x..., want % x... (the engine reads it from %s)", off/blk, got[off:off+8], want[off:off+8], from)
		}
	}
}

// TestExportZerosAndPreallocationOwnTheirBlocks is the engine's rule: a
// written zero block and a preallocated, never-written block in the head
// both hide the snapshot's data; only a hole shows it.
func TestExportZerosAndPreallocationOwnTheirBlocks(t *testing.T) {
	dir := t.TempDir()
	requireFiemap(t, dir)
	size := int64(6 * blk)
	makeLayer(t, filepath.Join(dir, "volume-snap-s1.img"), size, writeAt(0, fill('A', int(size))))
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size,
		writeAt(0, fill('H', blk)),      // block 0: new data
		writeAt(blk, fill(0, blk)),      // block 1: written zeros
		fallocate(0, 2*blk, blk),        // block 2: unwritten extent
		writeAt(4*blk+100, []byte{'x'}), // block 4: one byte written
		fallocate(3, 5*blk, blk),        // block 5: punched (a hole)
	)
	c := Chain{Size: size, Layers: []string{"volume-head-001.img", "volume-snap-s1.img"}}
	want := slices.Concat(fill('H', blk), fill(0, blk), fill(0, blk), fill('A', blk), fill(0, 100), []byte{'x'}, fill(0, blk-101), fill('A', blk))
	got, res, info := exportToFile(t, dir, c, ExportOptions{})
	if !bytes.Equal(got, want) {
		for b := 0; b < 6; b++ {
			if !bytes.Equal(got[b*blk:(b+1)*blk], want[b*blk:(b+1)*blk]) {
				t.Errorf("block %d: got %q..., want %q...", b, got[b*blk:b*blk+4], want[b*blk:b*blk+4])
			}
		}
	}
	if res.SHA256 != sha256.Sum256(want) || res.Size != size || info.Size() != size {
		t.Errorf("result %+v, file size %d; want size %d and the image's SHA-256", res, info.Size(), size)
	}
	if len(res.SeekDataLayers) != 0 {
		t.Errorf("SeekDataLayers = %v on a filesystem with FIEMAP", res.SeekDataLayers)
	}
	// The reference reader agrees (it is what the property test trusts).
	ref, _ := refImage(t, dir, c, false)
	if !bytes.Equal(ref, want) {
		t.Errorf("the reference reader disagrees with the engine's rule")
	}
}

// TestExportSeekDataFallback forces the path taken on a filesystem without
// FIEMAP: the layers are mapped with SEEK_DATA, named in the result, and a
// preallocated block may show the older data (the documented caveat); with
// RequireFiemap the export refuses.
func TestExportSeekDataFallback(t *testing.T) {
	dir := t.TempDir()
	size := int64(4 * blk)
	makeLayer(t, filepath.Join(dir, "volume-snap-s1.img"), size, writeAt(0, fill('A', int(size))))
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size,
		writeAt(0, fill('H', blk)), writeAt(blk, fill(0, blk)), fallocate(0, 2*blk, blk))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img", "volume-snap-s1.img"}}

	got, res, _ := exportToFile(t, dir, c, ExportOptions{forceSeekData: true})
	if !slices.Equal(res.SeekDataLayers, []string{"volume-head-001.img"}) {
		t.Errorf("SeekDataLayers = %q, want the head only (the bottom is read for its contents)", res.SeekDataLayers)
	}
	ref, _ := refImage(t, dir, c, true)
	if !bytes.Equal(got, ref) {
		t.Errorf("fallback export differs from a SEEK_DATA reader")
	}
	if !bytes.Equal(got[:2*blk], slices.Concat(fill('H', blk), fill(0, blk))) || !bytes.Equal(got[3*blk:], fill('A', blk)) {
		t.Errorf("data, written zeros or a hole read wrong through SEEK_DATA")
	}
	t.Logf("preallocated block through SEEK_DATA reads %q... (the engine reads zeros)", got[2*blk:2*blk+4])

	out := &memWriter{}
	_, err := ExportChain(context.Background(), dir, c, out, ExportOptions{forceSeekData: true, RequireFiemap: true})
	if !errors.Is(err, ErrExportNoFiemap) || !strings.Contains(err.Error(), "volume-head-001.img") {
		t.Errorf("RequireFiemap without FIEMAP: err = %v, want ErrExportNoFiemap naming the head", err)
	}
}

// TestExportNoChecksum: without the checksum the image is the same and
// ExportResult.SHA256 is zero; with it, the SHA-256 of the image.
func TestExportNoChecksum(t *testing.T) {
	dir := t.TempDir()
	size := int64(4 * blk)
	makeLayer(t, filepath.Join(dir, "volume-snap-s1.img"), size, writeAt(0, fill('A', int(size))))
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(blk, fill('H', blk)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img", "volume-snap-s1.img"}}

	summed, withSum, _ := exportToFile(t, dir, c, ExportOptions{})
	plain, without, _ := exportToFile(t, dir, c, ExportOptions{NoChecksum: true})
	if !bytes.Equal(summed, plain) {
		t.Fatal("the image without a checksum differs from the one with")
	}
	if withSum.SHA256 != sha256.Sum256(summed) {
		t.Errorf("SHA256 = %x, not the image's", withSum.SHA256)
	}
	if without.SHA256 != ([32]byte{}) {
		t.Errorf("NoChecksum: SHA256 = %x, want zero", without.SHA256)
	}
}

// TestExportShortLayersAndBackingFile: blocks past a short layer's end come
// from older layers; past the bottom's end they are zeros; with a backing
// file the oldest snapshot is probed and its holes show the backing file.
func TestExportShortLayersAndBackingFile(t *testing.T) {
	dir := t.TempDir()
	requireFiemap(t, dir)
	size := int64(8 * blk)
	// An expanded volume: the base was 4 blocks, the snapshot 6.
	makeLayer(t, filepath.Join(dir, "volume-snap-base.img"), 4*blk, writeAt(0, fill('B', 4*blk)))
	makeLayer(t, filepath.Join(dir, "volume-snap-mid.img"), 6*blk, writeAt(3*blk, fill('M', 3*blk)))
	makeLayer(t, filepath.Join(dir, "volume-head-002.img"), size, writeAt(0, fill('H', blk)))
	c := Chain{Size: size, Layers: []string{"volume-head-002.img", "volume-snap-mid.img", "volume-snap-base.img"}}
	want := slices.Concat(fill('H', blk), fill('B', 2*blk), fill('M', 3*blk), fill(0, 2*blk))
	got, _, _ := exportToFile(t, dir, c, ExportOptions{})
	if !bytes.Equal(got, want) {
		t.Errorf("expanded chain: got blocks %q, want %q", blockLetters(got), blockLetters(want))
	}

	bdir := filepath.Join(t.TempDir(), "backing-images", "bi-1234")
	if err := os.MkdirAll(bdir, 0o700); err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(bdir, "backing")
	makeLayer(t, backing, size, writeAt(0, fill('K', int(size))))
	c.BackingFile = backing
	want = slices.Concat(fill('H', blk), fill('B', 2*blk), fill('M', 3*blk), fill('K', 2*blk))
	got, _, _ = exportToFile(t, dir, c, ExportOptions{})
	if !bytes.Equal(got, want) {
		t.Errorf("with a backing file: got blocks %q, want %q", blockLetters(got), blockLetters(want))
	}

	if err := os.WriteFile(backing, []byte("QFI\xfb\x00\x00\x00\x03"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ExportChain(context.Background(), dir, c, &memWriter{}, ExportOptions{})
	if !errors.Is(err, ErrQcow2Corrupt) || !strings.Contains(err.Error(), backing) {
		t.Errorf("qcow2 backing file cut after its version: err = %v, want ErrQcow2Corrupt naming it", err)
	}
}

// blockLetters shows each block by its first byte, for messages.
func blockLetters(p []byte) string {
	var s []byte
	for i := 0; i < len(p); i += blk {
		if p[i] == 0 {
			s = append(s, '.')
		} else {
			s = append(s, p[i])
		}
	}
	return string(s)
}

// memWriter is an io.WriterAt that is not a file and cannot truncate.
type memWriter struct{ b []byte }

func (m *memWriter) WriteAt(p []byte, off int64) (int, error) {
	if need := off + int64(len(p)); need > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, need-int64(len(m.b)))...)
	}
	return copy(m.b[off:], p), nil
}

// randomChain writes a random replica directory: 1 to 5 layers, random
// data, explicit zeros, preallocations (some past the end), punched holes,
// unaligned writes, layers shorter than the volume, sometimes a backing
// file, sometimes a volume of several MiB with hundreds of extents.
func randomChain(t *testing.T, rng *rand.Rand, dir string, noPrealloc bool) Chain {
	t.Helper()
	blocks := int64(1 + rng.IntN(48))
	if rng.IntN(4) == 0 {
		blocks = 1024 + rng.Int64N(2048) // across the 4 MiB windows
	}
	size := blocks * blk
	if rng.IntN(6) == 0 {
		size += 1 + rng.Int64N(blk-1) // a partial last block
	}
	n := 1 + rng.IntN(5)
	var c Chain
	c.Size = size
	for i := range n {
		name := fmt.Sprintf("volume-snap-%d.img", n-1-i)
		if i == 0 {
			name = fmt.Sprintf("volume-head-%03d.img", n)
		}
		c.Layers = append(c.Layers, name)
	}
	randOps := func(lsize int64) []layerOp {
		var ops []layerOp
		for range rng.IntN(16) {
			off := rng.Int64N(blocks) * blk
			ln := (1 + rng.Int64N(8)) * blk
			switch k := rng.IntN(10); {
			case k < 4:
				p := make([]byte, ln)
				for j := range p {
					p[j] = byte(rng.IntN(255) + 1)
				}
				ops = append(ops, writeAt(off, p))
			case k < 5:
				ops = append(ops, writeAt(off+rng.Int64N(blk), []byte{byte(1 + rng.IntN(255))}))
			case k < 6:
				ops = append(ops, writeAt(off, make([]byte, ln)))
			case k < 8 && !noPrealloc:
				ops = append(ops, fallocate(uint32(rng.IntN(2)), off, ln))
			case k < 9:
				ops = append(ops, fallocate(3, off, ln))
			case blocks > 600 && !noPrealloc:
				// Hundreds of one-block extents: more than a FIEMAP batch.
				start := rng.Int64N(blocks - 600)
				ops = append(ops, func(t testing.TB, f *os.File) {
					for b := start; b < start+600; b += 2 {
						writeAt(b*blk, fill(byte(b), blk))(t, f)
					}
				})
			}
		}
		return ops
	}
	for i, name := range c.Layers {
		lsize := size
		if (i > 0 && rng.IntN(3) == 0) || rng.IntN(10) == 0 {
			lsize = rng.Int64N(size + 1)
		}
		makeLayer(t, filepath.Join(dir, name), lsize, randOps(lsize)...)
	}
	if rng.IntN(3) == 0 {
		bdir := filepath.Join(t.TempDir(), "backing-images", "bi-0")
		if err := os.MkdirAll(bdir, 0o700); err != nil {
			t.Fatal(err)
		}
		c.BackingFile = filepath.Join(bdir, "backing")
		makeLayer(t, c.BackingFile, rng.Int64N(size+1), randOps(size)...)
	}
	return c
}

// TestExportMatchesEngineReader is the property test: over random chains,
// the export equals the naive engine reader block by block, its SHA-256 is
// the image's, the output file is exactly Size bytes with no more
// allocated than the image's non-zero blocks, and a writer that is not a
// file gets the same bytes. The forced SEEK_DATA path is checked against
// the SEEK_DATA reader on chains without preallocation.
func TestExportMatchesEngineReader(t *testing.T) {
	requireFiemap(t, t.TempDir())
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SALVAGE_EXPORT_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (SALVAGE_EXPORT_SEED=%d to repeat)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 22))
	iterations := 40
	if testing.Short() {
		iterations = 10
	}
	for i := range iterations {
		seekData := i%4 == 3
		t.Run(fmt.Sprintf("chain%d", i), func(t *testing.T) {
			dir := t.TempDir()
			c := randomChain(t, rng, dir, seekData)
			// Export first: reading a preallocated block caches its
			// (zero) pages, after which ext4's SEEK_DATA calls it data,
			// so a reader that used SEEK_DATA would pass only after the
			// reference had read those blocks.
			got, res, info := exportToFile(t, dir, c, ExportOptions{forceSeekData: seekData})
			want, src := refImage(t, dir, c, seekData)
			compareImages(t, got, want, src, c)
			if res.SHA256 != sha256.Sum256(want) {
				t.Errorf("SHA-256 is not the image's")
			}
			if info.Size() != c.Size {
				t.Errorf("output is %d bytes, want %d", info.Size(), c.Size)
			}
			nonZero := int64(0)
			for off := 0; off < len(want); off += blk {
				if !exportAllZero(want[off:min(off+blk, len(want))]) {
					nonZero++
				}
			}
			if alloc := info.Sys().(*syscall.Stat_t).Blocks * 512; alloc > nonZero*blk {
				t.Errorf("output allocates %d bytes for %d non-zero blocks: holes were written", alloc, nonZero)
			}
			mem := &memWriter{b: fill(0xAA, int(c.Size))} // dirty: holes must be written
			res2, err := ExportChain(context.Background(), dir, c, mem, ExportOptions{forceSeekData: seekData})
			if err != nil {
				t.Fatal(err)
			}
			compareImages(t, mem.b, want, src, c)
			if res2.SHA256 != res.SHA256 || res2.WrittenBytes != c.Size {
				t.Errorf("io.WriterAt export: %+v, want the same SHA-256 and every byte written", res2)
			}
		})
	}
}

// TestExportRefusesWhatIsNotALayer puts a FIFO, a symbolic link, a
// directory and a device where a layer should be (and a link as the
// backing file): none blocks, none is followed or read.
func TestExportRefusesWhatIsNotALayer(t *testing.T) {
	size := int64(2 * blk)
	cases := map[string]func(t *testing.T, path string){
		"fifo": func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"symlink": func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.img")
			makeLayer(t, target, size, writeAt(0, fill('X', blk)))
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		},
		"directory": func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		},
		"device": func(t *testing.T, path string) {
			// A character device like /dev/zero (1, 5).
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
				t.Skipf("mknod a character device: %v (needs root and CAP_MKNOD)", err)
			}
		},
	}
	for name, put := range cases {
		for _, where := range []string{"head", "base", "backing"} {
			t.Run(name+"/"+where, func(t *testing.T) {
				dir := t.TempDir()
				c := Chain{Size: size, Layers: []string{"volume-head-001.img", "volume-snap-s1.img"}}
				for i, l := range c.Layers {
					if (where == "head" && i == 0) || (where == "base" && i == 1) {
						put(t, filepath.Join(dir, l))
						continue
					}
					makeLayer(t, filepath.Join(dir, l), size, writeAt(0, fill('L', blk)))
				}
				if where == "backing" {
					c.BackingFile = filepath.Join(t.TempDir(), "backing")
					put(t, c.BackingFile)
				}
				done := make(chan error, 1)
				out := &memWriter{}
				go func() {
					_, err := ExportChain(context.Background(), dir, c, out, ExportOptions{})
					done <- err
				}()
				select {
				case err := <-done:
					if !errors.Is(err, ErrExportNotRegular) {
						t.Errorf("err = %v, want ErrExportNotRegular", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("ExportChain blocked")
				}
				if len(out.b) != 0 {
					t.Errorf("%d bytes written before the refusal", len(out.b))
				}
			})
		}
	}
}

// TestExportRefusesBadChains: names that are paths, a cycle, a missing
// layer (which the engine would create empty and read through).
func TestExportRefusesBadChains(t *testing.T) {
	dir := t.TempDir()
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), blk)
	for _, c := range []Chain{
		{Size: blk},
		{Size: -1, Layers: []string{"volume-head-001.img"}},
		{Size: blk, Layers: []string{"../volume-head-001.img"}},
		{Size: blk, Layers: []string{"volume-head-001.img", "sub/x.img"}},
		{Size: blk, Layers: []string{".."}},
		{Size: blk, Layers: []string{""}},
		{Size: blk, Layers: []string{"volume-head-001.img", "volume-head-001.img"}},
	} {
		if _, err := ExportChain(context.Background(), dir, c, &memWriter{}, ExportOptions{}); !errors.Is(err, ErrExportBadChain) {
			t.Errorf("%+v: err = %v, want ErrExportBadChain", c, err)
		}
	}
	c := Chain{Size: blk, Layers: []string{"volume-head-001.img", "volume-snap-gone.img"}}
	if _, err := ExportChain(context.Background(), dir, c, &memWriter{}, ExportOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing layer: err = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "volume-snap-gone.img")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the missing layer was created: %v", err)
	}
}

// TestExportReadOnly: the export changes nothing in the replica directory
// (contents, sizes, modification times, the list of files).
func TestExportReadOnly(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 22))
	c := randomChain(t, rng, dir, false)
	before := snapshotDir(t, dir)
	time.Sleep(10 * time.Millisecond) // a write now would show in mtimes
	exportToFile(t, dir, c, ExportOptions{})
	if after := snapshotDir(t, dir); after != before {
		t.Errorf("replica directory changed:\nbefore %s\nafter  %s", before, after)
	}
}

func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %d %x; ", e.Name(), info.Size(), info.ModTime().UnixNano(), sha256.Sum256(data))
	}
	return b.String()
}

// TestExportStopsAtContext: a cancelled context stops the export, before
// it starts and in the middle (cancelled from the progress callback).
func TestExportStopsAtContext(t *testing.T) {
	dir := t.TempDir()
	size := int64(32 << 20)
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(0, fill('H', 8<<20)), writeAt(20<<20, fill('I', 8<<20)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ExportChain(ctx, dir, c, &memWriter{}, ExportOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: err = %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var calls []int64
	out := &memWriter{}
	_, err := ExportChain(ctx, dir, c, out, ExportOptions{Progress: func(done, total int64) {
		calls = append(calls, done)
		if total != size {
			t.Errorf("progress total %d, want %d", total, size)
		}
		cancel()
	}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled in the middle: err = %v", err)
	}
	if len(calls) != 1 || int64(len(out.b)) >= size {
		t.Errorf("after cancellation: %d progress calls, %d of %d bytes written", len(calls), len(out.b), size)
	}
}

// TestExportProgress: progress goes up to the total, in order.
func TestExportProgress(t *testing.T) {
	dir := t.TempDir()
	size := int64(13<<20 + 3*blk)
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(5<<20, fill('H', 1<<20)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}
	var calls []int64
	_, err := ExportChain(context.Background(), dir, c, &memWriter{}, ExportOptions{Progress: func(done, total int64) {
		calls = append(calls, done)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 3 || calls[len(calls)-1] != size || !slices.IsSorted(calls) {
		t.Errorf("progress calls %v, want several, increasing, ending at %d", calls, size)
	}
}

// failingWriter fails after n bytes.
type failingWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failingWriter) WriteAt(p []byte, off int64) (int, error) {
	if f.n < len(p) {
		return 0, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

// TestExportWriterError: a failing writer stops the export with its error;
// the reader does not stay blocked.
func TestExportWriterError(t *testing.T) {
	dir := t.TempDir()
	size := int64(24 << 20)
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(0, fill('H', int(size))))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}
	_, err := ExportChain(context.Background(), dir, c, &failingWriter{n: 3 << 20}, ExportOptions{})
	if !errors.Is(err, errDiskFull) {
		t.Errorf("err = %v, want the writer's error", err)
	}
}

// truncFailWriter is an output whose Truncate fails.
type truncFailWriter struct{ memWriter }

func (*truncFailWriter) Truncate(int64) error { return errDiskFull }

// TestExportErrorsCarryThePrefix: an I/O error of the output comes back
// wrapped (errors.Is finds it) in a text that says it is salvage's, once.
func TestExportErrorsCarryThePrefix(t *testing.T) {
	dir := t.TempDir()
	size := int64(4 * blk)
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(0, fill('H', int(size))))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}
	for what, w := range map[string]io.WriterAt{"salvage: write output at 0: disk full": &failingWriter{}, "salvage: truncate output: disk full": &truncFailWriter{}} {
		_, err := ExportChain(context.Background(), dir, c, w, ExportOptions{})
		if !errors.Is(err, errDiskFull) || err.Error() != what {
			t.Errorf("err = %v, want %q wrapping the writer's error", err, what)
		}
	}
}

// TestExportTruncatesOutput: an existing, longer output file ends exactly
// Size bytes long, with the old contents gone from the image's holes.
func TestExportTruncatesOutput(t *testing.T) {
	dir := t.TempDir()
	size := int64(4 * blk)
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(blk, fill('H', blk)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}
	path := filepath.Join(t.TempDir(), "out.raw")
	if err := os.WriteFile(path, fill(0xEE, 10*blk), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := ExportChain(context.Background(), dir, c, out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Concat(fill(0, blk), fill('H', blk), fill(0, 2*blk)); !bytes.Equal(got, want) {
		t.Errorf("output blocks %q, want %q", blockLetters(got), blockLetters(want))
	}
}

var _ io.WriterAt = (*memWriter)(nil)

// TestExportPartialLastBlockFromHead: with a Size that is not a multiple
// of 4096 the last, partial block is past the engine's location map, and
// diffDisk.lookup reads it from the head even where the head has a hole.
func TestExportPartialLastBlockFromHead(t *testing.T) {
	dir := t.TempDir()
	requireFiemap(t, dir)
	size := int64(2*blk + 512)
	makeLayer(t, filepath.Join(dir, "volume-snap-s1.img"), size, writeAt(0, fill('A', int(size))))
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(0, fill('H', blk)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img", "volume-snap-s1.img"}}
	got, _, _ := exportToFile(t, dir, c, ExportOptions{})
	if want := slices.Concat(fill('H', blk), fill('A', blk), fill(0, 512)); !bytes.Equal(got, want) {
		t.Errorf("got blocks %q, want %q", blockLetters(got), blockLetters(want))
	}
}

// The memory bound: a 4 GiB sparse volume with 64 MiB of data is exported
// by a child process (this test binary, running TestExportRSSChild), which
// reports its peak resident set (VmHWM in /proc/self/status).

const (
	rssEnvDir     = "SALVAGE_EXPORT_RSS_DIR"
	rssVolumeSize = 4 << 30
	rssDataBytes  = 64 << 20
	rssLimit      = 256 << 20
)

// makeRSSChain writes the 4 GiB chain: a head and a snapshot, each with
// 32 MiB in 1 MiB pieces spread over the volume.
func makeRSSChain(tb testing.TB, dir string) Chain {
	tb.Helper()
	c := Chain{Size: rssVolumeSize, Layers: []string{"volume-head-002.img", "volume-snap-s1.img"}}
	piece := 1 << 20
	pieces := rssDataBytes / piece / len(c.Layers)
	stride := int64(rssVolumeSize) / int64(pieces)
	for i, name := range c.Layers {
		var ops []layerOp
		for k := range pieces {
			p := fill(byte('a'+i), piece)
			p[0] = byte(k)
			ops = append(ops, writeAt(int64(k)*stride+int64(i)*stride/2, p))
		}
		makeLayer(tb, filepath.Join(dir, name), rssVolumeSize, ops...)
	}
	return c
}

// runRSSChild exports the chain in dir in a child process and returns its
// peak RSS in bytes, the SHA-256 it printed and how long the child ran.
func runRSSChild(tb testing.TB, dir string) (int64, string, time.Duration) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExportRSSChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), rssEnvDir+"="+dir)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("child: %v\n%s", err, out)
	}
	var hwm int64
	var sum string
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "export-rss "); i >= 0 {
			if _, err := fmt.Sscan(line[i+len("export-rss "):], &hwm, &sum); err != nil {
				tb.Fatalf("child said %q: %v", line, err)
			}
		}
	}
	if hwm == 0 {
		tb.Fatalf("child reported no peak RSS:\n%s", out)
	}
	return hwm, sum, took
}

// TestExportRSSChild is the child's side; it does nothing in a normal run.
func TestExportRSSChild(t *testing.T) {
	dir := os.Getenv(rssEnvDir)
	if dir == "" {
		t.Skip("runs as the child of TestExportMemoryBounded")
	}
	c := Chain{Size: rssVolumeSize, Layers: []string{"volume-head-002.img", "volume-snap-s1.img"}}
	out, err := os.Create(filepath.Join(dir, "out", "image.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	res, err := ExportChain(context.Background(), dir, c, out, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var kb int64
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Sscan(rest, &kb)
		}
	}
	fmt.Printf("export-rss %d %x\n", kb<<10, res.SHA256)
}

// TestExportMemoryBounded: the export of a 4 GiB sparse volume with 64 MiB
// of data peaks under 256 MiB of RSS, its output is a 4 GiB sparse file
// with about 64 MiB allocated.
func TestExportMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 4 GiB")
	}
	dir := t.TempDir()
	c := makeRSSChain(t, dir)
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o700); err != nil {
		t.Fatal(err)
	}
	hwm, sum, took := runRSSChild(t, dir)
	t.Logf("4 GiB volume, 64 MiB of data: peak RSS %.1f MiB, %v", float64(hwm)/(1<<20), took)
	if hwm >= rssLimit {
		t.Errorf("peak RSS %d bytes, want under %d", hwm, rssLimit)
	}
	info, err := os.Stat(filepath.Join(dir, "out", "image.raw"))
	if err != nil {
		t.Fatal(err)
	}
	alloc := info.Sys().(*syscall.Stat_t).Blocks * 512
	if info.Size() != c.Size || alloc > rssDataBytes+(1<<20) {
		t.Errorf("output: %d bytes, %d allocated; want %d bytes, about %d allocated", info.Size(), alloc, c.Size, rssDataBytes)
	}
	// The checksum's correctness is the property test's; here it must
	// at least be one.
	if len(sum) != 64 {
		t.Errorf("child printed SHA-256 %q", sum)
	}
}

// TestExportLayerChangedDuringExport: a layer cut short while it is read
// stops the export with ErrExportChanged instead of a silently wrong
// image.
func TestExportLayerChangedDuringExport(t *testing.T) {
	dir := t.TempDir()
	size := int64(96 << 20)
	var ops []layerOp
	for off := int64(0); off < size; off += 4 << 20 {
		ops = append(ops, writeAt(off, fill('H', 1<<20)))
	}
	head := filepath.Join(dir, "volume-head-001.img")
	makeLayer(t, head, size, ops...)
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}
	cut := false
	_, err := ExportChain(context.Background(), dir, c, &memWriter{}, ExportOptions{Progress: func(done, total int64) {
		if !cut {
			cut = true
			if err := os.Truncate(head, 0); err != nil {
				t.Error(err)
			}
		}
	}})
	if !errors.Is(err, ErrExportChanged) {
		t.Errorf("err = %v, want ErrExportChanged", err)
	}
}

// TestExportLayerWrittenDuringExport: a write to a layer during the export,
// even where it was already read, makes the export fail.
func TestExportLayerWrittenDuringExport(t *testing.T) {
	dir := t.TempDir()
	size := int64(16 << 20)
	head := filepath.Join(dir, "volume-head-001.img")
	makeLayer(t, head, size, writeAt(0, fill('H', 1<<20)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}
	written := false
	_, err := ExportChain(context.Background(), dir, c, &memWriter{}, ExportOptions{Progress: func(done, total int64) {
		if !written {
			written = true
			f, err := os.OpenFile(head, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// A modification time that cannot equal the one at open.
			if _, err := f.WriteAt([]byte("x"), 0); err != nil {
				t.Error(err)
			}
			if err := os.Chtimes(head, time.Time{}, time.Unix(1, 0)); err != nil {
				t.Error(err)
			}
		}
	}})
	if !errors.Is(err, ErrExportChanged) {
		t.Errorf("err = %v, want ErrExportChanged", err)
	}
}

// TestExportDenseAndDeviceOutput: Dense writes every byte to a file (no
// holes), and an *os.File that is not a regular file (a character device)
// is written densely and never truncated.
func TestExportDenseAndDeviceOutput(t *testing.T) {
	dir := t.TempDir()
	size := int64(64 * blk)
	makeLayer(t, filepath.Join(dir, "volume-head-001.img"), size, writeAt(3*blk, fill('H', blk)))
	c := Chain{Size: size, Layers: []string{"volume-head-001.img"}}

	got, res, info := exportToFile(t, dir, c, ExportOptions{Dense: true})
	if res.WrittenBytes != size || info.Size() != size || !bytes.Equal(got[3*blk:4*blk], fill('H', blk)) {
		t.Errorf("dense: %d written, file %d bytes; want %d and the head's block", res.WrittenBytes, info.Size(), size)
	}
	if alloc := info.Sys().(*syscall.Stat_t).Blocks * 512; alloc < size {
		t.Errorf("dense output allocates %d bytes of %d: holes were left", alloc, size)
	}

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	res, err = ExportChain(context.Background(), dir, c, null, ExportOptions{})
	if err != nil {
		t.Fatalf("export to %s: %v", os.DevNull, err)
	}
	if res.WrittenBytes != size {
		t.Errorf("to a device: %d bytes written, want all %d", res.WrittenBytes, size)
	}
}
