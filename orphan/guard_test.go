package orphan_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestDecideNodeHealthDominatesDisk covers every node × disk health: a
// requested, cleanable purge happens only when both are Ready, a node that
// forgets forgets with its own reason whatever the disk says, a node that
// holds (down) holds whatever the disk says unless the disk forgets, a
// requested record where a health holds is forgotten (its data kept), and
// a disk under a node nobody listed is never Ready.
func TestDecideNodeHealthDominatesDisk(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	n1 := orphan.Scope{NodeID: "n1"}
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	rec := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-0123abcd"))
	rec.DeletionRequested = true

	healths := []orphan.Health{"(absent)", orphan.HealthReady, orphan.HealthUnknown, orphan.HealthNodeUnavailable,
		orphan.HealthNodeEvicted, orphan.HealthDiskInvalid, orphan.HealthDiskChanged, orphan.HealthDiskEvicted,
		orphan.HealthNodeDeleted, orphan.HealthDiskRemoved}
	forgets := func(h orphan.Health) bool { return h != "(absent)" && h.Forgets() }
	for _, node := range healths {
		for _, disk := range healths {
			t.Run(fmt.Sprintf("node=%s,disk=%s", node, disk), func(t *testing.T) {
				scopes := map[orphan.Scope]orphan.ScopeStatus{}
				if node != "(absent)" {
					scopes[n1] = orphan.ScopeStatus{Health: node}
				}
				if disk != "(absent)" {
					scopes[d1] = orphan.ScopeStatus{Health: disk}
				}
				p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: scopes, Records: []orphan.Record{rec},
					Candidates: []orphan.Candidate{{Item: item, Verdict: orphan.Orphan("x")},
						{Item: replicaItem("n1", "disk-1", "pvc-live-0123abcd"), Verdict: orphan.Owned("y")}}})
				var want string
				switch {
				case forgets(node):
					want = "forget:" + string(node)
				case forgets(disk):
					want = "forget:" + string(disk)
				case node == "(absent)" && disk == "(absent)":
					want = "" // outside the input's authority
				case disk == "(absent)" && node == orphan.HealthReady:
					want = "forget:" + string(orphan.HealthDiskRemoved)
				case node.Holds():
					want = "forget:" + string(node) // requested where nothing can be purged
				case node == orphan.HealthReady && disk.Holds():
					want = "forget:" + string(disk)
				case node == orphan.HealthReady && disk == orphan.HealthReady:
					want = "purge"
				default:
					want = "keep"
				}
				if got := actions(p)[rec.Name]; got != want {
					t.Fatalf("action = %q, want %q", got, want)
				}
			})
		}
	}
}

// guardWorld builds one disk with orphans and owned items, every orphan
// recorded and cleanable.
type guardWorld struct {
	in    orphan.Input
	recs  map[string]orphan.Record
	scope orphan.Scope
}

func newGuardWorld(orphans, owned int, requested bool) *guardWorld {
	w := &guardWorld{recs: map[string]orphan.Record{}, scope: orphan.Scope{NodeID: "n1", Disk: "disk-1"}}
	// Every volume the host knows is listed: the orphans' volumes are
	// deleted, so the last-copy guard lets them go.
	w.in = orphan.Input{Now: testEpoch.Add(time.Hour), Scopes: ready(w.scope), VolumesComplete: true}
	for i := range orphans {
		it := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-o%d-0123abcd", i))
		w.in.Candidates = append(w.in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Orphan("not expected")})
		r := markCleanable(orphanRecord("n1", "disk-1", fmt.Sprintf("pvc-o%d-0123abcd", i)))
		r.DeletionRequested = requested
		w.recs[r.Name] = r
		w.in.Records = append(w.in.Records, r)
	}
	for i := range owned {
		it := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-w%d-0123abcd", i))
		w.in.Candidates = append(w.in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Owned("expected")})
	}
	return w
}

func (w *guardWorld) status(f func(*orphan.ScopeStatus)) *guardWorld {
	st := w.in.Scopes[w.scope]
	f(&st)
	w.in.Scopes[w.scope] = st
	return w
}

