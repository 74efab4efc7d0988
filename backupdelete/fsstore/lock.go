package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
	"k8s.io/utils/clock"
)

// LockType is a lock's type, as Longhorn numbers them. Locks of the same
// type are compatible; locks of different types exclude each other.
type LockType = lhformat.LockType

// The lock types.
const (
	LockBackup   = lhformat.LockBackup   // creating a backup
	LockRestore  = lhformat.LockRestore  // restoring one (compatible with creating)
	LockDeletion = lhformat.LockDeletion // deleting a backup
)

// Lock timing. LockExpiry, LockRefresh and LockSettle are Longhorn's
// (longhorn/backupstore lock.go: LOCK_DURATION, LOCK_REFRESH_INTERVAL,
// LOCK_CHECK_WAIT_TIME); DefaultLockCheckInterval is caretaker's own.
const (
	// LockExpiry: a lock whose file was not modified for longer is dead.
	LockExpiry = lhformat.LockExpiry
	// LockRefresh: a holder rewrites its lock file this often.
	LockRefresh = lhformat.LockRefresh
	// LockSettle: after writing its lock file, a taker waits this long
	// before listing, so that two takers racing see each other (file times
	// have second precision and node clocks differ).
	LockSettle = lhformat.LockSettle
	// DefaultLockCheckInterval: how often a taker that waits for a
	// conflicting lock (Options.LockWait > 0) looks again. Longhorn's
	// FileLock.Lock does not wait: it looks once after LockSettle and
	// fails. (Its lock.go once retried every 10 s for up to 30 s,
	// LOCK_CHECK_INTERVAL and LOCK_MAX_WAIT_TIME; that loop was removed
	// in 2020 in favour of the caller retrying with backoff.)
	DefaultLockCheckInterval = lhstore.DefaultLockCheckInterval
)

// LockFile is the content of locks/lock-<16 hex>.lck.
type LockFile = lhformat.LockFile

// maxLockFileBytes bounds a lock file read; real ones are ~60 bytes.
const maxLockFileBytes = lhformat.MaxLockFileBytes

// ParseLockFile parses a lock file. Bad JSON, an empty or path-like name,
// or an unknown type is an error wrapping backupdelete.ErrCorrupt.
func ParseLockFile(data []byte) (_ LockFile, err error) {
	defer prefixErr(&err)
	return lhformat.ParseLockFile(data)
}

// LockConflictError says which lock blocked a taker. It wraps
// backupdelete.ErrLocked. It is the same type as s3store.LockConflictError,
// so a host handles both stores' conflicts alike.
type LockConflictError = lhstore.LockConflictError

// ErrLockLost is the cause of a Lock's Context when its file could not be
// rewritten for LockHeldFor: past that, others may see it expire and take
// the volume (a backup that reuses a block a deletion is about to delete
// could start), so nothing more may be deleted under it. It wraps
// backupdelete.ErrLocked.
var ErrLockLost = lhformat.ErrLockLost

// LockHeldFor is how long after its last successful write a lock still
// counts as held: LockExpiry less LockRefresh, which leaves a minute for
// clock skew between this host and the file server's mtimes that others
// compare with their clocks, and for work in flight.
const LockHeldFor = lhformat.LockHeldFor

// Lock is a held backupstore lock. Its file is refreshed every LockRefresh
// until Release, every 10 s after a failed rewrite; when none has
// succeeded for LockHeldFor, its Context ends with ErrLockLost. It is the
// same type as s3store.Lock.
type Lock = lhstore.Lock

func lockPath(name string) string { return locksDir + "/" + name + lockSuffix }

// lockDir is a volume directory's locks/ as an lhstore.LockStorage: the
// lock protocol (lhstore.Acquire) on lock files.
type lockDir struct {
	vol *os.Root
	clk clock.PassiveClock
}

// WriteLock creates locks/ (with Longhorn's mode) and writes the lock
// file in it. Another holder's Release removes locks/ when it leaves it
// empty, and may do so between our mkdir and our write: then the write
// finds no directory, and we make it again (a few times). A file write
// takes no context: a refresh goes on until the lock stops it.
func (d lockDir) WriteLock(_ context.Context, l LockFile) error {
	data, err := lhformat.EncodeLockFile(l)
	if err != nil {
		return err
	}
	for range 3 {
		if err = d.vol.MkdirAll(locksDir, dirMode); err != nil {
			return err
		}
		if err = writeAtomic(d.vol, lockPath(l.Name), data, d.clk); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

// RemoveLock removes the lock file, and locks/ when that empties it, as
// Longhorn's removeLock does (see tidy.go for the race with a taker,
// which is Longhorn's too).
func (d lockDir) RemoveLock(_ context.Context, name string) error {
	err := d.vol.Remove(lockPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	_ = rmdirEmpty(d.vol, locksDir)
	return err
}

// LockEntries lists locks/*.lck with their modification times (Lstat:
// nothing opened, no symlink followed). A temporary file is never a lock
// until renamed; a lock that vanished was released.
func (d lockDir) LockEntries(context.Context) ([]lhstore.LockEntry, error) {
	names, err := readDirNames(d.vol, locksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", locksDir, err)
	}
	var out []lhstore.LockEntry
	for _, n := range names {
		if !strings.HasSuffix(n, lockSuffix) {
			continue
		}
		p := locksDir + "/" + n
		info, err := d.vol.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look at %s: %w", p, err)
		}
		out = append(out, lhstore.LockEntry{Name: strings.TrimSuffix(n, lockSuffix), Time: info.ModTime()})
	}
	return out, nil
}

// ReadLock reads a lock file, bounded; a missing one wraps
// backupdelete.ErrNotFound, one of the wrong type or size
// backupdelete.ErrCorrupt.
func (d lockDir) ReadLock(_ context.Context, name string) ([]byte, error) {
	data, _, err := readBounded(d.vol, lockPath(name), maxLockFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", backupdelete.ErrNotFound, err)
	}
	return data, err
}

// acquire takes a lock of type t on the volume directory vol with
// Longhorn's protocol (lhstore.Acquire), refreshed until Release, or
// until abandon is closed (nil: until Release).
func (s *Store) acquire(ctx context.Context, vol *os.Root, volume string, t LockType, abandon <-chan struct{}, after func()) (*Lock, error) {
	return lhstore.Acquire(ctx, lockDir{vol: vol, clk: s.clock}, lhstore.LockOptions{
		Clock: s.clock, Wait: s.opts.LockWait, CheckInterval: s.opts.LockCheckInterval,
		Abandon: abandon, AfterRelease: after,
	}, volume, t)
}

// BackupRunningError is why DeleteCompletedBackup left a backup whose cfg
// has an empty CreatedTime: a backup lock of its volume is live, so a
// backup of the volume (perhaps this one) may still be writing. Longhorn
// locks a volume, not a backup, so the lock cannot say which backup it
// is for. It wraps backupdelete.ErrInProgress. It is the same type as
// s3store.BackupRunningError.
type BackupRunningError = lhstore.BackupRunningError
