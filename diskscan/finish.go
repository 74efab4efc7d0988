package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/hashicorp/go-multierror"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/orphan"
)

// FinishInterrupted implements orphan.Finisher: it finishes purges a crash
// or a cancellation interrupted, on every disk whose identity checks pass
// (others are left for later). It touches only tombstones it can prove it
// made (see Delete: a marker names the tombstone and records its device
// and inode) and their markers, inside <disk>/replicas. Such a tombstone
// whose original name has become expected meanwhile is renamed back, if
// that name is free, and otherwise kept (an error wrapping
// ErrStillExpected) as long as a replica expects the name: it may hold
// that replica's data. Any other is removed as Delete removes it (never
// across a mount, never while the disk's expected set is empty unless
// Options.AllowNoneExpected). A look-alike tombstone is reported (an
// error wrapping ErrForeignTombstone) and left alone, as is the tombstone
// of a purge this value is running. The failures come back as a
// *multierror.Error; a disk that fails does not stop the others.
func (o *Orphans) FinishInterrupted(ctx context.Context) (err error) {
	defer withPrefix(&err)
	var errs *multierror.Error
	for _, disk := range o.disks.list() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := o.finishDisk(ctx, disk); err != nil {
			errs = multierror.Append(errs, errclass.Wrapf("diskscan", err, "disk %s", disk.Scope()))
		}
	}
	return errs.ErrorOrNil()
}

func (o *Orphans) finishDisk(ctx context.Context, disk Disk) error {
	if !o.disks.mayHoldTombstones(disk) {
		return nil // the last listing found none: no need to read the directory again
	}
	marks := o.disks.tombMarks(disk)
	root, err := o.openChecked(disk)
	if err != nil {
		if errors.Is(err, orphan.ErrPreconditionFailed) {
			return nil // not this disk's turn: it is not the disk we know
		}
		return err
	}
	defer root.Close()
	rr, err := openReplicas(root)
	if err != nil || rr == nil {
		if errors.Is(err, orphan.ErrPreconditionFailed) {
			return nil
		}
		return err
	}
	defer rr.Close()
	entries, err := listRoot(rr)
	if err != nil {
		return err
	}
	var (
		bound     boundary
		haveBound bool
		errs      *multierror.Error
		tombs     []purge
		markers   []purge
		seen      = map[purge]bool{} // purges whose tombstone is there
	)
	for _, e := range entries {
		p, isMarker, ok := parsePurgeEntry(e.Name())
		switch {
		case ok && isMarker:
			markers = append(markers, p)
		case ok:
			tombs = append(tombs, p)
			seen[p] = true
		case looksLikeTombstone(e.Name()):
			errs = multierror.Append(errs, refuse(ErrForeignTombstone, "%s is not named like a caretaker tombstone (no purge token): left alone", e.Name()))
		}
	}
	for _, p := range tombs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if o.isBusy(disk, p.name) {
			continue
		}
		if !haveBound {
			if bound, err = boundaryOf(rr); err != nil {
				return err
			}
			haveBound = true
		}
		// Asked again for each tombstone, right before it is finished:
		// removing the one before may have taken long, and a name that
		// became expected meanwhile must keep its tombstone.
		set, err := o.expected.Expected(ctx, disk)
		if err != nil {
			return fmt.Errorf("expected replicas unknown, tombstones left for later: %w", err)
		}
		if err := o.finishTombstone(ctx, rr, disk, p, bound, set); err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	// A marker whose tombstone is gone was left by a crash before the
	// rename or after the removal.
	for _, p := range markers {
		if !seen[p] && !o.isBusy(disk, p.name) {
			if err := removeMarker(rr, p); err != nil {
				errs = multierror.Append(errs, err)
			}
		}
	}
	if errs.ErrorOrNil() == nil {
		o.disks.sawTombstones(disk, false, marks)
	}
	return errs.ErrorOrNil()
}

// finishTombstone finishes the interrupted purge p, if its tombstone is
// provably ours. set is the disk's expected set.
func (o *Orphans) finishTombstone(ctx context.Context, rr *os.Root, disk Disk, p purge, bound boundary, set NameSet) error {
	tomb := p.tombstone()
	fi, err := ownTombstone(rr, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if set.Has(p.name) {
		// A replica expects the name: the tombstone may be its data (the
		// view that judged it orphaned was stale). Put it back if the
		// name is free; if a directory took the name meanwhile, keep the
		// tombstone until no replica expects the name.
		_, err := rr.Lstat(p.name)
		switch {
		case err == nil:
			return refuse(ErrStillExpected, "%s is expected again on disk %s and something of that name exists: tombstone %s kept while the name is expected", p.name, disk.UUID, tomb)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := rr.Rename(tomb, p.name); err != nil {
			return err
		}
		return removeMarker(rr, p)
	}
	if len(set) == 0 && !o.opts.AllowNoneExpected {
		return refuse(ErrNoneExpected, "no replica is expected on disk %s: tombstone %s left for later", disk.Scope(), tomb)
	}
	if err := o.host.noMountsIn(rr, tomb); err != nil {
		return err
	}
	purge := treeWalk{ctx: ctx, bound: bound, remove: true, afterRemove: o.hooks.afterRemove}
	if err := purge.walk(rr, tomb, tomb, fi, 0); err != nil {
		return fmt.Errorf("tombstone %s: %w", tomb, err)
	}
	return removeMarker(rr, p)
}
