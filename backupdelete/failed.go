package backupdelete

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/caretaker-storage/caretaker/internal/settings"
	"github.com/caretaker-storage/caretaker/orphan"
)

// FailedBackups finds failed backups (state Error or Unknown) for package
// orphan: it is an orphan.Inventory over the host's backup records and the
// orphan.Judge for the items it lists. Seed 000 turns failed backups into
// orphan records of kind orphan.KindBackup; their names come from
// orphan.Item.Name over (target, volume, backup name), with an empty
// target named DefaultBackupTarget.
//
// A failed backup is an item only while its data is in the backupstore:
// Scan asks Store.BackupExists for each one. After a purge the host's
// record of the backup usually stays (Error) for a while, or for good;
// without the check every scan would list it again and a new record would
// be created for data that is already gone. A backup that is not there is
// reported in Snapshot.Skipped, and a record left for it is forgotten by
// the planner (its item disappeared). The host also passes Cycle.ObservedAt
// (the Sweeper clock's time just before Scan read the list, or
// Observation.StartedAt), which covers a snapshot read before a purge and
// used after it.
//
// It is safe for concurrent use if the Lister and the Store are.
type FailedBackups struct {
	Lister BackupLister
	// Store is the backupstore the backups are in; required.
	Store Backupstore
	// NodeID is the node whose controller owns the records (Longhorn's
	// orphan spec.nodeID); it is the item's node and the scan's scope.
	NodeID string
}

var errNoStore = errors.New("backupdelete: FailedBackups needs a Store: without it a purged backup the host still lists as failed would get a new record")

// Scan lists the failed backups whose data is in the backupstore as orphan
// items, sorted by record name, in one scope (Scope{NodeID}): Ready, or
// Unknown when the backupstore could not say whether some backup is there
// (then no record is created, forgotten or purged this cycle). A backup
// whose names are not valid, or that is not in the backupstore, is
// reported in Skipped, never listed; so is the second of two host records
// that name one backup (an empty target and DefaultBackupTarget). A Lister
// error fails the scan.
func (f *FailedBackups) Scan(ctx context.Context) (orphan.Snapshot, error) {
	if f.Store == nil || f.Lister == nil {
		return orphan.Snapshot{}, errNoStore
	}
	backups, err := f.Lister.ListBackups(ctx)
	if err != nil {
		return orphan.Snapshot{}, fmt.Errorf("backupdelete: list backups: %w", err)
	}
	scope := orphan.Scope{NodeID: f.NodeID}
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
	for _, b := range backups {
		if !b.State.Failed() {
			continue
		}
		if err := b.Ref.Validate(); err != nil {
			skip(b.Ref, err.Error())
			continue
		}
		it := BackupItem(b.Ref, f.NodeID)
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
		exists, err := f.Store.BackupExists(ctx, b.Ref)
		if err != nil {
			// Cannot tell: keep the item, and keep the scope from
			// creating, forgetting or purging anything.
			status = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: fmt.Sprintf("cannot tell whether backup %s is in the backupstore: %v", b.Ref, err)}
		} else if !exists {
			skip(b.Ref, "not in the backupstore (already purged, or never written): nothing to clean")
			continue
		}
		items = append(items, named{name, it})
	}
	snap.Scopes = map[orphan.Scope]orphan.ScopeStatus{scope: status}
	slices.SortFunc(items, func(a, b named) int { return cmp.Compare(a.name, b.name) })
	for _, n := range items {
		snap.Items = append(snap.Items, n.item)
	}
	return snap, nil
}

