// Package orphantest helps test code built on package orphan: conformance
// suites that any Store or Deleter implementation runs in one line, and
// small hand-written fakes of Inventory, Judge and Deleter.
//
// A host's Store on custom resources runs the Store suite against a test
// API server:
//
//	func TestOrphanStore(t *testing.T) {
//		orphantest.RunStoreTests(t, func(t *testing.T) orphan.Store {
//			return newCRStore(t, startAPIServer(t))
//		})
//	}
//
// A Deleter is checked with a DeleterHarness that makes real orphaned data
// and can tell whether it still exists; see RunDeleterTests.
package orphantest
