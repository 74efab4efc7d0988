package orphan_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// notRecoverable marks an item as inspected and holding no data
// (NoData), so the last-copy guard leaves it alone and a test weighs the
// budget only.
func notRecoverable(it orphan.Item) orphan.Item {
	it.Copy = &orphan.Copy{Volume: "gone", Reasons: []string{"the test's data is garbage"}, NoData: true}
	return it
}

// trickle runs issue 21's second case through a Sweeper: a disk of 5
// replica directories whose expected set loses one replica per cycle,
// auto-deletion with no grace period, one cycle a minute, 7 cycles. It
// returns the names purged and the rules of the refusals.
func trickle(t *testing.T, h *sweepHarness) (purged []string, rules map[string]int) {
	t.Helper()
	ctx := context.Background()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	policy := orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	var items []orphan.Item
	for i := range 5 {
		items = append(items, notRecoverable(replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))))
	}
	rules = map[string]int{}
	for cycle := range 7 {
		for i, it := range items {
			v := orphan.Owned("expected")
			if i <= cycle {
				v = orphan.Orphan("no longer expected")
			}
			h.judge.Set(mustName(t, it), v)
		}
		gone := map[string]bool{}
		for _, n := range h.deleter.Deleted() {
			gone[n] = true
		}
		var present []orphan.Item
		for _, it := range items {
			if !gone[mustName(t, it)] {
				present = append(present, it)
			}
		}
		_, res, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{Items: present, Scopes: ready(d1)},
			orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"), Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Refused {
			rule, _, _ := strings.Cut(r.Reason, ":")
			rules[rule]++
		}
		h.clock.Step(time.Minute)
	}
	return h.deleter.Deleted(), rules
}

// TestBudgetStopsTrickledLoss: the budget lets the first two purges of
// the disk through (5 valid items: the allowance is 2) and refuses the
// third, where the guard weighing one cycle at a time purged all five.
func TestBudgetStopsTrickledLoss(t *testing.T) {
	h := newSweepHarness()
	purged, rules := trickle(t, h)
	if len(purged) != 2 || rules[string(orphan.GuardBudget)] == 0 {
		t.Fatalf("purged %v, refusals %v; want 2 purged, then Budget refusals", purged, rules)
	}
}

// TestBudgetHealthyNodeCleansUp: 10 valid items, 5 orphans due at once:
// the allowance (half of 10) lets all 5 go in one cycle; within the hour
// a sixth waits, and once the window has passed it goes too. A person's
// request is never held by the budget.
func TestBudgetHealthyNodeCleansUp(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	now := testEpoch.Add(24 * time.Hour)
	in := orphan.Input{Now: now, Scopes: ready(d1), Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}
	for i := range 10 {
		it := notRecoverable(replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i)))
		v := orphan.Owned("expected")
		if i < 5 {
			v = orphan.Orphan("not expected")
			in.Records = append(in.Records, markCleanable(orphanRecord("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))))
		}
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: it, Verdict: v})
	}
	p := orphan.Decide(in)
	if len(p.Purge) != 5 || len(p.Refused) != 0 || len(p.AutoPurges) != 5 {
		t.Fatalf("first cycle: purges %d, refused %v, ledger %d; want 5, none, 5", len(p.Purge), p.Refused, len(p.AutoPurges))
	}
	// Ten minutes later: the five are gone, a sixth is orphaned.
	next := orphan.Input{Now: now.Add(10 * time.Minute), Scopes: in.Scopes, Policy: in.Policy, AutoPurges: p.AutoPurges}
	next.Candidates = in.Candidates[5:]
	next.Candidates[0].Verdict = orphan.Orphan("not expected")
	sixth := markCleanable(orphanRecord("n1", "disk-1", "pvc-5-0123abcd"))
	next.Records = []orphan.Record{sixth}
	p = orphan.Decide(next)
	if len(p.Purge) != 0 || len(p.Refused) != 1 || !strings.HasPrefix(p.Refused[0].Reason, "Budget:") {
		t.Fatalf("within the hour: purges %d, refused %v; want the sixth refused by Budget", len(p.Purge), p.Refused)
	}
	requested := next
	requested.Records = []orphan.Record{sixth}
	requested.Records[0].DeletionRequested = true
	if p := orphan.Decide(requested); len(p.Purge) != 1 {
		t.Fatalf("a requested purge within the hour: %+v, want it purged", p.Refused)
	}
	next.Now = now.Add(time.Hour)
	next.AutoPurges = p.AutoPurges
	if p = orphan.Decide(next); len(p.Purge) != 1 || len(p.AutoPurges) != 1 {
		t.Fatalf("after the window: purges %d, refused %v, ledger %v; want the sixth purged", len(p.Purge), p.Refused, p.AutoPurges)
	}
}

