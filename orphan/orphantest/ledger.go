package orphantest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// runLedgerTests checks that the Stores open returns keep the guard's
// ledger as orphan.LedgerStore says: a version checked at each save, and
// a budget that holds across restarts (a new Store and Sweeper every
// cycle) and between two Sweepers of one node.
func runLedgerTests(t *testing.T, newLedger func(t *testing.T) (open func() orphan.Store)) {
	t.Helper()
	ctx := context.Background()
	ledgerOf := func(t *testing.T, s orphan.Store) orphan.LedgerStore {
		t.Helper()
		ls, ok := s.(orphan.LedgerStore)
		if !ok {
			t.Fatalf("%T is no orphan.LedgerStore", s)
		}
		return ls
	}

	t.Run("SaveChecksTheVersion", func(t *testing.T) {
		open := newLedger(t)
		ls, other := ledgerOf(t, open()), ledgerOf(t, open())
		l, v0, err := ls.LoadAutoPurges(ctx)
		if err != nil || len(l) != 0 {
			t.Fatalf("an empty store's ledger: %v, %q, %v", l, v0, err)
		}
		at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
		l1 := []orphan.AutoPurge{ledgerEntry("pvc-1-0123abcd", at)}
		v1, err := ls.SaveAutoPurges(ctx, l1, v0)
		if err != nil {
			t.Fatalf("first save: %v", err)
		}
		if _, err := other.SaveAutoPurges(ctx, nil, v0); !errors.Is(err, orphan.ErrConflict) {
			t.Fatalf("a second save at the first version: %v, want ErrConflict", err)
		}
		got, v, err := other.LoadAutoPurges(ctx)
		if err != nil || v != v1 || !sameLedger(got, l1) {
			t.Fatalf("load: %v, %q, %v; want %v at %q", got, v, err, l1, v1)
		}
		l2 := append(got, ledgerEntry("pvc-2-0123abcd", at.Add(time.Minute)))
		if _, err := other.SaveAutoPurges(ctx, l2, v); err != nil {
			t.Fatalf("save at the version loaded: %v", err)
		}
		if _, err := ls.SaveAutoPurges(ctx, l1, v1); !errors.Is(err, orphan.ErrConflict) {
			t.Fatalf("a save at a stale version: %v, want ErrConflict", err)
		}
		if got, _, err := ledgerOf(t, open()).LoadAutoPurges(ctx); err != nil || !sameLedger(got, l2) {
			t.Fatalf("after the stale save: %v, %v; want %v", got, err, l2)
		}
	})

	t.Run("RestartEveryCycle", func(t *testing.T) {
		open := newLedger(t)
		ledgerOf(t, open())
		w := newLedgerWorld(t, 10, false)
		for k := range 24 {
			snap := w.view(k)
			s, err := orphan.NewSweeper(open(), FakeAdapter(nil, w.judge, w.deleter), orphan.SweeperOptions{Clock: w.clock})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Reconcile(ctx, snap, w.cycle); err != nil {
				t.Fatalf("cycle %d: %v", k, err)
			}
			w.tick()
		}
		w.check(t, 5)
	})

	for _, concurrent := range []bool{false, true} {
		t.Run(fmt.Sprintf("TwoSweepers/concurrent=%t", concurrent), func(t *testing.T) {
			open := newLedger(t)
			ledgerOf(t, open())
			w := newLedgerWorld(t, 10, true)
			var sweepers []*orphan.Sweeper
			for range 2 {
				s, err := orphan.NewSweeper(open(), FakeAdapter(nil, w.judge, w.deleter), orphan.SweeperOptions{Clock: w.clock})
				if err != nil {
					t.Fatal(err)
				}
				sweepers = append(sweepers, s)
			}
			for k := range 24 {
				snap := w.view(k)
				if concurrent {
					var wg sync.WaitGroup
					for _, s := range sweepers {
						// A Reconcile may lose a race for a record or the
						// ledger and fail; the next cycle goes on.
						wg.Go(func() { _, _, _ = s.Reconcile(ctx, snap, w.cycle) })
					}
					wg.Wait()
				} else {
					for i := range sweepers {
						if _, _, err := sweepers[(i+k)%2].Reconcile(ctx, snap, w.cycle); err != nil {
							t.Fatalf("cycle %d: %v", k, err)
						}
					}
				}
				w.tick()
			}
			w.check(t, 5)
		})
	}
}

