package orphantest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Harness says what RunConformanceTests checks: one field per interface
// of package orphan that a host or an adapter implements. Nil fields are
// skipped.
type Harness struct {
	// Store makes an empty orphan.Store; it is called once per subtest.
	Store func(t *testing.T) orphan.Store
	// Adapter makes real orphaned and owned data for an orphan.Adapter
	// and looks at it.
	Adapter AdapterHarness
	// Ledger makes an empty Store that is an orphan.LedgerStore and
	// returns a function opening a new handle on it, as a restarted agent
	// or a second agent of the node would: the handles share one ledger
	// and one set of records. It is called once per subtest.
	Ledger func(t *testing.T) (open func() orphan.Store)
}

// AdapterHarness binds an orphan.Adapter to data the harness makes: real
// directories, runtime objects or backups. Every subtest calls Adapter
// first; the other methods act on the world of the adapter it last
// returned, so a harness may give each subtest a fresh world.
// Implementations call t.Fatal on their own failures.
type AdapterHarness interface {
	// Adapter returns the adapter under test, bound to the harness's data.
	Adapter(t *testing.T) orphan.Adapter
	// MakeOrphan creates the data of a new orphan, in a scope the adapter
	// scans and reports Ready, and returns its item as the adapter reports
	// it. Each call makes a different orphan.
	MakeOrphan(t *testing.T) orphan.Item
	// MakeOwned creates data that something in the cluster owns, in the
	// same scope, and returns its item.
	MakeOwned(t *testing.T) orphan.Item
	// Claim makes an orphan's data owned by something in the cluster, as
	// if a replica or instance started to use it after detection.
	Claim(t *testing.T, it orphan.Item)
	// Exists reports whether the item's data is still there.
	Exists(t *testing.T, it orphan.Item) bool
}

// RunConformanceTests checks every implementation h names against the
// contracts of package orphan: "Store" for the Store, and "Adapter"
// (with "Inventory", "Judge", "Deleter" and, where the adapter has it,
// "Finisher") for the Adapter. A Harness with nothing set is a test
// failure. Every Store and Adapter caretaker ships runs it; so can a
// host's:
//
//	func TestConformance(t *testing.T) {
//		orphantest.RunConformanceTests(t, orphantest.Harness{
//			Store: func(t *testing.T) orphan.Store { return newCRStore(t) },
//		})
//	}
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.Store == nil && h.Adapter == nil && h.Ledger == nil {
		t.Fatal("orphantest: the Harness sets nothing to test")
	}
	if h.Store != nil {
		t.Run("Store", func(t *testing.T) { runStoreTests(t, h.Store) })
	}
	if h.Ledger != nil {
		t.Run("Ledger", func(t *testing.T) { runLedgerTests(t, h.Ledger) })
	}
	if h.Adapter != nil {
		t.Run("Adapter", func(t *testing.T) {
			t.Run("Kinds", func(t *testing.T) { runKindsTests(t, h.Adapter) })
			t.Run("Inventory", func(t *testing.T) { runInventoryTests(t, h.Adapter) })
			t.Run("Judge", func(t *testing.T) { runJudgeTests(t, h.Adapter) })
			t.Run("Deleter", func(t *testing.T) { runDeleterTests(t, h.Adapter) })
			t.Run("Finisher", func(t *testing.T) { runFinisherTests(t, h.Adapter) })
		})
	}
}

// record is the record a Sweeper would hand the Deleter for it: created,
// marked DataCleanable=True, its deletion requested.
func record(t *testing.T, it orphan.Item) orphan.Record {
	t.Helper()
	r, err := orphan.NewRecord(it, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("harness: the item cannot be named: %v", err)
	}
	meta.SetStatusCondition(&r.Conditions, metav1.Condition{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable})
	r.DeletionRequested = true
	return r
}

func itemName(t *testing.T, it orphan.Item) string {
	t.Helper()
	name, err := it.Name()
	if err != nil {
		t.Fatalf("the item cannot be named: %v", err)
	}
	return name
}

func runKindsTests(t *testing.T, h AdapterHarness) {
	a := h.Adapter(t)
	kinds := a.Kinds()
	if len(kinds) == 0 {
		t.Fatal("Kinds is empty")
	}
	for _, k := range kinds {
		if !k.Valid() {
			t.Errorf("Kinds holds %q, which is not in orphan's kind table", k)
		}
	}
	if !slices.Equal(kinds, a.Kinds()) {
		t.Errorf("Kinds changed between two calls: %v, then %v", kinds, a.Kinds())
	}
	scoped, isScoped := a.(orphan.EngineScoped)
	for _, it := range []orphan.Item{h.MakeOrphan(t), h.MakeOwned(t)} {
		if !slices.Contains(kinds, it.Kind) {
			t.Errorf("the harness made a %s item, which Kinds %v does not list", it.Kind, kinds)
		}
		if isScoped && !slices.Contains(scoped.DataEngines(), it.DataEngine) {
			t.Errorf("the harness made a %s item of data engine %q, which DataEngines %v does not list", it.Kind, it.DataEngine, scoped.DataEngines())
		}
	}
}

