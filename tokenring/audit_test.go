package tokenring

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestCleanupDriverResumedNodeHeldWhenItsCleanerFails: the state of a
// driver that stopped says n3 runs, and ScyllaDB does go on cleaning
// there. The new driver cannot reach n3 at all (CleanerFor fails: its API
// is unreachable), so nothing stopped n3's cleanup: n3 must go on holding
// the nodes that share its ranges, also once it is given up, and those are
// reported never started. Counting the failed attempts as the end of
// n3's cleanup starts them beside it.
func TestCleanupDriverResumedNodeHeldWhenItsCleanerFails(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.cleaning["n3"] = true // the stopped driver's cleanup, still going
	store := &MemCleanupStateStore{}
	_ = store.Save(context.Background(), CleanupState{Done: []string{"n1", "n4", "n7"}, Running: []string{"n3"}})
	cleanerFor := func(ep string) (Cleaner, error) {
		if ep == "n3" {
			return nil, errors.New("dial tcp 10.0.0.3:10000: connect: connection refused")
		}
		return f.cleanerFor(ep)
	}
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: cleanerFor,
		Store: store, Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute}, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	f.check(t)
	if err == nil || rep.Failed["n3"] == nil || rep.Attempts["n3"] != 2 {
		t.Fatalf("report %+v, %v: want n3 given up after 2 attempts", rep, err)
	}
	for ep, e := range rep.Failed {
		if ep != "n3" && !errors.Is(e, ErrCleanupNotProven) {
			t.Errorf("%s failed with %v, want never started (held by n3)", ep, e)
		}
	}
	if len(rep.Failed) < 2 {
		t.Errorf("failed %v: the nodes sharing n3's ranges were started", rep.Failed)
	}
	st, _ := store.Load(context.Background())
	if !slices.Contains(st.Running, "n3") {
		t.Errorf("state %+v: n3, never stopped, must stay recorded as running", st)
	}
}

// TestCleanupDriverUnstoppedNodeHeldWhenItsCleanerFails: n4's connection
// drops mid-cleanup while ScyllaDB goes on cleaning, and the stop sent
// after the failure fails too, so n4 is held as running. Its retry cannot
// reach it at all (CleanerFor fails): nothing stopped it, and it must go
// on holding its neighbours.
func TestCleanupDriverUnstoppedNodeHeldWhenItsCleanerFails(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	f.lost["n4"] = 1
	f.stopFail["n4"] = 1
	var mu sync.Mutex
	calls := 0
	cleanerFor := func(ep string) (Cleaner, error) {
		mu.Lock()
		defer mu.Unlock()
		if ep == "n4" {
			calls++
			if calls == 2 { // the retry after the lost connection
				return nil, errors.New("dial tcp 10.0.0.4:10000: connect: connection refused")
			}
		}
		return f.cleanerFor(ep)
	}
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: cleanerFor,
		Store: &MemCleanupStateStore{}, Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if !slices.Equal(rep.Done, all9()) || rep.Attempts["n4"] != 3 {
		t.Fatalf("report %+v, want every node done and 3 attempts at n4", rep)
	}
}
