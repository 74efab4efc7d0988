// Package lhstore is what the two Longhorn backupstores (fsstore on a
// filesystem, s3store on an S3 bucket) share above the format: the lock
// protocol over a small storage interface (LockStorage), and the types
// both stores return (Collection, LockConflictError, BackupRunningError).
// Each store exports these types under its own name as aliases, so a host
// handles both stores' results and errors alike and neither store imports
// the other.
//
// It imports package backupdelete for the types it implements against
// (BackupRef, the sentinels), as the stores do; package backupdelete never
// imports it, and the format underneath (lhformat) imports neither.
package lhstore

import (
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

// Collection says what a deletion did to the volume's blocks.
type Collection struct {
	// Removed is the number of block files (objects) removed.
	Removed int
	// Referenced is the number of distinct blocks the remaining backups
	// reference (volume.cfg's new BlockCount when blocks were collected).
	// A targeted collection may derive it from the old BlockCount (see
	// the store's package documentation) and leaves it 0 when skipped.
	Referenced int
	// Full: every block of the volume was a candidate (not only the
	// deleted backup's).
	Full bool
	// Skipped is why no block was removed, or "".
	Skipped string
	// Abandoned: DeleteCompletedBackup deleted a backup whose cfg had an
	// empty CreatedTime because no backup lock of its volume was live
	// (its creation died mid-upload).
	Abandoned bool
}

// DefaultLockCheckInterval: how often a taker that waits for a
// conflicting lock looks again. Longhorn's FileLock.Lock does not wait:
// it looks once after LockSettle and fails. (Its lock.go once retried
// every 10 s for up to 30 s, LOCK_CHECK_INTERVAL and LOCK_MAX_WAIT_TIME;
// that loop was removed in 2020 in favour of the caller retrying with
// backoff.)
const DefaultLockCheckInterval = 10 * time.Second

// LockConflictError says which lock blocked a taker. It wraps
// backupdelete.ErrLocked.
type LockConflictError struct {
	Volume  string
	Type    lhformat.LockType
	Blocker lhformat.LockFile
	Waited  time.Duration
}

// Error names the taker's volume and type, and the blocking lock.
func (e *LockConflictError) Error() string {
	return fmt.Sprintf("failed to acquire lock type %d on backupstore volume %s after %v: lock %s type %d (acquired %v) is held, please try again later",
		e.Type, e.Volume, e.Waited, e.Blocker.Name, e.Blocker.Type, e.Blocker.Acquired)
}

// Unwrap returns backupdelete.ErrLocked.
func (e *LockConflictError) Unwrap() error { return backupdelete.ErrLocked }

// BackupRunningError is why DeleteCompletedBackup left a backup whose cfg
// has an empty CreatedTime: a backup lock of its volume is live, so a
// backup of the volume (perhaps this one) may still be writing. Longhorn
// locks a volume, not a backup, so the lock cannot say which backup it
// is for. It wraps backupdelete.ErrInProgress.
type BackupRunningError struct {
	Backup backupdelete.BackupRef
	// Lock is the live lock's name (lock-<16 hex>).
	Lock string
	// Age is how long before the check the lock was last written.
	Age time.Duration
	// Unreadable, if not nil, is why the lock could not be read: a fresh
	// lock that cannot be read might be a backup lock, so it holds the
	// deletion back too.
	Unreadable error
}

// Error says which lock holds the backup back, and how old it is.
func (e *BackupRunningError) Error() string {
	if e.Unreadable != nil {
		return fmt.Sprintf("backup %s has an empty CreatedTime and lock file %s of its volume (%s) cannot be read (%v): it may be a live backup lock, so a backup may still be writing",
			e.Backup, e.Lock, e.age(), e.Unreadable)
	}
	return fmt.Sprintf("backup %s has an empty CreatedTime and backup lock %s of its volume is live (%s; it expires %v after its last refresh): a backup may still be writing",
		e.Backup, e.Lock, e.age(), lhformat.LockExpiry)
}

func (e *BackupRunningError) age() string {
	if e.Age < 0 {
		return fmt.Sprintf("its file time is %v ahead of our clock", -e.Age)
	}
	return fmt.Sprintf("written %v ago", e.Age)
}

// Unwrap returns backupdelete.ErrInProgress.
func (e *BackupRunningError) Unwrap() error { return backupdelete.ErrInProgress }
