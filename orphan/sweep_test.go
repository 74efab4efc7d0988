package orphan_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/mock/gomock"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/mocks"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

type sweepHarness struct {
	store   *orphan.MemStore
	judge   *orphantest.Judge
	deleter *orphantest.Deleter
	sweeper *orphan.Sweeper
	clock   *clocktesting.FakeClock
}

func newSweepHarness() *sweepHarness {
	h := &sweepHarness{
		store:   orphan.NewMemStore(),
		judge:   &orphantest.Judge{Default: orphan.Orphan("not expected")},
		deleter: &orphantest.Deleter{},
		clock:   clocktesting.NewFakeClock(testEpoch),
	}
	h.sweeper = newSweeper(h.store, h.judge, h.deleter, h.clock)
	return h
}

// cleanRecord is a record a cycle has already marked DataCleanable=True,
// as every record must be before its data is purged.
func cleanRecord(node, disk, dataName string) orphan.Record {
	r := orphanRecord(node, disk, dataName)
	r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue,
		Reason: orphan.ReasonCleanable, LastTransitionTime: metav1.NewTime(testEpoch)}}
	return r
}

func (h *sweepHarness) seed(t *testing.T, rs ...orphan.Record) {
	t.Helper()
	for _, r := range rs {
		if _, err := h.store.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSyncAppliesEveryPart(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	keep := cleanRecord("n1", "disk-1", "pvc-keep-0123abcd")
	gone := cleanRecord("n1", "disk-1", "pvc-gone-0123abcd")
	purge := cleanRecord("n1", "disk-1", "pvc-purge-0123abcd")
	purge.DeletionRequested = true
	h.seed(t, keep, gone, purge)
	create := cleanRecord("n1", "disk-1", "pvc-new-0123abcd")

	res, err := h.sweeper.Sync(ctx, orphan.Plan{
		Create: []orphan.Record{create},
		Forget: []orphan.Forget{{Record: gone, Reason: orphan.ReasonGone}},
		Purge:  []orphan.Purge{{Record: purge}},
		Keep:   []orphan.Keep{{Record: keep}},
	})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !reflect.DeepEqual(res.Created, []string{create.Name}) || !reflect.DeepEqual(res.Forgotten, []string{gone.Name}) ||
		!reflect.DeepEqual(res.Purged, []string{purge.Name}) || len(res.Refused) != 0 {
		t.Fatalf("result = %+v", res)
	}
	if got := h.deleter.Deleted(); !reflect.DeepEqual(got, []string{purge.Name}) {
		t.Fatalf("deleted data = %v, want only the purged record's", got)
	}
	left, _ := h.store.List(ctx, orphan.Selector{})
	if got := sortedNames(left); !reflect.DeepEqual(got, sortedNames([]orphan.Record{keep, create})) {
		t.Fatalf("records left = %v", got)
	}
}

func TestSyncPurgeRechecksAtTheMomentOfDeletion(t *testing.T) {
	ctx := context.Background()
	base := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	requested := base.Clone()
	requested.DeletionRequested = true
	unmarked := requested.Clone()
	unmarked.Conditions = nil
	markedNotCleanable := requested.Clone()
	markedNotCleanable.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse,
		Reason: "NodeUnavailable", LastTransitionTime: metav1.NewTime(testEpoch)}}

	cases := []struct {
		name    string
		stored  *orphan.Record // what the store holds when Sync runs
		verdict orphan.Verdict // the judge's verdict at that moment
		auto    bool
		refused bool
	}{
		{name: "still requested and orphan: purged", stored: &requested, verdict: orphan.Orphan("x")},
		{name: "record deleted meanwhile: refused", stored: nil, verdict: orphan.Orphan("x"), refused: true},
		{name: "request withdrawn: refused", stored: &base, verdict: orphan.Orphan("x"), refused: true},
		{name: "claimed meanwhile: refused", stored: &requested, verdict: orphan.Owned("a replica claims it now"), refused: true},
		{name: "judge unsure now: refused", stored: &requested, verdict: orphan.Undecided("cache not synced"), refused: true},
		{name: "auto purge needs no request", stored: &base, verdict: orphan.Orphan("x"), auto: true},
		{name: "marked not cleanable meanwhile: refused", stored: &markedNotCleanable, verdict: orphan.Orphan("x"), refused: true},
		{name: "never marked cleanable: refused", stored: &unmarked, verdict: orphan.Orphan("x"), refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newSweepHarness()
			if tc.stored != nil {
				h.seed(t, *tc.stored)
			}
			h.judge.Set(base.Name, tc.verdict)
			res, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: requested, Auto: tc.auto,
				Candidate: orphan.Candidate{Item: base.Item(), Verdict: orphan.Orphan("at plan time")}}}})
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			deleted := len(h.deleter.Deleted()) > 0
			if tc.refused {
				if deleted || len(res.Refused) != 1 || len(res.Purged) != 0 {
					t.Fatalf("want a refusal and nothing deleted; deleted=%v result=%+v", deleted, res)
				}
				return
			}
			if !deleted || len(res.Purged) != 1 {
				t.Fatalf("want a purge; deleted=%v result=%+v", deleted, res)
			}
			if _, err := h.store.Get(ctx, base.Name); !errors.Is(err, orphan.ErrNotFound) {
				t.Fatalf("the record survived its purge: %v", err)
			}
		})
	}
}

