package instancetest_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
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
