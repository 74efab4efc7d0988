package instancetest_test

import (
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/internal/testrun"
	"github.com/caretaker-storage/caretaker/orphan"
)

type memHarness struct{ m *instancetest.MemLookup }

func (h memHarness) Lookup(*testing.T) instance.Lookup { return h.m }
func (h memHarness) Put(_ *testing.T, k orphan.Kind, n string, v instance.View) {
	h.m.Put(k, n, v)
}
func (h memHarness) Remove(_ *testing.T, k orphan.Kind, n string) { h.m.Remove(k, n) }

func TestMemLookupConformance(t *testing.T) {
	instancetest.RunConformanceTests(t, instancetest.Harness{Lookup: memHarness{&instancetest.MemLookup{}}})
}

// TestEmptyHarnessFails: a Harness with nothing set must fail.
func TestEmptyHarnessFails(t *testing.T) {
	if testrun.Passes("TestHost", func(t *testing.T) { instancetest.RunConformanceTests(t, instancetest.Harness{}) }) {
		t.Fatal("RunConformanceTests with an empty Harness passed")
	}
}

// A host's Lookup over its informer cache (here MemLookup stands in for
// it) runs the suite in one line of its test; the example runs that test
// itself, so that it can print the outcome.
func ExampleRunConformanceTests() {
	harness := instancetest.Harness{Lookup: memHarness{&instancetest.MemLookup{}}}
	ok := testrun.Passes("TestMyLookup", func(t *testing.T) { instancetest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}
