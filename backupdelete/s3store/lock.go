package s3store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
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

// Lock timing, Longhorn's (see fsstore).
const (
	LockExpiry               = lhformat.LockExpiry
	LockRefresh              = lhformat.LockRefresh
	LockSettle               = lhformat.LockSettle
	DefaultLockCheckInterval = fsstore.DefaultLockCheckInterval
)

// LockFile is the content of locks/lock-<16 hex>.lck.
type LockFile = lhformat.LockFile

// LockConflictError says which lock blocked a taker; it wraps
// backupdelete.ErrLocked. It is fsstore's type, so a host handles both
// stores' conflicts alike.
type LockConflictError = fsstore.LockConflictError

// BackupRunningError is why DeleteCompletedBackup left a backup in
// progress; it wraps backupdelete.ErrInProgress. It is fsstore's type.
type BackupRunningError = fsstore.BackupRunningError

// Lock is a held lock object. It is refreshed every LockRefresh until
// Release, or until the context it was taken with ends. A refresh that
// fails is tried again every lockRetry; when none has succeeded for
// LockHeldFor, the lock can no longer be proven held (others will see it
// expire LockExpiry after its last write), and Context ends with cause
// ErrLockLost.
type Lock struct {
	s      *Store
	volume string
	file   LockFile
	ctx    context.Context // the taker's, for the refreshes and Release
	held   context.Context // ends when the lock is lost
	lose   context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	err    error
	// written is when the object was last written, by the Store's clock.
	written time.Time
}

// ErrLockLost is the cause of a Lock's Context when its object could not
// be rewritten for LockHeldFor: past that, others may see it expire and
// take the volume, so nothing more may be deleted under it. It wraps
// backupdelete.ErrLocked. It is fsstore's.
var ErrLockLost = fsstore.ErrLockLost

// LockHeldFor is how long after its last successful write a lock still
// counts as held (fsstore's): LockExpiry less LockRefresh, which leaves a
// minute for clock skew between this host and the server whose
// Last-Modified others compare with their clocks, and for requests in
// flight.
const LockHeldFor = fsstore.LockHeldFor

// Context returns a context that ends when the lock is released or lost
// (context.Cause is then ErrLockLost), or when the context the lock was
// taken with ends. Work that must not outlive the lock runs under it.
func (l *Lock) Context() context.Context { return l.held }

// Name returns the lock's name (lock-<16 hex>).
func (l *Lock) Name() string { return l.file.Name }

// Release stops the refresh and deletes the lock object. It is
// idempotent. The delete is sent with the context the lock was taken
// with, minus its cancellation (context.WithoutCancel), bounded by
// releaseTimeout: a deletion cancelled mid-way still removes its lock
// object, so that backups are not held back until it expires, and
// returns at most releaseTimeout after its context ended.
func (l *Lock) Release() error {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		// Not in refresh: a taker's context that ended must reach the
		// lock's Context as its own error (a deadline stays a deadline).
		l.lose(nil)
		l.err = l.s.deleteLockObject(l.ctx, l.volume, l.file.Name)
	})
	return l.err
}

// maxReleaseTimeout bounds the deletion of a lock object after its
// taker's context ended (with RequestTimeout, whichever is shorter).
const maxReleaseTimeout = 5 * time.Second

// deleteLockObject deletes our lock object even when ctx has ended, within
// min(RequestTimeout, maxReleaseTimeout), retries included.
func (s *Store) deleteLockObject(ctx context.Context, volume, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(s.opts.RequestTimeout, maxReleaseTimeout))
	defer cancel()
	return s.del(ctx, s.lockRel(volume, name))
}

func (s *Store) lockRel(volume, name string) string {
	return lhformat.VolumePath(volume) + "/" + lhformat.LockPath(name)
}

