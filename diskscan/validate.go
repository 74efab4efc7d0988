package diskscan

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// A scan validates every unexpected directory (lstat, then open, read and
// parse its volume.meta and sum its allocated bytes unless its validation
// is cached): on a disk of 100k replicas with 1% orphans that is a
// thousand small reads, the larger part of a cold scan. They are
// independent, so a bounded pool of workers does them at once. Each
// worker only reads the disk and writes its own result; the scan applies
// the results to its cache and its report in one goroutine afterwards,
// in the order of the names, so the outcome is the one a sequential
// validation has (TestConcurrentValidationMatchesSequential).

// DefaultScanWorkers is how many unexpected directories a scan validates
// at once unless Options.ScanWorkers says otherwise.
const DefaultScanWorkers = 8

// cacheAction is what a validation does to the cached entry of its name.
type cacheAction uint8

const (
	cacheLeave cacheAction = iota // keep what is cached, if anything
	cacheStore                    // cache the new entry
	cacheDrop                     // forget what is cached
)

// validation is what validating one unexpected directory found.
type validation struct {
	present bool         // false: the directory is gone
	entry   *cachedEntry // what is known of it, when present
	cache   cacheAction
}

// scanWorkers is the number of workers the scan validates with.
func (o *Orphans) scanWorkers() int {
	if o.opts.Sequential {
		return 1
	}
	if o.opts.ScanWorkers > 0 {
		return o.opts.ScanWorkers
	}
	return DefaultScanWorkers
}

// validateAll validates the unexpected directories names, at most
// scanWorkers at once, and returns their validations in the order of
// names. It only reads cache. When ctx is done the workers stop taking
// names and it returns once each has finished the name it holds (every
// step of a validation is a non-blocking system call or stops on ctx);
// the results are then incomplete and the caller must fail with ctx's
// error.
//
// dirfd is a descriptor of the directory rr holds, or -1: with one, each
// directory is validated through descriptors relative to it (see
// validateAt), which costs a third of the system calls of going through
// rr; without one, or where that path cannot tell, through rr.
func (o *Orphans) validateAll(ctx context.Context, rr *os.Root, dirfd int, cache *diskCache, names []string) []validation {
	vs := make([]validation, len(names))
	prev := make([]*cachedEntry, len(names))
	for k, name := range names {
		prev[k] = cache.entries[name]
	}
	var next atomic.Int64
	work := func() {
		var bufs validateBufs
		for ctx.Err() == nil {
			k := int(next.Add(1)) - 1
			if k >= len(names) {
				return
			}
			vs[k] = o.validate(ctx, rr, dirfd, &bufs, prev[k], names[k])
		}
	}
	workers := min(o.scanWorkers(), len(names))
	if workers <= 1 {
		work()
		return vs
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		spawn(func() {
			defer wg.Done()
			work()
		})
	}
	wg.Wait()
	return vs
}

// validate returns what is known of the unexpected directory name,
// reading its volume.meta only if it is new or changed since prev was
// cached. It only reads; the caller applies the cache action. It takes
// the descriptor path when dirfd is one and that path can tell, and the
// path through rr otherwise; both find the same (TestValidateAtMatchesRoot).
func (o *Orphans) validate(ctx context.Context, rr *os.Root, dirfd int, bufs *validateBufs, prev *cachedEntry, name string) validation {
	if o.hooks.validated != nil {
		defer o.hooks.validated(name)
	}
	if dirfd >= 0 {
		if v, ok := o.validateAt(ctx, rr, dirfd, bufs, prev, name); ok {
			return v
		}
	}
	return o.validateRoot(ctx, rr, prev, name)
}

// validateRoot validates as validate does, through rr: the portable
// path, and the one validateAt leaves what it cannot tell to.
func (o *Orphans) validateRoot(ctx context.Context, rr *os.Root, prev *cachedEntry, name string) validation {
	fi, err := rr.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return validation{}
	}
	if err != nil {
		return validation{present: true, entry: &cachedEntry{reason: "cannot stat: " + errText(err)}}
	}
	if !fi.IsDir() {
		return validation{present: true, entry: &cachedEntry{reason: "not a directory"}}
	}
	id, _ := identityOf(fi)
	if prev != nil && prev.id == id {
		return validation{present: true, entry: prev}
	}
	o.metaReads.Add(1)
	meta, err := readMeta(rr, name, o.opts.MaxMetaSize)
	return o.validated(ctx, id, meta, err, func(w *sizeWalk) { w.sizeUnder(rr, name) })
}

// validated is the validation of a directory with identity id whose
// volume.meta read as meta or failed with err; walk sums its size into a
// bounded walk, and is called only for a valid meta. A walk that found
// the directory too deep makes it "not a replica"; one that found too many
// entries leaves its size unknown.
func (o *Orphans) validated(ctx context.Context, id dirIdentity, meta VolumeMeta, err error, walk func(*sizeWalk)) validation {
	ce := &cachedEntry{id: id}
	var pe *ParseError
	switch {
	case err == nil:
		w := o.newSizeWalk(ctx)
		walk(w)
		o.walkOpens.Add(w.opens)
		o.walkEntries.Add(int64(w.entries))
		if bytes, unknown, notReplica := w.size(); notReplica != "" {
			ce.reason = notReplica
		} else {
			ce.meta, ce.allocated, ce.sizeUnknown = meta, bytes, unknown
		}
	case errors.As(err, &pe):
		ce.reason = "invalid " + MetaFile + ": " + pe.Reason
		switch {
		case errors.Is(err, ErrTooLarge):
			ce.reason = MetaFile + " is too large (" + pe.Reason + ")"
		case errors.Is(err, ErrNotRegular):
			ce.reason = "not a replica: " + MetaFile + " is " + pe.Reason
		}
	case errors.Is(err, fs.ErrNotExist):
		ce.reason = "no " + MetaFile
	default:
		// Not cached: an I/O or permission error may pass, and a chmod
		// changes ctime anyway.
		return validation{present: true, entry: &cachedEntry{reason: "cannot read " + MetaFile + ": " + errText(err)}}
	}
	if ctx.Err() != nil {
		return validation{present: true, entry: ce} // a partial size is never cached; the scan fails anyway
	}
	if id.mtime < o.racyAfter && id.ctime < o.racyAfter {
		return validation{present: true, entry: ce, cache: cacheStore}
	}
	return validation{present: true, entry: ce, cache: cacheDrop}
}
