package backupdelete

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/caretaker-storage/caretaker/orphan"
)

// OrphansOptions configure NewOrphans.
type OrphansOptions struct {
	// NodeID is the node whose controller owns the records (Longhorn's
	// orphan spec.nodeID): every item's node and the scan's one scope.
	// Required.
	NodeID string
}

// Orphans is the orphan.Adapter of failed backups (kind
// orphan.KindBackup): the Inventory over the host's backup records, the
// Judge of the items it lists, and the Deleter that purges a failed
// backup's data from the backupstore. Longhorn's "Orphaned Data Cleanup" (longhorn/longhorn#685, #3898) turns failed backups
// (state Error or Unknown) into orphan records; their names come from
// orphan.Item.Name over (target, volume, backup name), with an empty
// target named DefaultBackupTarget.
//
// A failed backup is an item only while its data is in the backupstore:
// Scan asks the store for each one, and Judge asks again. After a purge
// the host's record of the backup usually stays (Error) for a while, or
// for good; without the check every scan would list it again and a new
// record would be created for data that is already gone. The host also
// passes Cycle.ObservedAt (the Monitor's Observation.StartedAt), which
// covers a snapshot read before a purge and used after it.
//
// Build one with NewOrphans. It is safe for concurrent use if the lister
// and the store are.
type Orphans struct {
	lister BackupLister
	store  completedStore
	nodeID string
}

// completedStore is what Orphans needs of a backupstore: to tell whether
// a backup is there, and to delete it only if its creation has finished.
type completedStore interface {
	Backupstore
	CompletedBackupDeleter
}

// NewOrphans returns the failed-backup adapter over the host's backup
// records (lister) and the backupstore they are in (store), for a host
// to pass to orphan.NewMonitor (as the Inventory) and orphan.NewSweeper.
//
// The store is required and must be a CompletedBackupDeleter: without it
// a backup the host reports failed (Unknown: it lost track of it) but that
// is still being written could be purged. A nil lister or store, a
// store without that ability, or an empty NodeID is an error naming the
// option that is invalid, wrapping orphan.ErrIncomplete.
func NewOrphans(lister BackupLister, store Backupstore, opts OrphansOptions) (*Orphans, error) {
	if lister == nil || store == nil {
		return nil, fmt.Errorf("%w: backupdelete.NewOrphans needs a BackupLister and a Backupstore", orphan.ErrIncomplete)
	}
	cs, ok := store.(completedStore)
	if !ok {
		return nil, fmt.Errorf("%w: the backupstore (%T) cannot tell whether a backup is still being written where it deletes (it is not a backupdelete.CompletedBackupDeleter)", orphan.ErrIncomplete, store)
	}
	if opts.NodeID == "" {
		return nil, fmt.Errorf("%w: backupdelete.NewOrphans needs OrphansOptions.NodeID", orphan.ErrIncomplete)
	}
	return &Orphans{lister: lister, store: cs, nodeID: opts.NodeID}, nil
}

// Kinds returns orphan.KindBackup, the one kind Orphans serves.
func (o *Orphans) Kinds() []orphan.Kind { return []orphan.Kind{orphan.KindBackup} }

// Scan lists the failed backups whose data is in the backupstore as orphan
// items, sorted by record name, in one scope (Scope{NodeID}): Ready, or
// Unknown when the backupstore could not say whether some backup is there
// (then no record is created, forgotten or purged this cycle).
//
// Scan pre-filters, the one way orphan.Inventory allows: backups in any
// other state are owned (by the host's backup controller) and are not
// listed, only counted (valid and distinct ones) in the scope's
// OwnedUnlisted, so that the mass-deletion guard weighs them. A failed
// backup whose names are not valid, or that is not in the backupstore, is
// reported in Skipped, never listed; so is the second of two host records
// that name one failed backup (an empty target and DefaultBackupTarget).
// A lister error fails the scan.
func (o *Orphans) Scan(ctx context.Context) (orphan.Snapshot, error) {
	backups, err := o.lister.ListBackups(ctx)
	if err != nil {
		return orphan.Snapshot{}, fmt.Errorf("backupdelete: list backups: %w", err)
	}
	scope := orphan.Scope{NodeID: o.nodeID}
	status := orphan.ScopeStatus{Health: orphan.HealthReady}
	snap := orphan.Snapshot{}
	skip := func(ref BackupRef, reason string) {
		snap.Skipped = append(snap.Skipped, orphan.Skipped{Scope: scope, Name: ref.String(), Reason: reason})
	}
	type named struct {
		name string
		item orphan.Item
	}
	var items []named
	seen := map[string]bool{}
	owned := map[string]bool{}
	for _, b := range backups {
		if !b.State.Failed() {
			if b.Ref.Validate() == nil {
				if name, err := BackupItem(b.Ref, o.nodeID).Name(); err == nil {
					owned[name] = true
				}
			}
			continue
		}
		if err := b.Ref.Validate(); err != nil {
			skip(b.Ref, err.Error())
			continue
		}
		it := BackupItem(b.Ref, o.nodeID)
		name, err := it.Name()
		if err != nil {
			skip(b.Ref, err.Error())
			continue
		}
		if seen[name] {
			skip(b.Ref, "another record names the same backup")
			continue
		}
		seen[name] = true
		exists, err := o.store.BackupExists(ctx, b.Ref)
		if err != nil {
			// Cannot tell: keep the item, and keep the scope from
			// creating, forgetting or purging anything.
			status.Health = orphan.HealthUnknown
			status.Message = fmt.Sprintf("cannot tell whether backup %s is in the backupstore: %v", b.Ref, err)
		} else if !exists {
			skip(b.Ref, "not in the backupstore (already purged, or never written): nothing to clean")
			continue
		}
		items = append(items, named{name, it})
	}
	for name := range owned {
		if !seen[name] {
			status.OwnedUnlisted++
		}
	}
	snap.Scopes = map[orphan.Scope]orphan.ScopeStatus{scope: status}
	slices.SortFunc(items, func(a, b named) int { return cmp.Compare(a.name, b.name) })
	for _, n := range items {
		snap.Items = append(snap.Items, n.item)
	}
	return snap, nil
}

