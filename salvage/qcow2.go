package salvage

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Qcow2Info is what the header of a qcow2 backing image says, as far as
// an export needs it.
type Qcow2Info struct {
	// Version is the format version, 2 or 3.
	Version int
	// VirtualSize is the size of the disk image the file holds, in bytes:
	// what the engine reads through it.
	VirtualSize int64
	// ClusterSize is the allocation unit, in bytes (512 B to 2 MiB).
	ClusterSize int64
	// Dirty says QEMU did not close the file cleanly (the dirty bit of
	// version 3): its reference counts may be stale, which does not
	// change the data it maps.
	Dirty bool
}

// The qcow2 format, as QEMU writes it (QEMU's docs/interop/qcow2.txt;
// block/qcow2.h): a big-endian header, a one-level L1 table of L2 table
// offsets, and L2 tables of cluster descriptors.
const (
	qcow2Magic = "QFI\xfb"

	qcow2MinClusterBits = 9
	qcow2MaxClusterBits = 21
	// qcow2MaxL1Bytes is QEMU's own bound on the L1 table (QCOW_MAX_L1_SIZE).
	qcow2MaxL1Bytes = 32 << 20

	qcow2OffsetMask     = 0x00fffffffffffe00 // bits 9-55 of L1 and L2 entries
	qcow2CompressedFlag = 1 << 62
	qcow2ZeroFlag       = 1 // bit 0 of a standard L2 entry (version 3)

	// Incompatible feature bits (version 3).
	qcow2FeatDirty        = 1 << 0 // refcounts may be stale: data is fine
	qcow2FeatCorrupt      = 1 << 1
	qcow2FeatExternalData = 1 << 2
	qcow2FeatCompression  = 1 << 3 // compression_type field is in use
	qcow2FeatExtendedL2   = 1 << 4

	qcow2L2CacheTables = 4
)

// qcow2Image reads the virtual disk of a qcow2 file. It is not safe for
// concurrent use: the export reads it from one goroutine.
type qcow2Image struct {
	r        io.ReaderAt
	name     string
	fileSize int64
	info     Qcow2Info

	clusterBits uint
	l2Bits      uint  // log2 of the entries of one L2 table
	csizeShift  uint  // where a compressed entry's sector count starts
	csizeMask   int64 // its width
	l1          []uint64

	cache    [qcow2L2CacheTables]qcow2L2
	cacheUse int
	cbuf     []byte // one compressed cluster, read
	dbuf     []byte // one cluster, inflated
	inflate  io.ReadCloser
	// dbuf holds the inflated cluster stored at dOff (dLen bytes
	// compressed) when dHeld: reads of one compressed cluster in pieces,
	// as an export makes where upper layers own some of its blocks,
	// inflate it once, not once a piece (QEMU keeps its last inflated
	// cluster likewise: s->cluster_cache in block/qcow2.c).
	dOff, dLen int64
	dHeld      bool
}

type qcow2L2 struct {
	off     int64
	entries []uint64
}

// ErrQcow2Corrupt is wrapped when a qcow2 backing file contradicts its
// own format: a header cut short, tables or clusters outside the file, a
// compressed cluster that does not inflate. The error says what and
// where. qemu-img check tells more.
var ErrQcow2Corrupt = errors.New("salvage: corrupt qcow2 image")

// qcow2Error is a malformed or unsupported qcow2 file.
func qcow2Error(sentinel error, name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", sentinel, name, fmt.Sprintf(format, args...))
}

