package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/caretaker-storage/caretaker/internal/safefile"
)

// A purge never crosses a filesystem boundary: a tmpfs, another disk or a
// bind mount (even of the same filesystem) inside an orphan directory must
// not lose a byte. os.Root.RemoveAll would descend into them, so the
// purge walks the tree itself (treeWalk). Two independent checks find a mount:
//
//   - the mount table (the calling thread's /proc/thread-self/mountinfo,
//     or the host root's, see Options.HostRoot): no mount point may be the
//     directory or lie below it. It sees bind mounts of the same
//     filesystem, which share its device number.
//   - every directory entered: opened without following symbolic links
//     and without blocking, it must be the directory its lstat showed
//     (type, device, inode), on the device of <disk>/replicas and in its
//     mount (the mount ID the kernel reports for the open directory). This
//     sees mounts made after the table was read, and mounts the table of
//     this mount namespace does not show.

// boundary is the filesystem and mount a purge must stay in: those of
// <disk>/replicas.
type boundary struct{ dev, mnt uint64 }

// maxTreeDepth bounds how deep a purge descends. A replica directory is
// flat; anything deeper than this is not Longhorn's and is left alone.
const maxTreeDepth = 64

// boundaryOf returns the boundary of the directory rr holds.
func boundaryOf(rr *os.Root) (boundary, error) {
	f, err := rr.Open(".")
	if err != nil {
		return boundary{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return boundary{}, err
	}
	_, dev, _, ok := fileIdentity(fi)
	if !ok {
		return boundary{}, errUnsupported
	}
	mnt, err := mountOf(f)
	if err != nil {
		return boundary{}, fmt.Errorf("mount of %s: %w", ReplicasDir, err)
	}
	return boundary{dev: dev, mnt: mnt}, nil
}

// sameEntry reports whether a and b are the same file: same type, device
// and inode.
func sameEntry(a, b fs.FileInfo) bool {
	ta, da, ia, ok1 := fileIdentity(a)
	tb, db, ib, ok2 := fileIdentity(b)
	return ok1 && ok2 && ta == tb && da == db && ia == ib
}

// noMountsIn refuses with ErrMountPoint if the mount table shows a mount
// point at or below <replicas>/name. An unreadable table is an error:
// nothing proves there is none. The table is the host root's when one is
// set, else the calling thread's; the directory's path is taken relative
// to the same root as the table's.
func (h hostTree) noMountsIn(rr *os.Root, name string) error {
	self, err := rr.Open(".")
	if err != nil {
		return err
	}
	dir, err := h.pathOf(self)
	self.Close()
	if err != nil {
		return fmt.Errorf("path of %s: %w", ReplicasDir, err)
	}
	table, fallback := h.mountTable()
	points, err := mountPointsUnder(table, fallback, strings.TrimSuffix(dir, "/")+"/"+name)
	if err != nil {
		return fmt.Errorf("mount table: %w", err)
	}
	if len(points) > 0 {
		return refuse(ErrMountPoint, "%s holds mount point %s: a purge never crosses a filesystem boundary", name, strings.Join(points, ", "))
	}
	return nil
}

// treeWalk checks (remove false) or removes (remove true) a directory
// tree inside <disk>/replicas without leaving its boundary. It never
// follows a symbolic link (links are removed as entries, never entered),
// never opens anything but a directory, and checks ctx between entries.
type treeWalk struct {
	ctx    context.Context
	bound  boundary
	remove bool
	// afterRemove is a test's hook (Orphans.hooks); nil outside tests.
	afterRemove func(path string)
}

// walk handles directory name inside parent; path names it in errors.
// want, if not nil, is what the directory must be (the identity the
// caller checked); otherwise it must be what lstat shows now. A vanished
// directory is not an error.
func (w *treeWalk) walk(parent *os.Root, name, path string, want fs.FileInfo, depth int) error {
	if depth > maxTreeDepth {
		return refuse(ErrNotReplica, "%s is more than %d directories deep: left alone", path, maxTreeDepth)
	}
	if want == nil {
		fi, err := parent.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		want = fi
	}
	if !want.IsDir() {
		return refuse(ErrChanged, "%s is %s, not a directory", path, safefile.Describe(want.Mode()))
	}
	sub, err := w.enter(parent, name, path, want)
	if err != nil {
		return err
	}
	defer sub.Close()
	for round := 0; ; round++ {
		if err := w.entries(sub, path, depth); err != nil || !w.remove {
			return err
		}
		err := parent.Remove(name)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		// Something was created inside meanwhile: list again, a few times.
		if !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) || round == 2 {
			return err
		}
	}
}

// enter opens directory name inside parent as a root of its own, after
// checking it is the directory want describes and is inside the boundary.
func (w *treeWalk) enter(parent *os.Root, name, path string, want fs.FileInfo) (*os.Root, error) {
	f, err := openDirNoBlock(parent, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !sameEntry(want, st) {
		return nil, refuse(ErrChanged, "%s changed while being purged: left alone", path)
	}
	if _, dev, _, _ := fileIdentity(st); dev != w.bound.dev {
		return nil, refuse(ErrMountPoint, "%s is on another filesystem (device %#x, the disk's is %#x): a purge never crosses a filesystem boundary", path, dev, w.bound.dev)
	}
	mnt, err := mountOf(f)
	if err != nil {
		return nil, fmt.Errorf("mount of %s: %w", path, err)
	}
	if mnt != w.bound.mnt {
		return nil, refuse(ErrMountPoint, "%s is a mount point (mount %d inside mount %d): a purge never crosses a mount, not even a bind mount", path, mnt, w.bound.mnt)
	}
	sub, err := rootOfDir(f)
	if err != nil {
		return nil, err
	}
	self, err := sub.Open(".")
	if err == nil {
		var again fs.FileInfo
		again, err = self.Stat()
		self.Close()
		if err == nil && !sameEntry(st, again) {
			err = refuse(ErrChanged, "%s changed while being purged: left alone", path)
		}
	}
	if err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// entries handles the entries of the directory sub holds: directories are
// walked, anything else (files, symbolic links, FIFOs, sockets, devices)
// is removed by name, never opened.
func (w *treeWalk) entries(sub *os.Root, path string, depth int) error {
	dir, err := sub.Open(".")
	if err != nil {
		return err
	}
	defer dir.Close()
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		// A directory opened through an os.Root lstat's its entries, so
		// their types are exact even where readdir does not give them.
		batch, err := dir.ReadDir(256)
		for _, e := range batch {
			if err := w.ctx.Err(); err != nil {
				return err
			}
			child := path + "/" + e.Name()
			if e.IsDir() {
				if err := w.walk(sub, e.Name(), child, nil, depth+1); err != nil {
					return err
				}
				continue
			}
			if !w.remove {
				continue
			}
			if err := sub.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if w.afterRemove != nil {
				w.afterRemove(child)
			}
		}
		if err == io.EOF || err == nil && len(batch) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