// Judge says a backup item is an orphan while the host's record of it is
// Error or Unknown and its data is in the backupstore; owned while the
// record is in any other state (including Deleting: the deletion engine
// has it); and undecided when the host has no record or cannot be asked
// (without a record nothing proves the backup failed), when the data is
// gone (nothing to clean: the record is forgotten once the scan no longer
// lists it), or when the store cannot tell. It returns an error only when
// ctx has ended.
func (o *Orphans) Judge(ctx context.Context, item orphan.Item) (orphan.Verdict, error) {
	ref, err := RefFromItem(item)
	if err != nil {
		return orphan.Undecided(err.Error()), nil
	}
	b, err := recordOf(ctx, o.lister, ref)
	if err := ctx.Err(); err != nil {
		return orphan.Verdict{}, err
	}
	if errors.Is(err, ErrNotFound) {
		return orphan.Undecided("no backup record for " + ref.String()), nil
	}
	if err != nil {
		return orphan.Undecided("cannot read backup record: " + err.Error()), nil
	}
	if !b.State.Failed() {
		return judgeState(b.State), nil
	}
	exists, err := o.store.BackupExists(ctx, b.Ref)
	if err := ctx.Err(); err != nil {
		return orphan.Verdict{}, err
	}
	switch {
	case err != nil:
		return orphan.Undecided(fmt.Sprintf("cannot tell whether backup %s is in the backupstore: %v", ref, err)), nil
	case !exists:
		return orphan.Undecided(fmt.Sprintf("backup %s is not in the backupstore: nothing to clean", ref)), nil
	}
	return judgeState(b.State), nil
}

func judgeState(s State) orphan.Verdict {
	if s.Failed() {
		return orphan.Orphan("backup failed: state " + string(s))
	}
	if s == StateNew {
		return orphan.Owned("backup is new")
	}
	return orphan.Owned("backup is " + string(s))
}

// Delete re-checks everything at the moment of deletion and deletes
// nothing (an error wrapping orphan.ErrPreconditionFailed) unless all of
// it holds:
//
//   - the record names a backup: kind backup, a valid target, volume and
//     backup name (never empty, never path-like: no '/', "..", NUL);
//   - the host still has a record of exactly that backup, and it is still
//     Error or Unknown (not retried, not being deleted, not completed);
//   - the store says, where it deletes (DeleteCompletedBackup), that the
//     backup is not still being written and that its state is readable.
//     A backup whose cfg has an empty CreatedTime (its upload died) is
//     purged while no backup lock of its volume is live (Longhorn's lock
//     protocol, whose deletion also removes a backup whatever its
//     CreatedTime); while one is live, or the store cannot take its
//     deletion lock because a backup or restore holds the volume, the
//     purge is refused with the store's reason.
//
// The backup is deleted under the host's spelling of its target (the
// host record's own ref). A backup already gone from the backupstore is
// success. Other errors (the host or the store could not be asked) are
// returned as they are, and the purge is retried.
func (o *Orphans) Delete(ctx context.Context, r orphan.Record) error {
	ref, err := RefFromItem(r.Item())
	if err != nil {
		return fmt.Errorf("%w: %v", orphan.ErrPreconditionFailed, err)
	}
	b, err := recordOf(ctx, o.lister, ref)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: no backup record for %s", orphan.ErrPreconditionFailed, ref)
	}
	if errors.Is(err, errWrongRecord) {
		return fmt.Errorf("%w: %v", orphan.ErrPreconditionFailed, err)
	}
	if err != nil {
		return fmt.Errorf("backupdelete: re-check %s: %w", ref, err)
	}
	if !b.State.Failed() {
		return fmt.Errorf("%w: backup %s is %q now, not failed", orphan.ErrPreconditionFailed, ref, b.State)
	}
	if err := b.Ref.Validate(); err != nil {
		return fmt.Errorf("%w: %v", orphan.ErrPreconditionFailed, err)
	}
	err = o.store.DeleteCompletedBackup(ctx, b.Ref)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInProgress), errors.Is(err, ErrLocked), errors.Is(err, ErrCorrupt), errors.Is(err, ErrInvalidRef),
		errors.Is(err, ErrListingInconsistent):
		// Both wrapped: the orphan core sees a refusal, the host can
		// still tell which (and reach the store's typed error).
		return fmt.Errorf("%w: backup %s: %w", orphan.ErrPreconditionFailed, ref, err)
	default:
		return fmt.Errorf("backupdelete: delete failed backup %s: %w", ref, err)
	}
}

var _ orphan.Adapter = (*Orphans)(nil)
