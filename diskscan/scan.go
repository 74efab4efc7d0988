package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Scan implements orphan.Inventory: it scans every disk and returns the
// Snapshot of the Report. Per-disk trouble is in the disk's scope health;
// the error is only ctx's. Calls are serialised.
//
// It pre-filters as orphan.Inventory allows: the directories a replica
// expects are counted in their disk's ScopeStatus.OwnedUnlisted, never
// listed as items, and never stat'ed or read.
func (o *Orphans) Scan(ctx context.Context) (orphan.Snapshot, error) {
	r, err := o.Report(ctx)
	if err != nil {
		return orphan.Snapshot{}, err
	}
	return r.Snapshot(), nil
}

// Report scans every disk, as Scan does, and returns the full Report:
// per-disk details, the orphans' metas and sizes, and the entries
// skipped. Calls are serialised with Scan's.
func (o *Orphans) Report(ctx context.Context) (_ Report, err error) {
	defer withPrefix(&err)
	o.scanMu.Lock()
	defer o.scanMu.Unlock()

	o.racyAfter = o.clock.Now().Add(-RacyWindow).UnixNano()
	disks := o.disks.list()
	reps := make([]DiskReport, len(disks))
	opened := make([]*os.Root, len(disks))
	defer func() {
		for _, r := range opened {
			if r != nil {
				r.Close()
			}
		}
	}()
	for i, d := range disks {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		reps[i], opened[i] = o.checkDisk(d)
	}
	markSharedFilesystems(reps)
	live := make(map[orphan.Scope]bool, len(disks))
	for i, d := range disks {
		live[d.Scope()] = true
		if reps[i].Status.Health != orphan.HealthReady {
			// A disk that changed or cannot be trusted is listed afresh
			// once it is Ready again.
			delete(o.caches, d.Scope())
			continue
		}
		if err := o.listDisk(ctx, &reps[i], opened[i]); err != nil {
			return Report{}, err
		}
	}
	for s := range o.caches {
		if !live[s] {
			delete(o.caches, s)
		}
	}
	r := Report{Disks: reps}
	o.lastMu.Lock()
	o.last = r
	o.lastMu.Unlock()
	return r, nil
}

// checkDisk opens the disk and checks its identity: filesystem ID, then
// config. It returns the open root when the disk is Ready.
func (o *Orphans) checkDisk(d Disk) (DiskReport, *os.Root) {
	rep := DiskReport{Disk: d, Status: orphan.ScopeStatus{Health: orphan.HealthReady}}
	id, err := o.checkIdentity(d)
	rep.FSID, rep.Config = id.fsid, id.cfg
	if err != nil {
		rep.Status = statusOf(err)
		if id.root != nil {
			id.root.Close()
		}
		return rep, nil
	}
	if o.disks.expectedFSID(d) == "" {
		o.disks.pin(d, id.fsid)
	}
	return rep, id.root
}

