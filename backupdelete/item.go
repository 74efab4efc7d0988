package backupdelete

import (
	"context"
	"errors"
	"fmt"

	"github.com/caretaker-storage/caretaker/orphan"
)

// This file maps failed backups to orphan items and back, and reads the
// host's record of one.

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
