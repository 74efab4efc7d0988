package orphan_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Adversarial inputs for Decide's flat name table and its name checks:
// what a tampered store, a confused host or a hostile user can put in
// front of the planner. Each test asserts that nothing is purged that the
// rules do not allow, whatever the table's layout.

// requestedClean returns r marked DataCleanable=True with its deletion
// requested: a record that purges at once if Decide believes it.
func requestedClean(r orphan.Record) orphan.Record {
	r = markCleanable(r)
	r.DeletionRequested = true
	return r
}

// TestDecideForgedHexNamesSharingTheTablesLeadNeverPurge: records whose
// names are valid lower-case hex that agrees with a candidate's name in
// the leading bytes the flat table is addressed by (so they probe the very
// slots the candidates sit in) but differs after them, all with deletion
// requested. None names a candidate, and none is its fields' name: each is
// forgotten as Mismatch, and each candidate still gets its record.
func TestDecideForgedHexNamesSharingTheTablesLeadNeverPurge(t *testing.T) {
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	var in orphan.Input
	in.Now, in.Scopes = testEpoch, ready(d)
	for i := range 300 {
		it := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d", i))
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Orphan("x")})
		name, _ := it.Name()
		for _, at := range []int{16 + len(orphan.NamePrefix), len(name) - 1} { // after the lead; the last digit
			forged := requestedClean(orphan.Record{Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine, Parameters: it.Parameters})
			flip := byte('0')
			if name[at] == '0' {
				flip = '1'
			}
			forged.Name = name[:at] + string(flip) + name[at+1:]
			in.Records = append(in.Records, forged)
		}
		upper := requestedClean(orphan.Record{Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine, Parameters: it.Parameters})
		upper.Name = orphan.NamePrefix + strings.ToUpper(name[len(orphan.NamePrefix):])
		if upper.Name != name { // a name of digits only has no case
			in.Records = append(in.Records, upper)
		}
	}
	// The all-zero sum is what an empty slot of the table holds.
	zero := requestedClean(mustRecord(t, in.Candidates[0].Item))
	zero.Name = orphan.NamePrefix + strings.Repeat("0", 64)
	in.Records = append(in.Records, zero)
	p := orphan.Decide(in)
	if len(p.Purge) != 0 {
		t.Fatalf("%d purges of forged names, e.g. %s", len(p.Purge), p.Purge[0].Record.Name)
	}
	for _, f := range p.Forget {
		if f.Reason != orphan.ReasonMismatch {
			t.Fatalf("%s forgotten as %s, want Mismatch", f.Record.Name, f.Reason)
		}
	}
	if len(p.Forget) != len(in.Records) || len(p.Create) != len(in.Candidates) {
		t.Fatalf("forget %d of %d records, create %d of %d candidates", len(p.Forget), len(in.Records), len(p.Create), len(in.Candidates))
	}
	checkAgainstReference(t, 0, in)
}

// TestDecideEveryRecordMismatchedPurgesNothing: a large input where every
// record carries the name of the next candidate over the fields of its
// own (a store whose names were shuffled), every deletion requested and
// every record cleanable. Each name finds a candidate in the table, and
// each must still be forgotten as Mismatch: the check hashes the record's
// own fields, never trusts the table's hit.
func TestDecideEveryRecordMismatchedPurgesNothing(t *testing.T) {
	const n = 20000
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	in := orphan.Input{Now: testEpoch, Scopes: ready(d), Guard: orphan.Guard{AllowAnyShare: true, AllowWholeScope: true}}
	items := make([]orphan.Item, n)
	for i := range items {
		items[i] = replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%06d", i))
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: items[i], Verdict: orphan.Orphan("x")})
	}
	for i, it := range items {
		r := requestedClean(orphan.Record{Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine, Parameters: it.Parameters})
		r.Name, _ = items[(i+1)%n].Name()
		in.Records = append(in.Records, r)
	}
	p := orphan.Decide(in)
	if len(p.Purge) != 0 || len(p.Forget) != n {
		t.Fatalf("purge %d, forget %d; want 0 and %d", len(p.Purge), len(p.Forget), n)
	}
	for _, f := range p.Forget {
		if f.Reason != orphan.ReasonMismatch {
			t.Fatalf("%s forgotten as %s, want Mismatch", f.Record.Name, f.Reason)
		}
	}
}

