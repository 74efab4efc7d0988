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
func (o *Orphans) Report(ctx context.Context) (Report, error) {
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

// diskCache is what scans remember of one disk between scans.
type diskCache struct {
	path, uuid string
	entries    map[string]*cachedEntry // unexpected directories, by name

	// The previous listing in the kernel's order (stable while the
	// directory does not change), whether each name was expected, and the
	// set that said so. While the expected source hands out the same set
	// (it may not modify a set it handed out), a name at the same position
	// as last time is expected again without hashing it: on a large disk
	// the look-ups would cost more than the listing.
	names      []string
	owned      []bool
	set        NameSet
	spareNames []string // the buffers of the listing before, reused
	spareOwned []bool
}

// cachedEntry is the validation of one unexpected directory, valid while
// the directory's identity is unchanged.
type cachedEntry struct {
	id        dirIdentity
	reason    string // why it is not a replica; "" if it is
	meta      VolumeMeta
	allocated int64
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
	marks := o.disks.tombMarks(d)
	entries, err := listDir(rr)
	if err != nil {
		return unknown("list %s: %v", ReplicasDir, err)
	}
	// Asked after listing, so a replica created meanwhile is either not
	// listed or already expected.
	expected, err := o.expected.Expected(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unknown("expected replicas unknown: %v", err)
	}

	cache := o.caches[d.Scope()]
	if cache == nil || cache.path != d.Path || cache.uuid != d.UUID {
		cache = &diskCache{path: d.Path, uuid: d.UUID, entries: map[string]*cachedEntry{}}
		o.caches[d.Scope()] = cache
	}
	seen := make(map[string]struct{}, len(cache.entries))
	rep.Entries = len(entries)
	sameSet := expected != nil && sameNameSet(cache.set, expected)
	names, owned := resize(cache.spareNames, len(entries)), resize(cache.spareOwned, len(entries))
	clear(owned)
	skip := func(name, reason string) {
		rep.Skipped = append(rep.Skipped, orphan.Skipped{Scope: d.Scope(), Name: name, Reason: reason})
	}
	tombstones := 0
	for i, e := range entries {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		name, typ := e.Name(), e.Type()
		names[i] = name
		if sameSet && typ.IsDir() && i < len(cache.names) && cache.owned[i] && cache.names[i] == name {
			owned[i] = true
			rep.Owned++
			if o.opts.ListOwned {
				rep.OwnedNames = append(rep.OwnedNames, name)
			}
			continue
		}
		switch {
		case isTombstone(name):
			skip(name, "a purge in progress (caretaker tombstone; FinishInterrupted finishes it if its marker proves it is caretaker's)")
			tombstones++
			continue
		case isMarker(name):
			skip(name, "a caretaker purge marker")
			tombstones++
			continue
		case typ&fs.ModeSymlink != 0:
			skip(name, "a symbolic link: never followed")
			continue
		case !typ.IsDir():
			skip(name, "not a directory")
			continue
		case !ValidDataName(name):
			skip(name, "name does not end in -<8 letters or digits>")
			continue
		case expected.Has(name):
			owned[i] = true
			rep.Owned++
			if o.opts.ListOwned {
				rep.OwnedNames = append(rep.OwnedNames, name)
			}
			continue
		case !purgeable(name):
			skip(name, "name too long to purge safely: its tombstone would exceed 255 bytes")
			continue
		}
		if err := ctx.Err(); err != nil {
			return err // each unexpected entry costs I/O: stop promptly
		}
		ce, ok := o.validate(ctx, rr, cache, name)
		if err := ctx.Err(); err != nil {
			return err
		}
		if !ok {
			continue // vanished since the listing
		}
		seen[name] = struct{}{}
		if ce.reason != "" {
			skip(name, ce.reason)
			continue
		}
		rep.Orphans = append(rep.Orphans, OrphanDir{Name: name, Item: dataItem(d, name), Meta: ce.meta, AllocatedBytes: ce.allocated})
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
	o.disks.sawTombstones(d, tombstones > 0, marks)
	clear(cache.names) // drop the old names for the garbage collector
	cache.spareNames, cache.spareOwned = cache.names, cache.owned
	cache.names, cache.owned, cache.set = names, owned, expected
	slices.Sort(rep.OwnedNames)
	slices.SortFunc(rep.Orphans, func(a, b OrphanDir) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(rep.Skipped, func(a, b orphan.Skipped) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// validate returns what is known of an unexpected directory, reading its
// volume.meta only if the directory is new or changed. It returns false if
// the directory is gone.
func (o *Orphans) validate(ctx context.Context, rr *os.Root, cache *diskCache, name string) (*cachedEntry, bool) {
	fi, err := rr.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		return &cachedEntry{reason: "cannot stat: " + errText(err)}, true
	}
	if !fi.IsDir() {
		return &cachedEntry{reason: "not a directory"}, true
	}
	id, _ := identityOf(fi)
	if ce := cache.entries[name]; ce != nil && ce.id == id {
		return ce, true
	}
	ce := &cachedEntry{id: id}
	o.metaReads.Add(1)
	meta, err := readMeta(rr, name, o.opts.MaxMetaSize)
	var pe *ParseError
	switch {
	case err == nil:
		ce.meta = meta
		ce.allocated = allocatedUnder(ctx, rr, name)
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
		return &cachedEntry{reason: "cannot read " + MetaFile + ": " + errText(err)}, true
	}
	if ctx.Err() != nil {
		return ce, true // a partial size is never cached; the scan fails anyway
	}
	if id.mtime < o.racyAfter && id.ctime < o.racyAfter {
		cache.entries[name] = ce
	} else {
		delete(cache.entries, name)
	}
	return ce, true
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
