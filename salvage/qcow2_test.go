package salvage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qemuImg returns the path of qemu-img, or skips saying how to get it.
// make test installs Debian's qemu-utils; CI does the same.
func qemuImg(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img not found: install Debian's qemu-utils (make test does) to hold the qcow2 reader to QEMU's own")
	}
	return p
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// randomSparse writes a raw image of size bytes at path: random runs of
// random data, of zeros written out, and holes, and returns its content.
func randomSparse(t testing.TB, rng *rand.Rand, path string, size int64) []byte {
	t.Helper()
	data := make([]byte, size)
	for off := int64(0); off < size; {
		n := min(size-off, int64(1+rng.IntN(96<<10)))
		switch rng.IntN(4) {
		case 0, 1: // random data; compressible half the time
			if rng.IntN(2) == 0 {
				for i := off; i < off+n; i++ {
					data[i] = byte(rng.Uint32())
				}
			} else {
				copy(data[off:off+n], bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, int(n)))
			}
		}
		off += n
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

// readVirtual reads the whole virtual disk through the reader, checking
// that every byte outside the runs allocated reports is zero.
func readVirtual(t testing.TB, path string) ([]byte, *qcow2Image) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, _ := f.Stat()
	q, err := openQcow2(f, fi.Size(), path)
	if err != nil {
		t.Fatalf("openQcow2: %v", err)
	}
	got := make([]byte, q.info.VirtualSize)
	// Odd-sized reads cross clusters at every alignment.
	for off := int64(0); off < int64(len(got)); {
		n := min(int64(len(got))-off, 12345)
		if _, err := q.ReadAt(got[off:off+n], off); err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		off += n
	}
	covered := make([]bool, len(got))
	if err := q.allocated(0, q.info.VirtualSize, func(s, e int64) {
		for i := s; i < e; i++ {
			covered[i] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	for i, c := range covered {
		if !c && got[i] != 0 {
			t.Fatalf("byte %d is %#x but lies outside every allocated run", i, got[i])
		}
	}
	return got, q
}

// TestQcow2MatchesQemuImg holds the reader to qemu-img: random sparse
// images converted to qcow2 (versions 2 and 3, several cluster sizes,
// compressed or not) read back exactly as `qemu-img convert -O raw` does.
func TestQcow2MatchesQemuImg(t *testing.T) {
	qi := qemuImg(t)
	rng := rand.New(rand.NewPCG(7, 31))
	for _, tc := range []struct {
		compat   string
		cluster  int
		compress bool
		size     int64
	}{
		{"0.10", 65536, false, 3<<20 + 4096},
		{"0.10", 65536, true, 3 << 20},
		{"1.1", 65536, false, 4<<20 + 512},
		{"1.1", 65536, true, 4 << 20},
		{"1.1", 4096, true, 2<<20 + 1024},
		{"1.1", 512, false, 1 << 20},
		{"1.1", 2 << 20, true, 5 << 20},
	} {
		name := fmt.Sprintf("compat=%s,cluster=%d,compress=%v", tc.compat, tc.cluster, tc.compress)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			raw, img, back := filepath.Join(dir, "src.raw"), filepath.Join(dir, "img.qcow2"), filepath.Join(dir, "back.raw")
			want := randomSparse(t, rng, raw, tc.size)
			args := []string{"convert", "-f", "raw", "-O", "qcow2", "-o", fmt.Sprintf("compat=%s,cluster_size=%d", tc.compat, tc.cluster)}
			if tc.compress {
				args = append(args, "-c")
			}
			run(t, qi, append(args, raw, img)...)
			run(t, qi, "convert", "-f", "qcow2", "-O", "raw", img, back)
			qemuRaw, err := os.ReadFile(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(qemuRaw, want) {
				t.Fatalf("qemu-img's own round trip differs") // the harness, not the reader
			}
			got, q := readVirtual(t, img)
			if q.info.VirtualSize != int64(len(qemuRaw)) {
				t.Fatalf("virtual size %d, qemu-img says %d", q.info.VirtualSize, len(qemuRaw))
			}
			if i := firstDiff(got, qemuRaw); i >= 0 {
				t.Fatalf("byte %d: got %#x, qemu-img reads %#x", i, got[i], qemuRaw[i])
			}
		})
	}
}

// TestQcow2ZeroClusters: version 3 zero clusters (qemu-io write -z over
// written data) read as zeros, and are not reported allocated.
func TestQcow2ZeroClusters(t *testing.T) {
	qi := qemuImg(t)
	qio, err := exec.LookPath("qemu-io")
	if err != nil {
		t.Skip("qemu-io not found: install Debian's qemu-utils")
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "img.qcow2")
	run(t, qi, "create", "-f", "qcow2", "-o", "compat=1.1,cluster_size=65536", img, "1M")
	run(t, qio, "-f", "qcow2", "-c", "write -P 0x5a 0 1M", img)
	run(t, qio, "-f", "qcow2", "-c", "write -z 64k 128k", img)
	run(t, qio, "-f", "qcow2", "-c", "write -z -u 512k 64k", img) // unmap: zero flag, cluster freed
	got, q := readVirtual(t, img)
	want := bytes.Repeat([]byte{0x5a}, 1<<20)
	clear(want[64<<10 : 192<<10])
	clear(want[512<<10 : 576<<10])
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("byte %d: got %#x, want %#x", i, got[i], want[i])
	}
	c, err := q.lookup(1)
	if err != nil || c.kind != qcow2Zero {
		t.Fatalf("cluster 1 = %+v, %v; want a zero cluster", c, err)
	}
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestQcow2Refuses: what Longhorn cannot have given the engine, or this
// reader does not decode, is refused saying which; a damaged file is
// ErrQcow2Corrupt, never a panic nor a wrong image.
func TestQcow2Refuses(t *testing.T) {
	qi := qemuImg(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	run(t, qi, "create", "-f", "qcow2", base, "1M")
	over := filepath.Join(dir, "overlay.qcow2")
	run(t, qi, "create", "-f", "qcow2", "-b", base, "-F", "qcow2", over)
	ext := filepath.Join(dir, "ext.qcow2")
	run(t, qi, "create", "-f", "qcow2", "-o", "extended_l2=on", ext, "1M")
	cases := map[string]string{over: "backing file of its own", ext: "extended L2"}
	zstd := filepath.Join(dir, "zstd.qcow2")
	if exec.Command(qi, "create", "-f", "qcow2", "-o", "compression_type=zstd", zstd, "1M").Run() == nil {
		cases[zstd] = "zstd"
	}
	for path, says := range cases {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		_, err = openQcow2(f, fi.Size(), path)
		f.Close()
		if !errors.Is(err, ErrExportQcow2) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: err = %v; want ErrExportQcow2 saying %q", filepath.Base(path), err, says)
		}
	}

	// Damage a good image: its L1 table points past the end of the file.
	good := filepath.Join(dir, "good.qcow2")
	raw := filepath.Join(dir, "good.raw")
	randomSparse(t, rand.New(rand.NewPCG(1, 2)), raw, 1<<20)
	run(t, qi, "convert", "-f", "raw", "-O", "qcow2", raw, good)
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func([]byte) []byte{
		"L1 past the end": func(b []byte) []byte { b[40] = 0x7f; return b },
		"cut after the header": func(b []byte) []byte {
			return b[:4096]
		},
		"cluster bits 30": func(b []byte) []byte { b[23] = 30; return b },
		"L1 too small":    func(b []byte) []byte { b[36], b[37], b[38], b[39] = 0, 0, 0, 0; return b },
	} {
		bad := mutate(bytes.Clone(b))
		_, err := readAllQcow2(bad)
		if !errors.Is(err, ErrQcow2Corrupt) {
			t.Errorf("%s: err = %v; want ErrQcow2Corrupt", name, err)
		}
	}
}

// readAllQcow2 opens b as a qcow2 file and reads its whole virtual disk,
// as an export would, bounded to 64 MiB.
func readAllQcow2(b []byte) ([]byte, error) {
	q, err := openQcow2(bytes.NewReader(b), int64(len(b)), "fuzz")
	if err != nil {
		return nil, err
	}
	size := min(q.info.VirtualSize, 64<<20)
	out := make([]byte, size)
	if err := q.allocated(0, size, func(s, e int64) {}); err != nil {
		return nil, err
	}
	_, err = q.ReadAt(out, 0)
	return out, err
}

// FuzzQcow2 feeds the reader damaged images: it must return an image or
// an error, never panic or hang.
func FuzzQcow2(f *testing.F) {
	if p, err := exec.LookPath("qemu-img"); err == nil {
		dir := f.TempDir()
		raw, img := filepath.Join(dir, "a.raw"), filepath.Join(dir, "a.qcow2")
		randomSparse(f, rand.New(rand.NewPCG(3, 4)), raw, 256<<10)
		if exec.Command(p, "convert", "-c", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=4096", raw, img).Run() == nil {
			if b, err := os.ReadFile(img); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readAllQcow2(b)
	})
}

// TestExportQcow2Backing: a chain over a qcow2 backing image exports the
// same image, byte for byte, as over the raw image qemu-img converts it
// to.
func TestExportQcow2Backing(t *testing.T) {
	qi := qemuImg(t)
	dir := t.TempDir()
	requireFiemap(t, dir)
	size := int64(6 << 20)
	makeLayer(t, filepath.Join(dir, "volume-snap-s1.img"), size, writeAt(1<<20, fill('S', 3*blk)), writeAt(5<<20, fill('T', blk)))
	makeLayer(t, filepath.Join(dir, "volume-head-002.img"), size, writeAt(0, fill('H', blk)), writeAt(2<<20, fill('I', 2*blk)))
	bdir := filepath.Join(t.TempDir(), "backing-images", "bi-1234")
	if err := os.MkdirAll(bdir, 0o700); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(bdir, "backing.raw")
	randomSparse(t, rand.New(rand.NewPCG(5, 6)), raw, size-(1<<20)) // shorter than the volume
	c := Chain{Size: size, Layers: []string{"volume-head-002.img", "volume-snap-s1.img"}, BackingFile: raw}
	want, wantRes, _ := exportToFile(t, dir, c, ExportOptions{})
	for _, compress := range []bool{false, true} {
		img := filepath.Join(bdir, fmt.Sprintf("backing-%v", compress))
		args := []string{"convert", "-f", "raw", "-O", "qcow2"}
		if compress {
			args = append(args, "-c")
		}
		run(t, qi, append(args, raw, img)...)
		c.BackingFile = img
		got, res, _ := exportToFile(t, dir, c, ExportOptions{})
		if i := firstDiff(got, want); i >= 0 || res.SHA256 != wantRes.SHA256 {
			t.Fatalf("compressed %v: byte %d differs from the raw backing file's export", compress, i)
		}
	}
}

// countingReaderAt counts the reads that reach the file.
type countingReaderAt struct {
	r     io.ReaderAt
	reads int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// TestQcow2InflatesEachClusterOnce: reading a compressed cluster in
// pieces, as an export does where upper layers own some of its blocks,
// reads and inflates it once, not once a piece. Without that, a 2 MiB
// cluster read 4 KiB at a time was inflated 512 times.
func TestQcow2InflatesEachClusterOnce(t *testing.T) {
	qi := qemuImg(t)
	dir := t.TempDir()
	raw, img := filepath.Join(dir, "src.raw"), filepath.Join(dir, "img.qcow2")
	const clusters, cs = 4, 64 << 10
	want := bytes.Repeat([]byte("caretaker qcow2 "), clusters*cs/16)
	for i := range want {
		want[i] ^= byte(i / cs) // each cluster its own content
	}
	if err := os.WriteFile(raw, want, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, qi, "convert", "-f", "raw", "-O", "qcow2", "-c", "-o", fmt.Sprintf("compat=1.1,cluster_size=%d", cs), raw, img)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReaderAt{r: f}
	q, err := openQcow2(cr, fi.Size(), img)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := q.lookup(0); err != nil || c.kind != qcow2Compressed {
		t.Fatalf("cluster 0 = %+v, %v; the harness wants a compressed cluster", c, err)
	}
	cr.reads = 0
	got := make([]byte, len(want))
	for off := 0; off < len(got); off += 4096 {
		if _, err := q.ReadAt(got[off:off+4096], int64(off)); err != nil {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back differs at byte %d", firstDiff(got, want))
	}
	// One read per cluster, and one for the L2 table.
	if cr.reads > clusters+1 {
		t.Errorf("%d reads of the file for %d compressed clusters read in 4 KiB pieces; want at most %d", cr.reads, clusters, clusters+1)
	}
}