// TestDecideManyDuplicatesWithOneDissentKeep: one item observed thousands
// of times as an orphan and once, anywhere in the run, as owned (or as the
// other instance kind) is no orphan: its requested deletion is kept, not
// purged, whichever observation comes last.
func TestDecideManyDuplicatesWithOneDissentKeep(t *testing.T) {
	inst := orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: "n1", DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{orphan.ParamInstanceName: "pvc-a-r-1", orphan.ParamInstanceUUID: "u", orphan.ParamInstanceManager: "im"}}
	asEngine := inst
	asEngine.Kind = orphan.KindEngineInstance
	rec := requestedClean(mustRecord(t, inst))
	for _, dissent := range []orphan.Candidate{
		{Item: inst, Verdict: orphan.Owned("replica of pvc-a")},
		{Item: inst, Verdict: orphan.Undecided("cannot tell")},
		{Item: asEngine, Verdict: orphan.Orphan("x")},
	} {
		for _, at := range []int{0, 1, 2500, 4999, 5000} {
			cs := make([]orphan.Candidate, 0, 5001)
			for range 5000 {
				cs = append(cs, orphan.Candidate{Item: inst, Verdict: orphan.Orphan("x")})
			}
			cs = append(cs[:at], append([]orphan.Candidate{dissent}, cs[at:]...)...)
			in := orphan.Input{Now: testEpoch, Scopes: hostReady("n1"), Candidates: cs, Records: []orphan.Record{rec}}
			p := orphan.Decide(in)
			if len(p.Purge) != 0 {
				t.Fatalf("dissent %s %s at %d: purged", dissent.Item.Kind, dissent.Verdict.Outcome, at)
			}
		}
	}
}

func mustRecord(t *testing.T, it orphan.Item) orphan.Record {
	t.Helper()
	r, err := orphan.NewRecord(it, testEpoch)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDecideNamesDifferingByCaseOrDashJoining: names Longhorn's formula
// cannot tell apart (fields that dash-join to one string) belong to
// different directories; an owned directory sharing an orphan's name is
// not merged with it (their match keys differ), and the purge planned is
// of the record's own directory, never the owned one. Names that differ
// only by the case of a field are different items, and one item's record
// never purges the other.
func TestDecideNamesDifferingByCaseOrDashJoining(t *testing.T) {
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	a := replicaItem("n1", "disk-1", "pvc-a")
	a.Parameters[orphan.ParamDiskUUID] = "u-v"
	a.Parameters[orphan.ParamDataName] = "w"
	b := replicaItem("n1", "disk-1", "v-w") // uuid "u" + data "v-w" joins as "u-v" + "w"
	b.Parameters[orphan.ParamDiskUUID] = "u"
	na, _ := a.Name()
	nb, _ := b.Name()
	if na != nb {
		t.Fatalf("the dash-joined items do not share a name: %s, %s", na, nb)
	}
	rec := requestedClean(mustRecord(t, a))
	in := orphan.Input{Now: testEpoch, Scopes: ready(d), Records: []orphan.Record{rec},
		Candidates: []orphan.Candidate{{Item: a, Verdict: orphan.Orphan("x")}, {Item: b, Verdict: orphan.Owned("live")}}}
	p := orphan.Decide(in)
	if len(p.Purge) != 1 || p.Purge[0].Candidate.Item.Param(orphan.ParamDataName) != "w" {
		t.Fatalf("dash-joined collision with an owned item: plan %v, want the purge of directory w only", actions(p))
	}
	checkAgainstReference(t, 0, in)

	upper := replicaItem("n1", "disk-1", "PVC-A")
	lower := replicaItem("n1", "disk-1", "pvc-a")
	rec = requestedClean(mustRecord(t, upper))
	p = orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(d), Records: []orphan.Record{rec},
		Candidates: []orphan.Candidate{{Item: lower, Verdict: orphan.Orphan("x")}, {Item: upper, Verdict: orphan.Owned("live")}}})
	if len(p.Purge) != 0 {
		t.Fatalf("a record of %q purged with %q an orphan", "PVC-A", "pvc-a")
	}
}