func TestGuardRules(t *testing.T) {
	auto := orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	cases := []struct {
		name     string
		world    *guardWorld
		policy   orphan.Policy
		guard    orphan.Guard
		purges   int
		refused  int
		rule     orphan.GuardRule
		creating bool
	}{
		{name: "empty expected list beside valid data refuses requested purges",
			world:   newGuardWorld(2, 0, true).status(func(s *orphan.ScopeStatus) { s.NoneExpected = true }),
			refused: 2, rule: orphan.GuardNoneExpected},
		{name: "empty expected list refuses even one orphan",
			world:   newGuardWorld(1, 0, true).status(func(s *orphan.ScopeStatus) { s.NoneExpected = true }),
			refused: 1, rule: orphan.GuardNoneExpected},
		{name: "empty expected list with the opt-out purges",
			world: newGuardWorld(2, 0, true).status(func(s *orphan.ScopeStatus) { s.NoneExpected = true }),
			guard: orphan.Guard{AllowNoneExpected: true}, purges: 2},
		{name: "empty expected list refuses automatic purges too",
			world:  newGuardWorld(1, 0, false).status(func(s *orphan.ScopeStatus) { s.NoneExpected = true }),
			policy: auto, refused: 1, rule: orphan.GuardNoneExpected},
		{name: "every item of a scope orphaned refuses",
			world: newGuardWorld(3, 0, true), refused: 3, rule: orphan.GuardWholeScope},
		{name: "owned items the inventory did not list count",
			world: newGuardWorld(3, 0, true).status(func(s *orphan.ScopeStatus) { s.OwnedUnlisted = 5 }), purges: 3},
		{name: "every item orphaned with the opt-out purges",
			world: newGuardWorld(3, 0, true), guard: orphan.Guard{AllowWholeScope: true}, purges: 3},
		{name: "fewer than MinItems whole-scope orphans still clean up",
			world: newGuardWorld(2, 0, true), purges: 2},
		{name: "MinItems is an option",
			world: newGuardWorld(2, 0, true), guard: orphan.Guard{MinItems: 2}, refused: 2, rule: orphan.GuardWholeScope},
		{name: "a small node where one of two replicas is orphaned cleans up automatically",
			world: newGuardWorld(1, 1, false), policy: auto, purges: 1},
		{name: "auto-deleting more than half of a scope at once refuses the automatic purges",
			world: newGuardWorld(4, 2, false), policy: auto, refused: 4, rule: orphan.GuardAutoShare},
		{name: "the share rule spares requested purges",
			world: newGuardWorld(4, 2, true), policy: auto, purges: 4},
		{name: "the share rule with a larger share purges",
			world: newGuardWorld(4, 2, false), policy: auto, guard: orphan.Guard{MaxAutoShare: 0.7}, purges: 4},
		{name: "the share rule can be turned off, and the budget too",
			world: newGuardWorld(4, 2, false), policy: auto, guard: orphan.Guard{AllowAnyShare: true, AllowOverBudget: true}, purges: 4},
		{name: "without the share rule the budget still bounds the automatic purges",
			world: newGuardWorld(4, 2, false), policy: auto, guard: orphan.Guard{AllowAnyShare: true}, purges: 3, refused: 1, rule: orphan.GuardBudget},
		{name: "exactly half is not more than half",
			world: newGuardWorld(3, 3, false), policy: auto, purges: 3},
		{name: "an undecided item is not an orphan for the whole-scope rule",
			world: func() *guardWorld {
				w := newGuardWorld(3, 0, true)
				w.in.Candidates = append(w.in.Candidates, orphan.Candidate{Item: replicaItem("n1", "disk-1", "pvc-u-0123abcd"), Verdict: orphan.Undecided("?")})
				return w
			}(), purges: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.world.in
			in.Policy, in.Guard = tc.policy, tc.guard
			p := orphan.Decide(in)
			if len(p.Purge) != tc.purges || len(p.Refused) != tc.refused {
				t.Fatalf("purges %d, refused %d; want %d and %d (%+v)", len(p.Purge), len(p.Refused), tc.purges, tc.refused, p.Refused)
			}
			for _, r := range p.Refused {
				if !strings.HasPrefix(r.Reason, string(tc.rule)+":") {
					t.Fatalf("refusal %q does not name rule %s", r.Reason, tc.rule)
				}
			}
			if tc.refused == 0 {
				return
			}
			// Every refused record is kept and marked PurgeGuarded=True with the rule.
			kept := map[string]bool{}
			for _, k := range p.Keep {
				kept[k.Record.Name] = true
			}
			marked := map[string]bool{}
			for _, sc := range p.Conditions {
				for _, c := range sc.Conditions {
					if c.Type == orphan.ConditionPurgeGuarded && c.Status == metav1.ConditionTrue && c.Reason == string(tc.rule) && c.Message != "" {
						marked[sc.Record.Name] = true
					}
				}
			}
			for _, r := range p.Refused {
				if !kept[r.Name] || !marked[r.Name] {
					t.Fatalf("refused %s: kept %v, marked %v", r.Name, kept[r.Name], marked[r.Name])
				}
			}
		})
	}
}

// TestGuardClearsItsCondition: a record marked PurgeGuarded=True whose
// scope looks sound again is marked False, and purged once due.
func TestGuardClearsItsCondition(t *testing.T) {
	w := newGuardWorld(1, 2, false)
	for i := range w.in.Records {
		w.in.Records[i].Conditions = append(w.in.Records[i].Conditions, metav1.Condition{
			Type: orphan.ConditionPurgeGuarded, Status: metav1.ConditionTrue, Reason: string(orphan.GuardWholeScope), Message: "old"})
	}
	p := orphan.Decide(w.in)
	if len(p.Conditions) != 1 {
		t.Fatalf("conditions = %+v, want one record's", p.Conditions)
	}
	if c := meta.FindStatusCondition(p.Conditions[0].Conditions, orphan.ConditionPurgeGuarded); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("conditions = %+v, want PurgeGuarded=False", p.Conditions)
	}
}

