package fsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
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
	DefaultLockCheckInterval = 10 * time.Second
)

// LockFile is the content of locks/lock-<16 hex>.lck.
type LockFile = lhformat.LockFile

// maxLockFileBytes bounds a lock file read; real ones are ~60 bytes.
const maxLockFileBytes = lhformat.MaxLockFileBytes

// ParseLockFile parses a lock file. Bad JSON, an empty or path-like name,
// or an unknown type is an error wrapping backupdelete.ErrCorrupt.
func ParseLockFile(data []byte) (LockFile, error) {
	if len(data) > maxLockFileBytes {
		return LockFile{}, corrupt("lock file", fmt.Errorf("%d bytes, more than %d", len(data), maxLockFileBytes))
	}
	var l LockFile
	if err := json.Unmarshal(data, &l); err != nil {
		return LockFile{}, corrupt("lock file", err)
	}
	if l.Name == "" || strings.ContainsAny(l.Name, "/\\\x00") || l.Name == "." || l.Name == ".." {
		return LockFile{}, corrupt("lock file", fmt.Errorf("invalid name %q", l.Name))
	}
	if l.Type != LockBackup && l.Type != LockDeletion {
		return LockFile{}, corrupt("lock file", fmt.Errorf("unknown type %d", l.Type))
	}
	return l, nil
}

// LockConflictError says which lock blocked a taker. It wraps
// backupdelete.ErrLocked.
type LockConflictError struct {
	Volume  string
	Type    LockType
	Blocker LockFile
	Waited  time.Duration
}

func (e *LockConflictError) Error() string {
	return fmt.Sprintf("failed to acquire lock type %d on backupstore volume %s after %v: lock %s type %d (acquired %v) is held, please try again later",
		e.Type, e.Volume, e.Waited, e.Blocker.Name, e.Blocker.Type, e.Blocker.Acquired)
}

func (e *LockConflictError) Unwrap() error { return backupdelete.ErrLocked }

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
// succeeded for LockHeldFor, its Context ends with ErrLockLost.
type Lock struct {
	vol  *os.Root
	file LockFile
	// held ends when the lock is lost, released, or its taker's context
	// ends; written is the last successful write, by the Store's clock.
	held    context.Context
	lose    context.CancelCauseFunc
	written time.Time
	stop    chan struct{}
	done    chan struct{}
	// abandon, if not nil, stops the refresh early (the operation the
	// lock is for was cancelled); the file stays until Release.
	abandon <-chan struct{}
	once    sync.Once
	err     error
	// closeRoot: the Lock opened vol itself (Store.Lock) and closes it.
	closeRoot bool
}

// Name returns the lock's name (lock-<16 hex>).
func (l *Lock) Name() string { return l.file.Name }

// Context returns a context that ends when the lock is released or lost
// (context.Cause is then ErrLockLost), or when the context it was taken
// with ends. Work that must not outlive the lock runs under it.
func (l *Lock) Context() context.Context { return l.held }

// Release stops the refresh and removes the lock file. It is idempotent.
func (l *Lock) Release() error {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		// Not in refresh: a taker's context that ended must reach the
		// lock's Context as its own error (a deadline stays a deadline).
		l.lose(nil)
		if err := l.vol.Remove(lockPath(l.file.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.err = err
		}
		// As Longhorn's removeLock: locks/ goes when it is empty (see
		// tidy.go for the race with a taker, which is Longhorn's too).
		_ = rmdirEmpty(l.vol, locksDir)
		if l.closeRoot {
			l.vol.Close()
		}
	})
	return l.err
}

func lockPath(name string) string { return locksDir + "/" + name + lockSuffix }

// lockSeen is a lock found in the directory, with its file time.
type lockSeen struct {
	LockFile
	mtime time.Time
}

// expired is Longhorn's FileLock.isExpired (longhorn/backupstore
// lock.go): a lock is dead when its file time is more than LockExpiry
// before now. Exactly LockExpiry old, it is still live.
func expired(now, mtime time.Time) bool { return lhformat.Expired(now, mtime) }

// ranksBefore is Longhorn's compareLocks(a, b) < 0: acquired locks first,
// then older file times, then smaller names.
func ranksBefore(a, b lockSeen) bool {
	return lhformat.RanksBefore(a.seen(), b.seen())
}

