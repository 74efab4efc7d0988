package lhstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"k8s.io/utils/clock"
)

// This file is Longhorn's lock protocol (longhorn/backupstore lock.go)
// over a LockStorage: one implementation for lock files (fsstore) and
// lock objects (s3store).

// LockStorage is where one volume's locks live: locks/<name>.lck in its
// directory.
type LockStorage interface {
	// WriteLock writes (creates or rewrites) l's lock, atomically: a
	// reader sees the old content or the new, never a part.
	WriteLock(ctx context.Context, l lhformat.LockFile) error
	// RemoveLock removes the lock named name; gone is success. It is
	// called at a failed attempt and at Release with the taker's
	// context, which may have ended: a store that needs a live context
	// to remove makes its own.
	RemoveLock(ctx context.Context, name string) error
	// LockEntries lists the locks: the names of locks/*.lck without
	// the suffix, each with its time (a file's modification time, an
	// object's Last-Modified cut to the second: what Longhorn's
	// FileTime reads). A lock that vanishes meanwhile is left out.
	LockEntries(ctx context.Context) ([]LockEntry, error)
	// ReadLock reads the named lock, at most lhformat.MaxLockFileBytes.
	// A lock that is gone is an error wrapping backupdelete.ErrNotFound;
	// one that is not a lock file (a FIFO, over the bound) wraps
	// backupdelete.ErrCorrupt.
	ReadLock(ctx context.Context, name string) ([]byte, error)
}

// LockEntry is a lock found in the volume's locks, with its time.
type LockEntry struct {
	Name string
	Time time.Time
}

// LockOptions tune Acquire.
type LockOptions struct {
	// Clock times the protocol; nil is not allowed (the stores pass
	// their own).
	Clock clock.Clock
	// Wait is how long a taker waits for a conflicting lock; zero looks
	// once, as Longhorn does.
	Wait time.Duration
	// CheckInterval is how often a waiting taker looks again; zero is
	// DefaultLockCheckInterval.
	CheckInterval time.Duration
	// Abandon, if not nil, stops the refresh when closed (the operation
	// the lock is for was cancelled); the lock stays until Release.
	Abandon <-chan struct{}
	// AfterRelease, if not nil, runs once at the end of Release.
	AfterRelease func()
}

// Lock is a held backupstore lock. It is refreshed every LockRefresh
// until Release (or until the operation it is for is abandoned), every
// LockRetry after a failed rewrite; when none has succeeded for
// LockHeldFor, its Context ends with cause ErrLockLost.
type Lock struct {
	st   LockStorage
	file lhformat.LockFile
	ctx  context.Context // the taker's, for the refreshes and Release
	// held ends when the lock is lost, released, or its taker's context
	// ends; written is the last successful write, by the clock.
	held    context.Context
	lose    context.CancelCauseFunc
	clk     clock.Clock
	written time.Time
	stop    chan struct{}
	done    chan struct{}
	abandon <-chan struct{}
	after   func()
	once    sync.Once
	err     error
}

// Name returns the lock's name (lock-<16 hex>).
func (l *Lock) Name() string { return l.file.Name }

// Context returns a context that ends when the lock is released or lost
// (context.Cause is then ErrLockLost), or when the context it was taken
// with ends. Work that must not outlive the lock runs under it.
func (l *Lock) Context() context.Context { return l.held }

// Release stops the refresh and removes the lock. It is idempotent.
func (l *Lock) Release() error {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		// Not in refresh: a taker's context that ended must reach the
		// lock's Context as its own error (a deadline stays a deadline).
		l.lose(nil)
		l.err = l.st.RemoveLock(l.ctx, l.file.Name)
		if l.after != nil {
			l.after()
		}
	})
	return l.err
}