func TestSyncAutoPurgeRecordsTheRequestFirst(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	h.seed(t, r)
	crash := errors.New("agent killed")
	h.deleter.FailWith(r.Name, crash)
	_, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: r, Auto: true}}})
	if !errors.Is(err, crash) {
		t.Fatalf("Sync error = %v, want the deleter's", err)
	}
	got, err := h.store.Get(ctx, r.Name)
	if err != nil {
		t.Fatalf("the record of a failed purge is gone: %v", err)
	}
	if !got.DeletionRequested {
		t.Fatalf("an interrupted auto purge left no deletion request behind")
	}
}

func TestSyncPreconditionFailureIsARefusalAndKeepsTheRecord(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	r.DeletionRequested = true
	h.seed(t, r)
	h.deleter.FailWith(r.Name, fmt.Errorf("disk UUID changed: %w", orphan.ErrPreconditionFailed))
	res, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: r}}})
	if err != nil || len(res.Refused) != 1 {
		t.Fatalf("Sync = %+v, %v; want one refusal, no error", res, err)
	}
	if _, err := h.store.Get(ctx, r.Name); err != nil {
		t.Fatalf("a refused purge deleted the record: %v", err)
	}
}

func TestSyncOneFailureNeverBlocksTheOthers(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	var recs []orphan.Record
	for i := range 10 {
		r := cleanRecord("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))
		r.DeletionRequested = true
		recs = append(recs, r)
	}
	h.seed(t, recs...)
	boom := errors.New("EIO")
	h.deleter.FailWith(recs[3].Name, boom)
	h.deleter.FailWith(recs[7].Name, boom)
	plan := orphan.Plan{}
	for _, r := range recs {
		plan.Purge = append(plan.Purge, orphan.Purge{Record: r})
	}
	res, err := h.sweeper.Sync(ctx, plan)
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) != 2 {
		t.Fatalf("error = %v, want a multierror of 2", err)
	}
	for _, e := range merr.Errors {
		var re *orphan.RecordError
		if !errors.As(e, &re) || re.Op != orphan.OpPurge || (re.Name != recs[3].Name && re.Name != recs[7].Name) || !errors.Is(e, boom) {
			t.Fatalf("per-record error = %#v", e)
		}
	}
	if len(res.Purged) != 8 {
		t.Fatalf("purged %d, want the 8 that did not fail", len(res.Purged))
	}
	if h.store.Len() != 2 {
		t.Fatalf("records left = %d, want the 2 that failed", h.store.Len())
	}
}

