package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Deleter purges orphaned replica directories. It implements
// orphan.Deleter and orphan.Finisher, and is safe for concurrent use (the
// Sweeper never purges one record twice at once).
//
// It trusts nothing it did not check itself at the moment it acts. For
// each purge, in order:
//
//  1. the record is a v1 replica data record whose DataName is a safe,
//     valid data directory name;
//  2. the record's disk is in the DiskSet with the record's DiskUUID and
//     DiskPath;
//  3. through one open handle of the disk path: the filesystem ID is the
//     expected one (the host's Disk.FSID, else the one a scan pinned; if
//     neither is known the purge is refused), no other disk of the node is
//     on the same filesystem, and longhorn-disk.cfg names the record's
//     UUID;
//  4. inside <disk>/replicas, opened as an os.Root so nothing can reach
//     outside it: the entry is a real directory (a symbolic link is never
//     followed or removed), and its volume.meta is valid;
//  5. no replica expects the name (the ExpectedSource is asked again);
//  6. the directory is renamed to a tombstone that can never look like a
//     replica, the tombstone is checked to be the same directory, and the
//     expected source is asked once more: if the name became expected,
//     the directory is renamed back and the purge refused;
//  7. the tombstone is removed.
//
// A crash between 6 and 7 leaves a tombstone, which FinishInterrupted (the
// Sweeper calls it once per sync) removes later.
type Deleter struct {
	disks    *DiskSet
	expected ExpectedSource
	opts     Options
}

// NewDeleter returns a Deleter over the same disks and expected source as
// the Inventory and Judge.
func NewDeleter(disks *DiskSet, expected ExpectedSource, opts Options) *Deleter {
	return &Deleter{disks: disks, expected: expected, opts: opts}
}

// afterTombstone, when set by a test, runs right after the rename to the
// tombstone, before the second expected check.
var afterTombstone func(replicas, tombstone string)

// Delete implements orphan.Deleter. A refusal wraps
// orphan.ErrPreconditionFailed and a sentinel of this package saying why;
// nothing was deleted. A directory that is already gone is success. Other
// errors (I/O, the expected source failing) are retryable.
func (d *Deleter) Delete(ctx context.Context, r orphan.Record) error {
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
	tomb, ok := tombstoneName(name)
	if !ok {
		return refuse(ErrUnsafePath, "%q is too long to rename to a tombstone", name)
	}
	disk, ok := d.disks.Lookup(r.NodeID, r.Param(orphan.ParamDiskName))
	if !ok {
		return refuse(ErrUnknownDisk, "disk %s", r.Scope())
	}
	if r.Param(orphan.ParamDiskUUID) != disk.UUID || r.Param(orphan.ParamDiskPath) != disk.Path {
		return refuse(ErrDiskChanged, "record names disk %s at %s, the host now has %s at %s",
			r.Param(orphan.ParamDiskUUID), r.Param(orphan.ParamDiskPath), disk.UUID, disk.Path)
	}
	root, err := d.openChecked(disk)
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
		return refuse(ErrNotReplica, "%s is a %s, not a directory", name, before.Mode().Type())
	}
	if _, err := readMeta(rr, name, d.opts.MaxMetaSize); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) || errors.Is(err, fs.ErrNotExist) {
			return refuse(ErrNotReplica, "%s: %s", name, errText(err))
		}
		return err
	}
	if err := d.notExpected(ctx, disk, name); err != nil {
		return err
	}

	if err := ctx.Err(); err != nil {
		return err // the last point where stopping leaves nothing to finish
	}
	// A tombstone of the same name is a purge a crash interrupted: it is
	// garbage already, and in the way of the rename.
	if err := rr.RemoveAll(tomb); err != nil {
		return err
	}
	if err := rr.Rename(name, tomb); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if afterTombstone != nil {
		afterTombstone(filepath.Join(disk.fsPath(), ReplicasDir), tomb)
	}
	after, err := rr.Lstat(tomb)
	if err != nil || !os.SameFile(before, after) {
		// Swapped between the lstat and the rename: what we renamed is
		// not what we checked. Put it back untouched.
		return d.restore(rr, disk, tomb, name, refuse(ErrNotReplica, "%s changed while it was being purged", name))
	}
	if err := d.notExpected(ctx, disk, name); err != nil {
		return d.restore(rr, disk, tomb, name, err)
	}
	if err := rr.RemoveAll(tomb); err != nil {
		d.disks.markTombstone(disk)
		return err
	}
	return nil
}

