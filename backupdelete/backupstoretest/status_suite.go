package backupstoretest

import (
	"context"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// This file is the StatusSource section of RunConformanceTests.

func testStatusSource(t *testing.T, newSource func(t *testing.T, progress map[backupdelete.BackupRef]backupdelete.Progress) backupdelete.StatusSource) {
	ctx := context.Background()
	progress := map[backupdelete.BackupRef]backupdelete.Progress{
		{Volume: "vol-a", Name: "backup-0000000000000001"}:                     {State: backupdelete.StateInProgress, Percent: 30, Snapshot: "snap-1"},
		{Volume: "vol-a", Name: "backup-0000000000000002"}:                     {State: backupdelete.StateCompleted, Percent: 100},
		{Target: "target-2", Volume: "vol-b", Name: "backup-0000000000000001"}: {State: backupdelete.StateError, Percent: 40, Error: "replica gone"},
	}
	t.Run("ReportsProgress", func(t *testing.T) {
		s := newSource(t, progress)
		for ref, want := range progress {
			got, err := s.BackupStatus(ctx, ref)
			if err != nil || got != want {
				t.Errorf("BackupStatus(%s) = %+v, %v; want %+v", ref, got, err, want)
			}
		}
	})
	t.Run("UnknownBackupIsAnError", func(t *testing.T) {
		// A zero Progress with no error would read as "in progress,
		// readable": the monitor would poll it forever instead of
		// giving up after its maximum retry period.
		s := newSource(t, progress)
		for _, ref := range []backupdelete.BackupRef{
			{Volume: "vol-a", Name: "backup-0000000000000009"},
			{Target: "target-3", Volume: "vol-b", Name: "backup-0000000000000001"},
		} {
			if p, err := s.BackupStatus(ctx, ref); err == nil {
				t.Errorf("BackupStatus(%s) of an unknown backup = %+v, nil; want an error", ref, p)
			}
		}
	})
	t.Run("ConcurrentForDifferentBackups", func(t *testing.T) {
		s := newSource(t, progress)
		var wg sync.WaitGroup
		for ref, want := range progress {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := s.BackupStatus(ctx, ref)
				if err != nil || got != want {
					t.Errorf("BackupStatus(%s) = %+v, %v; want %+v", ref, got, err, want)
				}
			}()
		}
		wg.Wait()
	})
}
