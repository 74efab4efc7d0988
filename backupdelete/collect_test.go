package backupdelete_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	clocktesting "k8s.io/utils/clock/testing"
)

// collectingStore is a MemStore that is also a Collector: it records
// each collection and fails while fail is set.
type collectingStore struct {
	*backupstoretest.MemStore
	mu    sync.Mutex
	calls []backupdelete.BackupRef
	fail  error
}

func (c *collectingStore) CollectVolume(_ context.Context, ref backupdelete.BackupRef) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, ref)
	return c.fail
}

func (c *collectingStore) collections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

func newCollectingDriver(t *testing.T, store backupdelete.Backupstore, done chan error) *backupdelete.Driver {
	t.Helper()
	d, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{Clock: clocktesting.NewFakeClock(epoch),
		OnDone: func(_ backupdelete.BackupRef, err error) {
			if done != nil {
				done <- err
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// TestDriverCollectsAfterRestart: a Driver with no record of a Deleting
// backup that is gone (the process that deleted it died, perhaps between
// the cfg and the blocks) collects the volume before it finalizes, once
// per volume; while the collection fails, the backup stays Deleting and
// the error is returned for the host to log.
func TestDriverCollectsAfterRestart(t *testing.T) {
	store := &collectingStore{MemStore: backupstoretest.NewMemStore(), fail: errors.New("503 SlowDown")}
	d := newCollectingDriver(t, store, nil)
	ctx := context.Background()
	a1 := backupdelete.BackupRef{Target: "t", Volume: "vol-a", Name: "backup-1"}
	a2 := backupdelete.BackupRef{Target: "t", Volume: "vol-a", Name: "backup-2"}
	b1 := backupdelete.BackupRef{Target: "t", Volume: "vol-b", Name: "backup-1"}

	res, err := d.Reconcile(ctx, backupdelete.Request{Ref: a1, State: backupdelete.StateDeleting})
	if err == nil || res.Finalize || res.State != backupdelete.StateDeleting || res.RequeueAt.IsZero() {
		t.Fatalf("failed collection: %+v, %v; want Deleting, requeued, with the error", res, err)
	}
	store.mu.Lock()
	store.fail = nil
	store.mu.Unlock()
	if res, err := d.Reconcile(ctx, backupdelete.Request{Ref: a1, State: backupdelete.StateDeleting}); err != nil || !res.Finalize {
		t.Fatalf("%+v, %v: want finalized once collected", res, err)
	}
	if res, err := d.Reconcile(ctx, backupdelete.Request{Ref: a2, State: backupdelete.StateDeleting}); err != nil || !res.Finalize {
		t.Fatalf("%+v, %v", res, err)
	}
	if n := store.collections(); n != 2 {
		t.Fatalf("%d collections after vol-a's two backups, want 2 (the failed one, then one for the volume)", n)
	}
	if res, err := d.Reconcile(ctx, backupdelete.Request{Ref: b1, State: backupdelete.StateDeleting}); err != nil || !res.Finalize {
		t.Fatalf("%+v, %v", res, err)
	}
	if n := store.collections(); n != 3 {
		t.Fatalf("%d collections, want vol-b collected too", n)
	}
}

// TestDriverCollectsAfterFailedCommand: a command that failed after the
// backup went (a partial deletion) is collected before finalizing; one
// that succeeded is not.
func TestDriverCollectsAfterFailedCommand(t *testing.T) {
	mem := backupstoretest.NewMemStore()
	store := &collectingStore{MemStore: mem}
	faulty := &backupstoretest.Faulty{Store: store}
	done := make(chan error, 4)
	d := newCollectingDriver(t, faulty, done)
	ctx := context.Background()
	ok := backupdelete.BackupRef{Target: "t", Volume: "vol-a", Name: "backup-ok"}
	partial := backupdelete.BackupRef{Target: "t", Volume: "vol-a", Name: "backup-partial"}
	for _, r := range []backupdelete.BackupRef{ok, partial} {
		if err := mem.Put(r, false, "b-"+r.Name); err != nil {
			t.Fatal(err)
		}
	}

	run := func(ref backupdelete.BackupRef) backupdelete.StepResult {
		t.Helper()
		res, err := d.Reconcile(ctx, backupdelete.Request{Ref: ref, State: backupdelete.StateCompleted})
		if err != nil || !res.StartCommand {
			t.Fatalf("%+v, %v", res, err)
		}
		<-done
		res, err = d.Reconcile(ctx, backupdelete.Request{Ref: ref, State: backupdelete.StateDeleting})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(ok); !res.Finalize || store.collections() != 0 {
		t.Fatalf("%+v, %d collections: a deletion seen to succeed needs none", res, store.collections())
	}
	faulty.InjectDelete(backupstoretest.Fault{Partial: true, Err: errors.New("connection reset")})
	if res := run(partial); !res.Finalize || store.collections() != 1 {
		t.Fatalf("%+v, %d collections: want the failed deletion's volume collected, then finalized", res, store.collections())
	}
}

// TestDriverWithoutCollector: a store that is no Collector finalizes as
// before, with no collection event.
func TestDriverWithoutCollector(t *testing.T) {
	var ops []backupdelete.Op
	var mu sync.Mutex
	d, err := backupdelete.NewDriver(backupstoretest.NewMemStore(), backupdelete.DriverOptions{Clock: clocktesting.NewFakeClock(epoch),
		Hooks: backupdelete.HooksFunc(func(e backupdelete.Event) { mu.Lock(); ops = append(ops, e.Op); mu.Unlock() })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	res, err := d.Reconcile(context.Background(), backupdelete.Request{Ref: backupdelete.BackupRef{Target: "t", Volume: "vol-v", Name: "backup-b"}, State: backupdelete.StateDeleting})
	if err != nil || !res.Finalize {
		t.Fatalf("%+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, op := range ops {
		if op == backupdelete.OpCollect {
			t.Fatalf("events %v: a collection without a Collector", ops)
		}
	}
}