// notExpected asks the expected source about name; it is nil only if the
// source answered and does not expect it.
func (d *Deleter) notExpected(ctx context.Context, disk Disk, name string) error {
	set, err := d.expected.Expected(ctx, disk)
	if err != nil {
		return fmt.Errorf("diskscan: expected replicas of disk %s unknown: %w", disk.Scope(), err)
	}
	if set.Has(name) {
		return refuse(ErrStillExpected, "%s on disk %s", name, disk.UUID)
	}
	if len(set) == 0 && !d.opts.AllowNoneExpected {
		return refuse(ErrNoneExpected, "no replica is expected on disk %s (%s): a broken view is likelier than a disk of orphans; set Options.AllowNoneExpected to purge anyway", disk.Scope(), disk.UUID)
	}
	return nil
}

// restore renames a tombstone back to its name and returns why, or an
// error saying the restore failed too.
func (d *Deleter) restore(rr *os.Root, disk Disk, tomb, name string, why error) error {
	if err := rr.Rename(tomb, name); err != nil {
		d.disks.markTombstone(disk)
		return fmt.Errorf("%w; and renaming %s back to %s failed: %v (FinishInterrupted restores it if it is still expected)", why, tomb, name, err)
	}
	return why
}

// openChecked opens the disk and checks its identity as a purge needs it:
// a known, unchanged filesystem ID not shared with another disk of the
// node, and the config's UUID. Refusals wrap orphan.ErrPreconditionFailed.
func (d *Deleter) openChecked(disk Disk) (*os.Root, error) {
	if d.disks.expectedFSID(disk) == "" {
		return nil, refuse(ErrDiskChanged, "filesystem ID of disk %s is not known: set Disk.FSID or scan the disk first", disk.Scope())
	}
	id, err := checkIdentity(d.disks, disk, d.opts)
	if err != nil {
		if id.root != nil {
			id.root.Close()
		}
		if errors.Is(err, ErrDiskChanged) {
			return nil, refuse(ErrDiskChanged, "disk %s: %v", disk.Scope(), err)
		}
		if errors.Is(err, ErrDiskInvalid) {
			return nil, refuse(ErrDiskInvalid, "disk %s: %v", disk.Scope(), err)
		}
		return nil, err
	}
	for _, other := range d.disks.Disks() {
		if other.NodeID != disk.NodeID || other.Name == disk.Name {
			continue
		}
		if fsid, err := FSID(other.fsPath()); err == nil && fsid == id.fsid {
			id.root.Close()
			return nil, refuse(ErrDiskInvalid, "disk %s shares filesystem %s with disk %s", disk.Scope(), fsid, other.Name)
		}
	}
	return id.root, nil
}

// openReplicas opens <disk>/replicas as a root of its own. It returns nil
// and no error if there is none.
func openReplicas(root *os.Root) (*os.Root, error) {
	fi, err := root.Lstat(ReplicasDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, refuse(ErrDiskInvalid, "%s is a %s, not a directory", ReplicasDir, fi.Mode().Type())
	}
	return root.OpenRoot(ReplicasDir)
}

// FinishInterrupted implements orphan.Finisher: it finishes purges a crash
// interrupted, on every disk whose identity checks pass (others are left
// for later). A tombstone whose original name has become expected
// meanwhile is renamed back, if that name is free; any other tombstone is
// removed. It touches nothing but tombstones, inside <disk>/replicas.
// Errors are joined; a disk that fails does not stop the others.
func (d *Deleter) FinishInterrupted(ctx context.Context) error {
	var errs []error
	for _, disk := range d.disks.Disks() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.finishDisk(ctx, disk); err != nil {
			errs = append(errs, fmt.Errorf("disk %s: %w", disk.Scope(), err))
		}
	}
	return errors.Join(errs...)
}

func (d *Deleter) finishDisk(ctx context.Context, disk Disk) error {
	if !d.disks.mayHoldTombstones(disk) {
		return nil // the last listing found none: no need to read the directory again
	}
	marks := d.disks.tombMarks(disk)
	root, err := d.openChecked(disk)
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
	entries, err := listDir(rr)
	if err != nil {
		return err
	}
	var set NameSet
	var errs []error
	for _, e := range entries {
		orig, ok := tombstoneOf(e.Name())
		if !ok {
			continue
		}
		if set == nil {
			if set, err = d.expected.Expected(ctx, disk); err != nil {
				return fmt.Errorf("expected replicas unknown, tombstones left for later: %w", err)
			}
		}
		if set.Has(orig) && e.IsDir() {
			if _, err := rr.Lstat(orig); errors.Is(err, fs.ErrNotExist) {
				if err := rr.Rename(e.Name(), orig); err != nil {
					errs = append(errs, err)
				}
				continue
			}
		}
		if err := rr.RemoveAll(e.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		d.disks.sawTombstones(disk, false, marks)
	}
	return errors.Join(errs...)
}
