// Package storetest holds the tests fsstore and s3store share, written
// once against what both stores offer: the backupstoretest conformance
// harness for a backupstore in Longhorn's layout (Conformance), and the
// Driver's scenarios over a real store (Host, DriverNormal,
// DriverControllerCrash). Each store's test files call these with its own
// store, so both run every case; the cases only one store can stage (a
// file made immutable, a server refusing a request) stay with that store
// and use Host.
package storetest

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// Store is what fsstore.Store and s3store.Store both offer the tests:
// deletion, and writing Longhorn's files under Longhorn's locks.
type Store interface {
	backupdelete.Backupstore
	// ReadVolume reads volume.cfg (backupdelete.ErrNotFound if missing).
	ReadVolume(ctx context.Context, volume string) (lhformat.Volume, error)
	// WriteVolume, WriteBackup and WriteBlock write Longhorn's files.
	WriteVolume(ctx context.Context, v lhformat.Volume) error
	WriteBackup(ctx context.Context, b lhformat.Backup) error
	WriteBlock(ctx context.Context, volume, checksum string, data []byte) error
	// Lock takes Longhorn's lock of type t on the volume.
	Lock(ctx context.Context, volume string, t lhformat.LockType) (*lhstore.Lock, error)
	// BlockFiles counts a volume's blocks.
	BlockFiles(ctx context.Context, volume string) (int, error)
}

// Checksum returns a valid block checksum derived from seed: 64 lowercase
// hex digits, like Longhorn's util.GetChecksum (the first half of a
// SHA-512 in hex).
func Checksum(seed string) string {
	s := sha512.Sum512([]byte(seed))
	return hex.EncodeToString(s[:])[:64]
}

// Conformance returns the maker backupstoretest.Harness wants for both
// its Backupstore and CompletedBackupDeleter sections, over the fresh,
// empty stores open makes. A backup in progress holds a live backup lock
// until the test ends, as Longhorn's CreateDeltaBlockBackup holds it
// until the backup completes; an abandoned one (its creation died) left
// its cfg and blocks and no lock.
func Conformance(open func(t *testing.T) Store) func(t *testing.T) backupstoretest.StoreHarness {
	return func(t *testing.T) backupstoretest.StoreHarness {
		s := open(t)
		create := func(ctx context.Context, r backupdelete.BackupRef, createdTime string) error {
			if _, err := s.ReadVolume(ctx, r.Volume); err != nil {
				if err := s.WriteVolume(ctx, lhformat.Volume{Name: r.Volume, Size: 4 << 20}); err != nil {
					return err
				}
			}
			shared, own := Checksum(r.Volume), Checksum(r.String())
			for _, ck := range []string{shared, own} {
				if err := s.WriteBlock(ctx, r.Volume, ck, []byte(ck)); err != nil {
					return err
				}
			}
			return s.WriteBackup(ctx, lhformat.Backup{
				Name: r.Name, VolumeName: r.Volume, SnapshotCreatedAt: "2026-11-01T00:00:00Z", CreatedTime: createdTime,
				Blocks: []lhformat.BlockMapping{{Offset: 0, BlockChecksum: shared}, {Offset: 2 << 20, BlockChecksum: own}},
			})
		}
		return backupstoretest.StoreHarness{
			Store: s,
			CreateInProgress: func(ctx context.Context, r backupdelete.BackupRef) error {
				// Not ctx: the lock must outlive the call, to the test's end.
				lock, err := s.Lock(context.Background(), r.Volume, lhformat.LockBackup)
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
}
