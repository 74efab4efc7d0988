package backupdelete

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// FailedBackups finds failed backups (state Error or Unknown) for package
// orphan: it is an orphan.Inventory over the host's backup records and the
// orphan.Judge for the items it lists. Seed 000 turns failed backups into
// orphan records of kind orphan.KindBackup; their names come from
// orphan.Item.Name over (target, volume, backup name).
//
// It is safe for concurrent use if the Lister is.
type FailedBackups struct {
	Lister BackupLister
	// NodeID is the node whose controller owns the records (Longhorn's
	// orphan spec.nodeID); it is the item's node and the scan's scope.
	NodeID string
}

// Scan lists the failed backups as orphan items, sorted by record name, in
// one Ready scope (Scope{NodeID}). A backup whose names are not valid
// backupstore names is reported in Skipped, never listed. A Lister error
// fails the scan.
func (f *FailedBackups) Scan(ctx context.Context) (orphan.Snapshot, error) {
	backups, err := f.Lister.ListBackups(ctx)
	if err != nil {
		return orphan.Snapshot{}, fmt.Errorf("backupdelete: list backups: %w", err)
	}
	scope := orphan.Scope{NodeID: f.NodeID}
	snap := orphan.Snapshot{Scopes: map[orphan.Scope]orphan.ScopeStatus{scope: {Health: orphan.HealthReady}}}
	type named struct {
		name string
		item orphan.Item
	}
	var items []named
	for _, b := range backups {
		if !b.State.Failed() {
			continue
		}
		if err := b.Ref.Validate(); err != nil {
			snap.Skipped = append(snap.Skipped, orphan.Skipped{Scope: scope, Name: b.Ref.String(), Reason: err.Error()})
			continue
		}
		it := BackupItem(b.Ref, f.NodeID)
		name, err := it.Name()
		if err != nil {
			snap.Skipped = append(snap.Skipped, orphan.Skipped{Scope: scope, Name: b.Ref.String(), Reason: err.Error()})
			continue
		}
		items = append(items, named{name, it})
	}
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
	b, err := f.Lister.GetBackup(ctx, ref)
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

// BackupItem returns the orphan item of a failed backup.
func BackupItem(ref BackupRef, nodeID string) orphan.Item {
	return orphan.Item{
		Kind:   orphan.KindBackup,
		NodeID: nodeID,
		Parameters: map[string]string{
			orphan.ParamBackupTarget: ref.Target,
			orphan.ParamBackupVolume: ref.Volume,
			orphan.ParamBackupName:   ref.Name,
		},
	}
}

// RefFromItem returns the backup an orphan item or record describes, or an
// error wrapping ErrInvalidRef if it is not a valid backup item.
func RefFromItem(it orphan.Item) (BackupRef, error) {
	if it.Kind != orphan.KindBackup {
		return BackupRef{}, fmt.Errorf("%w: orphan kind %q is not %q", ErrInvalidRef, it.Kind, orphan.KindBackup)
	}
	ref := BackupRef{Target: it.Param(orphan.ParamBackupTarget), Volume: it.Param(orphan.ParamBackupVolume), Name: it.Param(orphan.ParamBackupName)}
	return ref, ref.Validate()
}

// BackupOrphanDeleter is the orphan.Deleter for kind orphan.KindBackup: it
// deletes a failed backup's data through the Backupstore. Register it with
// orphan.KindDeleters{orphan.KindBackup: d}.
type BackupOrphanDeleter struct {
	Store  Backupstore
	Lister BackupLister
}

// Delete re-reads the host's record at the moment of deletion and deletes
// the backup from the backupstore only if it is still Error or Unknown;
// otherwise (a record that vanished, a backup retried or being deleted) it
// deletes nothing and returns an error wrapping orphan.ErrPreconditionFailed.
// A backup already gone from the backupstore is success.
func (d *BackupOrphanDeleter) Delete(ctx context.Context, r orphan.Record) error {
	ref, err := RefFromItem(r.Item())
	if err != nil {
		return fmt.Errorf("%w: %v", orphan.ErrPreconditionFailed, err)
	}
	b, err := d.Lister.GetBackup(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: no backup record for %s", orphan.ErrPreconditionFailed, ref)
	}
	if err != nil {
		return fmt.Errorf("backupdelete: re-check %s: %w", ref, err)
	}
	if !b.State.Failed() {
		return fmt.Errorf("%w: backup %s is %q now, not failed", orphan.ErrPreconditionFailed, ref, b.State)
	}
	if err := d.Store.DeleteBackup(ctx, ref); err != nil {
		return fmt.Errorf("backupdelete: delete failed backup %s: %w", ref, err)
	}
	return nil
}

// DefaultFailedBackupTTL is Longhorn's failed-backup-ttl default: 1440
// minutes.
const DefaultFailedBackupTTL = 1440 * time.Minute

// ErrInvalidSetting: a setting value could not be parsed.
var ErrInvalidSetting = errors.New("backupdelete: invalid setting")

// ParseFailedBackupTTL parses Longhorn's failed-backup-ttl setting: a whole
// number of minutes, 0 disabling the clean-up; "" is the default (1440).
func ParseFailedBackupTTL(value string) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return DefaultFailedBackupTTL, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(time.Duration(1<<63-1)/time.Minute) {
		return 0, fmt.Errorf("%w: failed-backup-ttl %q: want a whole number of minutes >= 0", ErrInvalidSetting, value)
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
