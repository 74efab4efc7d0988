package lhformat

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// ErrLockLost: a held lock's object or file could not be rewritten for
// LockHeldFor. Past that, others may soon see the lock expire and take
// the volume (a backup that reuses a block a deletion is about to delete
// could start), so nothing more may be deleted under it. It wraps
// ErrLocked.
var ErrLockLost = fmt.Errorf("%w: the lock could not be refreshed in time, so it may have expired for others", ErrLocked)

// LockHeldFor is how long after its last successful write a lock still
// counts as held: LockExpiry less LockRefresh, which leaves a minute for
// clock skew between the holder and whatever stamps the lock's time
// (the server's Last-Modified, the file system's mtime) and for work in
// flight.
const LockHeldFor = LockExpiry - LockRefresh

// LockRetry is how soon a failed refresh is tried again.
const LockRetry = 10 * time.Second

// KeepLock keeps a held lock: it calls write every LockRefresh, and every
// LockRetry after a failed write, until stop is closed. When no write has
// succeeded for LockHeldFor after written (the last successful write), it
// calls lost with ErrLockLost and returns. Longhorn's lock.go refreshes
// and ignores failures; a deletion that goes on under a lock others may
// see expired is what this guards against.
func KeepLock(clk clock.Clock, written time.Time, stop <-chan struct{}, write func() error, lost func(error)) {
	wait := LockRefresh
	for {
		lostAt := written.Add(LockHeldFor)
		t := clk.NewTimer(max(0, min(wait, lostAt.Sub(clk.Now()))))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C():
		}
		if !clk.Now().Before(lostAt) {
			lost(ErrLockLost)
			return
		}
		if err := write(); err != nil {
			wait = LockRetry
			continue
		}
		written, wait = clk.Now(), LockRefresh
	}
}

// WithLockLost adds ErrLockLost to err when the lock was lost (cause is
// the context's cause), so that a deletion cut short by it says why.
func WithLockLost(err, cause error) error {
	if err != nil && errors.Is(cause, ErrLockLost) && !errors.Is(err, ErrLockLost) {
		return fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	return err
}
