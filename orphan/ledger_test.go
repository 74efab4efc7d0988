package orphan_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// brokenDisk is a disk of n replica directories whose host view loses
// one more each cycle (cycle k: the first k+1 are judged orphans), as a
// crash-looping agent with a broken view sees it. Items purged are gone
// from the next snapshot.
type brokenDisk struct {
	t       *testing.T
	items   []orphan.Item
	judge   *orphantest.Judge
	deleter *orphantest.Deleter
	clock   *clocktesting.FakeClock
	store   orphan.Store
}

func newBrokenDisk(t *testing.T, n int, store orphan.Store) *brokenDisk {
	b := &brokenDisk{t: t, judge: &orphantest.Judge{Default: orphan.Orphan("not expected")}, deleter: &orphantest.Deleter{},
		clock: clocktesting.NewFakeClock(testEpoch), store: store}
	for i := range n {
		b.items = append(b.items, notRecoverable(replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-0123abcd", i))))
	}
	return b
}

func (b *brokenDisk) sweeper() *orphan.Sweeper {
	return newSweeper(b.store, b.judge, b.deleter, b.clock)
}

// view sets the verdicts of cycle k and returns the snapshot of the
// directories not yet deleted. With rebuild, each deleted directory is
// replaced by a new owned one (Longhorn rebuilds the replica), so the
// disk's count of valid items, and its allowance, stay the same.
func (b *brokenDisk) view(k int, rebuild bool) orphan.Snapshot {
	gone := map[string]bool{}
	for _, n := range b.deleter.Deleted() {
		gone[n] = true
	}
	var present []orphan.Item
	for i, it := range b.items {
		v := orphan.Owned("expected")
		if i <= k {
			v = orphan.Orphan("no longer expected")
		}
		b.judge.Set(mustName(b.t, it), v)
		if !gone[mustName(b.t, it)] {
			present = append(present, it)
		} else if rebuild {
			nu := notRecoverable(replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-rebuilt0", i)))
			b.judge.Set(mustName(b.t, nu), orphan.Owned("rebuilt"))
			present = append(present, nu)
		}
	}
	return orphan.Snapshot{Items: present, Scopes: ready(orphan.Scope{NodeID: "n1", Disk: "disk-1"})}
}

var brokenCycle = orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"),
	Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}

// TestBudgetRestartEveryCycle is issue 32's third point: an agent that
// restarts before every cycle (a new Sweeper over the same MemStore),
// with a view that loses one more of a disk's 10 replicas each cycle, one
// cycle every 5 minutes for two hours. The budget (10 valid items: 5 an
// hour) holds across the restarts: no hour sees more than 5 automatic
// purges, where a ledger kept in each Sweeper's memory started afresh
// at every restart.
func TestBudgetRestartEveryCycle(t *testing.T) {
	const rebuild = false
	b := newBrokenDisk(t, 10, orphan.NewMemStore())
	ctx := context.Background()
	var at []time.Time // when each purge happened
	for k := range 24 {
		before := len(b.deleter.Deleted())
		if _, _, err := b.sweeper().Reconcile(ctx, b.view(k, rebuild), brokenCycle); err != nil {
			t.Fatal(err)
		}
		for range len(b.deleter.Deleted()) - before {
			at = append(at, b.clock.Now())
		}
		b.clock.Step(5 * time.Minute)
	}
	checkWindows(t, at, 5)
}

// checkWindows fails t if any hour holds more than allowance of the times.
func checkWindows(t *testing.T, at []time.Time, allowance int) {
	t.Helper()
	for i := range at {
		n := 0
		for _, a := range at[i:] {
			if a.Sub(at[i]) < time.Hour {
				n++
			}
		}
		if n > allowance {
			t.Fatalf("%d automatic purges within the hour from %s, more than the allowance of %d (all: %v)", n, at[i].Format(time.TimeOnly), allowance, at)
		}
	}
	if len(at) == 0 {
		t.Fatalf("nothing purged: the budget must still let the allowance through")
	}
}

// TestBudgetSharedBySweepersOfANode: two Sweepers of one node at once (a
// DaemonSet surge) over one MemStore, each running every cycle, the one
// going first alternating, and in a second run both at once; each
// replica deleted is rebuilt, so the disk keeps 10 valid items and an
// allowance of 5 an hour. Together they stay within one allowance an
// hour, where two ledgers in the Sweepers' memories allowed 5 each.
func TestBudgetSharedBySweepersOfANode(t *testing.T) {
	for _, mode := range []string{"alternating", "concurrent"} {
		t.Run(mode, func(t *testing.T) {
			const rebuild = true
			b := newBrokenDisk(t, 10, orphan.NewMemStore())
			ctx := context.Background()
			sweepers := []*orphan.Sweeper{b.sweeper(), b.sweeper()}
			var at []time.Time
			for k := range 24 {
				before := len(b.deleter.Deleted())
				snap := b.view(k, rebuild)
				if mode == "alternating" {
					for i := range sweepers {
						if _, _, err := sweepers[(i+k)%2].Reconcile(ctx, b.view(k, rebuild), brokenCycle); err != nil {
							t.Fatal(err)
						}
					}
				} else {
					var wg sync.WaitGroup
					for _, s := range sweepers {
						wg.Go(func() {
							// Two agents racing over one store see each
							// other's writes as conflicts now and then;
							// the next cycle goes on.
							s.Reconcile(ctx, snap, brokenCycle) //nolint:errcheck
						})
					}
					wg.Wait()
				}
				for range len(b.deleter.Deleted()) - before {
					at = append(at, b.clock.Now())
				}
				b.clock.Step(5 * time.Minute)
			}
			checkWindows(t, at, 5)
		})
	}
}

// conflictingStore is a MemStore where another Sweeper saves the ledger
// between this one's load and save, once: its entries fill the disk's
// allowance.
type conflictingStore struct {
	*orphan.MemStore
	other []orphan.AutoPurge
	once  sync.Once
}

func (s *conflictingStore) SaveAutoPurges(ctx context.Context, l []orphan.AutoPurge, version string) (string, error) {
	s.once.Do(func() {
		cur, v, err := s.MemStore.LoadAutoPurges(ctx)
		if err == nil {
			_, err = s.MemStore.SaveAutoPurges(ctx, append(cur, s.other...), v)
		}
		if err != nil {
			panic(err)
		}
	})
	return s.MemStore.SaveAutoPurges(ctx, l, version)
}

// TestLedgerConflictDecidesAgain: the save of a Reconcile's ledger conflicts
// with another Sweeper's, which spent the disk's allowance meanwhile. The
// Reconcile loads the ledger again and decides again: its purges are refused
// by the budget, none happens.
func TestLedgerConflictDecidesAgain(t *testing.T) {
	cs := &conflictingStore{MemStore: orphan.NewMemStore()}
	b := newBrokenDisk(t, 5, cs)
	for i := range 2 { // the other Sweeper purged two directories of the disk's 5 a minute ago
		r := orphanRecord("n1", "disk-1", fmt.Sprintf("pvc-other%d-0123abcd", i))
		cs.other = append(cs.other, orphan.AutoPurge{Name: r.Name, Scope: r.Scope(), Group: orphan.Group{Kind: r.Kind, DataEngine: r.DataEngine},
			At: testEpoch.Add(-time.Minute)})
	}
	s := b.sweeper()
	ctx := context.Background()
	if _, _, err := s.Reconcile(ctx, b.view(1, false), brokenCycle); err != nil { // creates the records
		t.Fatal(err)
	}
	b.clock.Step(time.Minute)
	_, res, err := s.Reconcile(ctx, b.view(1, false), brokenCycle)
	if err != nil || len(res.Purged) != 0 || len(b.deleter.Deleted()) != 0 || len(res.Refused) != 2 {
		t.Fatalf("res %+v, err %v, deleted %v; want the 2 purges refused after the conflict", res, err, b.deleter.Deleted())
	}
	for _, r := range res.Refused {
		if !strings.HasPrefix(r.Reason, "Budget:") {
			t.Fatalf("refusal %q, want Budget", r.Reason)
		}
	}
	if l, _, _ := cs.LoadAutoPurges(ctx); len(l) != 2 {
		t.Fatalf("ledger %v, want the other Sweeper's 2 entries only", l)
	}
}

// storeOnly hides a MemStore's LedgerStore methods: a Store that keeps
// no ledger.
type storeOnly struct{ orphan.Store }

// TestBudgetWithoutALedgerWaitsOneWindow: a Sweeper whose Store keeps no
// ledger refuses automatic purges for one budget window after its start
// (it cannot know what a previous run purged), goes on with requested
// ones, and after the window purges automatically within the budget.
func TestBudgetWithoutALedgerWaitsOneWindow(t *testing.T) {
	mem := orphan.NewMemStore()
	b := newBrokenDisk(t, 10, storeOnly{mem})
	s := b.sweeper()
	ctx := context.Background()
	if _, _, err := s.Reconcile(ctx, b.view(2, false), brokenCycle); err != nil { // creates 3 records
		t.Fatal(err)
	}
	b.clock.Step(10 * time.Minute)
	_, res, err := s.Reconcile(ctx, b.view(2, false), brokenCycle)
	if err != nil || len(res.Purged) != 0 || len(res.Refused) != 3 || !strings.Contains(res.Refused[0].Reason, "keeps no ledger") {
		t.Fatalf("within the first window: %+v, %v; want the 3 refused by Budget", res, err)
	}
	recs, _ := mem.List(ctx, orphan.Selector{NodeID: "n1"})
	if err := mem.RequestDeletion(ctx, recs[0].Name); err != nil {
		t.Fatal(err)
	}
	if _, res, err = s.Reconcile(ctx, b.view(2, false), brokenCycle); err != nil || len(res.Purged) != 1 || res.Purged[0] != recs[0].Name {
		t.Fatalf("a requested purge within the first window: %+v, %v; want it purged", res, err)
	}
	b.clock.Step(50 * time.Minute) // one hour after NewSweeper
	if _, res, err = s.Reconcile(ctx, b.view(2, false), brokenCycle); err != nil || len(res.Purged) != 2 {
		t.Fatalf("after the window: %+v, %v; want the other 2 purged", res, err)
	}
}

// downLedger is a MemStore whose ledger cannot be read.
type downLedger struct{ *orphan.MemStore }

func (downLedger) LoadAutoPurges(context.Context) ([]orphan.AutoPurge, string, error) {
	return nil, "", errors.New("ledger unreachable")
}

// TestLedgerReadOnlyForAutomaticPurges: a Reconcile that plans no automatic
// purge (here, only a requested one) neither reads nor writes the ledger,
// so an unreadable ledger does not stop it; a Reconcile that would purge
// automatically fails before doing anything.
func TestLedgerReadOnlyForAutomaticPurges(t *testing.T) {
	mem := orphan.NewMemStore()
	b := newBrokenDisk(t, 10, downLedger{mem})
	s := b.sweeper()
	ctx := context.Background()
	manual := brokenCycle
	manual.Policy = orphan.Policy{}
	if _, res, err := s.Reconcile(ctx, b.view(1, false), manual); err != nil || len(res.Created) != 2 {
		t.Fatalf("creating the records: %+v, %v", res, err)
	}
	recs, _ := mem.List(ctx, orphan.Selector{NodeID: "n1"})
	if err := mem.RequestDeletion(ctx, recs[0].Name); err != nil {
		t.Fatal(err)
	}
	b.clock.Step(time.Minute)
	if _, res, err := s.Reconcile(ctx, b.view(1, false), manual); err != nil || len(res.Purged) != 1 {
		t.Fatalf("a requested purge with the ledger unreadable: %+v, %v; want it purged", res, err)
	}
	if _, res, err := s.Reconcile(ctx, b.view(1, false), brokenCycle); err == nil || len(res.Purged) != 0 || len(b.deleter.Deleted()) != 1 {
		t.Fatalf("an automatic purge with the ledger unreadable: %+v, %v; want an error and nothing purged", res, err)
	}
}

// wrapper embeds a Store as an orphan.Store, which hides its ledger, and
// unwraps to it.
type wrapper struct{ orphan.Store }

func (w wrapper) Unwrap() orphan.Store { return w.Store }

// TestLedgerFoundThroughUnwrap: a Store wrapped by a host (to pin a
// List, say) still shares its ledger when the wrapper unwraps to it: the
// restarted Sweepers of TestBudgetRestartEveryCycle stay in budget, and
// start purging at once (no wait for a window).
func TestLedgerFoundThroughUnwrap(t *testing.T) {
	const rebuild = false
	b := newBrokenDisk(t, 10, wrapper{orphan.NewMemStore()})
	ctx := context.Background()
	var at []time.Time
	for k := range 24 {
		before := len(b.deleter.Deleted())
		if _, _, err := b.sweeper().Reconcile(ctx, b.view(k, rebuild), brokenCycle); err != nil {
			t.Fatal(err)
		}
		for range len(b.deleter.Deleted()) - before {
			at = append(at, b.clock.Now())
		}
		b.clock.Step(5 * time.Minute)
	}
	checkWindows(t, at, 5)
	if !at[0].Before(testEpoch.Add(time.Hour)) {
		t.Fatalf("first purge at %v: the wrapped MemStore's ledger was not found", at[0])
	}
}
