package salvage

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// SEEK_DATA and SEEK_HOLE (lseek(2)); the syscall package has no names for
// them.
const (
	exportSeekData = 3
	exportSeekHole = 4
)

func exportSupported() error { return nil }

// exportExtent is a byte range [start, end) of a file that has an extent.
type exportExtent struct{ start, end int64 }

// exportCursor walks one layer's extents in order, a batch at a time, so
// that its memory does not depend on how many extents the file has.
type exportCursor struct {
	l        exportLayer
	limit    int64 // the volume's size: extents past it do not matter
	pos      int64 // where the next batch starts
	done     bool  // no extents at or after pos
	seekData bool  // mapped with SEEK_DATA/SEEK_HOLE (no FIEMAP)
	pending  []exportExtent
	store    []exportExtent
	req      *exportFiemapRequest
}

// newExportCursor maps l's first batch, finding out whether its filesystem
// has FIEMAP.
func newExportCursor(l exportLayer, limit int64, forceSeekData bool) (*exportCursor, error) {
	c := &exportCursor{l: l, limit: limit, seekData: forceSeekData, store: make([]exportExtent, 0, exportFiemapBatch)}
	if !forceSeekData {
		c.req = new(exportFiemapRequest)
	}
	if err := c.fill(); err != nil {
		if !c.seekData && (errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOTTY)) {
			c.seekData, c.req, c.done, c.pos = true, nil, false, 0
			err = c.fill()
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// window calls fn with each part of an extent inside [wStart, wEnd), in
// order; windows must come in order.
func (c *exportCursor) window(wStart, wEnd int64, fn func(s, e int64)) error {
	for {
		if len(c.pending) == 0 {
			if c.done {
				return nil
			}
			if err := c.fill(); err != nil {
				return err
			}
			continue
		}
		x := c.pending[0]
		if x.start >= wEnd {
			return nil
		}
		if x.end > wStart {
			fn(max(x.start, wStart), min(x.end, wEnd))
		}
		if x.end > wEnd {
			return nil
		}
		c.pending = c.pending[1:]
	}
}

// fill maps the next batch of extents from pos.
func (c *exportCursor) fill() error {
	c.pending = c.store[:0]
	if c.pos >= c.limit {
		c.done = true
		return nil
	}
	var err error
	if c.seekData {
		err = c.fillSeek()
	} else {
		err = c.fillFiemap()
	}
	if err != nil {
		return errclass.Wrapf("salvage", err, "map extents of %s", c.l.name)
	}
	return nil
}

func (c *exportCursor) fillFiemap() error {
	exts, errno := exportFiemap(c.l.f.Fd(), uint64(c.pos), uint64(c.limit-c.pos), c.req)
	if errno != 0 {
		return errno
	}
	if len(exts) < exportFiemapBatch {
		c.done = true
	}
	for _, x := range exts {
		s, e := int64(x.Logical), int64(x.Logical+x.Length)
		if x.Flags&exportFiemapExtentLast != 0 {
			c.done = true
		}
		if e <= c.pos || s < 0 || e < s {
			continue // before pos (or nonsense): nothing new
		}
		c.pending = append(c.pending, exportExtent{start: max(s, c.pos), end: e})
		c.pos = e
	}
	if !c.done && len(c.pending) == 0 {
		// A full batch that does not move forward would loop forever.
		return fmt.Errorf("salvage: FIEMAP of %s made no progress at offset %d", c.l.name, c.pos)
	}
	return nil
}

func (c *exportCursor) fillSeek() error {
	fd := int(c.l.f.Fd())
	for len(c.pending) < cap(c.pending) && c.pos < c.limit {
		d, err := syscall.Seek(fd, c.pos, exportSeekData)
		if errors.Is(err, syscall.ENXIO) {
			c.done = true
			return nil
		}
		if err != nil {
			return errclass.Wrapf("salvage", err, "SEEK_DATA")
		}
		h, err := syscall.Seek(fd, d, exportSeekHole)
		if err != nil {
			return errclass.Wrapf("salvage", err, "SEEK_HOLE")
		}
		if h <= d || d < c.pos {
			return fmt.Errorf("salvage: SEEK_DATA/SEEK_HOLE of %s made no progress at offset %d", c.l.name, c.pos)
		}
		c.pending = append(c.pending, exportExtent{start: d, end: h})
		c.pos = h
	}
	if c.pos >= c.limit {
		c.done = true
	}
	return nil
}
