package diskscan

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// The size of an orphan is summed by a walk of its directory. A replica
// directory is flat (the engine writes its files in one directory), so a
// walk that goes deep or finds many entries is walking something that is
// not Longhorn's, and a scan must not stall on it: the Monitor scans with
// no deadline, and one directory holding a chain of thousands of nested
// directories would hold up every disk of the node. So the walk is
//
//   - linear: every directory is opened once, relative to its parent's
//     descriptor, and every entry is looked at once;
//   - bounded: it descends at most MaxWalkDepth levels and looks at most at
//     Options.MaxWalkEntries entries (DefaultMaxWalkEntries);
//   - cancellable: it checks the scan's context at every entry, and the
//     scan then fails with the context's error;
//   - confined: it never follows a symbolic link (directories are opened
//     O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK), opens nothing but directories,
//     and never crosses into another filesystem or mount (a directory on
//     another device or with another mount ID than the orphan directory is
//     neither entered nor counted).
//
// Beyond a bound the directory is not reported as a plain orphan:
//
//   - deeper than MaxWalkDepth: skipped, with the reason. A purge refuses
//     such a tree anyway (Delete stops at the same depth and leaves it
//     alone), so reporting it as an orphan would only make a record that
//     can never be purged;
//   - more than MaxWalkEntries entries: reported as an orphan whose size
//     is unknown (OrphanDir.SizeUnknown says why, AllocatedBytes is 0 and
//     not in DiskReport.OrphanBytes). A purge does not depend on the count.

// MaxWalkDepth is how many directory levels below an orphan directory the
// walk that sums its size descends, the same bound a purge has: a
// directory with anything deeper is skipped as not a replica.
const MaxWalkDepth = maxTreeDepth

// DefaultMaxWalkEntries is how many entries (files, directories, links,
// at every level) the walk that sums a directory's size looks at unless
// Options.MaxWalkEntries says otherwise. A replica holds a few files per
// snapshot and at most a few thousand; beyond the bound the size is
// reported unknown.
const DefaultMaxWalkEntries = 1 << 20

// sizeWalk is one walk summing the allocated bytes of the regular files
// under a directory, and what stopped it, if anything.
type sizeWalk struct {
	ctx        context.Context
	maxEntries int
	bytes      int64
	entries    int   // entries looked at
	opens      int64 // directories opened below the one validated
	tooDeep    bool  // a directory deeper than MaxWalkDepth was found
	tooMany    bool  // more than maxEntries entries
}

// newSizeWalk returns a walk bounded by o's options.
func (o *Orphans) newSizeWalk(ctx context.Context) *sizeWalk {
	n := o.opts.MaxWalkEntries
	if n <= 0 {
		n = DefaultMaxWalkEntries
	}
	return &sizeWalk{ctx: ctx, maxEntries: n}
}

// stopped reports whether the walk must not go on: ctx is done or a bound
// was passed.
func (w *sizeWalk) stopped() bool {
	return w.tooDeep || w.tooMany || w.ctx.Err() != nil
}

// entry counts one entry and reports whether the walk may look at it.
func (w *sizeWalk) entry() bool {
	w.entries++
	if w.entries > w.maxEntries {
		w.tooMany = true
	}
	return !w.stopped()
}

// subdir reports whether the walk may enter a directory depth levels below
// the one validated (which is at depth 0).
func (w *sizeWalk) subdir(depth int) bool {
	if depth > MaxWalkDepth {
		w.tooDeep = true
	}
	return !w.stopped()
}

// size is what the walk found, as the scan applies it: the allocated
// bytes, or why they are not known (sizeUnknown), or why the directory is
// not a replica at all (notReplica).
func (w *sizeWalk) size() (bytes int64, sizeUnknown, notReplica string) {
	switch {
	case w.tooDeep:
		return 0, "", fmt.Sprintf("not a replica: holds directories more than %d levels deep (a replica directory is flat, and a purge would leave it alone)", MaxWalkDepth)
	case w.tooMany:
		return 0, fmt.Sprintf("more than %d entries: size not summed", w.maxEntries), ""
	}
	return w.bytes, "", ""
}

