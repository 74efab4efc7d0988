package s3store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// The lock protocol is Longhorn's (longhorn/backupstore lock.go), on lock
// objects; its types, timing, file format, ranking and expiry are the
// same as fsstore's (package internal/lhformat), and so are its errors.

// LockType is a lock's type, as Longhorn numbers them.
type LockType = lhformat.LockType

// The lock types.
const (
	LockBackup   = lhformat.LockBackup
	LockRestore  = lhformat.LockRestore
	LockDeletion = lhformat.LockDeletion
)

// Lock timing, Longhorn's (longhorn/backupstore lock.go: LOCK_DURATION,
// LOCK_REFRESH_INTERVAL, LOCK_CHECK_WAIT_TIME); DefaultLockCheckInterval
// is caretaker's own, for Options.LockWait.
const (
	LockExpiry               = lhformat.LockExpiry
	LockRefresh              = lhformat.LockRefresh
	LockSettle               = lhformat.LockSettle
	DefaultLockCheckInterval = lhstore.DefaultLockCheckInterval
)

// LockFile is the content of locks/lock-<16 hex>.lck.
type LockFile = lhformat.LockFile

// LockConflictError says which lock blocked a taker; it wraps
// backupdelete.ErrLocked. It is the same type as
// fsstore.LockConflictError, so a host handles both stores' conflicts
// alike.
type LockConflictError = lhstore.LockConflictError

// BackupRunningError is why DeleteCompletedBackup left a backup in
// progress; it wraps backupdelete.ErrInProgress. It is the same type as
// fsstore.BackupRunningError.
type BackupRunningError = lhstore.BackupRunningError

// Lock is a held lock object. It is refreshed every LockRefresh until
// Release, or until the context it was taken with ends. A refresh that
// fails is tried again every 10 s; when none has succeeded for
// LockHeldFor, the lock can no longer be proven held (others will see it
// expire LockExpiry after its last write), and Context ends with cause
// ErrLockLost. Release deletes the object with the context the lock was
// taken with, minus its cancellation (context.WithoutCancel), bounded by
// 5 s (or RequestTimeout if shorter): a deletion cancelled mid-way still
// removes its lock object, so that backups are not held back until it
// expires. It is the same type as fsstore.Lock.
type Lock = lhstore.Lock

// ErrLockLost is the cause of a Lock's Context when its object could not
// be rewritten for LockHeldFor: past that, others may see it expire and
// take the volume, so nothing more may be deleted under it. It wraps
// backupdelete.ErrLocked.
var ErrLockLost = lhformat.ErrLockLost

// LockHeldFor is how long after its last successful write a lock still
// counts as held: LockExpiry less LockRefresh, which leaves a minute for
// clock skew between this host and the server whose Last-Modified others
// compare with their clocks, and for requests in flight.
const LockHeldFor = lhformat.LockHeldFor

// maxReleaseTimeout bounds the deletion of a lock object after its
// taker's context ended (with RequestTimeout, whichever is shorter).
const maxReleaseTimeout = 5 * time.Second

// lockObjects is a volume's locks/ as an lhstore.LockStorage: the lock
// protocol (lhstore.Acquire) on objects.
type lockObjects struct {
	s      *Store
	volume string
}

func (d lockObjects) dir() string { return lhformat.VolumePath(d.volume) + "/" + lhformat.LocksDir }

// WriteLock puts the lock object.
func (d lockObjects) WriteLock(ctx context.Context, l LockFile) error {
	data, err := lhformat.EncodeLockFile(l)
	if err != nil {
		return err
	}
	return d.s.put(ctx, d.s.lockRel(d.volume, l.Name), data)
}

// RemoveLock deletes our lock object even when ctx has ended, within
// min(RequestTimeout, maxReleaseTimeout), retries included.
func (d lockObjects) RemoveLock(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(d.s.opts.RequestTimeout, maxReleaseTimeout))
	defer cancel()
	return d.s.del(ctx, d.s.lockRel(d.volume, name))
}

// LockEntries lists the lock objects with their Last-Modified from the
// listing, cut to the second: that is the time Longhorn's FileTime reads
// with a HeadObject (whose Last-Modified header has one-second
// precision), one request fewer per lock, and the same rank.
func (d lockObjects) LockEntries(ctx context.Context) ([]lhstore.LockEntry, error) {
	var out []lhstore.LockEntry
	err := d.s.list(ctx, d.dir(), false, func(objs []listed, _ []string) error {
		for _, o := range objs {
			if strings.HasSuffix(o.name, lhformat.LockSuffix) && !strings.Contains(o.name, "/") {
				out = append(out, lhstore.LockEntry{Name: strings.TrimSuffix(o.name, lhformat.LockSuffix), Time: o.modified.Truncate(time.Second)})
			}
		}
		return nil
	})
	return out, err
}

// ReadLock gets a lock object, bounded.
func (d lockObjects) ReadLock(ctx context.Context, name string) ([]byte, error) {
	data, _, err := d.s.get(ctx, d.s.lockRel(d.volume, name), lhformat.MaxLockFileBytes)
	return data, err
}

func (s *Store) lockRel(volume, name string) string {
	return lhformat.VolumePath(volume) + "/" + lhformat.LockPath(name)
}

// Lock takes a lock of the given type on a volume with Longhorn's
// protocol; release it with Lock.Release. A backup creator takes
// LockBackup, which DeleteBackup's LockDeletion excludes. The lock is
// refreshed until Release or until ctx ends, whichever is first.
func (s *Store) Lock(ctx context.Context, volume string, t LockType) (_ *Lock, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return nil, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	if t != LockBackup && t != LockDeletion {
		return nil, fmt.Errorf("%w: lock type %d", backupdelete.ErrInvalidRef, t)
	}
	return s.acquire(ctx, volume, t)
}

// acquire is Longhorn's FileLock.Lock on objects (lhstore.Acquire),
// refreshed until Release or until ctx ends.
func (s *Store) acquire(ctx context.Context, volume string, t LockType) (*Lock, error) {
	return lhstore.Acquire(ctx, lockObjects{s: s, volume: volume}, lhstore.LockOptions{
		Clock: s.clock, Wait: s.opts.LockWait, CheckInterval: s.opts.LockCheckInterval, Abandon: ctx.Done(),
	}, volume, t)
}
