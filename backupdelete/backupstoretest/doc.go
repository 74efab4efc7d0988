// Package backupstoretest helps test code that uses
// backupdelete.Backupstore, like net/http/httptest does for handlers:
//
//   - RunConformance is the Backupstore contract as a test suite; any
//     implementation (fsstore, a host's S3 or engine-binary adapter) runs it
//     in one line.
//   - MemStore is an in-memory Backupstore (and CompletedBackupDeleter)
//     that passes it, with reference-counted block collection.
//   - Faulty wraps any Backupstore and injects faults per call: EIO or any
//     error, a hang until the context ends (a timeout), a panic, a partial
//     deletion (the work done, an error returned).
//
// # Host duties
//
//  1. Write a harness function returning a fresh, empty store and a way to
//     create a completed backup in it; if your store is a
//     backupdelete.CompletedBackupDeleter (BackupOrphanDeleter needs
//     one), also a way to create a backup still in progress
//     (Harness.CreateInProgress), so the suite checks it is never deleted.
//  2. Call RunConformance(t, harness) from a test.
//  3. Use MemStore and Faulty to test your controller against a store that
//     misbehaves on cue.
//
// # A complete loop
//
//	func TestMyStore(t *testing.T) {
//		backupstoretest.RunConformance(t, func(t *testing.T) backupstoretest.Harness {
//			s := newMyStore(t)
//			return backupstoretest.Harness{Store: s, Create: s.createCompletedBackup}
//		})
//	}
//
// # Errors
//
// The suite expects ErrInvalidRef for names that are not valid backupstore
// names, nil for deleting what is gone, and nil or context.Canceled from a
// cancelled context; from a CompletedBackupDeleter, ErrInProgress for a
// backup still being written. It retries ErrLocked a few times.
//
// # Concurrency
//
// MemStore and Faulty are safe for concurrent use. The suite runs
// concurrent deletions in two volumes.
package backupstoretest