// listDisk lists <disk>/replicas and fills rep's entries. Per-disk trouble
// goes into rep.Status; the error is only ctx's.
func (o *Orphans) listDisk(ctx context.Context, rep *DiskReport, root *os.Root) error {
	d := rep.Disk
	unknown := func(format string, args ...any) error {
		rep.Status = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: fmt.Sprintf(format, args...)}
		return nil
	}
	fi, err := root.Lstat(ReplicasDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		rep.Status.Message = "no " + ReplicasDir + " directory: nothing to scan"
		delete(o.caches, d.Scope())
		// Still asked, so NoneExpected tells the truth for every Ready disk.
		expected, err := o.expected.Expected(ctx, d)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return unknown("expected replicas unknown: %v", err)
		}
		rep.Status.NoneExpected = len(expected) == 0
		return nil
	case err != nil:
		return unknown("stat %s: %v", ReplicasDir, err)
	case !fi.IsDir():
		rep.Status = orphan.ScopeStatus{Health: orphan.HealthDiskInvalid,
			Message: fmt.Sprintf("%v: %s is a %s, not a directory", ErrDiskInvalid, ReplicasDir, fi.Mode().Type())}
		return nil
	}
	rr, err := root.OpenRoot(ReplicasDir)
	if err != nil {
		return unknown("open %s: %v", ReplicasDir, err)
	}
	defer rr.Close()
	switch err := replicasOfDisk(root, rr); {
	case errors.Is(err, ErrMountPoint):
		delete(o.caches, d.Scope())
		rep.Status = orphan.ScopeStatus{Health: orphan.HealthDiskInvalid, Message: err.Error()}
		return nil
	case errors.Is(err, errUnsupported):
		// No mounts to compare where there are no mount IDs: such a
		// disk is never purged (Delete needs them too).
	case err != nil:
		return unknown("mount of %s: %v", ReplicasDir, err)
	}
	marks := o.disks.tombMarks(d)
	cache := o.caches[d.Scope()]
	if cache == nil || cache.path != d.Path || cache.uuid != d.UUID {
		cache = &diskCache{path: d.Path, uuid: d.UUID, entries: map[string]*cachedEntry{}}
		o.caches[d.Scope()] = cache
	}
	dir, stamp, stamped, err := openListing(rr)
	if err != nil {
		return unknown("list %s: %v", ReplicasDir, err)
	}
	// An unchanged, settled stamp means the entries are the ones listed
	// last time (see diskCache): the listing is skipped. Every unexpected
	// directory is still lstat'ed below, and Judge and Delete trust none of
	// this.
	var (
		names []string
		types []fs.FileMode
	)
	relist := !cache.listingStands(stamp, stamped)
	if relist {
		o.listings.Add(1)
		names, types, err = listNames(dir, rr, entriesHint(stamp), cache.spareNames[:0], cache.spareTypes[:0])
	}
	// The validations below open each unexpected directory relative to
	// this very directory (see validateAt); -1 where that is not done.
	dirfd := validationFd(dir)
	defer closeValidationFd(dirfd)
	dir.Close()
	if err != nil {
		return unknown("list %s: %v", ReplicasDir, err)
	}
	// Asked after listing (or after the stamp that vouches for the last
	// listing), so a replica created meanwhile is either not listed or
	// already expected.
	expected, err := o.expected.Expected(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unknown("expected replicas unknown: %v", err)
	}
	same, prints := cache.sameContent(expected)
	switch {
	case relist:
		settled := stamp.mtime < o.racyAfter && stamp.ctime < o.racyAfter
		if err := cache.relist(ctx, names, types, stamp, stamped && settled, expected, same, o.scanWorkers()); err != nil {
			return err
		}
		cache.classifiedBy(expected, prints)
		cache.derive(o.opts.ListOwned)
	case !same:
		if err := cache.classify(ctx, expected, o.scanWorkers()); err != nil {
			return err
		}
		cache.classifiedBy(expected, prints)
		cache.derive(o.opts.ListOwned)
	default:
		cache.classifiedBy(expected, prints)
	}

	rep.Entries = len(cache.names)
	rep.Owned = cache.owned
	if o.opts.ListOwned {
		rep.OwnedNames = slices.Clone(cache.ownedNames)
	}
	for _, s := range cache.static {
		s.Scope = d.Scope()
		rep.Skipped = append(rep.Skipped, s)
	}
	skip := func(name, reason string) {
		rep.Skipped = append(rep.Skipped, orphan.Skipped{Scope: d.Scope(), Name: name, Reason: reason})
	}
	todo := make([]string, 0, len(cache.candidates))
	for _, i := range cache.candidates {
		name := cache.names[i]
		if !purgeable(name) {
			skip(name, "name too long to purge safely: its tombstone would exceed 255 bytes")
			continue
		}
		todo = append(todo, name)
	}
	// Each unexpected entry costs I/O: validated by a bounded pool of
	// workers that stop when ctx is done, and then the scan fails with
	// ctx's error, so a partial report is never returned.
	vs := o.validateAll(ctx, rr, dirfd, cache, todo)
	if err := ctx.Err(); err != nil {
		return err
	}
	seen := make(map[string]struct{}, len(todo))
	for k, name := range todo {
		v := vs[k]
		if !v.present {
			continue // vanished since the listing
		}
		seen[name] = struct{}{}
		switch v.cache {
		case cacheStore:
			cache.entries[name] = v.entry
		case cacheDrop:
			delete(cache.entries, name)
		}
		ce := v.entry
		if ce.reason != "" {
			skip(name, ce.reason)
			continue
		}
		rep.Orphans = append(rep.Orphans, OrphanDir{Name: name, Item: dataItem(d, name), Meta: ce.meta, AllocatedBytes: ce.allocated, SizeUnknown: ce.sizeUnknown})
		rep.OrphanBytes += ce.allocated
	}
	for name := range cache.entries {
		if _, ok := seen[name]; !ok {
			delete(cache.entries, name)
		}
	}
	// The evidence the orphan core's mass-deletion guard weighs: owned
	// directories are not listed as items, so they are counted, and an
	// empty expected set beside valid directories is a broken view.
	rep.Status.OwnedUnlisted = rep.Owned
	rep.Status.NoneExpected = len(expected) == 0
	o.disks.sawTombstones(d, cache.tombstones > 0, marks)
	slices.SortFunc(rep.Orphans, func(a, b OrphanDir) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(rep.Skipped, func(a, b orphan.Skipped) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// sameNameSet reports whether a and b are the same map, not just equal.
func sameNameSet(a, b NameSet) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// resize returns s with length n, reusing its array if it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// dataItem is the orphan item of directory name on disk d.
func dataItem(d Disk, name string) orphan.Item {
	return orphan.Item{
		Kind:       orphan.KindReplicaData,
		NodeID:     d.NodeID,
		DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{
			orphan.ParamDataName: name,
			orphan.ParamDiskName: d.Name,
			orphan.ParamDiskUUID: d.UUID,
			orphan.ParamDiskPath: d.Path,
			orphan.ParamDiskType: DiskType,
		},
	}
}
