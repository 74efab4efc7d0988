package orphan_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// eventLog is a Hooks that keeps every event.
type eventLog struct {
	mu     sync.Mutex
	events []orphan.Event
}

func (l *eventLog) Observe(e orphan.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []orphan.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]orphan.Event(nil), l.events...)
}

// one returns the only event of op about the named record.
func (l *eventLog) one(t *testing.T, op orphan.Op, name string) orphan.Event {
	t.Helper()
	var found []orphan.Event
	for _, e := range l.all() {
		if e.Op == op && e.Name == name {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s events for %q, want 1: %+v", len(found), op, name, l.all())
	}
	return found[0]
}

// steppingInventory advances the fake clock by took during each scan.
type steppingInventory struct {
	clock *clocktesting.FakeClock
	took  time.Duration
	mu    sync.Mutex
	err   error
}

func (i *steppingInventory) Scan(context.Context) (orphan.Snapshot, error) {
	i.clock.Step(i.took)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.err != nil {
		return orphan.Snapshot{}, i.err
	}
	return snapshotOf(replicaItem("n1", "disk-1", "pvc-a-0123abcd")), nil
}

func TestMonitorHooksSeeEveryScanTimedByItsClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(testEpoch)
	inv := &steppingInventory{clock: clk, took: 2 * time.Second}
	log := &eventLog{}
	scans := make(chan orphan.Observation, 4)
	mon, err := orphan.NewMonitor(inv, orphan.MonitorOptions{Clock: clk, Hooks: log,
		OnScan: func(o orphan.Observation) { scans <- o }})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Stop)
	<-scans // the hooks are called before OnScan
	want := orphan.Event{Op: orphan.OpScan, Outcome: orphan.EventOK, Duration: 2 * time.Second}
	if got := log.all(); len(got) != 1 || got[0] != want {
		t.Fatalf("after the first scan: %+v, want [%+v]", got, want)
	}

	eio := errors.New("disk-1: EIO")
	inv.mu.Lock()
	inv.err, inv.took = eio, 5*time.Second
	inv.mu.Unlock()
	mon.Rescan()
	select {
	case <-scans:
	case <-time.After(10 * time.Second):
		t.Fatal("no rescan")
	}
	want = orphan.Event{Op: orphan.OpScan, Outcome: orphan.EventFailed, Duration: 5 * time.Second, Err: eio}
	if got := log.all(); len(got) != 2 || got[1] != want {
		t.Fatalf("after the failed scan: %+v, want the second %+v", got, want)
	}
}

// failingCreates is a Store whose Create fails for one name.
type failingCreates struct {
	*orphan.MemStore
	name string
	err  error
}

func (s failingCreates) Create(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	if r.Name == s.name {
		return orphan.Record{}, s.err
	}
	return s.MemStore.Create(ctx, r)
}

