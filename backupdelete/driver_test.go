package backupdelete_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/backupdelete/mocks"
	"github.com/caretaker-storage/caretaker/orphan"
	"go.uber.org/mock/gomock"
	clocktesting "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// rig is a Driver over a faulty in-memory store, on a fake clock, with
// every command's completion reported on done.
type rig struct {
	mem    *backupstoretest.MemStore
	faulty *backupstoretest.Faulty
	clock  *clocktesting.FakeClock
	driver *backupdelete.Driver
	done   chan error
}

func newRig(t *testing.T, opts backupdelete.DriverOptions) *rig {
	t.Helper()
	r := &rig{mem: backupstoretest.NewMemStore(), clock: clocktesting.NewFakeClock(epoch), done: make(chan error, 100)}
	r.faulty = &backupstoretest.Faulty{Store: r.mem}
	opts.Clock = r.clock
	opts.OnDone = func(_ backupdelete.BackupRef, err error) { r.done <- err }
	var err error
	r.driver, err = backupdelete.NewDriver(r.faulty, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.driver.Close)
	return r
}

// waitDone waits for one command to return (a test timeout, not timing
// logic: the command itself never waits on time).
func (r *rig) waitDone(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no command returned")
		return nil
	}
}

// reconcile runs one step and applies the result to *state as the host does.
func (r *rig) reconcile(t *testing.T, ref backupdelete.BackupRef, state *backupdelete.State, msg *string) backupdelete.StepResult {
	t.Helper()
	res, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: ref, State: *state, Message: *msg})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	*state, *msg = res.State, res.Message
	return res
}

var refB = backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-b"}

func TestDriverNormalDeletion(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	state, msg := backupdelete.StateCompleted, ""

	res := r.reconcile(t, refB, &state, &msg)
	if !res.StartCommand || state != backupdelete.StateDeleting {
		t.Fatalf("first step %+v, want Deleting with the command started", res)
	}
	if rec, ok := r.driver.Record(refB); !ok || rec.State != backupdelete.RecordRunning && rec.State != backupdelete.RecordSucceeded {
		t.Fatalf("record %+v %v, want running (or already succeeded)", rec, ok)
	}
	if err := r.waitDone(t); err != nil {
		t.Fatal(err)
	}
	res = r.reconcile(t, refB, &state, &msg)
	if !res.Finalize {
		t.Fatalf("after the command, %+v, want finalize", res)
	}
	if _, ok := r.driver.Record(refB); ok {
		t.Fatal("record kept after finalize")
	}
	if r.faulty.DeleteCalls() != 1 {
		t.Fatalf("%d delete calls, want 1", r.faulty.DeleteCalls())
	}
}

func TestDriverCommandErrorCyclesWithBackoff(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	eio := &errorString{"remove backups/backup_backup-b.cfg: input/output error", syscall.EIO}
	r.faulty.InjectDelete(backupstoretest.Fault{Err: eio}, backupstoretest.Fault{Err: eio})
	state, msg := backupdelete.StateCompleted, ""

	r.reconcile(t, refB, &state, &msg)
	r.waitDone(t)
	res := r.reconcile(t, refB, &state, &msg)
	want := "Failed to delete the backup backup-b in the backupstore, err remove backups/backup_backup-b.cfg: input/output error"
	if state != backupdelete.StateError || msg != want {
		t.Fatalf("after EIO: %q %q, want Error %q", state, msg, want)
	}
	if got := res.RequeueAt.Sub(r.clock.Now()); got != 10*time.Second {
		t.Fatalf("requeue in %v, want the 10 s backoff", got)
	}
	// Within the backoff nothing is retried and the message stays.
	r.clock.Step(5 * time.Second)
	r.reconcile(t, refB, &state, &msg)
	if state != backupdelete.StateError || msg != want || r.faulty.DeleteCalls() != 1 {
		t.Fatalf("in backoff: %q %q calls %d", state, msg, r.faulty.DeleteCalls())
	}
	// After it, Deleting again; the second failure doubles the backoff.
	r.clock.Step(5 * time.Second)
	res = r.reconcile(t, refB, &state, &msg)
	if !res.StartCommand || res.Backoff.Delay != 20*time.Second {
		t.Fatalf("retry %+v, want a command with a 20 s backoff", res)
	}
	r.waitDone(t)
	r.reconcile(t, refB, &state, &msg)
	if state != backupdelete.StateError {
		t.Fatalf("second failure: %q", state)
	}
	r.clock.Step(20 * time.Second)
	r.reconcile(t, refB, &state, &msg)
	if err := r.waitDone(t); err != nil {
		t.Fatalf("third command: %v", err)
	}
	if res := r.reconcile(t, refB, &state, &msg); !res.Finalize {
		t.Fatalf("after success %+v", res)
	}
}