// isQcow2 says whether the file starts with qcow2's magic.
func isQcow2(r io.ReaderAt) (bool, error) {
	var magic [4]byte
	n, err := r.ReadAt(magic[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return n == 4 && string(magic[:]) == qcow2Magic, nil
}

// openQcow2 reads and checks the header and L1 table of the qcow2 file r
// of fileSize bytes. What the engine could not have been given by
// Longhorn, or what this reader does not decode, is refused with
// ErrExportQcow2 saying which; a file whose tables point outside it or
// contradict the format is ErrQcow2Corrupt.
func openQcow2(r io.ReaderAt, fileSize int64, name string) (*qcow2Image, error) {
	var h [112]byte
	n, err := r.ReadAt(h[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errclass.Wrapf("salvage", err, "read %s", name)
	}
	if n < 72 || string(h[:4]) != qcow2Magic {
		return nil, qcow2Error(ErrQcow2Corrupt, name, "not a qcow2 header (%d bytes)", n)
	}
	be := binary.BigEndian
	q := &qcow2Image{r: r, name: name, fileSize: fileSize}
	version := be.Uint32(h[4:])
	backingOff := be.Uint64(h[8:])
	clusterBits := be.Uint32(h[20:])
	size := be.Uint64(h[24:])
	crypt := be.Uint32(h[32:])
	l1Size := be.Uint32(h[36:])
	l1Off := be.Uint64(h[40:])
	switch {
	case version != 2 && version != 3:
		return nil, qcow2Error(ErrExportQcow2, name, "qcow2 version %d (2 and 3 are read)", version)
	case backingOff != 0:
		// Longhorn's backing images are whole images; a qcow2 with a
		// backing file of its own would need that file too.
		return nil, qcow2Error(ErrExportQcow2, name, "it has a backing file of its own")
	case crypt != 0:
		return nil, qcow2Error(ErrExportQcow2, name, "it is encrypted (method %d)", crypt)
	case clusterBits < qcow2MinClusterBits || clusterBits > qcow2MaxClusterBits:
		return nil, qcow2Error(ErrQcow2Corrupt, name, "cluster bits %d outside %d..%d", clusterBits, qcow2MinClusterBits, qcow2MaxClusterBits)
	case size > 1<<62:
		return nil, qcow2Error(ErrQcow2Corrupt, name, "virtual size %d", size)
	}
	if version == 3 {
		if n < 104 {
			return nil, qcow2Error(ErrQcow2Corrupt, name, "version 3 header of %d bytes", n)
		}
		incompat := be.Uint64(h[72:])
		hdrLen := be.Uint32(h[100:])
		switch {
		case hdrLen < 104:
			return nil, qcow2Error(ErrQcow2Corrupt, name, "header length %d", hdrLen)
		case incompat&qcow2FeatCorrupt != 0:
			return nil, qcow2Error(ErrExportQcow2, name, "QEMU marked it corrupt (run qemu-img check)")
		case incompat&qcow2FeatExternalData != 0:
			return nil, qcow2Error(ErrExportQcow2, name, "its data is in an external data file")
		case incompat&qcow2FeatExtendedL2 != 0:
			return nil, qcow2Error(ErrExportQcow2, name, "it uses extended L2 entries (subclusters)")
		case incompat&^(qcow2FeatDirty|qcow2FeatCompression) != 0:
			return nil, qcow2Error(ErrExportQcow2, name, "unknown incompatible features %#x", incompat)
		}
		if incompat&qcow2FeatCompression != 0 {
			if hdrLen < 105 || n < 105 {
				return nil, qcow2Error(ErrQcow2Corrupt, name, "compression type flagged but not in the header")
			}
			if ct := h[104]; ct != 0 {
				return nil, qcow2Error(ErrExportQcow2, name, "compression type %d (zstd): only zlib is read", ct)
			}
		}
		q.info.Dirty = incompat&qcow2FeatDirty != 0
	}
	q.info.Version = int(version)
	q.info.VirtualSize = int64(size)
	q.clusterBits = uint(clusterBits)
	q.info.ClusterSize = 1 << clusterBits
	q.l2Bits = q.clusterBits - 3
	q.csizeShift = 62 - (q.clusterBits - 8)
	q.csizeMask = (1 << (q.clusterBits - 8)) - 1

	// Every virtual cluster needs its L1 entry.
	perL1 := uint64(1) << (q.clusterBits + q.l2Bits)
	need := (size + perL1 - 1) / perL1
	switch {
	case uint64(l1Size) < need:
		return nil, qcow2Error(ErrQcow2Corrupt, name, "L1 table of %d entries for %d bytes (needs %d)", l1Size, size, need)
	case uint64(l1Size)*8 > qcow2MaxL1Bytes:
		return nil, qcow2Error(ErrQcow2Corrupt, name, "L1 table of %d entries", l1Size)
	case l1Size > 0 && (l1Off%uint64(q.info.ClusterSize) != 0 || l1Off > uint64(fileSize) || uint64(fileSize)-l1Off < uint64(l1Size)*8):
		return nil, qcow2Error(ErrQcow2Corrupt, name, "L1 table at %d of %d entries is outside the file of %d bytes", l1Off, l1Size, fileSize)
	}
	raw := make([]byte, int(need)*8)
	if _, err := r.ReadAt(raw, int64(l1Off)); err != nil && len(raw) > 0 {
		return nil, errclass.Wrapf("salvage", err, "read %s L1 table", name)
	}
	q.l1 = make([]uint64, need)
	for i := range q.l1 {
		q.l1[i] = be.Uint64(raw[i*8:])
	}
	return q, nil
}

// cluster describes virtual cluster vc: kind is one of the qcow2Cluster
// values; off is the host offset of a standard cluster or of a compressed
// one's data, and clen the compressed data's length.
type qcow2Cluster struct {
	kind int
	off  int64
	clen int64
}

const (
	qcow2Unallocated = iota // reads as zeros (no backing file)
	qcow2Zero               // reads as zeros
	qcow2Standard
	qcow2Compressed
)

// lookup finds virtual cluster vc.
func (q *qcow2Image) lookup(vc int64) (qcow2Cluster, error) {
	l1i := vc >> q.l2Bits
	if l1i >= int64(len(q.l1)) {
		return qcow2Cluster{}, nil
	}
	l2Off := int64(q.l1[l1i] & qcow2OffsetMask)
	if l2Off == 0 {
		return qcow2Cluster{}, nil
	}
	l2, err := q.l2(l2Off)
	if err != nil {
		return qcow2Cluster{}, err
	}
	e := l2[vc&(1<<q.l2Bits-1)]
	if e&qcow2CompressedFlag != 0 {
		off := int64(e & (1<<q.csizeShift - 1))
		sectors := int64(e>>q.csizeShift)&q.csizeMask + 1
		clen := sectors*512 - off&511
		if off <= 0 || off >= q.fileSize {
			return qcow2Cluster{}, qcow2Error(ErrQcow2Corrupt, q.name, "compressed cluster %d at %d is outside the file of %d bytes", vc, off, q.fileSize)
		}
		// The last sector may run past the end of the file: QEMU counts
		// whole sectors, and the file may end inside the last one.
		clen = min(clen, q.fileSize-off)
		return qcow2Cluster{kind: qcow2Compressed, off: off, clen: clen}, nil
	}
	if q.info.Version >= 3 && e&qcow2ZeroFlag != 0 {
		return qcow2Cluster{kind: qcow2Zero}, nil
	}
	off := int64(e & qcow2OffsetMask)
	if off == 0 {
		return qcow2Cluster{}, nil
	}
	if off%q.info.ClusterSize != 0 || off >= q.fileSize {
		return qcow2Cluster{}, qcow2Error(ErrQcow2Corrupt, q.name, "cluster %d at %d is outside the file of %d bytes or not aligned", vc, off, q.fileSize)
	}
	return qcow2Cluster{kind: qcow2Standard, off: off}, nil
}

// l2 returns the L2 table at off, from a small cache: the export walks
// the image in order, so few tables are live at once.
func (q *qcow2Image) l2(off int64) ([]uint64, error) {
	for i := range q.cache {
		if q.cache[i].off == off && q.cache[i].entries != nil {
			return q.cache[i].entries, nil
		}
	}
	cs := q.info.ClusterSize
	if off%cs != 0 || off > q.fileSize-cs {
		return nil, qcow2Error(ErrQcow2Corrupt, q.name, "L2 table at %d is outside the file of %d bytes or not aligned", off, q.fileSize)
	}
	slot := &q.cache[q.cacheUse%qcow2L2CacheTables]
	q.cacheUse++
	if slot.entries == nil {
		slot.entries = make([]uint64, cs/8)
	}
	raw := make([]byte, cs)
	if _, err := q.r.ReadAt(raw, off); err != nil {
		slot.off = 0
		return nil, errclass.Wrapf("salvage", err, "read %s L2 table at %d", q.name, off)
	}
	for i := range slot.entries {
		slot.entries[i] = binary.BigEndian.Uint64(raw[i*8:])
	}
	slot.off = off
	return slot.entries, nil
}

// allocated calls fn with each run of [start, end) whose clusters hold
// data (standard or compressed), in order: the rest reads as zeros.
func (q *qcow2Image) allocated(start, end int64, fn func(s, e int64)) error {
	end = min(end, q.info.VirtualSize)
	cs := q.info.ClusterSize
	runStart := int64(-1)
	for vc := start / cs; vc*cs < end; vc++ {
		c, err := q.lookup(vc)
		if err != nil {
			return err
		}
		s := max(vc*cs, start)
		if c.kind == qcow2Standard || c.kind == qcow2Compressed {
			if runStart < 0 {
				runStart = s
			}
			continue
		}
		if runStart >= 0 {
			fn(runStart, s)
			runStart = -1
		}
	}
	if runStart >= 0 {
		fn(runStart, end)
	}
	return nil
}

// ReadAt reads the virtual disk at off into p; p must lie inside
// VirtualSize.
func (q *qcow2Image) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > q.info.VirtualSize {
		return 0, fmt.Errorf("salvage: qcow2 %s: read [%d, %d) outside its %d bytes", q.name, off, off+int64(len(p)), q.info.VirtualSize)
	}
	cs := q.info.ClusterSize
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		vc, in := pos/cs, pos%cs
		k := int(min(int64(len(p)-done), cs-in))
		c, err := q.lookup(vc)
		if err != nil {
			return done, err
		}
		dst := p[done : done+k]
		switch c.kind {
		case qcow2Unallocated, qcow2Zero:
			clear(dst)
		case qcow2Standard:
			// Clusters that follow each other in the file too (qemu-img
			// writes them so) are read with one call.
			for done+k < len(p) {
				next, err := q.lookup(vc + 1)
				if err != nil || next.kind != qcow2Standard || next.off != c.off+int64(k)+in {
					break
				}
				vc++
				k += int(min(int64(len(p)-done-k), cs))
			}
			dst = p[done : done+k]
			// The last cluster may be shorter in the file (QEMU does not
			// always pad it): what is past the file's end reads as zeros.
			n, err := q.r.ReadAt(dst, c.off+in)
			if err != nil && !(errors.Is(err, io.EOF) && c.off+in+int64(n) == q.fileSize) {
				return done, errclass.Wrapf("salvage", err, "read %s cluster %d", q.name, vc)
			}
			clear(dst[n:])
		case qcow2Compressed:
			data, err := q.inflateCluster(vc, c)
			if err != nil {
				return done, err
			}
			copy(dst, data[in:])
		}
		done += k
	}
	return done, nil
}

// inflateCluster reads and inflates compressed cluster vc (raw deflate,
// as QEMU's zlib compression writes it: block/qcow2-threads.c).
func (q *qcow2Image) inflateCluster(vc int64, c qcow2Cluster) ([]byte, error) {
	cs := int(q.info.ClusterSize)
	if q.dbuf == nil {
		q.dbuf = make([]byte, cs)
		q.cbuf = make([]byte, 0, 2*cs)
	}
	if c.clen > int64(2*cs) {
		return nil, qcow2Error(ErrQcow2Corrupt, q.name, "compressed cluster %d of %d bytes", vc, c.clen)
	}
	if q.dHeld && q.dOff == c.off && q.dLen == c.clen {
		return q.dbuf, nil
	}
	q.dHeld = false
	cb := q.cbuf[:c.clen]
	if n, err := q.r.ReadAt(cb, c.off); err != nil && !(errors.Is(err, io.EOF) && n == len(cb)) {
		return nil, errclass.Wrapf("salvage", err, "read %s compressed cluster %d", q.name, vc)
	}
	src := bytes.NewReader(cb)
	if q.inflate == nil {
		q.inflate = flate.NewReader(src)
	} else if err := q.inflate.(flate.Resetter).Reset(src, nil); err != nil {
		return nil, err
	}
	// QEMU stops at the cluster's size and ignores what follows.
	if _, err := io.ReadFull(q.inflate, q.dbuf); err != nil {
		return nil, qcow2Error(ErrQcow2Corrupt, q.name, "compressed cluster %d does not inflate to %d bytes: %v", vc, cs, err)
	}
	q.dOff, q.dLen, q.dHeld = c.off, c.clen, true
	return q.dbuf, nil
}