// Judge says a backup item is an orphan while the host's record of it is
// Error or Unknown, owned in any other state (including Deleting: the
// deletion engine has it), and undecided when the host has no record or
// cannot be asked: without a record nothing proves the backup failed.
func (f *FailedBackups) Judge(ctx context.Context, item orphan.Item) (orphan.Verdict, error) {
	ref, err := RefFromItem(item)
	if err != nil {
		return orphan.Undecided(err.Error()), nil
	}
	b, err := recordOf(ctx, f.Lister, ref)
	if errors.Is(err, ErrNotFound) {
		return orphan.Undecided("no backup record for " + ref.String()), nil
	}
	if err != nil {
		return orphan.Undecided("cannot read backup record: " + err.Error()), nil
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

// recordOf reads the host's record of ref, whose Target may be spelled
// DefaultBackupTarget where the host says "" (a record's items always
// carry the name): ask for ref, then, if the host has no such record and
// the target is the default one, for the empty spelling. The record the
// host returns must be ref's (SameTarget, same volume and name): a host
// answering with another backup is an error, never a licence to act.
func recordOf(ctx context.Context, l BackupLister, ref BackupRef) (Backup, error) {
	b, err := l.GetBackup(ctx, ref)
	if errors.Is(err, ErrNotFound) && ref.Target == DefaultBackupTarget {
		alt := ref
		alt.Target = ""
		b, err = l.GetBackup(ctx, alt)
	}
	if err != nil {
		return Backup{}, err
	}
	if !SameTarget(b.Ref.Target, ref.Target) || b.Ref.Volume != ref.Volume || b.Ref.Name != ref.Name {
		return Backup{}, fmt.Errorf("%w: asked for backup %s, the host answered with %s", errWrongRecord, ref, b.Ref)
	}
	return b, nil
}

var errWrongRecord = errors.New("backupdelete: wrong backup record")

// BackupItem returns the orphan item of a failed backup. An empty target
// is written as DefaultBackupTarget, so that the record has a name (every
// field of the name formula must be set) and keeps it when the host starts
// to spell its target out.
func BackupItem(ref BackupRef, nodeID string) orphan.Item {
	target := ref.Target
	if target == "" {
		target = DefaultBackupTarget
	}
	return orphan.Item{
		Kind:   orphan.KindBackup,
		NodeID: nodeID,
		Parameters: map[string]string{
			orphan.ParamBackupTarget: target,
			orphan.ParamBackupVolume: ref.Volume,
			orphan.ParamBackupName:   ref.Name,
		},
	}
}

// RefFromItem returns the backup an orphan item or record describes, or an
// error wrapping ErrInvalidRef if it is not a valid backup item: another
// kind, a target, volume or backup name that is empty or path-like. The
// target is as the record has it (DefaultBackupTarget for a host that
// reports an empty one).
func RefFromItem(it orphan.Item) (BackupRef, error) {
	if it.Kind != orphan.KindBackup {
		return BackupRef{}, fmt.Errorf("%w: orphan kind %q is not %q", ErrInvalidRef, it.Kind, orphan.KindBackup)
	}
	ref := BackupRef{Target: it.Param(orphan.ParamBackupTarget), Volume: it.Param(orphan.ParamBackupVolume), Name: it.Param(orphan.ParamBackupName)}
	if ref.Target == "" {
		return ref, fmt.Errorf("%w: backup item without a target", ErrInvalidRef)
	}
	return ref, ref.Validate()
}

// BackupOrphanDeleter is the orphan.Deleter for kind orphan.KindBackup: it
// deletes a failed backup's data through the Backupstore, which must be a
// CompletedBackupDeleter. Register it with
// orphan.KindDeleters{orphan.KindBackup: d}.
type BackupOrphanDeleter struct {
	Store  Backupstore
	Lister BackupLister
}

// Delete re-checks everything at the moment of deletion and deletes
// nothing (an error wrapping orphan.ErrPreconditionFailed) unless all of
// it holds:
//
//   - the record names a backup: kind backup, a valid target, volume and
//     backup name (never empty, never path-like: no '/', "..", NUL);
//   - the host still has a record of exactly that backup, and it is still
//     Error or Unknown (not retried, not being deleted, not completed);
//   - the Store can delete conditionally (CompletedBackupDeleter), and
//     says, where it deletes, that the backup is not still being written
//     (Longhorn: its cfg has an empty CreatedTime) and that its state is
//     readable.
//
// The backup is deleted under the host's spelling of its target (the
// record's own ref). A backup already gone from the backupstore is
// success. Other errors (the host or the store could not be asked) are
// returned as they are, and the purge is retried.
func (d *BackupOrphanDeleter) Delete(ctx context.Context, r orphan.Record) error {
	ref, err := RefFromItem(r.Item())
	if err != nil {
		return fmt.Errorf("%w: %v", orphan.ErrPreconditionFailed, err)
	}
	b, err := recordOf(ctx, d.Lister, ref)
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
	cd, ok := d.Store.(CompletedBackupDeleter)
	if !ok {
		return fmt.Errorf("%w: the backupstore (%T) cannot tell whether backup %s is still being written (it is not a backupdelete.CompletedBackupDeleter)", orphan.ErrPreconditionFailed, d.Store, ref)
	}
	err = cd.DeleteCompletedBackup(ctx, b.Ref)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInProgress), errors.Is(err, ErrCorrupt), errors.Is(err, ErrInvalidRef):
		return fmt.Errorf("%w: backup %s: %v", orphan.ErrPreconditionFailed, ref, err)
	default:
		return fmt.Errorf("backupdelete: delete failed backup %s: %w", ref, err)
	}
}

