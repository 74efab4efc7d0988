package s3store

import (
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/storetest"
)

// TestConformance runs the Backupstore and CompletedBackupDeleter
// sections against a Store on a real S3 server: a backup in progress
// holds a live backup lock object, an abandoned one has none.
func TestConformance(t *testing.T) {
	store := storetest.Conformance(func(t *testing.T) storetest.Store { return newEnv(t, false, Options{}).store })
	backupstoretest.RunConformanceTests(t, backupstoretest.Harness{Backupstore: store, CompletedBackupDeleter: store})
}