func (l lockSeen) seen() lhformat.SeenLock {
	return lhformat.SeenLock{LockFile: l.LockFile, Time: l.mtime}
}

// acquire takes a lock of type t on the volume directory vol, following
// Longhorn's protocol: write the lock file (not acquired), wait
// LockSettle, list the locks; if a lock of another type that has not
// expired ranks before ours, we are blocked. Blocked, we look again every
// LockCheckInterval until LockWait has passed (Longhorn fails at once),
// then remove our file and fail with a LockConflictError. Otherwise we
// rewrite our file as acquired and refresh it until Release, or until
// abandon is closed (nil: until Release).
func (s *Store) acquire(ctx context.Context, vol *os.Root, volume string, t LockType, abandon <-chan struct{}) (*Lock, error) {
	name, err := newLockName()
	if err != nil {
		return nil, err
	}
	me := LockFile{Name: name, Type: t}
	if err := s.writeLockFile(vol, me); err != nil {
		return nil, err
	}
	start := s.clock.Now()
	written := start
	fail := func(err error) (*Lock, error) {
		_ = vol.Remove(lockPath(name))
		_ = rmdirEmpty(vol, locksDir)
		return nil, err
	}
	if err := s.wait(ctx, LockSettle); err != nil {
		return fail(err)
	}
	for {
		blocker, err := s.blockingLock(vol, me)
		if err != nil {
			return fail(err)
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
			if err := s.writeLock(vol, me); err != nil {
				return fail(err)
			}
			written = s.clock.Now()
			if err := s.wait(ctx, LockSettle); err != nil {
				return fail(err)
			}
		}
	}
	me.Acquired = true
	if err := s.writeLock(vol, me); err != nil {
		return fail(err)
	}
	l := &Lock{vol: vol, file: me, stop: make(chan struct{}), done: make(chan struct{}), abandon: abandon, written: s.clock.Now()}
	l.held, l.lose = context.WithCancelCause(ctx)
	go s.refresh(l)
	return l, nil
}

// blockingLock returns the first lock that blocks me, or nil.
func (s *Store) blockingLock(vol *os.Root, me LockFile) (*lockSeen, error) {
	locks, err := s.listLocks(vol)
	if err != nil {
		return nil, err
	}
	var mine *lockSeen
	for i := range locks {
		if locks[i].Name == me.Name {
			mine = &locks[i]
		}
	}
	if mine == nil {
		// Our file vanished (someone cleaned the directory): we cannot
		// prove our rank, so we do not proceed.
		return nil, fmt.Errorf("fsstore: our lock file %s disappeared", me.Name)
	}
	now := s.clock.Now()
	var blocker *lockSeen
	for i := range locks {
		l := &locks[i]
		if l.Name == me.Name || l.Type == me.Type || expired(now, l.mtime) {
			continue
		}
		if ranksBefore(*l, *mine) && (blocker == nil || ranksBefore(*l, *blocker)) {
			blocker = l
		}
	}
	return blocker, nil
}

