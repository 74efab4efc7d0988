package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Delete implements orphan.Deleter: it purges the orphaned replica
// directory r names. It may run for different records at once (the
// Sweeper never purges one record twice at once; a second purge of a
// directory already being purged fails and is retried).
//
// It trusts nothing it did not check itself at the moment it acts. In
// order:
//
//  1. the record is a v1 replica data record whose DataName is a safe,
//     valid data directory name, short enough for its tombstone and
//     marker;
//  2. the record's disk is one SetDisks set, with the record's DiskUUID and
//     DiskPath, compared as strings: the path is part of the record's
//     name, so "/var/lib/longhorn" and "/var/lib/longhorn/" are different
//     records even though they open the same directory;
//  3. through one open handle of the disk path: the filesystem ID is the
//     expected one (the host's Disk.FSID, else the one a scan pinned; if
//     neither is known the purge is refused), no other disk of the node is
//     on the same filesystem, and longhorn-disk.cfg (a regular file)
//     names the record's UUID;
//  4. inside <disk>/replicas, opened as an os.Root so nothing can reach
//     outside it, and on the device and in the mount of the disk
//     directory (no mount point at replicas: ErrMountPoint): the entry is
//     a real directory (a symbolic link is never
//     followed or removed), and its volume.meta is a regular file and
//     valid (a FIFO, socket or device is never opened in a way that could
//     block);
//  5. the ExpectedSource is asked again: no replica expects the name, and
//     the disk's expected set is not empty (ErrNoneExpected, unless
//     Options.AllowNoneExpected);
//  6. no mount point is at or below the directory: not in the mount table,
//     and every directory of the tree is on the device and in the mount of
//     <disk>/replicas (ErrMountPoint);
//  7. a durable marker recording the directory's name, tombstone, device
//     and inode is written beside it;
//  8. the directory is renamed to a tombstone that can never look like a
//     replica; the tombstone must be the same directory (type, device and
//     inode: a recycled inode under another type is caught), the mount
//     table must still show nothing below it, and the expected source is
//     asked once more; on any difference it is renamed back and the purge
//     refused;
//  9. the tombstone is removed by a walk that never follows a symbolic
//     link, checks every directory as in 6 before entering it, and stops
//     between entries when ctx is done, leaving the marked tombstone for
//     FinishInterrupted;
//  10. the marker is removed.
//
// A crash or a cancellation after 8 leaves a marked tombstone, which
// FinishInterrupted (the Sweeper calls it once per sync) removes later. A
// tombstone without a matching marker is never removed.
//
// A refusal wraps orphan.ErrPreconditionFailed and a sentinel of this
// package saying why; nothing was deleted. Every refusal because the
// directory changed under the purge is one: replaced by a symbolic link
// or another directory, moved or removed between the lstat of 4 and the
// rename of 8 (ErrChanged), or found swapped after the rename
// (ErrNotReplica). The Sweeper reports it as a refusal, and the next
// scan, which sees what is there now, forgets the record. A directory that is already
// gone is success. An error wrapping ctx's error means the purge stopped
// part way and left a marked tombstone that FinishInterrupted finishes.
// Other errors (I/O, the expected source failing) are retryable.
func (o *Orphans) Delete(ctx context.Context, r orphan.Record) (err error) {
	defer withPrefix(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Kind != orphan.KindReplicaData || r.DataEngine != orphan.DataEngineV1 {
		return refuse(ErrNotReplica, "record %s is %s/%s, not a v1 replica data directory", r.Name, r.Kind, r.DataEngine)
	}
	name := r.Param(orphan.ParamDataName)
	if err := SafeName(name); err != nil {
		return refuse(ErrUnsafePath, "record %s: %v", r.Name, err)
	}
	if !ValidDataName(name) {
		return refuse(ErrNotReplica, "%q does not end in -<8 letters or digits>", name)
	}
	if !purgeable(name) {
		return refuse(ErrUnsafePath, "%q is too long to rename to a tombstone", name)
	}
	disk, ok := o.disks.lookup(r.NodeID, r.Param(orphan.ParamDiskName))
	if !ok {
		return refuse(ErrUnknownDisk, "disk %s", r.Scope())
	}
	if r.Param(orphan.ParamDiskUUID) != disk.UUID || r.Param(orphan.ParamDiskPath) != disk.Path {
		return refuse(ErrDiskChanged, "record names disk %s at %q, the host now has %s at %q",
			r.Param(orphan.ParamDiskUUID), r.Param(orphan.ParamDiskPath), disk.UUID, disk.Path)
	}
	release, err := o.claim(disk, name)
	if err != nil {
		return err
	}
	defer release()
	root, err := o.openChecked(disk)
	if err != nil {
		return err
	}
	defer root.Close()
	rr, err := openReplicas(root)
	if err != nil {
		return err
	}
	if rr == nil {
		return nil // no replicas directory: already gone
	}
	defer rr.Close()

	before, err := rr.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case before.Mode()&fs.ModeSymlink != 0:
		return refuse(ErrNotReplica, "%s is a symbolic link", name)
	case !before.IsDir():
		return refuse(ErrNotReplica, "%s is %s, not a directory", name, safefile.Describe(before.Mode()))
	}
	if _, err := readMeta(rr, name, o.opts.MaxMetaSize); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) || errors.Is(err, fs.ErrNotExist) {
			return refuse(ErrNotReplica, "%s: %s", name, errText(err))
		}
		return err
	}
	if err := o.notExpected(ctx, disk, name); err != nil {
		return err
	}
	bound, err := boundaryOf(rr)
	if err != nil {
		return err
	}
	if err := o.host.noMountsIn(rr, name); err != nil {
		return err
	}
	check := treeWalk{ctx: ctx, bound: bound, afterRemove: o.hooks.afterRemove}
	if err := check.walk(rr, name, name, before, 0); err != nil {
		return changedUnder(rr, name, before, err)
	}

	if err := ctx.Err(); err != nil {
		return err // the last point where stopping leaves nothing to finish
	}
	p, err := newPurge(name)
	if err != nil {
		return err
	}
	tomb := p.tombstone()
	if _, err := rr.Lstat(tomb); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("diskscan: %s exists already (a 64-bit token collided): try again (%v)", tomb, err)
	}
	if err := writeMarker(rr, p, before); err != nil {
		return err
	}
	if err := rr.Rename(name, tomb); err != nil {
		_ = removeMarker(rr, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if o.hooks.afterTombstone != nil {
		o.hooks.afterTombstone(filepath.Join(disk.fsPath(), ReplicasDir), tomb)
	}
	after, err := rr.Lstat(tomb)
	if err != nil || !sameEntry(before, after) {
		// Swapped between the lstat and the rename, or since: what is
		// there now is not what was checked. Put it back untouched.
		return o.restore(rr, disk, p, refuse(ErrNotReplica, "%s changed while it was being purged", name))
	}
	if err := o.host.noMountsIn(rr, tomb); err != nil {
		return o.restore(rr, disk, p, err)
	}
	if err := o.notExpected(ctx, disk, name); err != nil {
		return o.restore(rr, disk, p, err)
	}
	purge := treeWalk{ctx: ctx, bound: bound, remove: true, afterRemove: o.hooks.afterRemove}
	if err := purge.walk(rr, tomb, tomb, after, 0); err != nil {
		o.disks.markTombstone(disk)
		return fmt.Errorf("purge of %s stopped, tombstone %s left for FinishInterrupted: %w", name, tomb, err)
	}
	return removeMarker(rr, p)
}

// changedUnder classifies an error of the purge's checks of name, whose
// lstat was before: if name is no longer that directory (replaced by a
// symbolic link or another directory, moved, removed), the purge is
// refused with ErrChanged, so the Sweeper reports a refusal rather than
// retrying a failure for ever; refusals and ctx's error stay as they are,
// and so does any other error while name is still the directory checked.
func changedUnder(rr *os.Root, name string, before fs.FileInfo, err error) error {
	if errors.Is(err, orphan.ErrPreconditionFailed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	now, lerr := rr.Lstat(name)
	switch {
	case errors.Is(lerr, fs.ErrNotExist):
		return refuse(ErrChanged, "%s vanished while its purge checked it (%v)", name, err)
	case lerr == nil && !sameEntry(before, now):
		return refuse(ErrChanged, "%s was replaced by %s while its purge checked it (%v)", name, safefile.Describe(now.Mode()), err)
	}
	return err
}

// busyKey names a directory being purged.
type busyKey struct {
	scope orphan.Scope
	name  string
}

// claim marks name on disk as being purged by this value, so that
// FinishInterrupted leaves its tombstone alone meanwhile.
func (o *Orphans) claim(disk Disk, name string) (release func(), err error) {
	k := busyKey{disk.Scope(), name}
	o.busyMu.Lock()
	defer o.busyMu.Unlock()
	if _, ok := o.busy[k]; ok {
		return nil, fmt.Errorf("diskscan: %s on disk %s is already being purged", name, disk.Scope())
	}
	o.busy[k] = struct{}{}
	return func() {
		o.busyMu.Lock()
		delete(o.busy, k)
		o.busyMu.Unlock()
	}, nil
}

func (o *Orphans) isBusy(disk Disk, name string) bool {
	o.busyMu.Lock()
	defer o.busyMu.Unlock()
	_, ok := o.busy[busyKey{disk.Scope(), name}]
	return ok
}

// notExpected asks the expected source about name; it is nil only if the
// source answered and does not expect it.
func (o *Orphans) notExpected(ctx context.Context, disk Disk, name string) error {
	set, err := o.expected.Expected(ctx, disk)
	if err != nil {
		return fmt.Errorf("diskscan: expected replicas of disk %s unknown: %w", disk.Scope(), err)
	}
	if set.Has(name) {
		return refuse(ErrStillExpected, "%s on disk %s", name, disk.UUID)
	}
	if len(set) == 0 && !o.opts.AllowNoneExpected {
		return refuse(ErrNoneExpected, "no replica is expected on disk %s (%s): a broken view is likelier than a disk of orphans; set Options.AllowNoneExpected to purge anyway", disk.Scope(), disk.UUID)
	}
	return nil
}

// restore renames p's tombstone back to its name, drops its marker, and
// returns why, or an error saying the restore failed too.
func (o *Orphans) restore(rr *os.Root, disk Disk, p purge, why error) error {
	if err := rr.Rename(p.tombstone(), p.name); err != nil {
		o.disks.markTombstone(disk)
		return fmt.Errorf("%w; and renaming %s back to %s failed: %v (FinishInterrupted restores it if it is still expected)", why, p.tombstone(), p.name, err)
	}
	if err := removeMarker(rr, p); err != nil {
		o.disks.markTombstone(disk) // a stale marker for FinishInterrupted to drop
	}
	return why
}