func ledgerEntry(data string, at time.Time) orphan.AutoPurge {
	r := SampleRecord("node-1", data)
	return orphan.AutoPurge{Name: r.Name, Scope: r.Scope(), Group: orphan.Group{Kind: r.Kind, DataEngine: r.DataEngine}, At: at}
}

func sameLedger(a, b []orphan.AutoPurge) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Scope != b[i].Scope || a[i].Group != b[i].Group || !a[i].At.Equal(b[i].At) {
			return false
		}
	}
	return true
}

// ledgerWorld is a disk of replica directories on node-1 whose view
// loses one more each cycle (cycle k: the first k+1 are judged orphans),
// one cycle every 5 minutes, as a crash-looping agent with a broken view
// sees it. With rebuild, each directory deleted is replaced by a new owned
// one, so the disk's allowance stays the same.
type ledgerWorld struct {
	t       *testing.T
	items   []orphan.Item
	rebuild bool
	judge   *Judge
	deleter *Deleter
	clock   *clocktesting.FakeClock
	cycle   orphan.Cycle
	purged  map[string]time.Time // by the clock
}

func newLedgerWorld(t *testing.T, n int, rebuild bool) *ledgerWorld {
	// Stores that stamp records with the server's time need a clock at
	// least as late.
	w := &ledgerWorld{t: t, rebuild: rebuild, judge: &Judge{Default: orphan.Orphan("not expected")}, deleter: &Deleter{},
		clock: clocktesting.NewFakeClock(time.Now().Add(time.Second)), purged: map[string]time.Time{},
		cycle: orphan.Cycle{Selector: orphan.Selector{NodeID: "node-1"},
			Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}},
			Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}}
	for i := range n {
		w.items = append(w.items, unrecoverable(SampleRecord("node-1", fmt.Sprintf("pvc-%d-0123abcd", i)).Item()))
	}
	return w
}

// unrecoverable marks an item inspected and proven to hold none of its
// volume's data (Copy.NoData), so the last-copy guard leaves it alone and
// only the budget weighs it.
func unrecoverable(it orphan.Item) orphan.Item {
	it.Copy = &orphan.Copy{Volume: "gone", Reasons: []string{"test data"}, NoData: true}
	return it
}

func (w *ledgerWorld) view(k int) orphan.Snapshot {
	gone := map[string]bool{}
	for _, n := range w.deleter.Deleted() {
		gone[n] = true
	}
	var present []orphan.Item
	for i, it := range w.items {
		v := orphan.Owned("expected")
		if i <= k {
			v = orphan.Orphan("no longer expected")
		}
		name := itemName(w.t, it)
		w.judge.Set(name, v)
		switch {
		case !gone[name]:
			present = append(present, it)
		case w.rebuild:
			nu := unrecoverable(SampleRecord("node-1", fmt.Sprintf("pvc-%d-rebuilt0", i)).Item())
			w.judge.Set(itemName(w.t, nu), orphan.Owned("rebuilt"))
			present = append(present, nu)
		}
	}
	scope := present[0].Scope()
	return orphan.Snapshot{Items: present, Scopes: map[orphan.Scope]orphan.ScopeStatus{scope: {Health: orphan.HealthReady}}}
}

// tick notes the purges of the cycle and moves the clock on.
func (w *ledgerWorld) tick() {
	for _, n := range w.deleter.Deleted() {
		if _, ok := w.purged[n]; !ok {
			w.purged[n] = w.clock.Now()
		}
	}
	w.clock.Step(5 * time.Minute)
}

// check fails t if an hour saw more than allowance purges, or none
// happened at all (the budget must still let its allowance through).
func (w *ledgerWorld) check(t *testing.T, allowance int) {
	t.Helper()
	if len(w.purged) == 0 {
		t.Fatalf("nothing purged: the budget must let its allowance through")
	}
	for _, from := range w.purged {
		n := 0
		for _, at := range w.purged {
			if !at.Before(from) && at.Sub(from) < time.Hour {
				n++
			}
		}
		if n > allowance {
			t.Fatalf("%d automatic purges within the hour from %s, more than the allowance of %d: %v", n, from, allowance, w.purged)
		}
	}
}