func runInventoryTests(t *testing.T, h AdapterHarness) {
	ctx := context.Background()

	t.Run("ScanListsTheOrphanInAReadyScope", func(t *testing.T) {
		a := h.Adapter(t)
		orph, owned := h.MakeOrphan(t), h.MakeOwned(t)
		snap, err := a.Scan(ctx)
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if !containsItem(t, snap.Items, orph) {
			t.Fatalf("Scan did not list the orphan %v among %d items", orph.Parameters, len(snap.Items))
		}
		st, ok := snap.Scopes[orph.Scope()]
		if !ok || st.Health != orphan.HealthReady {
			t.Fatalf("the orphan's scope %s is %+v (listed: %v), want Ready", orph.Scope(), st, ok)
		}
		// The owned item is either listed, or left out and counted
		// (orphan.Inventory's one pre-filtering rule).
		if !containsItem(t, snap.Items, owned) && snap.Scopes[owned.Scope()].OwnedUnlisted == 0 {
			t.Fatalf("the owned item is neither listed nor counted in ScopeStatus.OwnedUnlisted")
		}
		for _, it := range snap.Items {
			if !slices.Contains(a.Kinds(), it.Kind) {
				t.Errorf("Scan listed a %s item, which Kinds does not list", it.Kind)
			}
		}
	})

	t.Run("ScanIsStable", func(t *testing.T) {
		a := h.Adapter(t)
		h.MakeOrphan(t)
		h.MakeOrphan(t)
		h.MakeOwned(t)
		first, err := a.Scan(ctx)
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		second, err := a.Scan(ctx)
		if err != nil {
			t.Fatalf("second Scan: %v", err)
		}
		if !sameItems(t, first.Items, second.Items) {
			t.Fatalf("two scans of an unchanged world listed different items in different orders")
		}
	})

	t.Run("ScanStopsAtItsContext", func(t *testing.T) {
		a := h.Adapter(t)
		h.MakeOrphan(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = a.Scan(cctx) // an error, or a snapshot from before it looked: both are fine
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Scan with a cancelled context did not return")
		}
	})
}

func runJudgeTests(t *testing.T, h AdapterHarness) {
	ctx := context.Background()

	t.Run("OrphanAndOwned", func(t *testing.T) {
		a := h.Adapter(t)
		orph, owned := h.MakeOrphan(t), h.MakeOwned(t)
		if v, err := a.Judge(ctx, orph); err != nil || v.Outcome != orphan.OutcomeOrphan {
			t.Errorf("Judge(orphan) = %v, %v; want an orphan verdict", v, err)
		}
		if v, err := a.Judge(ctx, owned); err != nil || v.Outcome == orphan.OutcomeOrphan {
			t.Errorf("Judge(owned) = %v, %v; want anything but orphan", v, err)
		}
	})

	t.Run("ClaimedIsNoOrphan", func(t *testing.T) {
		a := h.Adapter(t)
		it := h.MakeOrphan(t)
		h.Claim(t, it)
		if v, err := a.Judge(ctx, it); err != nil || v.Outcome == orphan.OutcomeOrphan {
			t.Errorf("Judge after Claim = %v, %v; want anything but orphan", v, err)
		}
	})

	t.Run("GoneIsNoOrphan", func(t *testing.T) {
		a := h.Adapter(t)
		it := h.MakeOrphan(t)
		if err := a.Delete(ctx, record(t, it)); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if v, err := a.Judge(ctx, it); err == nil && v.Outcome == orphan.OutcomeOrphan {
			t.Errorf("Judge of data that is gone = %v; want anything but orphan (a stale snapshot must not recreate its record)", v)
		}
	})

	t.Run("MalformedItemIsUndecided", func(t *testing.T) {
		a := h.Adapter(t)
		it := h.MakeOrphan(t)
		bad := orphan.Item{Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine, Parameters: map[string]string{}}
		if v, err := a.Judge(ctx, bad); err == nil && v.Outcome == orphan.OutcomeOrphan {
			t.Errorf("Judge of an item without parameters = %v; want anything but orphan", v)
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		a := h.Adapter(t)
		orph, owned := h.MakeOrphan(t), h.MakeOwned(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				it, want := orph, orphan.OutcomeOrphan
				if i%2 == 1 {
					it, want = owned, orphan.OutcomeOwned
				}
				v, err := a.Judge(ctx, it)
				if err != nil || (want == orphan.OutcomeOrphan) != (v.Outcome == orphan.OutcomeOrphan) {
					t.Errorf("concurrent Judge = %v, %v", v, err)
				}
			}()
		}
		wg.Wait()
	})
}

func runFinisherTests(t *testing.T, h AdapterHarness) {
	a := h.Adapter(t)
	f, ok := a.(orphan.Finisher)
	if !ok {
		t.Skip("the adapter is no Finisher")
	}
	orph, owned := h.MakeOrphan(t), h.MakeOwned(t)
	if err := f.FinishInterrupted(context.Background()); err != nil {
		t.Fatalf("FinishInterrupted with nothing interrupted: %v", err)
	}
	if !h.Exists(t, orph) || !h.Exists(t, owned) {
		t.Fatal("FinishInterrupted removed data it had not started to purge")
	}
}

func containsItem(t *testing.T, items []orphan.Item, want orphan.Item) bool {
	t.Helper()
	name := itemName(t, want)
	for _, it := range items {
		if n, err := it.Name(); err == nil && n == name {
			return true
		}
	}
	return false
}

func sameItems(t *testing.T, a, b []orphan.Item) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		na, ea := a[i].Name()
		nb, eb := b[i].Name()
		if (ea == nil) != (eb == nil) || na != nb {
			return false
		}
	}
	return true
}
