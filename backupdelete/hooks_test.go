package backupdelete_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
)

// eventLog is a Hooks that keeps every event.
type eventLog struct {
	mu     sync.Mutex
	events []backupdelete.Event
}

func (l *eventLog) Observe(e backupdelete.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// take returns the events since the last take.
func (l *eventLog) take() []backupdelete.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// slowStore advances the fake clock during each call, so that the
// events' durations are exact.
type slowStore struct {
	backupdelete.Backupstore
	clock          *clocktesting.FakeClock
	delete, exists time.Duration
}

func (s slowStore) DeleteBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	err := s.Backupstore.DeleteBackup(ctx, ref) // held by a Fault's Wait until the test lets it go
	s.clock.Step(s.delete)
	return err
}

func (s slowStore) BackupExists(ctx context.Context, ref backupdelete.BackupRef) (bool, error) {
	s.clock.Step(s.exists)
	return s.Backupstore.BackupExists(ctx, ref)
}

// TestDriverHooksSeeEveryActWithItsOutcome follows a deletion that fails
// once, backs off and succeeds, then a failed presence check, an invalid
// ref and a closed Driver, and checks every event.
func TestDriverHooksSeeEveryActWithItsOutcome(t *testing.T) {
	mem := backupstoretest.NewMemStore()
	faulty := &backupstoretest.Faulty{Store: mem}
	clk := clocktesting.NewFakeClock(epoch)
	log := &eventLog{}
	done := make(chan error, 10)
	d, err := backupdelete.NewDriver(slowStore{faulty, clk, 4 * time.Second, time.Second}, backupdelete.DriverOptions{
		Clock: clk, Hooks: log, OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	must(t, mem.Put(refB, false, "k1"))
	// Each command waits for the test, so that its clock step cannot
	// fall inside the Reconcile that started it.
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	faulty.InjectDelete(backupstoretest.Fault{Err: syscall.EIO, Wait: gate1}, backupstoretest.Fault{Wait: gate2})
	state, msg := backupdelete.StateCompleted, ""
	reconcile := func() {
		t.Helper()
		res, _ := d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: state, Message: msg})
		state, msg = res.State, res.Message
	}
	wait := func() {
		t.Helper()
		select {
		case <-done: // the hooks are called before OnDone
		case <-time.After(10 * time.Second):
			t.Fatal("no command returned")
		}
	}
	expect := func(step string, want ...backupdelete.Event) {
		t.Helper()
		got := log.take()
		if len(got) != len(want) {
			t.Fatalf("%s: events %+v, want %+v", step, got, want)
		}
		for i := range want {
			if !errors.Is(got[i].Err, want[i].Err) || (want[i].Err == nil) != (got[i].Err == nil) {
				t.Errorf("%s: event %d err %v, want %v", step, i, got[i].Err, want[i].Err)
			}
			got[i].Err, want[i].Err = nil, nil
			if got[i] != want[i] {
				t.Errorf("%s: event %d\n got %+v\nwant %+v", step, i, got[i], want[i])
			}
		}
	}
	const (
		reconcileOp = backupdelete.OpReconcile
		check       = backupdelete.OpCheck
		del         = backupdelete.OpDelete
		deleting    = backupdelete.StateDeleting
	)

	reconcile()
	expect("start", backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventStarted, Ref: refB, State: deleting, Why: "start command", Attempt: 1})
	close(gate1)
	wait()
	expect("failed command", backupdelete.Event{Op: del, Outcome: backupdelete.EventFailed, Ref: refB, Attempt: 1, Duration: 4 * time.Second, Err: syscall.EIO})

	reconcile()
	expect("to Error",
		backupdelete.Event{Op: check, Outcome: backupdelete.EventOK, Ref: refB, Duration: time.Second},
		backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventErrored, Ref: refB, State: backupdelete.StateError, Why: "command failed", Attempt: 1, Duration: time.Second})

	reconcile() // 5 s after the start: 5 s of backoff left
	expect("backoff", backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventBackingOff, Ref: refB, State: backupdelete.StateError, Why: "in backoff", Attempt: 1})

	clk.Step(5 * time.Second)
	reconcile()
	expect("retry", backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventStarted, Ref: refB, State: deleting, Why: "start command", Attempt: 2})
	close(gate2)
	wait()
	expect("command", backupdelete.Event{Op: del, Outcome: backupdelete.EventOK, Ref: refB, Attempt: 2, Duration: 4 * time.Second})

	faulty.InjectExists(syscall.ETIMEDOUT)
	reconcile()
	expect("check failed",
		backupdelete.Event{Op: check, Outcome: backupdelete.EventFailed, Ref: refB, Duration: time.Second, Err: syscall.ETIMEDOUT},
		backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventWaiting, Ref: refB, State: deleting, Why: "presence unknown", Attempt: 2, Duration: time.Second})

	reconcile()
	expect("finish",
		backupdelete.Event{Op: check, Outcome: backupdelete.EventOK, Ref: refB, Duration: time.Second},
		backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventFinished, Ref: refB, State: deleting, Why: "gone from backupstore", Attempt: 2, Duration: time.Second})

	bad := backupdelete.BackupRef{Volume: "vol-a", Name: ""}
	if _, err := d.Reconcile(context.Background(), backupdelete.Request{Ref: bad}); !errors.Is(err, backupdelete.ErrInvalidRef) {
		t.Fatalf("invalid ref: %v", err)
	}
	expect("invalid ref", backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventFailed, Ref: bad, Err: backupdelete.ErrInvalidRef})

	d.Close()
	if _, err := d.Reconcile(context.Background(), backupdelete.Request{Ref: refB, State: backupdelete.StateCompleted}); !errors.Is(err, backupdelete.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	expect("closed", backupdelete.Event{Op: reconcileOp, Outcome: backupdelete.EventFailed, Ref: refB, Err: backupdelete.ErrClosed})
}

func TestDriverNilHooksFuncIsNoHooks(t *testing.T) {
	r := newRig(t, backupdelete.DriverOptions{Hooks: backupdelete.HooksFunc(nil)})
	must(t, r.mem.Put(refB, false, "k1"))
	state, msg := backupdelete.StateCompleted, ""
	r.reconcile(t, refB, &state, &msg)
	if err := r.waitDone(t); err != nil {
		t.Fatal(err)
	}
}