// DefaultFailedBackupTTL is Longhorn's failed-backup-ttl default: 1440
// minutes.
const DefaultFailedBackupTTL = 1440 * time.Minute

// SettingError says which setting value could not be parsed and why; it
// wraps ErrInvalidSetting. It is the same type as every caretaker
// package's SettingError.
type SettingError = settings.Error

// ErrInvalidSetting is wrapped by every *SettingError; the same value as
// every caretaker package's ErrInvalidSetting.
var ErrInvalidSetting = settings.ErrInvalid

// SettingFailedBackupTTL is the name of Longhorn's failed-backup-ttl
// setting.
const SettingFailedBackupTTL = "failed-backup-ttl"

// ParseFailedBackupTTL parses Longhorn's failed-backup-ttl setting: a whole
// number of minutes, 0 disabling the clean-up; "" is the default (1440).
// Surrounding ASCII white space is ignored (settings.Trim, the rule every
// caretaker parser shares). Anything else is a *SettingError.
func ParseFailedBackupTTL(value string) (time.Duration, error) {
	v := settings.Trim(value)
	if v == "" {
		return DefaultFailedBackupTTL, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(time.Duration(1<<63-1)/time.Minute) {
		return 0, &SettingError{Setting: SettingFailedBackupTTL, Value: value, Reason: "want a whole number of minutes >= 0"}
	}
	return time.Duration(n) * time.Minute, nil
}

// ExpiredFailedBackups applies Longhorn's failed-backup-ttl: the backups in
// Error or Unknown whose FailedAt is at least ttl before now, sorted, for
// the host to delete (set their deletion, then the Driver runs). A ttl of 0
// disables it; a zero FailedAt never expires. RequeueAt is when the next
// failed backup expires (zero if none will). Pass only backups this cluster
// created: Longhorn leaves backups synced from a target alone.
func ExpiredFailedBackups(backups []Backup, ttl time.Duration, now time.Time) (expired []BackupRef, requeueAt time.Time) {
	if ttl <= 0 {
		return nil, time.Time{}
	}
	for _, b := range backups {
		if !b.State.Failed() || b.FailedAt.IsZero() {
			continue
		}
		due := b.FailedAt.Add(ttl)
		if !now.Before(due) {
			expired = append(expired, b.Ref)
		} else if requeueAt.IsZero() || due.Before(requeueAt) {
			requeueAt = due
		}
	}
	slices.SortFunc(expired, func(a, b BackupRef) int { return cmp.Compare(a.String(), b.String()) })
	return expired, requeueAt
}

// Interface checks.
var (
	_ orphan.Inventory = (*FailedBackups)(nil)
	_ orphan.Judge     = (*FailedBackups)(nil)
	_ orphan.Deleter   = (*BackupOrphanDeleter)(nil)
)