// walkRoot sums the size of the directory dir holds, which is at depth
// levels below the one validated, through os.Root: the portable path, and
// the one taken where the descriptor path cannot tell. Every directory is
// opened once relative to its parent (openSubRoot), so the cost is linear
// in the entries, whatever the depth. bound is the device and mount of the
// directory validated (mnt 0 where mount IDs are not available).
func (w *sizeWalk) walkRoot(dir *os.Root, bound boundary, depth int) {
	self, err := dir.Open(".")
	if err != nil {
		return
	}
	defer self.Close()
	var subs []string
	for !w.stopped() {
		// A directory opened through an os.Root lstat's its entries, so
		// their types are exact even where readdir does not give them.
		batch, err := self.ReadDir(256)
		for _, e := range batch {
			if !w.entry() {
				return
			}
			switch t := e.Type(); {
			case t.IsDir():
				subs = append(subs, e.Name())
			case t.IsRegular():
				if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
					w.bytes += allocatedBytes(fi)
				}
			}
		}
		if err != nil || len(batch) == 0 { // io.EOF at the end
			break
		}
	}
	for _, name := range subs {
		if !w.subdir(depth + 1) {
			return
		}
		sub, ok := w.openSubRoot(dir, name, bound)
		if !ok {
			continue
		}
		w.walkRoot(sub, bound, depth+1)
		sub.Close()
	}
}

// openSubRoot opens directory name inside dir as a root of its own, if it
// is a directory (never a symbolic link) on bound's device and in its
// mount. ok is false for anything else, which the walk then leaves out.
func (w *sizeWalk) openSubRoot(dir *os.Root, name string, bound boundary) (*os.Root, bool) {
	f, err := openDirNoBlock(dir, name)
	if errors.Is(err, errUnsupported) {
		// No descriptors to reopen (not Linux): the root opens it, and
		// keeps whatever it resolves inside dir.
		fi, err := dir.Lstat(name)
		if err != nil || !fi.IsDir() {
			return nil, false
		}
		sub, err := dir.OpenRoot(name)
		if err != nil {
			return nil, false
		}
		w.opens++
		return sub, true
	}
	if err != nil {
		return nil, false
	}
	defer f.Close()
	w.opens++
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		return nil, false
	}
	if _, dev, _, ok := fileIdentity(fi); !ok || dev != bound.dev {
		return nil, false // another filesystem: not this disk's bytes
	}
	if bound.mnt != 0 {
		if mnt, err := mountOf(f); err != nil || mnt != bound.mnt {
			return nil, false // a mount point, or nothing proves it is none
		}
	}
	sub, err := rootOfDir(f)
	if err != nil {
		return nil, false
	}
	return sub, true
}

// sizeUnder walks directory name inside rr (the directory validated)
// through os.Root; the walk records what it found. A name that is not a
// directory now, or that was replaced between its lstat and its open, is
// not counted.
func (w *sizeWalk) sizeUnder(rr *os.Root, name string) {
	fi, err := rr.Lstat(name)
	if err != nil || !fi.IsDir() {
		return
	}
	f, err := openDirNoBlock(rr, name)
	if errors.Is(err, errUnsupported) {
		// Not Linux: no descriptors to reopen, no device numbers or mount
		// IDs to compare.
		dir, err := rr.OpenRoot(name)
		if err != nil {
			return
		}
		defer dir.Close()
		w.walkRoot(dir, boundary{}, 0)
		return
	}
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !sameEntry(fi, st) {
		return
	}
	_, dev, _, _ := fileIdentity(st)
	mnt, _ := mountOf(f) // 0 without /proc: then only devices are compared
	dir, err := rootOfDir(f)
	if err != nil {
		return
	}
	defer dir.Close()
	w.walkRoot(dir, boundary{dev: dev, mnt: mnt}, 0)
}