func TestSyncBoundsConcurrency(t *testing.T) {
	h := newSweepHarness()
	h.sweeper, _ = orphan.NewSweeper(h.store, orphantest.FakeAdapter(nil, h.judge, h.deleter), orphan.SweeperOptions{Clock: h.clock, Concurrency: 3})
	var inFlight, peak, arrivals atomic.Int32
	gate := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(3)
	h.deleter.Hook = func(context.Context, orphan.Record) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if arrivals.Add(1) <= 3 {
			arrived.Done()
		}
		<-gate
		inFlight.Add(-1)
	}
	plan := orphan.Plan{}
	for i := range 12 {
		r := cleanRecord("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))
		r.DeletionRequested = true
		h.seed(t, r)
		plan.Purge = append(plan.Purge, orphan.Purge{Record: r})
	}
	done := make(chan error)
	go func() { _, err := h.sweeper.Sync(context.Background(), plan); done <- err }()
	arrived.Wait() // three deletions are in flight and blocked
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrent deletions = %d, want 3", p)
	}
}

func TestSyncForgetMarksNotCleanableThenDeletes(t *testing.T) {
	ctrl := gomock.NewController(t)
	store := mocks.NewMockStore(ctrl)
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	gomock.InOrder(
		store.EXPECT().Update(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, got orphan.Record) (orphan.Record, error) {
			if len(got.Conditions) != 1 {
				t.Fatalf("conditions = %+v", got.Conditions)
			}
			c := got.Conditions[0]
			if c.Type != orphan.ConditionDataCleanable || c.Status != metav1.ConditionFalse || c.Reason != "DiskEvicted" ||
				!c.LastTransitionTime.Time.Equal(testEpoch) {
				t.Fatalf("condition = %+v", c)
			}
			return got, nil
		}),
		store.EXPECT().Delete(gomock.Any(), r.Name).Return(nil),
	)
	s := newSweeper(store, &orphantest.Judge{}, &orphantest.Deleter{}, clocktesting.NewFakeClock(testEpoch))
	res, err := s.Sync(context.Background(), orphan.Plan{Forget: []orphan.Forget{{Record: r, Reason: orphan.ForgetReason(orphan.HealthDiskEvicted)}}})
	if err != nil || len(res.Forgotten) != 1 {
		t.Fatalf("Sync = %+v, %v", res, err)
	}
}

type finishingDeleter struct {
	orphantest.Deleter
	finished int
}

func (d *finishingDeleter) FinishInterrupted(context.Context) error { d.finished++; return nil }

func TestSyncCallsFinisher(t *testing.T) {
	h := newSweepHarness()
	d := &finishingDeleter{}
	h.sweeper = newSweeper(h.store, h.judge, d, h.clock)
	if _, err := h.sweeper.Sync(context.Background(), orphan.Plan{}); err != nil {
		t.Fatal(err)
	}
	if d.finished != 1 {
		t.Fatalf("FinishInterrupted called %d times, want 1", d.finished)
	}
}

func TestSweeperNeedsItsParts(t *testing.T) {
	if _, err := orphan.NewSweeper(nil, orphantest.FakeAdapter(nil, &orphantest.Judge{}, &orphantest.Deleter{}), orphan.SweeperOptions{}); !errors.Is(err, orphan.ErrIncomplete) {
		t.Fatalf("NewSweeper with no Store: %v, want ErrIncomplete", err)
	}
	if _, err := orphan.NewSweeper(orphan.NewMemStore(), nil, orphan.SweeperOptions{}); !errors.Is(err, orphan.ErrIncomplete) {
		t.Fatalf("NewSweeper with no Adapter: %v, want ErrIncomplete", err)
	}
}

