package salvage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/internal/safefile"
	"golang.org/x/sync/errgroup"
)

// ExportBlockSize is the engine's read granularity: the size of a block of
// its location map (longhorn-engine diskutil.VolumeSectorSize).
const ExportBlockSize = 4096

// Errors of ExportChain, for errors.Is. An I/O error of the writer or of a
// layer is returned wrapped, with the file's name.
var (
	// ErrExportBadChain: the Chain cannot be read as given (no layers, a
	// negative size, a layer name that is empty, ".", ".." or has a path
	// separator, or a layer listed twice, which in the engine is a Parent
	// cycle).
	ErrExportBadChain = errors.New("salvage: chain cannot be exported")
	// ErrExportNotRegular: a layer or the backing file is not a regular
	// file (a symbolic link, FIFO, device, socket or directory). It is
	// never followed nor read.
	ErrExportNotRegular = errors.New("salvage: layer is not a regular file")
	// ErrExportNoFiemap: ExportOptions.RequireFiemap is set and the
	// filesystem of a layer has no FIEMAP.
	ErrExportNoFiemap = errors.New("salvage: filesystem has no FIEMAP")
	// ErrExportQcow2: the backing file is a qcow2 image of a kind this
	// export does not read (the error says which): a version other than 2
	// or 3, a backing file of its own, encryption, an external data file,
	// extended L2 entries, zstd compression, or QEMU's corrupt bit. Plain
	// qcow2 images, compressed or not, are read.
	ErrExportQcow2 = errors.New("salvage: unsupported qcow2 backing file")
	// ErrExportChanged: a layer or the backing file changed (size or
	// modification time) while it was read, so the image may mix old and
	// new data; or, for a Chain from Inspection.Chain, it is not the file
	// Inspect saw (replaced by another, or changed since), so what was
	// checked is not what would be read.
	ErrExportChanged = errors.New("salvage: layer changed during export")
	// ErrExportUnsupported: this operating system cannot export (Longhorn
	// replicas live on Linux; FIEMAP is Linux's).
	ErrExportUnsupported = errors.New("salvage: export is supported on Linux only")
)

// ExportOptions tunes ExportChain. The zero value is the default.
type ExportOptions struct {
	// Progress, if set, is called with the bytes of the image done so far
	// and the total (Size), from the goroutine that called ExportChain,
	// at most every few MiB and once at the end.
	Progress func(done, total int64)
	// RequireFiemap refuses (ErrExportNoFiemap) a layer on a filesystem
	// without FIEMAP instead of mapping it with SEEK_DATA/SEEK_HOLE.
	RequireFiemap bool
	// Dense writes every byte of the image, zero blocks included, even to
	// a writer that could keep them as holes.
	Dense bool

	// NoChecksum leaves the SHA-256 of the image out: ExportResult.SHA256
	// is then zero. Hashing is one stream that caps an export near the
	// speed of SHA-256 on one core (about 1.7 GB/s with SHA extensions),
	// slower than the disks of a large volume; a user who checks the image
	// some other way, or not at all, exports at the speed of reading and
	// writing.
	NoChecksum bool

	// forceSeekData maps every layer with SEEK_DATA, as on a filesystem
	// without FIEMAP (tests of the fallback).
	forceSeekData bool
}

// ExportResult says what ExportChain wrote.
type ExportResult struct {
	// Size is the image's length in bytes (the Chain's Size).
	Size int64
	// SHA256 is the checksum of the whole image, Size bytes, holes as
	// zeros; zero when ExportOptions.NoChecksum.
	SHA256 [32]byte
	// ReadBytes is how many bytes of the image came from layer files (the
	// blocks it takes from them, zeros past a short layer's end included;
	// not the blocks no layer has).
	ReadBytes int64
	// WrittenBytes is how many bytes were written to w.
	WrittenBytes int64
	// SeekDataLayers names the layers whose extents came from
	// SEEK_DATA/SEEK_HOLE because their filesystem has no FIEMAP (see the
	// caveat in the package documentation); empty normally.
	SeekDataLayers []string
}