// TestBudgetOverCycles is the budget's property over sequences of
// cycles: on a disk whose items are orphaned, owned, requested, purged
// and re-created at random, with the ledger carried from plan to plan,
// the automatic purges of any window never exceed the allowance of the
// cycle that made the last of them, and a Planner plans every cycle as
// Decide does.
func TestBudgetOverCycles(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	group := orphan.Group{Kind: orphan.KindReplicaData, DataEngine: orphan.DataEngineV1}
	budgetRefusals := 0
	defer func() {
		if budgetRefusals == 0 {
			t.Errorf("no cycle of any seed met the budget: the property was never put to the test")
		}
	}()
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 21))
		guard := orphan.Guard{MinItems: rng.IntN(4), MaxAutoShare: []float64{0, 0.2, 0.5, 0.8}[rng.IntN(4)],
			BudgetWindow: time.Duration(rng.IntN(3)) * 20 * time.Minute, AllowWholeScope: rng.IntN(2) == 0}
		window := guard.BudgetWindow
		if window <= 0 {
			window = orphan.DefaultGuardBudgetWindow
		}
		share, minItems := guard.MaxAutoShare, guard.MinItems
		if share <= 0 {
			share = orphan.DefaultGuardMaxAutoShare
		}
		if minItems <= 0 {
			minItems = orphan.DefaultGuardMinItems
		}
		n := 2 + rng.IntN(14)
		present := make([]bool, n)
		for i := range present {
			present[i] = true
		}
		records := map[string]orphan.Record{}
		var ledger []orphan.AutoPurge
		var purgedAt []orphan.AutoPurge // the automatic purges so far
		var planner orphan.Planner
		now := testEpoch.Add(24 * time.Hour)
		for cycle := range 30 {
			now = now.Add(time.Duration(1+rng.IntN(15)) * time.Minute)
			in := orphan.Input{Now: now, Scopes: ready(d1), Guard: guard, AutoPurges: ledger, VolumesComplete: true,
				Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}
			valid := 0
			for i := range n {
				if !present[i] && rng.IntN(5) == 0 {
					present[i] = true // a directory written again
				}
				if !present[i] {
					continue
				}
				it := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))
				v := orphan.Owned("expected")
				if rng.IntN(3) == 0 {
					v = orphan.Orphan("not expected")
				}
				in.Candidates = append(in.Candidates, orphan.Candidate{Item: it, Verdict: v})
				valid++
			}
			for _, r := range records {
				if rng.IntN(10) == 0 {
					r.DeletionRequested = true
				}
				in.Records = append(in.Records, r)
			}
			p := orphan.Decide(in)
			for _, r := range p.Refused {
				if strings.HasPrefix(r.Reason, "Budget:") {
					budgetRefusals++
				}
			}
			if pp := planner.Decide(in); !reflect.DeepEqual(p, pp) {
				t.Fatalf("seed %d cycle %d: the Planner's plan differs from Decide's", seed, cycle)
			}
			allowance := max(minItems-1, int(math.Floor(share*float64(valid))))
			inWindow := map[string]bool{} // a name counts once in a window
			for _, e := range purgedAt {
				if e.At.After(now.Add(-window)) {
					inWindow[e.Name] = true
				}
			}
			spent := false
			for _, pu := range p.Purge {
				if pu.Auto && !inWindow[pu.Record.Name] {
					spent = true
					inWindow[pu.Record.Name] = true
					purgedAt = append(purgedAt, orphan.AutoPurge{Name: pu.Record.Name, At: now})
				}
			}
			if spent && len(inWindow) > allowance {
				t.Fatalf("seed %d cycle %d: %d automatic purges within %s, allowance %d of %d valid items", seed, cycle, len(inWindow), window, allowance, valid)
			}
			for _, e := range p.AutoPurges {
				if e.Group != group || e.Scope != d1 || !e.At.After(now.Add(-window)) {
					t.Fatalf("seed %d cycle %d: ledger entry %+v", seed, cycle, e)
				}
			}
			// Apply the plan: records created and forgotten; purged data gone.
			for _, r := range p.Create {
				records[r.Name] = r
			}
			for _, f := range p.Forget {
				delete(records, f.Record.Name)
			}
			for _, pu := range p.Purge {
				delete(records, pu.Record.Name)
				var i int
				fmt.Sscanf(pu.Record.Param(orphan.ParamDataName), "pvc-%d-", &i)
				present[i] = false
			}
			ledger = p.AutoPurges
		}
	}
}

