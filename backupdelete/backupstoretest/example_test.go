package backupstoretest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/internal/testrun"
)

// A host's own backupstore (here MemStore stands in for it) runs the
// whole suite in one line of its test:
//
//	func TestMyStore(t *testing.T) { backupstoretest.RunConformanceTests(t, harness) }
//
// The example runs that test function itself, so that it can print the
// outcome.
func ExampleRunConformanceTests() {
	store := func(t *testing.T) backupstoretest.StoreHarness {
		m := backupstoretest.NewMemStore()
		return backupstoretest.StoreHarness{
			Store: m,
			Create: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.Put(r, false, "shared-block", r.Name)
			},
			CreateInProgress: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.Put(r, true, "shared-block", r.Name)
			},
		}
	}
	harness := backupstoretest.Harness{Backupstore: store, CompletedBackupDeleter: store}
	ok := testrun.Passes("TestMyStore", func(t *testing.T) { backupstoretest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}