// TestDecideRecordNeverPurgesAnObservationOfAnotherScope: a record whose
// name is also the name of an item observed in another scope (instances:
// the node is not in Longhorn's formula; replica data: node and disk names
// that dash-join alike) must not be purged on that observation: its own
// scope was scanned and its item not seen there. The other scope here is
// unavailable or not in the input at all, so the observation vouches for
// nothing.
func TestDecideRecordNeverPurgesAnObservationOfAnotherScope(t *testing.T) {
	inst := func(node string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: node, DataEngine: orphan.DataEngineV2,
			Parameters: map[string]string{orphan.ParamInstanceName: "pvc-a-r-1", orphan.ParamInstanceUUID: "u", orphan.ParamInstanceManager: "im"}}
	}
	data := func(node, disk string) orphan.Item { return replicaItem(node, disk, "pvc-a") }
	for _, tc := range []struct {
		name      string
		rec, seen orphan.Item
		scopes    map[orphan.Scope]orphan.ScopeStatus
	}{
		{"instance on an unlisted node", inst("n1"), inst("n2"), hostReady("n1")},
		{"instance on an unavailable node", inst("n1"), inst("n2"), map[orphan.Scope]orphan.ScopeStatus{
			{NodeID: "n1"}: {Health: orphan.HealthReady}, {NodeID: "n2"}: {Health: orphan.HealthNodeUnavailable}}},
		{"replica data, dash-joined node and disk", data("n0", "x-d"), data("n0-x", "d"), func() map[orphan.Scope]orphan.ScopeStatus {
			m := ready(orphan.Scope{NodeID: "n0", Disk: "x-d"})
			m[orphan.Scope{NodeID: "n0-x"}] = orphan.ScopeStatus{Health: orphan.HealthReady}
			m[orphan.Scope{NodeID: "n0-x", Disk: "d"}] = orphan.ScopeStatus{Health: orphan.HealthDiskChanged}
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rn, _ := tc.rec.Name()
			sn, _ := tc.seen.Name()
			if rn != sn {
				t.Fatalf("the items do not share a name")
			}
			rec := requestedClean(mustRecord(t, tc.rec))
			in := orphan.Input{Now: testEpoch, Scopes: tc.scopes, Records: []orphan.Record{rec},
				Candidates: []orphan.Candidate{{Item: tc.seen, Verdict: orphan.Orphan("x")}}}
			p := orphan.Decide(in)
			if got := actions(p)[rec.Name]; got != "forget:Gone" || len(p.Purge) != 0 {
				t.Fatalf("record of %s on an observation in %s: action %q, want forget:Gone", rec.Scope(), tc.seen.Scope(), got)
			}
			checkAgainstReference(t, 0, in)
		})
	}
}