// listLocks reads every lock file of the volume. A file that cannot be
// read or parsed is skipped, as Longhorn does; a file that vanishes
// between listing and reading was released.
func (s *Store) listLocks(vol *os.Root) ([]lockSeen, error) {
	entries, err := readDirNames(vol, locksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []lockSeen
	for _, n := range entries {
		if !strings.HasSuffix(n, lockSuffix) {
			continue
		}
		p := locksDir + "/" + n
		data, info, err := readBounded(vol, p, maxLockFileBytes)
		if err != nil {
			continue
		}
		lf, err := ParseLockFile(data)
		if err != nil || lf.Name+lockSuffix != n {
			continue
		}
		out = append(out, lockSeen{LockFile: lf, mtime: info.ModTime()})
	}
	return out, nil
}

// refresh keeps the lock file (lhformat.KeepLock): rewritten every
// LockRefresh, every LockRetry after a failure; when none has succeeded
// for LockHeldFor, the lock's Context ends with ErrLockLost. It stops at
// Release, or when the lock's operation is abandoned.
func (s *Store) refresh(l *Lock) {
	defer close(l.done)
	stop := make(chan struct{})
	go func() {
		select {
		case <-l.stop:
		case <-l.abandon:
		}
		close(stop)
	}()
	lhformat.KeepLock(s.clock, l.written, stop, func() error { return s.writeLock(l.vol, l.file) }, l.lose)
}

// writeLockFile creates locks/ (with Longhorn's mode) and writes a new
// lock file in it. Another holder's Release removes locks/ when it leaves
// it empty, and may do so between our mkdir and our write: then the write
// finds no directory, and we make it again (a few times).
func (s *Store) writeLockFile(vol *os.Root, l LockFile) error {
	var err error
	for range 3 {
		if err = vol.MkdirAll(locksDir, dirMode); err != nil {
			return err
		}
		if err = s.writeLock(vol, l); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

func (s *Store) writeLock(vol *os.Root, l LockFile) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return writeAtomic(vol, lockPath(l.Name), data, s.clock)
}

// wait waits d on the store's clock, or until ctx ends.
func (s *Store) wait(ctx context.Context, d time.Duration) error {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

func (s *Store) checkInterval() time.Duration {
	if s.opts.LockCheckInterval > 0 {
		return s.opts.LockCheckInterval
	}
	return DefaultLockCheckInterval
}

// newLockName returns "lock-" and 16 lowercase hex digits, as Longhorn's
// util.GenerateName("lock") does.
func newLockName() (string, error) { return lhformat.NewLockName() }

// BackupRunningError is why DeleteCompletedBackup left a backup whose cfg
// has an empty CreatedTime: a backup lock of its volume is live, so a
// backup of the volume (perhaps this one) may still be writing. Longhorn
// locks a volume, not a backup, so the lock cannot say which backup it
// is for. It wraps backupdelete.ErrInProgress.
type BackupRunningError struct {
	Backup backupdelete.BackupRef
	// Lock is the live lock file's name (lock-<16 hex>).
	Lock string
	// Age is how long before the check the lock file was last written.
	Age time.Duration
	// Unreadable, if not nil, is why the lock file could not be read: a
	// fresh lock file that cannot be read might be a backup lock, so it
	// holds the deletion back too.
	Unreadable error
}

// Error says which lock holds the backup back, and how old it is.
func (e *BackupRunningError) Error() string {
	if e.Unreadable != nil {
		return fmt.Sprintf("backup %s has an empty CreatedTime and lock file %s of its volume (%s) cannot be read (%v): it may be a live backup lock, so a backup may still be writing",
			e.Backup, e.Lock, e.age(), e.Unreadable)
	}
	return fmt.Sprintf("backup %s has an empty CreatedTime and backup lock %s of its volume is live (%s; it expires %v after its last refresh): a backup may still be writing",
		e.Backup, e.Lock, e.age(), LockExpiry)
}

func (e *BackupRunningError) age() string {
	if e.Age < 0 {
		return fmt.Sprintf("its file time is %v ahead of our clock", -e.Age)
	}
	return fmt.Sprintf("written %v ago", e.Age)
}

// Unwrap returns backupdelete.ErrInProgress.
func (e *BackupRunningError) Unwrap() error { return backupdelete.ErrInProgress }

// backupRunning returns a *BackupRunningError if a backup lock (type 1)
// of the volume is live: not expired by Longhorn's rule (see expired),
// judged on the store's clock against the lock file's time. A fresh lock
// file that cannot be read counts as one (Longhorn's lock takers skip
// it, but a purge of a backup that may be in progress must not). Our own
// deletion lock, and every other deletion lock, is type 2 and does not
// count. An error listing the directory or looking at a file is
// returned as it is: whether a backup runs cannot be told.
func (s *Store) backupRunning(vol *os.Root, ref backupdelete.BackupRef) error {
	names, err := readDirNames(vol, locksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", locksDir, err)
	}
	now := s.clock.Now()
	for _, n := range names {
		if !strings.HasSuffix(n, lockSuffix) {
			continue // a temporary file, never a lock until renamed
		}
		p := locksDir + "/" + n
		info, err := vol.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // released
		}
		if err != nil {
			return fmt.Errorf("look at %s: %w", p, err)
		}
		if expired(now, info.ModTime()) {
			continue
		}
		running := &BackupRunningError{Backup: ref, Lock: strings.TrimSuffix(n, lockSuffix), Age: now.Sub(info.ModTime())}
		data, _, err := readBounded(vol, p, maxLockFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var lf LockFile
		if err == nil {
			lf, err = ParseLockFile(data)
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
