package fsstore

import (
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/storetest"
)

// TestConformance runs the Backupstore and CompletedBackupDeleter
// sections against a Store: a backup in progress holds a live backup
// lock, an abandoned one has none.
func TestConformance(t *testing.T) {
	store := storetest.Conformance(func(t *testing.T) storetest.Store { return openFast(t, t.TempDir(), Options{}) })
	backupstoretest.RunConformanceTests(t, backupstoretest.Harness{Backupstore: store, CompletedBackupDeleter: store})
}