type errorString struct {
	s   string
	err error
}

func (e *errorString) Error() string { return e.s }
func (e *errorString) Unwrap() error { return e.err }

func TestDriverPanicBecomesErrorRecord(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	r.faulty.InjectDelete(backupstoretest.Fault{Panic: "nil map write"})
	state, msg := backupdelete.StateCompleted, ""
	r.reconcile(t, refB, &state, &msg)
	if err := r.waitDone(t); !errors.Is(err, backupdelete.ErrPanic) {
		t.Fatalf("command error %v, want ErrPanic", err)
	}
	rec, ok := r.driver.Record(refB)
	if !ok || rec.State != backupdelete.RecordFailed || !strings.Contains(rec.Err, "nil map write") || strings.Contains(rec.Err, "\n") {
		t.Fatalf("record %+v %v, want a one-line failed record naming the panic", rec, ok)
	}
	r.reconcile(t, refB, &state, &msg)
	if state != backupdelete.StateError || !strings.Contains(msg, "panicked: nil map write") {
		t.Fatalf("%q %q", state, msg)
	}
}

func TestDriverPartialDeletionFinalizesWhenGone(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	r.faulty.InjectDelete(backupstoretest.Fault{Err: syscall.EIO, Partial: true})
	state, msg := backupdelete.StateCompleted, ""
	r.reconcile(t, refB, &state, &msg)
	r.waitDone(t)
	if res := r.reconcile(t, refB, &state, &msg); !res.Finalize {
		t.Fatalf("cfg gone after a partial deletion: %+v, want finalize", res)
	}
}

func TestDriverExistsErrorKeepsDeleting(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	r.faulty.InjectExists(syscall.ETIMEDOUT)
	res, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateDeleting})
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("err %v, want the check's ETIMEDOUT", err)
	}
	if res.State != backupdelete.StateDeleting || res.StartCommand || res.Finalize || res.RequeueAt.IsZero() {
		t.Fatalf("%+v, want stay Deleting and requeue", res)
	}
}

func TestDriverInvalidRefAndClosed(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	if _, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: backupdelete.BackupRef{Volume: "../x", Name: "b1"}}); !errors.Is(err, backupdelete.ErrInvalidRef) {
		t.Fatalf("%v, want ErrInvalidRef", err)
	}
	r.driver.Close()
	if _, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: refB}); !errors.Is(err, backupdelete.ErrClosed) {
		t.Fatalf("%v, want ErrClosed", err)
	}
}

func TestDriverBoundsConcurrency(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{MaxConcurrent: 2})
	release := make(chan struct{})
	var refs []backupdelete.BackupRef
	for _, n := range []string{"backup-1", "backup-2", "backup-3", "backup-4", "backup-5"} {
		ref := backupdelete.BackupRef{Volume: "vol-a", Name: n}
		refs = append(refs, ref)
		must(t, r.mem.Put(ref, false))
		r.faulty.InjectDelete(backupstoretest.Fault{Wait: release})
	}
	for _, ref := range refs {
		if res, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: ref, State: backupdelete.StateCompleted}); err != nil || !res.StartCommand {
			t.Fatalf("%v %+v", err, res)
		}
	}
	if got := r.driver.Running(); got != 5 {
		t.Fatalf("Running = %d, want 5 (2 running, 3 queued)", got)
	}
	// Only two calls reach the store while the first two hang.
	waitFor(t, func() bool { return r.faulty.DeleteCalls() == 2 })
	for range 50 {
		if r.faulty.DeleteCalls() > 2 {
			t.Fatalf("%d calls in flight, bound is 2", r.faulty.DeleteCalls())
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range refs {
		if err := r.waitDone(t); err != nil {
			t.Fatal(err)
		}
	}
	if r.faulty.DeleteCalls() != 5 || r.driver.Running() != 0 {
		t.Fatalf("calls %d running %d", r.faulty.DeleteCalls(), r.driver.Running())
	}
}

func TestDriverManyReconcilersStartOneCommand(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	hold := make(chan struct{})
	r.faulty.InjectDelete(backupstoretest.Fault{Wait: hold})
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.driver.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateCompleted})
			if err != nil {
				t.Error(err)
			}
			if res.StartCommand {
				mu.Lock()
				started++
				mu.Unlock()
			}
			if res.State != backupdelete.StateDeleting {
				t.Errorf("state %q, want Deleting", res.State)
			}
		}()
	}
	wg.Wait()
	close(hold)
	r.waitDone(t)
	if started != 1 || r.faulty.DeleteCalls() != 1 {
		t.Fatalf("%d starts, %d calls; want exactly one command", started, r.faulty.DeleteCalls())
	}
}