// newSweeper builds a Sweeper over fakes, for tests.
func newSweeper(store orphan.Store, j orphan.Judge, d orphan.Deleter, clk clock.Clock) *orphan.Sweeper {
	s, err := orphan.NewSweeper(store, orphantest.FakeAdapter(nil, j, d), orphan.SweeperOptions{Clock: clk})
	if err != nil {
		panic(err)
	}
	return s
}

// TestRunLifecycle walks one directory through Longhorn's e2e story with the
// generic engine: detected, kept while its disk is evicted (data kept,
// record forgotten), detected again, deleted on request.
func TestRunLifecycle(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	name, _ := item.Name()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	snap := orphan.Snapshot{Items: []orphan.Item{item}, Scopes: ready(d1)}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")}

	run := func(snap orphan.Snapshot, c orphan.Cycle) orphan.Plan {
		t.Helper()
		p, _, err := h.sweeper.Reconcile(ctx, snap, c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := run(snap, cycle); len(p.Create) != 1 || h.store.Len() != 1 {
		t.Fatalf("not detected: %+v", p)
	}
	evicted := cycle
	evicted.Scopes = map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthDiskEvicted}}
	if p := run(snap, evicted); len(p.Forget) != 1 || h.store.Len() != 0 || len(h.deleter.Deleted()) != 0 {
		t.Fatalf("eviction: plan %+v, records %d, deleted %v", p, h.store.Len(), h.deleter.Deleted())
	}
	if p := run(snap, cycle); len(p.Create) != 1 {
		t.Fatalf("not detected again after the eviction: %+v", p)
	}
	if err := h.store.RequestDeletion(ctx, name); err != nil {
		t.Fatal(err)
	}
	if p := run(snap, cycle); len(p.Purge) != 1 || !reflect.DeepEqual(h.deleter.Deleted(), []string{name}) || h.store.Len() != 0 {
		t.Fatalf("purge: plan %+v, deleted %v", p, h.deleter.Deleted())
	}
	h.clock.Step(time.Minute)
	if p := run(orphan.Snapshot{Scopes: ready(d1)}, cycle); !p.Empty() {
		t.Fatalf("after the purge the plan still does something: %+v", p)
	}
}

func sortedNames(rs []orphan.Record) []string {
	out := names(rs)
	sort.Strings(out)
	return out
}

// A snapshot taken before a purge still shows the purged data. Reconcile given
// that snapshot's start must not create a record for it again; a snapshot
// started after the purge is trusted as usual.
func TestRunIgnoresPurgedDataInOlderSnapshots(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	snap := orphan.Snapshot{Items: []orphan.Item{item}, Scopes: ready(d1)}
	scanStart := h.clock.Now()
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"), ObservedAt: scanStart}

	if _, _, err := h.sweeper.Reconcile(ctx, snap, cycle); err != nil {
		t.Fatal(err)
	}
	name, _ := item.Name()
	must(t, h.store.RequestDeletion(ctx, name))
	h.clock.Step(time.Second)
	if _, res, err := h.sweeper.Reconcile(ctx, snap, cycle); err != nil || len(res.Purged) != 1 {
		t.Fatalf("purge: %+v, %v", res, err)
	}

	// The same old snapshot again, as a host reconciling on the purge's
	// own event would pass it.
	p, res, err := h.sweeper.Reconcile(ctx, snap, cycle)
	if err != nil || len(p.Create) != 0 || len(res.Created) != 0 || h.store.Len() != 0 {
		t.Fatalf("a snapshot from before the purge re-created its record: plan %+v result %+v", p, res)
	}

	// A scan that started after the purge and still sees the directory is
	// believed: something put it back.
	h.clock.Step(time.Second)
	fresh := cycle
	fresh.ObservedAt = h.clock.Now()
	if p, _, err := h.sweeper.Reconcile(ctx, snap, fresh); err != nil || len(p.Create) != 1 {
		t.Fatalf("a snapshot newer than the purge was ignored: %+v, %v", p, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
