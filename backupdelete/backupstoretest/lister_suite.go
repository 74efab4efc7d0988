package backupstoretest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// This file is the BackupLister section of RunConformanceTests.

// listerRecords are the records the section asks a lister to hold: two
// targets, two volumes, every state, with and without FailedAt.
func listerRecords() []backupdelete.Backup {
	failedAt := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	return []backupdelete.Backup{
		{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000001"}, State: backupdelete.StateCompleted},
		{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000002"}, State: backupdelete.StateError, FailedAt: failedAt},
		{Ref: backupdelete.BackupRef{Volume: "vol-b", Name: "backup-0000000000000001"}, State: backupdelete.StateUnknown},
		{Ref: backupdelete.BackupRef{Volume: "vol-b", Name: "backup-0000000000000003"}, State: backupdelete.StateDeleting},
		{Ref: backupdelete.BackupRef{Target: "target-2", Volume: "vol-a", Name: "backup-0000000000000001"}, State: backupdelete.StateInProgress},
		{Ref: backupdelete.BackupRef{Target: "target-2", Volume: "vol-a", Name: "backup-0000000000000004"}, State: backupdelete.StateNew},
	}
}

func testBackupLister(t *testing.T, newLister func(t *testing.T, records []backupdelete.Backup) backupdelete.BackupLister) {
	ctx := context.Background()
	t.Run("EmptyListsNothing", func(t *testing.T) {
		l := newLister(t, nil)
		got, err := l.ListBackups(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("ListBackups = %v, %v; want none", got, err)
		}
		r := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000001"}
		if _, err := l.GetBackup(ctx, r); !errors.Is(err, backupdelete.ErrNotFound) {
			t.Fatalf("GetBackup(%s) of an empty lister: %v, want ErrNotFound", r, err)
		}
	})
	t.Run("ListsEveryRecordOnce", func(t *testing.T) {
		records := listerRecords()
		got, err := newLister(t, records).ListBackups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[backupdelete.BackupRef]bool{}
		for _, b := range got {
			if seen[b.Ref] {
				t.Fatalf("ListBackups lists %s twice", b.Ref)
			}
			seen[b.Ref] = true
		}
		if len(got) != len(records) {
			t.Fatalf("ListBackups = %d records, want %d: %v", len(got), len(records), got)
		}
		for _, want := range records {
			i := indexOf(got, want.Ref)
			if i < 0 {
				t.Fatalf("ListBackups does not list %s", want.Ref)
			}
			wantRecord(t, "ListBackups", got[i], want)
		}
	})
	t.Run("GetReturnsThatRecord", func(t *testing.T) {
		records := listerRecords()
		l := newLister(t, records)
		for _, want := range records {
			got, err := l.GetBackup(ctx, want.Ref)
			if err != nil {
				t.Fatalf("GetBackup(%s): %v", want.Ref, err)
			}
			wantRecord(t, "GetBackup", got, want)
		}
	})
	t.Run("GetOfAnotherBackupIsNotFound", func(t *testing.T) {
		// Each differs from a record in one part only: an answer with
		// that record would let a caller act on the wrong backup.
		l := newLister(t, listerRecords())
		for _, r := range []backupdelete.BackupRef{
			{Target: "target-3", Volume: "vol-a", Name: "backup-0000000000000001"},
			{Target: "target-2", Volume: "vol-b", Name: "backup-0000000000000001"},
			{Volume: "vol-a", Name: "backup-0000000000000004"},
			{Volume: "vol-c", Name: "backup-0000000000000001"},
		} {
			if b, err := l.GetBackup(ctx, r); !errors.Is(err, backupdelete.ErrNotFound) {
				t.Errorf("GetBackup(%s) = %+v, %v; want ErrNotFound", r, b, err)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		records := listerRecords()
		l := newLister(t, records)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.ListBackups(ctx); err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = l.GetBackup(ctx, records[i%len(records)].Ref)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func indexOf(bs []backupdelete.Backup, ref backupdelete.BackupRef) int {
	for i, b := range bs {
		if b.Ref == ref {
			return i
		}
	}
	return -1
}

func wantRecord(t *testing.T, call string, got, want backupdelete.Backup) {
	t.Helper()
	if got.Ref != want.Ref || got.State != want.State || !got.FailedAt.Equal(want.FailedAt) {
		t.Fatalf("%s: %+v, want %+v", call, got, want)
	}
}
