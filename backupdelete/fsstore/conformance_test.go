package fsstore

import (
	"context"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
)

// TestConformance runs the Backupstore and CompletedBackupDeleter
// sections against a Store: a backup in progress holds a live backup
// lock, an abandoned one has none.
func TestConformance(t *testing.T) {
	store := func(t *testing.T) backupstoretest.StoreHarness {
		s := openFast(t, t.TempDir(), Options{})
		create := func(ctx context.Context, r backupdelete.BackupRef, createdTime string) error {
			if _, err := s.ReadVolume(ctx, r.Volume); err != nil {
				if err := s.WriteVolume(ctx, Volume{Name: r.Volume, Size: 4 << 20}); err != nil {
					return err
				}
			}
			shared, own := checksum(r.Volume), checksum(r.String())
			for _, ck := range []string{shared, own} {
				if err := s.WriteBlock(ctx, r.Volume, ck, []byte(ck)); err != nil {
					return err
				}
			}
			return s.WriteBackup(ctx, Backup{
				Name: r.Name, VolumeName: r.Volume, SnapshotCreatedAt: "2026-11-01T00:00:00Z", CreatedTime: createdTime,
				Blocks: []BlockMapping{{Offset: 0, BlockChecksum: shared}, {Offset: 2 << 20, BlockChecksum: own}},
			})
		}
		return backupstoretest.StoreHarness{
			Store: s,
			// A backup being written holds a backup lock until it
			// completes, as Longhorn's CreateDeltaBlockBackup does.
			CreateInProgress: func(ctx context.Context, r backupdelete.BackupRef) error {
				lock, err := s.Lock(ctx, r.Volume, LockBackup)
				if err != nil {
					return err
				}
				t.Cleanup(func() { lock.Release() })
				return create(ctx, r, "")
			},
			// One whose creation died left its cfg and blocks, and
			// its lock expired (or was never written).
			CreateAbandoned: func(ctx context.Context, r backupdelete.BackupRef) error {
				return create(ctx, r, "")
			},
			Create: func(ctx context.Context, r backupdelete.BackupRef) error {
				return create(ctx, r, "2026-11-01T00:00:00Z")
			},
		}
	}
	backupstoretest.RunConformanceTests(t, backupstoretest.Harness{Backupstore: store, CompletedBackupDeleter: store})
}
