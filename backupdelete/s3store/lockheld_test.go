package s3store

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/s3test"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestDeletionStopsWhenTheLockIsLost: the deletion of backup-1 stalls in
// its scan (a slow server) while every rewrite of its lock object fails.
// Past LockHeldFor without a successful refresh, others may soon see the
// lock expire and start a backup that reuses block a, so the deletion
// must not go on to delete it: it ends with ErrLockLost, block a still
// there. Without the watchdog the stalled request is released after the
// lock expired for others, and block a is deleted with no lock held.
func TestDeletionStopsWhenTheLockIsLost(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, true, Options{Clock: fc, RetryInitial: time.Millisecond, MaxAttempts: 2})
	threeBackups(t, e.store)

	var failLocks atomic.Bool
	stalled := make(chan struct{}, 1)
	released := make(chan struct{})
	e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		switch {
		case op == "PutObject" && strings.Contains(r.URL.Path, "/locks/") && failLocks.Load():
			return s3test.SlowDown()
		case op == "GetObject" && strings.HasSuffix(r.URL.Path, "backup_backup-2.cfg"):
			select {
			case stalled <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
			case <-released:
			}
		}
		return nil
	})

	done := make(chan error, 1)
	go func() {
		_, err := e.store.DeleteBackupReport(context.Background(), ref("backup-1"))
		done <- err
	}()
	// Let the lock be taken (its settle wait is on the fake clock) and the
	// scan reach backup-2's cfg.
	deadline := time.Now().Add(30 * time.Second)
	for len(stalled) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deletion never reached its scan")
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		}
		time.Sleep(time.Millisecond)
	}
	failLocks.Store(true)
	start := fc.Now()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the deletion did not end")
		}
		if fc.Since(start) > LockExpiry+10*time.Second {
			// Others see the lock expired by now: release the stalled
			// request, as a slow server eventually answers.
			select {
			case <-released:
			default:
				close(released)
			}
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, ErrLockLost) || !errors.Is(err, backupdelete.ErrLocked) {
		t.Fatalf("deletion: %v, want ErrLockLost", err)
	}
	if lost := fc.Since(start); lost > LockHeldFor+LockRefresh {
		t.Fatalf("the deletion ended %v after the refreshes began failing, want about LockHeldFor (%v)", lost, LockHeldFor)
	}
	if blocks := e.blocks(t, "vol-a"); !blocks[ckA] || !blocks[ckS] || !blocks[ckB] || !blocks[ckC] {
		t.Fatalf("blocks after a deletion that lost its lock: %v, want all four", blocks)
	}
}