// ledgerStore is a MemStore whose ledger counts its saves and can fail,
// as a host's store can.
type ledgerStore struct {
	*orphan.MemStore
	mu      sync.Mutex
	saves   int
	failing bool
}

func (s *ledgerStore) SaveAutoPurges(ctx context.Context, l []orphan.AutoPurge, version string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return "", errors.New("store down")
	}
	s.saves++
	return s.MemStore.SaveAutoPurges(ctx, l, version)
}

func (s *ledgerStore) ledger(t *testing.T) []orphan.AutoPurge {
	t.Helper()
	l, _, err := s.LoadAutoPurges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestBudgetSurvivesRestartWithALedgerStore: a Sweeper restarted over a
// Store that keeps the ledger goes on counting. A ledger that cannot be
// saved stops the Reconcile before anything is done. Only the Reconciles that plan a
// new automatic purge save (two of the seven).
func TestBudgetSurvivesRestartWithALedgerStore(t *testing.T) {
	h := newSweepHarness()
	ls := &ledgerStore{MemStore: h.store}
	h.sweeper = newSweeper(ls, h.judge, h.deleter, h.clock)
	purged, _ := trickle(t, h)
	if len(purged) != 2 || len(ls.ledger(t)) != 2 || ls.saves != 2 {
		t.Fatalf("purged %v, ledger %v, saves %d; want 2, 2 and 2", purged, ls.ledger(t), ls.saves)
	}
	// A restart: a new Sweeper over the same store and disk. The third
	// directory is still refused.
	ctx := context.Background()
	restarted := newSweeper(ls, h.judge, h.deleter, h.clock)
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	var present []orphan.Item
	for i := 2; i < 5; i++ {
		present = append(present, notRecoverable(replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))))
	}
	h.judge.Set(mustName(t, present[2]), orphan.Owned("expected again"))
	cyc := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"), Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}
	snap := orphan.Snapshot{Items: present, Scopes: ready(d1)}
	_, res, err := restarted.Reconcile(ctx, snap, cyc)
	if err != nil || len(res.Purged) != 0 || len(res.Refused) == 0 || !strings.HasPrefix(res.Refused[0].Reason, "Budget:") {
		t.Fatalf("after a restart with the ledger kept: %+v, %v; want Budget refusals", res, err)
	}
	// Once the window has passed, the save that would reserve the next
	// purges fails: nothing is done.
	h.clock.Step(time.Hour)
	ls.failing = true
	if _, res, err := restarted.Reconcile(ctx, snap, cyc); err == nil || len(res.Purged)+len(res.Marked)+len(res.Created) != 0 || len(h.deleter.Deleted()) != 2 {
		t.Fatalf("a ledger that cannot be saved: %+v, %v, deleted %v; want an error and nothing done", res, err, h.deleter.Deleted())
	}
	ls.failing = false
	if _, res, err := restarted.Reconcile(ctx, snap, cyc); err != nil || len(res.Purged) != 2 {
		t.Fatalf("once it can be saved: %+v, %v; want the two orphans purged", res, err)
	}
}