func TestSweeperHooksSeeEveryStepWithItsOutcome(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(testEpoch)
	store := orphan.NewMemStore()
	judge := &orphantest.Judge{Default: orphan.Orphan("not expected")}
	deleter := &finishingDeleter{}
	log := &eventLog{}

	keep := cleanRecord("n1", "disk-1", "pvc-keep-0123abcd")
	gone := cleanRecord("n1", "disk-1", "pvc-gone-0123abcd")
	purged := cleanRecord("n1", "disk-1", "pvc-purged-0123abcd")
	owned := cleanRecord("n1", "disk-1", "pvc-owned-0123abcd")
	broken := cleanRecord("n1", "disk-1", "pvc-broken-0123abcd")
	guarded := cleanRecord("n2", "disk-2", "pvc-guarded-0123abcd")
	for _, r := range []*orphan.Record{&purged, &owned, &broken} {
		r.DeletionRequested = true
	}
	for _, r := range []orphan.Record{keep, gone, purged, owned, broken, guarded} {
		if _, err := store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	created := cleanRecord("n1", "disk-1", "pvc-new-0123abcd")
	refusedCreate := cleanRecord("n1", "disk-1", "pvc-nocreate-0123abcd")
	judge.Set(owned.Name, orphan.Owned("a replica claims it now"))
	eio := errors.New("EIO")
	deleter.FailWith(broken.Name, eio)
	// The purge of purged takes 3 s by the Sweeper's clock.
	deleter.Hook = func(_ context.Context, r orphan.Record) {
		if r.Name == purged.Name {
			clk.Step(3 * time.Second)
		}
	}
	createErr := errors.New("apiserver unavailable")
	s, err := orphan.NewSweeper(failingCreates{store, refusedCreate.Name, createErr},
		orphantest.FakeAdapter(nil, judge, deleter),
		// One step at a time, so that the clock stepped in one purge
		// shows in that purge's duration only.
		orphan.SweeperOptions{Clock: clk, Concurrency: 1, Hooks: log})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Sync(ctx, orphan.Plan{
		Create:     []orphan.Record{created, refusedCreate},
		Forget:     []orphan.Forget{{Record: gone, Reason: orphan.ReasonGone, Message: "the data is gone"}},
		Purge:      []orphan.Purge{{Record: purged, Auto: true}, {Record: owned}, {Record: broken}},
		Keep:       []orphan.Keep{{Record: keep}, {Record: guarded}},
		Conditions: []orphan.SetConditions{{Record: keep, Conditions: keep.Conditions}},
		Refused:    []orphan.Refusal{{Name: guarded.Name, Reason: "every valid item of the scope judged an orphan"}},
	})
	if err == nil || len(res.Failed) != 2 {
		t.Fatalf("Sync = %+v, %v; want two failures", res, err)
	}

	type want struct {
		op      orphan.Op
		r       orphan.Record
		outcome orphan.EventOutcome
		reason  string
		auto    bool
		took    time.Duration
		err     error
	}
	for _, w := range []want{
		{op: orphan.OpCreate, r: created, outcome: orphan.EventOK},
		{op: orphan.OpCreate, r: refusedCreate, outcome: orphan.EventFailed, err: createErr},
		{op: orphan.OpForget, r: gone, outcome: orphan.EventOK, reason: string(orphan.ReasonGone)},
		{op: orphan.OpMark, r: keep, outcome: orphan.EventOK},
		{op: orphan.OpPurge, r: purged, outcome: orphan.EventOK, auto: true, took: 3 * time.Second},
		{op: orphan.OpPurge, r: owned, outcome: orphan.EventRefused, reason: "re-judged owned: a replica claims it now"},
		{op: orphan.OpPurge, r: broken, outcome: orphan.EventFailed, err: eio},
		{op: orphan.OpPurge, r: guarded, outcome: orphan.EventGuarded, reason: "every valid item of the scope judged an orphan"},
	} {
		got := log.one(t, w.op, w.r.Name)
		exp := orphan.Event{Op: w.op, Outcome: w.outcome, Kind: w.r.Kind, NodeID: w.r.NodeID, Name: w.r.Name,
			Reason: w.reason, Auto: w.auto, Duration: w.took}
		if !errors.Is(got.Err, w.err) || (w.err == nil) != (got.Err == nil) {
			t.Errorf("%s %s: err %v, want %v", w.op, w.r.Name, got.Err, w.err)
		}
		got.Err = nil
		if got != exp {
			t.Errorf("%s %s:\n got %+v\nwant %+v", w.op, w.r.Name, got, exp)
		}
	}
	if e := log.one(t, orphan.OpFinish, ""); e.Outcome != orphan.EventOK || e.Err != nil {
		t.Errorf("finish event %+v, want ok", e)
	}
	// One event per step: nothing doubled, nothing extra (the Error=True
	// marks after the refused and the failed purge are not in
	// Result.Marked and have no event).
	if n := len(log.all()); n != 9 {
		t.Errorf("%d events, want 9: %+v", n, log.all())
	}
}

func TestSweeperHooksSeeTheGuardsRefusalsWithKindAndNode(t *testing.T) {
	h := newSweepHarness()
	log := &eventLog{}
	h.sweeper, _ = orphan.NewSweeper(h.store, orphantest.FakeAdapter(nil, h.judge, h.deleter),
		orphan.SweeperOptions{Clock: h.clock, Hooks: log})
	w := newGuardWorld(2, 0, true).status(func(s *orphan.ScopeStatus) { s.NoneExpected = true })
	for _, r := range w.in.Records {
		h.seed(t, r)
	}
	var items []orphan.Item
	for _, c := range w.in.Candidates {
		items = append(items, c.Item)
	}
	_, res, err := h.sweeper.Reconcile(context.Background(), orphan.Snapshot{Items: items, Scopes: w.in.Scopes},
		orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")})
	if err != nil || len(res.Refused) != 2 {
		t.Fatalf("Reconcile = %+v, %v; want two refusals", res, err)
	}
	for name, r := range w.recs {
		e := log.one(t, orphan.OpPurge, name)
		if e.Outcome != orphan.EventGuarded || e.Kind != r.Kind || e.NodeID != r.NodeID || e.Kind == "" ||
			!strings.Contains(e.Reason, "expected") {
			t.Errorf("event %+v, want guarded with kind %q and node %q", e, r.Kind, r.NodeID)
		}
	}
}

func TestNilHooksFuncIsNoHooks(t *testing.T) {
	// A typed nil in the interface must not be called.
	h := newSweepHarness()
	s, _ := orphan.NewSweeper(h.store, orphantest.FakeAdapter(nil, h.judge, h.deleter),
		orphan.SweeperOptions{Clock: h.clock, Hooks: orphan.HooksFunc(nil)})
	if _, err := s.Sync(context.Background(), orphan.Plan{Create: []orphan.Record{cleanRecord("n1", "disk-1", "pvc-a-0123abcd")}}); err != nil {
		t.Fatal(err)
	}
	var nilFunc orphan.HooksFunc
	nilFunc.Observe(orphan.Event{}) // no panic
}