// TestGuardMarksNewRecords: records created in a guarded scope carry
// PurgeGuarded=True from the start, so users see it before they delete.
func TestGuardMarksNewRecords(t *testing.T) {
	w := newGuardWorld(0, 0, false)
	for i := range 3 {
		w.in.Candidates = append(w.in.Candidates, orphan.Candidate{
			Item: replicaItem("n1", "disk-1", fmt.Sprintf("pvc-n%d-0123abcd", i)), Verdict: orphan.Orphan("x")})
	}
	p := orphan.Decide(w.in)
	if len(p.Create) != 3 {
		t.Fatalf("created %d, want 3", len(p.Create))
	}
	for _, r := range p.Create {
		if !r.Cleanable() {
			t.Fatalf("created %s without DataCleanable=True", r.Name)
		}
		found := false
		for _, c := range r.Conditions {
			found = found || (c.Type == orphan.ConditionPurgeGuarded && c.Reason == string(orphan.GuardWholeScope))
		}
		if !found {
			t.Fatalf("created %s without PurgeGuarded: %+v", r.Name, r.Conditions)
		}
	}
}

// TestSweeperCleanableRuleEndToEnd: a record that a host stored without
// DataCleanable is purged only after a cycle has marked it, and the mark is
// written on a fresh read so a deletion request made meanwhile stays.
func TestSweeperCleanableRuleEndToEnd(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	owned := replicaItem("n1", "disk-1", "pvc-live-0123abcd")
	rec := orphanRecord("n1", "disk-1", "pvc-a-0123abcd") // no conditions, as an older host left it
	h.seed(t, rec)
	h.judge.Set(mustName(t, owned), orphan.Owned("expected"))
	snap := orphan.Snapshot{Items: []orphan.Item{item, owned}, Scopes: ready(orphan.Scope{NodeID: "n1", Disk: "disk-1"})}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")}

	// A user requests the deletion after the plan was made but before the
	// condition is written: the mark must not withdraw the request.
	plan := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: snap.Scopes, Records: []orphan.Record{rec},
		Candidates: []orphan.Candidate{{Item: item, Verdict: orphan.Orphan("x")}, {Item: owned, Verdict: orphan.Owned("y")}}})
	if err := h.store.RequestDeletion(ctx, rec.Name); err != nil {
		t.Fatal(err)
	}
	res, err := h.sweeper.Sync(ctx, plan)
	if err != nil || len(res.Marked) != 1 || len(res.Purged) != 0 {
		t.Fatalf("first sync = %+v, %v; want one mark and no purge", res, err)
	}
	got, _ := h.store.Get(ctx, rec.Name)
	if !got.Cleanable() || !got.DeletionRequested {
		t.Fatalf("after the mark: cleanable %v, requested %v; want both", got.Cleanable(), got.DeletionRequested)
	}

	_, res, err = h.sweeper.Reconcile(ctx, snap, orphan.Cycle{Selector: cycle.Selector, Scopes: snap.Scopes})
	if err != nil || len(res.Purged) != 1 {
		t.Fatalf("second cycle = %+v, %v; want the purge", res, err)
	}
}

// TestSweeperReportsGuardRefusals: the plan's refusals reach the Result,
// the marks reach the Store, and nothing is deleted.
func TestSweeperReportsGuardRefusals(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	w := newGuardWorld(2, 0, true).status(func(s *orphan.ScopeStatus) { s.NoneExpected = true })
	for _, r := range w.in.Records {
		h.seed(t, r)
	}
	var items []orphan.Item
	for _, c := range w.in.Candidates {
		items = append(items, c.Item)
	}
	_, res, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{Items: items, Scopes: w.in.Scopes}, orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")})
	if err != nil || len(res.Refused) != 2 || len(res.Purged) != 0 || len(h.deleter.Deleted()) != 0 {
		t.Fatalf("Reconcile = %+v, %v; deleted %v; want two refusals and nothing deleted", res, err, h.deleter.Deleted())
	}
	for name := range w.recs {
		got, err := h.store.Get(ctx, name)
		if err != nil || !hasCondition(got, orphan.ConditionPurgeGuarded, metav1.ConditionTrue) {
			t.Fatalf("record %s: %v, conditions %+v; want PurgeGuarded=True", name, err, got.Conditions)
		}
	}
}

func hasCondition(r orphan.Record, typ string, status metav1.ConditionStatus) bool {
	for _, c := range r.Conditions {
		if c.Type == typ {
			return c.Status == status
		}
	}
	return false
}

func mustName(t *testing.T, it orphan.Item) string {
	t.Helper()
	n, err := it.Name()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