// Lock takes a lock of the given type on a volume with Longhorn's
// protocol; release it with Lock.Release. A backup creator takes
// LockBackup, which DeleteBackup's LockDeletion excludes. The lock is
// refreshed until Release or until ctx ends, whichever is first.
func (s *Store) Lock(ctx context.Context, volume string, t LockType) (*Lock, error) {
	if !backupdelete.ValidName(volume) {
		return nil, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	if t != LockBackup && t != LockDeletion {
		return nil, fmt.Errorf("%w: lock type %d", backupdelete.ErrInvalidRef, t)
	}
	return s.acquire(ctx, volume, t)
}

// acquire is Longhorn's FileLock.Lock on objects: write our lock object
// (not acquired), wait LockSettle, list the locks; a lock of another type
// that has not expired and ranks before ours blocks. Blocked, we look
// again every LockCheckInterval until LockWait has passed (Longhorn fails
// at once), rewriting ours every LockRefresh meanwhile, then delete ours
// and fail with a *LockConflictError. Otherwise we rewrite ours as
// acquired and refresh it until Release or until ctx ends.
func (s *Store) acquire(ctx context.Context, volume string, t LockType) (*Lock, error) {
	name, err := lhformat.NewLockName()
	if err != nil {
		return nil, err
	}
	me := LockFile{Name: name, Type: t}
	if err := s.writeLock(ctx, volume, me); err != nil {
		return nil, err
	}
	start := s.clock.Now()
	written := start
	fail := func(err error) (*Lock, error) {
		_ = s.deleteLockObject(ctx, volume, name)
		return nil, err
	}
	if err := s.wait(ctx, LockSettle); err != nil {
		return fail(err)
	}
	for {
		locks, err := s.listLocks(ctx, volume)
		if err != nil {
			return fail(err)
		}
		blocker, ok := lhformat.Blocker(locks, me, s.clock.Now())
		if !ok {
			// Our object is not in the listing: someone removed it, or
			// the store's listing lags its writes (see the package
			// documentation on consistency). We cannot prove our rank.
			return fail(fmt.Errorf("s3store: our lock object %s is not in the listing of the volume's locks", name))
		}
		if blocker == nil {
			break
		}
		waited := s.clock.Since(start)
		if waited+s.checkInterval() > s.opts.LockWait {
			return fail(&LockConflictError{Volume: volume, Type: t, Blocker: blocker.LockFile, Waited: waited})
		}
		if err := s.wait(ctx, s.checkInterval()); err != nil {
			return fail(err)
		}
		if s.clock.Since(written) >= LockRefresh {
			if err := s.writeLock(ctx, volume, me); err != nil {
				return fail(err)
			}
			written = s.clock.Now()
			if err := s.wait(ctx, LockSettle); err != nil {
				return fail(err)
			}
		}
	}
	me.Acquired = true
	if err := s.writeLock(ctx, volume, me); err != nil {
		return fail(err)
	}
	l := &Lock{s: s, volume: volume, file: me, ctx: ctx, stop: make(chan struct{}), done: make(chan struct{}), written: s.clock.Now()}
	l.held, l.lose = context.WithCancelCause(ctx)
	go s.refresh(l)
	return l, nil
}

// refresh keeps the lock object (lhformat.KeepLock): rewritten every
// LockRefresh, every LockRetry after a failure, each rewrite bounded by
// LockRetry; when none has succeeded for LockHeldFor, the lock's Context
// ends with ErrLockLost. It stops at Release, or when the taker's context
// ends.
func (s *Store) refresh(l *Lock) {
	defer close(l.done)
	stop := make(chan struct{})
	go func() {
		select {
		case <-l.stop:
		case <-l.ctx.Done():
		}
		close(stop)
	}()
	lhformat.KeepLock(s.clock, l.written, stop, func() error {
		rctx, cancel := context.WithTimeout(l.ctx, lhformat.LockRetry)
		defer cancel()
		return s.writeLock(rctx, l.volume, l.file)
	}, l.lose)
}

func (s *Store) writeLock(ctx context.Context, volume string, l LockFile) error {
	data, err := lhformat.EncodeLockFile(l)
	if err != nil {
		return err
	}
	return s.put(ctx, s.lockRel(volume, l.Name), data)
}

// listLocks lists and reads the volume's lock objects. A lock's time is
// its object's Last-Modified from the listing, cut to the second: that
// is the time Longhorn's FileTime reads with a HeadObject (whose
// Last-Modified header has one-second precision), one request fewer per
// lock, and the same rank. An object that cannot be parsed is skipped,
// as Longhorn does; one that vanished was released. One that cannot be
// read (a 503, a dropped connection) fails the listing: Longhorn skips it
// too, but a live lock skipped because the server hiccuped would let two
// exclusive takers proceed.
func (s *Store) listLocks(ctx context.Context, volume string) ([]lhformat.SeenLock, error) {
	var names []listed
	err := s.list(ctx, lhformat.VolumePath(volume)+"/"+lhformat.LocksDir, false, func(objs []listed, _ []string) error {
		for _, o := range objs {
			if strings.HasSuffix(o.name, lhformat.LockSuffix) && !strings.Contains(o.name, "/") {
				names = append(names, o)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []lhformat.SeenLock
	for _, o := range names {
		data, _, err := s.get(ctx, lhformat.VolumePath(volume)+"/"+lhformat.LocksDir+"/"+o.name, lhformat.MaxLockFileBytes)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if errors.Is(err, backupdelete.ErrNotFound) || errors.Is(err, backupdelete.ErrCorrupt) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read lock %s: %w", o.name, err)
		}
		lf, err := lhformat.ParseLockFile(data)
		if err != nil || lf.Name+lhformat.LockSuffix != o.name {
			continue
		}
		out = append(out, lhformat.SeenLock{LockFile: lf, Time: o.modified.Truncate(time.Second)})
	}
	return out, nil
}

func (s *Store) checkInterval() time.Duration {
	if s.opts.LockCheckInterval > 0 {
		return s.opts.LockCheckInterval
	}
	return DefaultLockCheckInterval
}

// backupRunning returns a *BackupRunningError if a backup lock (type 1)
// of the volume is live by Longhorn's expiry rule on the Store's clock
// against the object's Last-Modified. A fresh lock object that cannot be
// read counts as one. An error listing is returned as it is: whether a
// backup runs cannot be told.
func (s *Store) backupRunning(ctx context.Context, ref backupdelete.BackupRef) error {
	var names []listed
	err := s.list(ctx, lhformat.VolumePath(ref.Volume)+"/"+lhformat.LocksDir, false, func(objs []listed, _ []string) error {
		for _, o := range objs {
			if strings.HasSuffix(o.name, lhformat.LockSuffix) && !strings.Contains(o.name, "/") {
				names = append(names, o)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list locks: %w", err)
	}
	now := s.clock.Now()
	for _, o := range names {
		mod := o.modified.Truncate(time.Second)
		if lhformat.Expired(now, mod) {
			continue
		}
		running := &BackupRunningError{Backup: ref, Lock: strings.TrimSuffix(o.name, lhformat.LockSuffix), Age: now.Sub(mod)}
		data, _, err := s.get(ctx, lhformat.VolumePath(ref.Volume)+"/"+lhformat.LocksDir+"/"+o.name, lhformat.MaxLockFileBytes)
		if errors.Is(err, backupdelete.ErrNotFound) {
			continue // released
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var lf LockFile
		if err == nil {
			lf, err = lhformat.ParseLockFile(data)
		}
		if err != nil {
			running.Unreadable = err
			return running
		}
		if lf.Type == LockBackup {
			return running
		}
	}
	return nil
}
