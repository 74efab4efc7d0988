package orphantest_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/testrun"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

type memHarness struct {
	a *orphantest.MemAdapter
	n atomic.Int64
}

func (h *memHarness) Adapter(*testing.T) orphan.Adapter { return h.a }

func (h *memHarness) make(t *testing.T, owned bool) orphan.Item {
	it := orphan.Item{Kind: orphan.KindBackup, NodeID: "n1", Parameters: map[string]string{
		orphan.ParamBackupTarget: "default", orphan.ParamBackupVolume: "vol",
		orphan.ParamBackupName: fmt.Sprintf("backup-%016x", h.n.Add(1))}}
	if err := h.a.Put(it, owned); err != nil {
		t.Fatal(err)
	}
	return it
}

func (h *memHarness) MakeOrphan(t *testing.T) orphan.Item { return h.make(t, false) }
func (h *memHarness) MakeOwned(t *testing.T) orphan.Item  { return h.make(t, true) }
func (h *memHarness) Claim(t *testing.T, it orphan.Item) {
	if err := h.a.Put(it, true); err != nil {
		t.Fatal(err)
	}
}
func (h *memHarness) Exists(_ *testing.T, it orphan.Item) bool { return h.a.Has(it) }

func TestMemAdapterConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Adapter: &memHarness{a: orphantest.NewMemAdapter(orphan.KindBackup)}})
}

func TestMemStoreConformanceFromOutside(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(*testing.T) orphan.Store { return orphan.NewMemStore() }})
}

// TestEmptyHarnessFails: a Harness with nothing set would check nothing,
// and must say so rather than pass.
func TestEmptyHarnessFails(t *testing.T) {
	if testrun.Passes("TestHost", func(t *testing.T) { orphantest.RunConformanceTests(t, orphantest.Harness{}) }) {
		t.Fatal("RunConformanceTests with an empty Harness passed")
	}
}

// A host's own Store (here MemStore stands in for it) runs the whole suite
// in one line of its test:
//
//	func TestMyStore(t *testing.T) { orphantest.RunConformanceTests(t, harness) }
//
// The example runs that test function itself, so that it can print the
// outcome.
func ExampleRunConformanceTests() {
	harness := orphantest.Harness{Store: func(*testing.T) orphan.Store { return orphan.NewMemStore() }}
	ok := testrun.Passes("TestMyStore", func(t *testing.T) { orphantest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}