// Acquire takes a lock of type t on volume, following Longhorn's
// FileLock.Lock: write our lock (not acquired), wait LockSettle, list
// the locks; a lock of another type that has not expired and ranks
// before ours blocks (lhformat.Blocker). Blocked, it looks again every
// CheckInterval until Wait has passed (Longhorn fails at once),
// rewriting ours every LockRefresh meanwhile so that it never looks
// expired to others while we still count its rank; then it removes ours
// and fails with a *LockConflictError. Otherwise it rewrites ours as
// acquired and refreshes it until Release. A taker whose own lock is
// missing from the listing cannot prove its rank and fails.
func Acquire(ctx context.Context, st LockStorage, o LockOptions, volume string, t lhformat.LockType) (*Lock, error) {
	name, err := lhformat.NewLockName()
	if err != nil {
		return nil, err
	}
	me := lhformat.LockFile{Name: name, Type: t}
	if err := st.WriteLock(ctx, me); err != nil {
		return nil, err
	}
	interval := o.CheckInterval
	if interval <= 0 {
		interval = DefaultLockCheckInterval
	}
	start := o.Clock.Now()
	written := start
	fail := func(err error) (*Lock, error) {
		_ = st.RemoveLock(ctx, name)
		return nil, err
	}
	if err := wait(ctx, o.Clock, lhformat.LockSettle); err != nil {
		return fail(err)
	}
	for {
		locks, err := ListLocks(ctx, st)
		if err != nil {
			return fail(err)
		}
		blocker, ok := lhformat.Blocker(locks, me, o.Clock.Now())
		if !ok {
			// Someone removed our lock, or the store's listing lags its
			// writes.
			return fail(fmt.Errorf("our lock %s is not in the listing of the volume's locks: its rank cannot be proven", name))
		}
		if blocker == nil {
			break
		}
		waited := o.Clock.Since(start)
		if waited+interval > o.Wait {
			return fail(&LockConflictError{Volume: volume, Type: t, Blocker: blocker.LockFile, Waited: waited})
		}
		if err := wait(ctx, o.Clock, interval); err != nil {
			return fail(err)
		}
		if o.Clock.Since(written) >= lhformat.LockRefresh {
			if err := st.WriteLock(ctx, me); err != nil {
				return fail(err)
			}
			written = o.Clock.Now()
			if err := wait(ctx, o.Clock, lhformat.LockSettle); err != nil {
				return fail(err)
			}
		}
	}
	me.Acquired = true
	if err := st.WriteLock(ctx, me); err != nil {
		return fail(err)
	}
	l := &Lock{st: st, file: me, ctx: ctx, clk: o.Clock, written: o.Clock.Now(),
		stop: make(chan struct{}), done: make(chan struct{}), abandon: o.Abandon, after: o.AfterRelease}
	l.held, l.lose = context.WithCancelCause(ctx)
	go l.refresh()
	return l, nil
}

// refresh keeps the lock (lhformat.KeepLock): rewritten every
// LockRefresh, every LockRetry after a failure, each rewrite bounded by
// LockRetry; when none has succeeded for LockHeldFor, the lock's Context
// ends with ErrLockLost. It stops at Release, or when the lock's
// operation is abandoned.
func (l *Lock) refresh() {
	defer close(l.done)
	stop := make(chan struct{})
	go func() {
		select {
		case <-l.stop:
		case <-l.abandon:
		}
		close(stop)
	}()
	lhformat.KeepLock(l.clk, l.written, stop, func() error {
		rctx, cancel := context.WithTimeout(l.ctx, lhformat.LockRetry)
		defer cancel()
		return l.st.WriteLock(rctx, l.file)
	}, l.lose)
}

// ListLocks reads every lock of the volume. A lock that cannot be parsed
// (or is not a lock file) is skipped, as Longhorn does; one that vanished
// was released. One that cannot be read otherwise (an I/O error, a 503)
// fails the listing, a departure for safety: Longhorn's
// getLocksForVolume (longhorn/backupstore lock.go) skips every lock it
// cannot load, but a live lock skipped because the server hiccuped would
// let two exclusive takers proceed.
func ListLocks(ctx context.Context, st LockStorage) ([]lhformat.SeenLock, error) {
	entries, err := st.LockEntries(ctx)
	if err != nil {
		return nil, err
	}
	var out []lhformat.SeenLock
	for _, e := range entries {
		data, err := st.ReadLock(ctx, e.Name)
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if errors.Is(err, backupdelete.ErrNotFound) || errors.Is(err, backupdelete.ErrCorrupt) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read lock %s: %w", e.Name, err)
		}
		lf, err := lhformat.ParseLockFile(data)
		if err != nil || lf.Name != e.Name {
			continue
		}
		out = append(out, lhformat.SeenLock{LockFile: lf, Time: e.Time})
	}
	return out, nil
}

// BackupRunning returns a *BackupRunningError if a backup lock (type 1)
// of ref's volume is live: not expired by Longhorn's rule
// (lhformat.Expired) on clk against the lock's time. A fresh lock that
// cannot be read counts as one (Longhorn's lock takers skip it, but a
// purge of a backup that may be in progress must not). Deletion locks,
// ours among them, are type 2 and do not count. An error listing is
// returned as it is: whether a backup runs cannot be told.
func BackupRunning(ctx context.Context, st LockStorage, clk clock.Clock, ref backupdelete.BackupRef) error {
	entries, err := st.LockEntries(ctx)
	if err != nil {
		return fmt.Errorf("list locks: %w", err)
	}
	now := clk.Now()
	for _, e := range entries {
		if lhformat.Expired(now, e.Time) {
			continue
		}
		running := &BackupRunningError{Backup: ref, Lock: e.Name, Age: now.Sub(e.Time)}
		data, err := st.ReadLock(ctx, e.Name)
		if errors.Is(err, backupdelete.ErrNotFound) {
			continue // released
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var lf lhformat.LockFile
		if err == nil {
			lf, err = lhformat.ParseLockFile(data)
		}
		if err != nil {
			running.Unreadable = err
			return running
		}
		if lf.Type == lhformat.LockBackup {
			return running
		}
	}
	return nil
}

// wait waits d on clk, or until ctx ends.
func wait(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
