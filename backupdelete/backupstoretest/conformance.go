package backupstoretest

import (
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// Harness says how to make each implementation under test: one field per
// interface of package backupdelete that hosts implement. A nil field
// skips that interface's section; a Harness with none set is a test
// failure, since it would check nothing. Makers are called once per
// subtest; clean up with t.Cleanup.
type Harness struct {
	// Backupstore makes a fresh, empty backupdelete.Backupstore and the
	// ways to put backups in it.
	Backupstore func(t *testing.T) StoreHarness
	// CompletedBackupDeleter makes a fresh, empty backupstore whose Store
	// is also a backupdelete.CompletedBackupDeleter, with
	// CreateInProgress set. A store that is one must set this field as
	// well as Backupstore: the Backupstore section fails otherwise, since
	// the failed-backup orphans rely on its promise never to delete a
	// backup still being written.
	CompletedBackupDeleter func(t *testing.T) StoreHarness
	// BackupLister makes a backupdelete.BackupLister that holds exactly
	// records (valid refs, distinct).
	BackupLister func(t *testing.T, records []backupdelete.Backup) backupdelete.BackupLister
	// StatusSource makes a backupdelete.StatusSource that reports
	// progress for exactly the backups in it, and knows no other.
	StatusSource func(t *testing.T, progress map[backupdelete.BackupRef]backupdelete.Progress) backupdelete.StatusSource
}

// RunConformanceTests checks that the implementations h makes honour the
// contracts of package backupdelete's host interfaces, one subtest per
// interface: "Backupstore", "CompletedBackupDeleter", "BackupLister" and
// "StatusSource". Every implementation runs it in one line; a host's S3
// or engine-binary backupstore, for one:
//
//	func TestMyStore(t *testing.T) {
//		backupstoretest.RunConformanceTests(t, backupstoretest.Harness{
//			Backupstore: func(t *testing.T) backupstoretest.StoreHarness {
//				s := newMyStore(t)
//				return backupstoretest.StoreHarness{Store: s, Create: s.createCompletedBackup}
//			},
//		})
//	}
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.Backupstore == nil && h.CompletedBackupDeleter == nil && h.BackupLister == nil && h.StatusSource == nil {
		t.Fatal("backupstoretest: RunConformanceTests needs at least one maker in the Harness")
	}
	if h.Backupstore != nil {
		t.Run("Backupstore", func(t *testing.T) {
			testBackupstore(t, h.Backupstore)
			if h.CompletedBackupDeleter == nil {
				if s := h.Backupstore(t).Store; isCompletedDeleter(s) {
					t.Errorf("%T is a backupdelete.CompletedBackupDeleter: set Harness.CompletedBackupDeleter too, so that its section runs", s)
				}
			}
		})
	}
	if h.CompletedBackupDeleter != nil {
		t.Run("CompletedBackupDeleter", func(t *testing.T) { testCompletedDeleter(t, h.CompletedBackupDeleter) })
	}
	if h.BackupLister != nil {
		t.Run("BackupLister", func(t *testing.T) { testBackupLister(t, h.BackupLister) })
	}
	if h.StatusSource != nil {
		t.Run("StatusSource", func(t *testing.T) { testStatusSource(t, h.StatusSource) })
	}
}

func isCompletedDeleter(s backupdelete.Backupstore) bool {
	_, ok := s.(backupdelete.CompletedBackupDeleter)
	return ok
}