// ExportChain writes the raw image of the volume c describes, read from the
// layer files in dir, to w, and returns its size and SHA-256. It writes
// nothing under dir.
//
// It rebuilds the image block by block the way longhorn-engine's replica
// reads it (pkg/replica/diff_disk.go, diffDisk.lookup and diffDisk.read):
//
//   - The volume is read in 4096-byte blocks (diskutil.VolumeSectorSize,
//     the engine's location map has one entry per such block).
//   - A block belongs to the newest layer whose file has an extent there,
//     as FIEMAP reports it (the engine calls rancher/go-fibmap's Fiemap with
//     FIEMAP_FLAG_SYNC on [block*4096, +4096) of each file from the head
//     down and takes the first file with any extent, ignoring the extent
//     flags). So a block written with zeros, and a preallocated (unwritten)
//     extent, both own their block and hide older layers: they read as
//     zeros, not as the older data. Holes are NOT found with SEEK_DATA:
//     on ext4 SEEK_DATA reports an unwritten extent as a hole (and as data
//     once its pages are cached), so it disagrees with the engine there.
//   - The bottom of the engine's file list is never probed (diffDisk.lookup:
//     "for index 1 we don't check Fiemap because it may be a base image
//     file"): a block no upper layer has comes from the backing file when
//     the chain has one (it is index 1, the oldest snapshot index 2 is
//     probed), or else from the oldest layer, whatever its extents say.
//   - Bytes past a layer file's end, inside the volume, read as zeros
//     (diffDisk.read); a layer shorter than the volume (an older layer of
//     an expanded volume) has no extents there, so the blocks past its end
//     come from older layers, as in the engine.
//   - A final partial block (a Size that is not a multiple of 4096) is read
//     from the head, as diffDisk.lookup does for a block past its location
//     map.
//   - Removed snapshots are layers like any other (the engine's Chain keeps
//     them and reads through them); snapshots outside the chain are never
//     opened.
//
// Memory. The image is streamed: the extent maps are walked in windows of
// 32 MiB (the next window is mapped, and its reads hinted to the kernel
// with POSIX_FADV_WILLNEED, while the current one is read), and eight 1 MiB
// buffers are in flight between a reading, a hashing and a writing
// goroutine, so memory does not grow with the volume's size or its number
// of extents (about 10 MiB plus a few KiB per layer).
//
// Filesystems without FIEMAP. The engine cannot serve a replica from a
// filesystem without FIEMAP at all (its lookup fails the read, and
// replica.go's construct refuses such a directory up front:
// Replica.isExtentSupported, "file extent is unsupported"). A copy of a
// replica directory on such a filesystem (tmpfs, some network filesystems)
// can still hold the only data left, so by default ExportChain then maps
// that layer with SEEK_DATA/SEEK_HOLE instead, and names it in
// ExportResult.SeekDataLayers. The caveat: SEEK_DATA may call a
// preallocated, never-written range a hole, and the older data below it
// then shows through where the engine would have read zeros. Replicas the
// engine wrote have no such ranges (it never preallocates), and cp, which
// writes zero ranges as holes, does not carry them into a copy. With ExportOptions.RequireFiemap the
// export refuses instead (ErrExportNoFiemap). The backing file, or the
// bottom layer, is read for its contents only, so for it SEEK_DATA is
// exact. Other operating systems than Linux have no export
// (ErrExportUnsupported).
//
// Output. When w can be truncated (it has a Truncate(int64) error method
// and, if it is an *os.File, is a regular file), ExportChain truncates it
// to zero length first, writes only the 4096-byte blocks that are not all
// zeros, and truncates it to Size at the end: the image's zero blocks stay
// holes of the output file and its size is exactly Size. Any other
// io.WriterAt (a block device, a buffer) gets every byte of the image,
// zeros included. ExportOptions.Dense writes every byte in both cases.
//
// Every layer is opened read-only by its name inside dir, never through a
// symbolic link, and must be a regular file (else ErrExportNotRegular; a
// FIFO does not block the open). The backing file, if any, is opened by
// its path, its last element never through a link. For a Chain from
// Inspection.Chain, each file opened must be the one Inspect saw, unchanged
// (device, inode, size, modification time), else ErrExportChanged: a file
// swapped in after the inspection is never read. A missing layer is an
// error wrapping fs.ErrNotExist: unlike the engine, which creates it empty
// and reads through it, the export refuses.
//
// ExportChain stops at ctx's end with its error; w then holds part of the
// image. It needs Linux (ErrExportUnsupported elsewhere).
func ExportChain(ctx context.Context, dir string, c Chain, w io.WriterAt, opts ExportOptions) (ExportResult, error) {
	if err := exportCheckChain(c); err != nil {
		return ExportResult{}, err
	}
	if err := exportSupported(); err != nil {
		return ExportResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return ExportResult{}, err
	}
	layers, err := exportOpen(dir, c)
	if err != nil {
		return ExportResult{}, err
	}
	defer func() {
		for _, l := range layers {
			l.f.Close()
		}
	}()
	return exportRun(ctx, c, layers, w, opts)
}

