// Package backupstoretest helps test code that implements or uses package
// backupdelete's host interfaces, like net/http/httptest does for
// handlers:
//
//   - RunConformanceTests is the contract of every host interface as a
//     test suite, one section per interface (Backupstore,
//     CompletedBackupDeleter, BackupLister, StatusSource); any
//     implementation (fsstore, a host's S3 or engine-binary adapter, its
//     informer-backed lister) runs it in one line.
//   - MemStore is an in-memory Backupstore (and CompletedBackupDeleter)
//     with reference-counted block collection; MemLister an in-memory
//     BackupLister; MemStatusSource an in-memory StatusSource. All pass
//     the suite.
//   - Faulty wraps any Backupstore and injects faults per call: EIO or any
//     error, a hang until the context ends (a timeout), a panic, a partial
//     deletion (the work done, an error returned).
//
// # Host duties
//
//  1. Write a maker for each interface you implement: a fresh, empty store
//     with a way to create a completed backup in it (StoreHarness); if
//     your store is a backupdelete.CompletedBackupDeleter (the
//     failed-backup orphans need one), set Harness.CompletedBackupDeleter
//     too, with StoreHarness.CreateInProgress, so the suite checks that a
//     backup still being written is never deleted, and, if your store
//     tells a backup whose creation died from one being written,
//     StoreHarness.CreateAbandoned, so it checks that such a backup is
//     deleted; a lister holding given records; a status source reporting
//     given progress.
//  2. Call RunConformanceTests(t, harness) from a test.
//  3. Use MemStore, MemLister, MemStatusSource and Faulty to test your
//     controller against adapters that misbehave on cue.
//
// # A complete loop
//
//	func TestMyStore(t *testing.T) {
//		store := func(t *testing.T) backupstoretest.StoreHarness {
//			s := newMyStore(t)
//			return backupstoretest.StoreHarness{Store: s, Create: s.createCompletedBackup, CreateInProgress: s.createRunningBackup}
//		}
//		backupstoretest.RunConformanceTests(t, backupstoretest.Harness{
//			Backupstore:            store,
//			CompletedBackupDeleter: store,
//			BackupLister: func(t *testing.T, records []backupdelete.Backup) backupdelete.BackupLister {
//				return newMyLister(t, records)
//			},
//		})
//	}
//
// # Errors
//
// The suite expects ErrInvalidRef for names that are not valid backupstore
// names, nil for deleting what is gone, and nil or context.Canceled from a
// cancelled context; from a CompletedBackupDeleter, ErrInProgress (or
// ErrLocked, when the writer's lock keeps it from looking) for a backup
// still being written, and nil for one whose creation died; from a BackupLister, ErrNotFound for a
// backup it has no record of (never another backup's record); from a
// StatusSource, an error for a backup it does not know. It retries
// ErrLocked a few times. A Harness with no maker set fails.
//
// # Concurrency
//
// MemStore, MemLister, MemStatusSource and Faulty are safe for concurrent
// use. The suite runs concurrent deletions in two volumes, and concurrent
// calls of the other interfaces.
package backupstoretest