// TestPlanSharedMapsAreNotWrittenByTheSweeper: a plan's new records share
// their Labels map with each other and their Parameters with the input's
// items, and the Sweeper hands them to the Store from many goroutines at
// once. A Store that honours its contract (copy, never modify) sees the
// maps unchanged; this test's Store checks every map it is given against
// the value it had when the plan was made, so a Sweeper (or a hook) that
// stamps a label or parameter onto a plan's record in place, which would
// race on a shared map and rewrite other records' and the input's maps,
// fails here (and under -race).
func TestPlanSharedMapsAreNotWrittenByTheSweeper(t *testing.T) {
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	var cs []orphan.Candidate
	for i := range 200 {
		cs = append(cs, orphan.Candidate{Item: replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d", i)), Verdict: orphan.Orphan("x")})
	}
	p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(d), Candidates: cs,
		Guard: orphan.Guard{AllowAnyShare: true, AllowWholeScope: true}})
	if len(p.Create) != len(cs) {
		t.Fatalf("created %d, want %d", len(p.Create), len(cs))
	}
	want := map[string]string{}
	for _, r := range p.Create {
		want[r.Name] = fmt.Sprint(r.Labels, r.Parameters)
	}
	inner := orphan.NewMemStore()
	var mu sync.Mutex
	var changed []string
	store := checkingStore{Store: inner, check: func(r orphan.Record) {
		if got := fmt.Sprint(r.Labels, r.Parameters); got != want[r.Name] {
			mu.Lock()
			changed = append(changed, r.Name+": "+got)
			mu.Unlock()
		}
	}}
	h := newSweepHarness()
	s := newSweeper(store, h.judge, h.deleter, h.clock)
	if _, err := s.Sync(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if len(changed) != 0 {
		t.Fatalf("maps of the plan changed before reaching the store: %v", changed[:min(3, len(changed))])
	}
	for i, c := range cs {
		if c.Item.Parameters[orphan.ParamDataName] != fmt.Sprintf("pvc-%d", i) || len(c.Item.Parameters) != 5 {
			t.Fatalf("input item %d's parameters changed: %v", i, c.Item.Parameters)
		}
	}
}

// checkingStore calls check on every record handed to Create, then
// creates it.
type checkingStore struct {
	orphan.Store
	check func(orphan.Record)
}

func (s checkingStore) Create(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	s.check(r)
	return s.Store.Create(ctx, r)
}

// TestSweeperRechecksTheRecordItMarkedForDeletion: recording an
// auto-deletion is a write, and what the Store answers is the record as
// stored. A Store that lets another writer's change through (a forget
// marking DataCleanable=False between its re-read and its write, as
// examples/controller-runtime's Store did before its delete carried a
// ResourceVersion precondition) answers a record that is no longer
// cleanable: the Sweeper must not purge on it.
func TestSweeperRechecksTheRecordItMarkedForDeletion(t *testing.T) {
	h := newSweepHarness()
	rec := cleanRecord("n1", "disk-1", "pvc-a")
	h.seed(t, rec)
	cur, err := h.store.Get(context.Background(), rec.Name)
	if err != nil {
		t.Fatal(err)
	}
	store := racingStore{Store: h.store}
	s := newSweeper(store, h.judge, h.deleter, h.clock)
	c := orphan.Candidate{Item: rec.Item(), Verdict: orphan.Orphan("x")}
	res, _ := s.Sync(context.Background(), orphan.Plan{Purge: []orphan.Purge{{Record: cur, Candidate: c, Auto: true}}})
	if d := h.deleter.Deleted(); len(d) != 0 {
		t.Fatalf("purged %v though the record the Store answered says DataCleanable=False", d)
	}
	if len(res.Refused) != 1 {
		t.Fatalf("refused = %v, want the purge refused", res.Refused)
	}
}

// racingStore lets a forget's DataCleanable=False land during every
// Update that requests a deletion, and stores the request over it.
type racingStore struct{ orphan.Store }

func (s racingStore) Update(ctx context.Context, r orphan.Record) (orphan.Record, error) {
	if r.DeletionRequested {
		r = r.Clone()
		r.ResourceVersion = ""
		r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse,
			Reason: string(orphan.ReasonGone), Message: "forgotten meanwhile"}}
	}
	return s.Store.Update(ctx, r)
}

// TestSyncNeverDeletesOneRecordTwiceAtOnce: Decide plans a purge per
// record, so an input with one record listed three times (a Store.List
// that repeats it, a host that concatenates two lists) plans three purges
// of one name. The Deleter's contract is that the Sweeper never calls it
// twice at once for one record; the Sweeper purges each name once.
func TestSyncNeverDeletesOneRecordTwiceAtOnce(t *testing.T) {
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	h := newSweepHarness()
	rec := requestedClean(cleanRecord("n1", "disk-1", "pvc-a"))
	h.seed(t, rec)
	p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(d), Records: []orphan.Record{rec, rec, rec},
		Candidates: []orphan.Candidate{{Item: rec.Item(), Verdict: orphan.Orphan("x")}}})
	if len(p.Purge) < 2 {
		t.Skipf("Decide planned %d purges for the repeated record: nothing to check here", len(p.Purge))
	}
	// Each Delete waits until every purge of the plan has re-read its
	// record (or a short while, when fewer come), so that purges of one
	// name, if several run, are all under way at once.
	store := &gettingStore{Store: h.store}
	var mu sync.Mutex
	calls := 0
	h.deleter.Hook = func(ctx context.Context, r orphan.Record) {
		mu.Lock()
		calls++
		mu.Unlock()
		for start := time.Now(); store.gets.Load() < int64(len(p.Purge)) && time.Since(start) < 300*time.Millisecond; {
			time.Sleep(time.Millisecond)
		}
	}
	s := newSweeper(store, h.judge, h.deleter, h.clock)
	if _, err := s.Sync(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("Deleter called %d times for one record, want once", calls)
	}
}

// gettingStore counts Gets.
type gettingStore struct {
	orphan.Store
	gets atomic.Int64
}

func (s *gettingStore) Get(ctx context.Context, name string) (orphan.Record, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, name)
}
