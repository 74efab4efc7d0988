package s3store

import (
	"context"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
)

// TestConformance runs the Backupstore and CompletedBackupDeleter
// sections against a Store on a real S3 server: a backup in progress
// holds a live backup lock object, an abandoned one has none.
func TestConformance(t *testing.T) {
	store := func(t *testing.T) backupstoretest.StoreHarness {
		s := newEnv(t, false, Options{}).store
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
			CreateInProgress: func(ctx context.Context, r backupdelete.BackupRef) error {
				lock, err := s.Lock(context.Background(), r.Volume, LockBackup)
				if err != nil {
					return err
				}
				t.Cleanup(func() { lock.Release() })
				return create(ctx, r, "")
			},
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
