// Package orphantest helps test code built on package orphan: one
// conformance suite, RunConformanceTests, that any Store or Adapter
// implementation runs in one line, and small hand-written fakes of an
// Inventory, a Judge and a Deleter (FakeAdapter joins them).
//
// A host's Store on custom resources runs the suite against a test API
// server:
//
//	func TestOrphanStore(t *testing.T) {
//		orphantest.RunConformanceTests(t, orphantest.Harness{
//			Store: func(t *testing.T) orphan.Store { return newCRStore(t, startAPIServer(t)) },
//		})
//	}
//
// An Adapter is checked with an AdapterHarness that makes real orphaned
// and owned data and can tell whether it still exists.
package orphantest