// exportCheckChain refuses what cannot be a chain.
func exportCheckChain(c Chain) error {
	if len(c.Layers) == 0 {
		return fmt.Errorf("%w: no layers", ErrExportBadChain)
	}
	if c.Size < 0 {
		return fmt.Errorf("%w: negative size %d", ErrExportBadChain, c.Size)
	}
	seen := make(map[string]bool, len(c.Layers))
	for _, name := range c.Layers {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, 0) {
			return fmt.Errorf("%w: layer name %q is not a file name", ErrExportBadChain, name)
		}
		if seen[name] {
			return fmt.Errorf("%w: layer %q appears twice (a Parent cycle)", ErrExportBadChain, name)
		}
		seen[name] = true
	}
	return nil
}

// exportLayer is one open file of the chain.
type exportLayer struct {
	name string // as given: a layer name, or the backing file's path
	f    *os.File
	size int64     // apparent size when opened
	mod  time.Time // modification time when opened
	// qcow2 is set for a qcow2 backing file: its virtual disk is read
	// through it, and its extents are the clusters it maps.
	qcow2 *qcow2Image
}

// contentSize is how far the layer's content reaches: past it, reads are
// zeros.
func (l *exportLayer) contentSize() int64 {
	if l.qcow2 != nil {
		return l.qcow2.info.VirtualSize
	}
	return l.size
}

// readAt reads the layer's content.
func (l *exportLayer) readAt(p []byte, off int64) (int, error) {
	if l.qcow2 != nil {
		return l.qcow2.ReadAt(p, off)
	}
	return l.f.ReadAt(p, off)
}

// exportOpen opens the layers, head first, then the backing file if any.
func exportOpen(dir string, c Chain) (layers []exportLayer, err error) {
	defer func() {
		if err != nil {
			for _, l := range layers {
				l.f.Close()
			}
			layers = nil
		}
	}()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, name := range c.Layers {
		l, err := exportOpenIn(root, name, name, c.inspected[name])
		if err != nil {
			return layers, err
		}
		layers = append(layers, l)
	}
	if c.BackingFile != "" {
		broot, err := os.OpenRoot(filepath.Dir(c.BackingFile))
		if err != nil {
			return layers, err
		}
		defer broot.Close()
		l, err := exportOpenIn(broot, filepath.Base(c.BackingFile), c.BackingFile, c.inspected[c.BackingFile])
		if err != nil {
			return layers, err
		}
		layers = append(layers, l)
		if err := exportOpenBacking(&layers[len(layers)-1]); err != nil {
			return layers, err
		}
	}
	return layers, nil
}

// exportOpenIn opens name in root as a regular file, refusing a link and,
// when seen is what Inspect saw of it, a file that is not that one or has
// changed since.
func exportOpenIn(root *os.Root, name, shown string, seen fs.FileInfo) (exportLayer, error) {
	f, info, err := safefile.OpenRegular(root, name)
	var te *safefile.TypeError
	if errors.As(err, &te) {
		if te.Swapped {
			return exportLayer{}, fmt.Errorf("%w: %s was replaced by another file while being opened", ErrExportNotRegular, shown)
		}
		return exportLayer{}, fmt.Errorf("%w: %s is %s", ErrExportNotRegular, shown, safefile.Describe(te.Mode))
	}
	if err != nil {
		return exportLayer{}, err
	}
	if seen != nil {
		var what string
		switch {
		case !os.SameFile(seen, info):
			what = "was replaced by another file"
		case seen.Size() != info.Size():
			what = fmt.Sprintf("changed from %d to %d bytes", seen.Size(), info.Size())
		case !seen.ModTime().Equal(info.ModTime()):
			what = "was modified"
		}
		if what != "" {
			f.Close()
			return exportLayer{}, fmt.Errorf("%w: %s %s after it was inspected", ErrExportChanged, shown, what)
		}
	}
	return exportLayer{name: shown, f: f, size: info.Size(), mod: info.ModTime()}, nil
}

