package tokenring

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestCleanupDriverPreconditionRefuses: the cluster starts scaling after
// the campaign began; the host's Precondition says so. No node is sent a
// cleanup request while it refuses, every attempt is asked, and the nodes
// are given up with ErrPreconditionUnmet.
func TestCleanupDriverPreconditionRefuses(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	var mu sync.Mutex
	asked := map[string]int{}
	scaling := errors.New("StatefulSetControllerProgressing is True: the cluster is scaling")
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor,
		Store: &MemCleanupStateStore{}, Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute}, MaxAttempts: 2,
		Precondition: func(ctx context.Context, ep string) error {
			mu.Lock()
			defer mu.Unlock()
			asked[ep]++
			return scaling
		}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	if !errors.Is(err, ErrPreconditionUnmet) || !errors.Is(err, scaling) {
		t.Fatalf("Run: %v, want ErrPreconditionUnmet wrapping the host's reason", err)
	}
	f.check(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxAtOnce != 0 || len(f.cleaned) != 0 || len(f.stops) != 0 {
		t.Fatalf("requests were sent: %d cleaning at once, cleaned %v, stops %v", f.maxAtOnce, f.cleaned, f.stops)
	}
	for _, ep := range all9() {
		if asked[ep] != 2 || !errors.Is(rep.Failed[ep], ErrPreconditionUnmet) {
			t.Errorf("%s: asked %d times, failed with %v; want 2 and ErrPreconditionUnmet", ep, asked[ep], rep.Failed[ep])
		}
	}
}

// TestCleanupDriverPreconditionPasses: a Precondition that refuses once
// (the rollout ends) delays n4's cleanup by one backoff; the campaign
// completes.
func TestCleanupDriverPreconditionPasses(t *testing.T) {
	topo := racked9()
	f := newFakeCluster(topo)
	var mu sync.Mutex
	refuse := 1
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor,
		Store: &MemCleanupStateStore{}, Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute},
		Precondition: func(ctx context.Context, ep string) error {
			mu.Lock()
			defer mu.Unlock()
			if ep == "n4" && refuse > 0 {
				refuse--
				return errors.New("Degraded is True")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDriver(t, d, fc)
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if !slices.Equal(rep.Done, all9()) || rep.Attempts["n4"] != 2 || f.cleaned["n4"] != 1 {
		t.Fatalf("report %+v, n4 cleaned %d times", rep, f.cleaned["n4"])
	}
}

// TestCleanupDriverPreconditionStopsResumedNode: n3 is recorded running
// by a stopped driver and still cleaning; the Precondition now refuses.
// The driver stops n3's cleanup rather than leave it running through a
// topology change; while the stop fails, n3 holds its neighbours.
func TestCleanupDriverPreconditionStopsResumedNode(t *testing.T) {
	for _, stopFails := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "stop fails"}[stopFails], func(t *testing.T) {
			topo := racked9()
			f := newFakeCluster(topo)
			f.cleaning["n3"] = true
			if stopFails {
				f.stopFail["n3"] = 100
			}
			store := &MemCleanupStateStore{}
			_ = store.Save(context.Background(), CleanupState{Done: []string{"n1", "n4", "n7"}, Running: []string{"n3"}})
			fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			d, err := NewCleanupDriver(CleanupDriverOptions{Scheduler: mustScheduler(t, topo, ScheduleLimits{}), CleanerFor: f.cleanerFor,
				Store: store, Clock: fc, Backoff: CleanupBackoff{Initial: time.Minute}, MaxAttempts: 1,
				Precondition: func(ctx context.Context, ep string) error {
					if ep == "n3" {
						return errors.New("a node is joining")
					}
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			rep, _ := runDriver(t, d, fc)
			f.check(t)
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.stops["n3"] == 0 {
				t.Fatal("n3's running cleanup was never stopped")
			}
			if f.cleaning["n3"] != stopFails || f.cleaned["n3"] != 0 {
				t.Fatalf("n3 cleaning %v, cleaned %d", f.cleaning["n3"], f.cleaned["n3"])
			}
			st, _ := store.Load(context.Background())
			if held := slices.Contains(st.Running, "n3"); held != stopFails {
				t.Errorf("state %+v: n3 recorded running %v, want %v", st, held, stopFails)
			}
			if !errors.Is(rep.Failed["n3"], ErrPreconditionUnmet) {
				t.Errorf("n3 failed with %v", rep.Failed["n3"])
			}
		})
	}
}

// ClusterPreconditions is Decide's gate as an error: nil only when every
// precondition holds.
func TestClusterPreconditions(t *testing.T) {
	gen := int64(3)
	ok := ClusterStatus{Generation: 3, ObservedGeneration: &gen, Conditions: []metav1.Condition{
		{Type: AvailableCondition, Status: metav1.ConditionTrue},
		{Type: DegradedCondition, Status: metav1.ConditionFalse},
		{Type: StatefulSetControllerProgressingCondition, Status: metav1.ConditionFalse},
	}}
	if err := ClusterPreconditions(ok); err != nil {
		t.Fatalf("all met: %v", err)
	}
	degraded := ok
	degraded.Conditions = slices.Clone(ok.Conditions)
	degraded.Conditions[1].Status = metav1.ConditionTrue
	stale := ok
	stale.Generation = 4
	for name, s := range map[string]ClusterStatus{"degraded": degraded, "stale generation": stale, "no status": {Generation: 1}} {
		if err := ClusterPreconditions(s); !errors.Is(err, ErrPreconditionUnmet) {
			t.Errorf("%s: %v, want ErrPreconditionUnmet", name, err)
		}
		if d := Decide(Member{Name: "m", Annotations: map[string]string{
			CurrentTokenRingHashAnnotation:       HashTokens([]string{"1"}),
			LastCleanedUpTokenRingHashAnnotation: NeverCleanedUp,
		}}, s, DecideOptions{}); d.Action == ActionStartCleanup {
			t.Errorf("%s: Decide starts a cleanup that ClusterPreconditions refuses", name)
		}
	}
}