// TestDriverCrashRecovery: a driver dropped mid-deletion (its command hung)
// leaves the backup Deleting; a new driver has no record, reports seed
// 002's message, and retries after the backoff.
func TestDriverCrashRecovery(t *testing.T) {
	mem := backupstoretest.NewMemStore()
	must(t, mem.Put(refB, false, "k1"))
	faulty := &backupstoretest.Faulty{Store: mem}
	faulty.InjectDelete(backupstoretest.Fault{Wait: make(chan struct{})}) // never returns by itself
	clk := clocktesting.NewFakeClock(epoch)
	old, err := backupdelete.NewDriver(faulty, backupdelete.DriverOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := old.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateCompleted})
	if res.State != backupdelete.StateDeleting {
		t.Fatal(res)
	}
	waitFor(t, func() bool { return faulty.DeleteCalls() == 1 })
	old.Close() // the process goes away; its in-memory records with it

	done := make(chan error, 1)
	d, err := backupdelete.NewDriver(faulty, backupdelete.DriverOptions{Clock: clk, OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err = d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateDeleting})
	if err != nil || res.State != backupdelete.StateError || res.Message != backupdelete.MessageNoDeletionRecord || res.StartCommand {
		t.Fatalf("%v %+v, want Error %q", err, res, backupdelete.MessageNoDeletionRecord)
	}
	res, _ = d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: res.State, Message: res.Message})
	if !res.StartCommand || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v, want the command retried", res)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res, _ = d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: res.State}); !res.Finalize {
		t.Fatalf("%+v, want finalize", res)
	}
}

func TestDriverForgetDiscardsLateResult(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{})
	must(t, r.mem.Put(refB, false, "k1"))
	hold := make(chan struct{})
	r.faulty.InjectDelete(backupstoretest.Fault{Wait: hold, Err: syscall.EIO})
	state, msg := backupdelete.StateCompleted, ""
	r.reconcile(t, refB, &state, &msg)
	r.driver.Forget(refB)
	close(hold)
	r.waitDone(t)
	if _, ok := r.driver.Record(refB); ok {
		t.Fatal("a forgotten backup's late result came back as a record")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDriverWithGeneratedMock shows the mocks package: a Completed backup
// is never checked for presence, and its command is started exactly once.
func TestDriverWithGeneratedMock(t *testing.T) {
	ctrl := gomock.NewController(t)
	store := mocks.NewMockBackupstore(ctrl)
	done := make(chan error, 1)
	store.EXPECT().DeleteBackup(gomock.Any(), refB).Return(nil).Times(1)
	store.EXPECT().BackupExists(gomock.Any(), refB).Return(false, nil).Times(1)
	d, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if res, err := d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateCompleted}); err != nil || !res.StartCommand {
		t.Fatal(res, err)
	}
	<-done
	if res, err := d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateDeleting}); err != nil || !res.Finalize {
		t.Fatal(res, err)
	}
}

func TestDriverCommandTimeout(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{CommandTimeout: time.Minute})
	must(t, r.mem.Put(refB, false, "k1"))
	r.faulty.InjectDelete(backupstoretest.Fault{Wait: make(chan struct{})}) // a hung mount
	state, msg := backupdelete.StateCompleted, ""
	r.reconcile(t, refB, &state, &msg)
	waitFor(t, func() bool { return r.faulty.DeleteCalls() == 1 && r.clock.HasWaiters() })
	r.clock.Step(59 * time.Second)
	select {
	case err := <-r.done:
		t.Fatalf("returned before the timeout: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	r.clock.Step(time.Second)
	if err := r.waitDone(t); !errors.Is(err, backupdelete.ErrTimeout) {
		t.Fatalf("%v, want ErrTimeout", err)
	}
	r.reconcile(t, refB, &state, &msg)
	if state != backupdelete.StateError || !strings.Contains(msg, "timed out after 1m0s") {
		t.Fatalf("%q %q", state, msg)
	}
}

// TestNewDriverNeedsAStore: a Driver without a Backupstore is refused when
// it is built, with an error naming what is missing, instead of a nil
// dereference at the first Reconcile.
func TestNewDriverNeedsAStore(t *testing.T) {
	d, err := backupdelete.NewDriver(nil, backupdelete.DriverOptions{})
	if d != nil || !errors.Is(err, orphan.ErrIncomplete) || !strings.Contains(err.Error(), "Backupstore") {
		t.Fatalf("NewDriver(nil) = %v, %v; want no driver and orphan.ErrIncomplete naming the Backupstore", d, err)
	}
}