// exportOpenBacking tells a qcow2 backing file (magic "QFI\xfb", the
// format longhorn-engine's backingfile package tells apart with qemu-img
// info) from a raw one, and opens a qcow2 one's tables.
func exportOpenBacking(l *exportLayer) error {
	q, err := isQcow2(l.f)
	if err != nil {
		return errclass.Wrapf("salvage", err, "backing file %s", l.name)
	}
	if q {
		if l.qcow2, err = openQcow2(l.f, l.size, l.name); err != nil {
			return errclass.Wrapf("salvage", err, "backing file")
		}
	}
	return nil
}

// Sizes of the stream: the window of the volume mapped at once, and the
// buffers in flight between the reader and the writer.
const (
	exportWindow  = 32 << 20
	exportBufSize = 1 << 20
	exportBuffers = 8

	exportProgressStep = 4 << 20 // at most one Progress call per 4 MiB
)

// exportZeros is hashed (and written, when dense) for the image's holes.
var exportZeros [exportBufSize]byte

// exportSegment is a piece of the image, in order: data in buf (one of the
// pool's buffers) or, when buf is nil, n zero bytes.
type exportSegment struct {
	off, n int64
	buf    []byte
}

// exportRun streams the image: a goroutine maps and reads (exportReader),
// this one hashes and writes.
func exportRun(ctx context.Context, c Chain, layers []exportLayer, w io.WriterAt, opts ExportOptions) (ExportResult, error) {
	res := ExportResult{Size: c.Size}
	out := exportOutput{w: w}
	out.init(opts.Dense)
	if out.truncate != nil {
		if err := out.truncate(0); err != nil {
			return res, errclass.Wrapf("salvage", err, "truncate output")
		}
	}

	// Three stages, each in its own goroutine, so that reading, hashing
	// and writing overlap: reader -> hasher -> writer (this goroutine,
	// which also reports progress). A buffer goes back to the pool once
	// written.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(rctx)
	pool := make(chan []byte, exportBuffers)
	for range exportBuffers {
		pool <- make([]byte, exportBufSize)
	}
	segs := make(chan exportSegment, exportBuffers)
	hashed := make(chan exportSegment, exportBuffers)
	r := &exportReader{ctx: gctx, c: c, layers: layers, opts: opts, pool: pool, segs: segs}
	g.Go(func() error {
		defer close(segs)
		return r.run()
	})
	h := sha256.New()
	g.Go(func() error {
		defer close(hashed)
		for s := range segs {
			if opts.NoChecksum {
				// nothing to hash
			} else if s.buf != nil {
				h.Write(s.buf[:s.n])
			} else {
				for left := s.n; left > 0; {
					if err := gctx.Err(); err != nil {
						return err
					}
					k := min(left, int64(len(exportZeros)))
					h.Write(exportZeros[:k])
					left -= k
				}
			}
			select {
			case hashed <- s:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})

	var done, reported int64
	advance := func(to int64) {
		done = to
		if opts.Progress != nil && done-reported >= exportProgressStep {
			opts.Progress(done, c.Size)
			reported = done
		}
	}
	consume := func() error {
		for s := range hashed {
			if err := gctx.Err(); err != nil {
				return err
			}
			if s.buf != nil {
				if err := out.data(s.off, s.buf[:s.n]); err != nil {
					return err
				}
				res.ReadBytes += s.n
				pool <- s.buf
				advance(s.off + s.n)
				continue
			}
			for off, end := s.off, s.off+s.n; off < end; {
				if err := gctx.Err(); err != nil {
					return err
				}
				k := min(end-off, int64(len(exportZeros)))
				if err := out.zeros(off, k); err != nil {
					return err
				}
				off += k
				advance(off)
			}
		}
		return gctx.Err()
	}
	cerr := consume()
	if cerr != nil {
		cancel() // the other stages may be waiting to send
	}
	rerr := g.Wait()
	switch {
	case ctx.Err() != nil:
		return res, ctx.Err()
	case rerr != nil && (cerr == nil || !errors.Is(rerr, context.Canceled)):
		return res, rerr // the reader's or hasher's own failure
	case cerr != nil:
		return res, cerr // the writer's failure (the reader was cancelled)
	}
	if done != c.Size {
		return res, fmt.Errorf("salvage: export stopped at %d of %d bytes", done, c.Size)
	}
	// A write to a layer while it was mapped or read could have changed
	// the image without failing a read.
	for _, l := range layers {
		info, err := l.f.Stat()
		if err != nil {
			return res, errclass.Wrapf("salvage", err, "stat %s", l.name)
		}
		if info.Size() != l.size || !info.ModTime().Equal(l.mod) {
			return res, fmt.Errorf("%w: %s was modified while it was read", ErrExportChanged, l.name)
		}
	}
	if out.truncate != nil {
		if err := out.truncate(c.Size); err != nil {
			return res, errclass.Wrapf("salvage", err, "truncate output to %d", c.Size)
		}
	}
	if opts.Progress != nil && reported != done {
		opts.Progress(done, c.Size)
	}
	if !opts.NoChecksum {
		copy(res.SHA256[:], h.Sum(nil))
	}
	res.WrittenBytes = out.written
	res.SeekDataLayers = r.seekData
	return res, nil
}

// exportOutput writes the image: sparse when it can be truncated.
type exportOutput struct {
	w        io.WriterAt
	truncate func(int64) error // nil: w must get every byte
	dense    bool
	written  int64
}

func (o *exportOutput) init(dense bool) {
	t, ok := o.w.(interface{ Truncate(int64) error })
	if f, isFile := o.w.(*os.File); isFile {
		info, err := f.Stat()
		ok = err == nil && info.Mode().IsRegular()
	}
	if ok {
		o.truncate = t.Truncate
	}
	o.dense = dense || !ok
}

// zeros writes n zero bytes at off, unless they can stay a hole.
func (o *exportOutput) zeros(off, n int64) error {
	if !o.dense {
		return nil
	}
	return o.write(exportZeros[:n], off)
}

// data writes p at off; a sparse output skips its all-zero blocks.
func (o *exportOutput) data(off int64, p []byte) error {
	if o.dense {
		return o.write(p, off)
	}
	start := -1 // start of the pending run of non-zero blocks
	for i := 0; i < len(p); i += ExportBlockSize {
		end := min(i+ExportBlockSize, len(p))
		if exportAllZero(p[i:end]) {
			if start >= 0 {
				if err := o.write(p[start:i], off+int64(start)); err != nil {
					return err
				}
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		return o.write(p[start:], off+int64(start))
	}
	return nil
}

func (o *exportOutput) write(p []byte, off int64) error {
	n, err := o.w.WriteAt(p, off)
	o.written += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return errclass.Wrapf("salvage", err, "write output at %d", off)
	}
	return nil
}

func exportAllZero(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), len(exportZeros))
		if !bytes.Equal(p[:n], exportZeros[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}

// exportReader maps the layers window by window and reads the blocks of the
// image in order.
type exportReader struct {
	ctx      context.Context
	c        Chain
	layers   []exportLayer
	opts     ExportOptions
	pool     chan []byte
	segs     chan<- exportSegment
	seekData []string
}

// run produces the segments of the image, in order.
func (r *exportReader) run() error {
	c := r.c
	// The engine probes every layer but its file list's index 1: the
	// backing file if there is one, else the oldest layer.
	probed := len(c.Layers)
	if c.BackingFile == "" {
		probed--
	}
	fallback := len(r.layers) - 1
	cursors := make([]*exportCursor, len(r.layers))
	for i := range r.layers {
		if r.layers[i].qcow2 != nil {
			continue // mapped by its clusters, below
		}
		cur, err := newExportCursor(r.layers[i], c.Size, r.opts.forceSeekData)
		if err != nil {
			return err
		}
		if cur.seekData && i < probed {
			if r.opts.RequireFiemap {
				return fmt.Errorf("%w: %s", ErrExportNoFiemap, r.layers[i].name)
			}
			r.seekData = append(r.seekData, r.layers[i].name)
		}
		cursors[i] = cur
	}

	// Window k+1 is mapped, and its reads hinted to the kernel, before
	// window k is read, so the device has work queued across windows.
	fullBlocks := c.Size / ExportBlockSize
	mapWindow := func(own []int32, wStart int64) ([]int32, error) {
		wEnd := min(wStart+exportWindow, c.Size)
		nb := int((wEnd - wStart + ExportBlockSize - 1) / ExportBlockSize)
		own = own[:nb]
		for i := range own {
			own[i] = exportNone
		}
		mark := func(layer int32) func(s, e int64) {
			return func(s, e int64) {
				first := int((s - wStart) / ExportBlockSize)
				last := int((e - wStart + ExportBlockSize - 1) / ExportBlockSize)
				for b := first; b < last && b < nb; b++ {
					if own[b] == exportNone {
						own[b] = layer
					}
				}
			}
		}
		for i := 0; i < probed; i++ {
			if err := cursors[i].window(wStart, wEnd, mark(int32(i))); err != nil {
				return nil, err
			}
		}
		if q := r.layers[fallback].qcow2; q != nil {
			if err := q.allocated(wStart, wEnd, mark(int32(fallback))); err != nil {
				return nil, err
			}
		} else if err := cursors[fallback].window(wStart, wEnd, mark(int32(fallback))); err != nil {
			return nil, err
		}
		for b := range own {
			if own[b] == exportNone {
				own[b] = exportZero
			}
		}
		// diffDisk.lookup: a block past the location map (the tail of a
		// Size that is not a multiple of 4096) is read from the head.
		if tail := int(fullBlocks - wStart/ExportBlockSize); tail >= 0 && tail < nb {
			own[tail] = 0
		}
		r.hint(wStart, wEnd, own)
		return own, nil
	}
	cur, next := make([]int32, exportWindow/ExportBlockSize), make([]int32, exportWindow/ExportBlockSize)
	var err error
	if c.Size > 0 {
		if cur, err = mapWindow(cur, 0); err != nil {
			return err
		}
	}
	for wStart := int64(0); wStart < c.Size; wStart += exportWindow {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if nStart := wStart + exportWindow; nStart < c.Size {
			if next, err = mapWindow(next[:cap(next)], nStart); err != nil {
				return err
			}
		}
		if err := r.emit(wStart, min(wStart+exportWindow, c.Size), cur); err != nil {
			return err
		}
		cur, next = next, cur
	}
	return nil
}

// Sources of a block besides a layer index.
const (
	exportNone = -1 // not known yet
	exportZero = -2 // no layer has it: zeros
)

// hint asks the kernel to read the window's data runs ahead.
func (r *exportReader) hint(wStart, wEnd int64, own []int32) {
	r.runs(wStart, wEnd, own, func(s, end int64, src int32) {
		if src >= 0 && r.layers[src].qcow2 == nil {
			l := &r.layers[src]
			if k := min(end, l.size) - s; k > 0 {
				exportWillNeed(l.f, s, k)
			}
		}
	})
}

// emit sends the window's runs of blocks of one source.
func (r *exportReader) emit(wStart, wEnd int64, own []int32) error {
	var err error
	r.runs(wStart, wEnd, own, func(s, end int64, src int32) {
		switch {
		case err != nil:
		case src == exportZero:
			err = r.send(exportSegment{off: s, n: end - s})
		default:
			err = r.read(&r.layers[src], s, end)
		}
	})
	return err
}

// runs calls fn for each run of blocks of one source in the window.
func (r *exportReader) runs(wStart, wEnd int64, own []int32, fn func(s, end int64, src int32)) {
	for b := 0; b < len(own); {
		e := b + 1
		for e < len(own) && own[e] == own[b] {
			e++
		}
		fn(wStart+int64(b)*ExportBlockSize, min(wStart+int64(e)*ExportBlockSize, wEnd), own[b])
		b = e
	}
}

// read sends [s, end) of layer l, zeros past its end, in buffers.
func (r *exportReader) read(l *exportLayer, s, end int64) error {
	for s < end {
		var buf []byte
		select {
		case buf = <-r.pool:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
		n := min(end-s, int64(len(buf)))
		k := max(0, min(n, l.contentSize()-s)) // bytes inside the layer
		if k > 0 {
			got, err := l.readAt(buf[:k], s)
			if err != nil {
				if errors.Is(err, io.EOF) {
					return fmt.Errorf("%w: %s is shorter than its %d bytes", ErrExportChanged, l.name, l.size)
				}
				return errclass.Wrapf("salvage", err, "read %s at %d", l.name, s)
			}
			k = int64(got)
		}
		clear(buf[k:n])
		if err := r.send(exportSegment{off: s, n: n, buf: buf}); err != nil {
			return err
		}
		s += n
	}
	return nil
}

func (r *exportReader) send(s exportSegment) error {
	select {
	case r.segs <- s:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}
