package backupdelete

import (
	"errors"
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// DefaultBackupTarget is the name of Longhorn's default backup target:
// the BackupTarget object longhorn-manager creates from its backup-target
// setting is named "default" (types.DefaultBackupTargetName), and since
// v1.8, which allows several targets, it is still the one backups use
// unless told otherwise. A BackupRef with an empty Target (a host with one
// target) names this target: its failed-backup orphan records carry
// BackupTarget "default", so they keep their names when the host starts
// to spell the target out.
const DefaultBackupTarget = "default"

// BackupRef names one backup in one backup target: the triple Longhorn's
// backup URL encodes (target, volume, backup name).
type BackupRef struct {
	Target string // the backup target's name; empty when the host has one target (DefaultBackupTarget)
	Volume string // the backup volume: the name of the volume backed up
	Name   string // the backup's name, e.g. backup-0123456789abcdef
}

// String returns "target/volume/name" (or "volume/name" without a target).
// It is the key the Driver keeps records and backoff under.
func (r BackupRef) String() string {
	if r.Target == "" {
		return r.Volume + "/" + r.Name
	}
	return r.Target + "/" + r.Volume + "/" + r.Name
}

// ValidName reports whether s is a valid backupstore volume or backup name:
// Longhorn's rule (backupstore/util.ValidateName, the regular expression
// ^[a-zA-Z0-9][a-zA-Z0-9_.-]+$), so at least two characters, a leading
// letter or digit, then letters, digits, '_', '.', '-'; and at most 253
// characters. It keeps names from being path-like, which the filesystem
// store relies on. (Hand-written: the Driver checks it on every reconcile.)
func ValidName(s string) bool { return lhformat.ValidName(s) }

// ValidTarget reports whether s can be a backup target's name: empty (the
// host's only target), or 1 to 253 letters, digits, '_', '.' and '-'
// starting with a letter or digit (Kubernetes object names are a subset),
// so never path-like.
func ValidTarget(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > 253 || !lhformat.NameByte[s[0]] || s[0] == '_' || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !lhformat.NameByte[s[i]] {
			return false
		}
	}
	return true
}

// SameTarget reports whether two target names name one target: equal, or
// one empty and the other DefaultBackupTarget.
func SameTarget(a, b string) bool {
	if a == "" {
		a = DefaultBackupTarget
	}
	if b == "" {
		b = DefaultBackupTarget
	}
	return a == b
}

// Validate returns an error wrapping ErrInvalidRef if the volume or the
// backup name is not a valid backupstore name, or the target name is not
// a ValidTarget.
func (r BackupRef) Validate() error {
	if !ValidTarget(r.Target) {
		return fmt.Errorf("%w: backup target name %q", ErrInvalidRef, r.Target)
	}
	if !ValidName(r.Volume) {
		return fmt.Errorf("%w: volume name %q", ErrInvalidRef, r.Volume)
	}
	if !ValidName(r.Name) {
		return fmt.Errorf("%w: backup name %q", ErrInvalidRef, r.Name)
	}
	return nil
}

// State is a backup's state, spelled as Longhorn's Backup status.state.
type State string

// The states. Deleting is the state longhorn/longhorn#8746 adds; the others are
// Longhorn's. The zero value is StateNew.
const (
	StateNew        State = ""
	StatePending    State = "Pending"
	StateInProgress State = "InProgress"
	StateCompleted  State = "Completed"
	StateError      State = "Error"
	StateUnknown    State = "Unknown"
	StateDeleting   State = "Deleting"
)

// Failed reports whether a backup in this state failed: Error or Unknown.
// Failed backups become orphan records (see Orphans).
func (s State) Failed() bool { return s == StateError || s == StateUnknown }

// Backup is the host's view of one backup record (in Longhorn, a Backup
// custom resource).
type Backup struct {
	Ref   BackupRef
	State State
	// FailedAt is when the backup entered Error or Unknown (Longhorn: the
	// status's lastSyncedAt). Zero when unknown; the failed-backup TTL then
	// never expires it.
	FailedAt time.Time
}

// Messages, exactly as Longhorn's backup controller writes them.
const (
	// MessageNoDeletionRecord is set with StateError when a backup is
	// Deleting, still exists in the backupstore, and this process has no
	// record of a running delete command: the controller restarted.
	MessageNoDeletionRecord = "No deletion in progress record, retry the deletion command"
	// messageFailedToDelete takes the backup's name and the command's error.
	messageFailedToDelete = "Failed to delete the backup %s in the backupstore, err %s"
	// messageWaitForDeletion takes the name of the backup being deleted.
	messageWaitForDeletion = "Wait for backup %s to be deleted"
)

// FailedToDeleteMessage returns Longhorn's Error message for a delete
// command that failed with errText.
func FailedToDeleteMessage(backup, errText string) string {
	return fmt.Sprintf(messageFailedToDelete, backup, errText)
}

// WaitForDeletionMessage returns the Pending message of a creation that
// waits for the named backup's deletion.
func WaitForDeletionMessage(backup string) string {
	return fmt.Sprintf(messageWaitForDeletion, backup)
}

// Sentinel errors, for errors.Is.
var (
	// ErrNotFound: the backup (or the host record) does not exist. A
	// Backupstore's DeleteBackup never returns it: deleting what is gone
	// is success. It is the same value as every caretaker package's
	// ErrNotFound; errors wrap it with what was not found.
	ErrNotFound = errclass.ErrNotFound
	// ErrInvalidRef: a volume or backup name is empty or not a valid
	// backupstore name. Not retryable.
	ErrInvalidRef = errors.New("backupdelete: invalid backup reference")
	// ErrLocked: the backupstore holds a conflicting lock (a backup or
	// restore is running on the volume). Retryable later.
	ErrLocked = lhformat.ErrLocked
	// ErrCorrupt: a backupstore file could not be parsed. Nothing was
	// deleted because of it. It is of caretaker's one malformed-input
	// class (errclass.ErrMalformed): errors.Is matches it with every
	// package's sentinel of that class (s3store.ErrMalformed among them),
	// and the other way round.
	ErrCorrupt = lhformat.ErrCorrupt
	// ErrPanic: a delete command panicked; the Driver recorded it as an
	// Error instead of losing the record.
	ErrPanic = errors.New("backupdelete: delete command panicked")
	// ErrTimeout: a delete command ran longer than
	// DriverOptions.CommandTimeout and was cancelled. Retried.
	ErrTimeout = errors.New("backupdelete: delete command timed out")
	// ErrClosed: the Driver was closed.
	ErrClosed = errors.New("backupdelete: driver closed")
	// ErrInProgress: a CompletedBackupDeleter found that the backup may
	// still be being written in the backupstore (Longhorn: its cfg has an
	// empty CreatedTime and a backup lock of its volume is live) and
	// deleted nothing.
	ErrInProgress = errors.New("backupdelete: backup still in progress in the backupstore")
	// ErrListingInconsistent: a listing of a volume's backups contradicted
	// volume.cfg or itself (the backup volume.cfg names as its last is
	// missing from the listing yet exists; a page holding exactly the page
	// size, marked complete, disagreed with a listing in smaller pages).
	// A gateway, cache or proxy that drops entries would make a deletion
	// remove blocks another backup references, so nothing was deleted.
	// Retryable: the deletion finishes once the listing is honest.
	ErrListingInconsistent = lhformat.ErrListingInconsistent
)
