package fsstore

import (
	"context"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// LonghornStore is what a backupstore in Longhorn's layout offers a tool
// besides deletion: Store (a filesystem) and s3store.Store (an S3 bucket)
// both implement it, so a program (the backup-delete example) handles a
// mount and a bucket with one code path.
type LonghornStore interface {
	backupdelete.Backupstore
	backupdelete.CompletedBackupDeleter
	// DeleteBackupReport is DeleteBackup, saying what it did to the
	// volume's blocks.
	DeleteBackupReport(ctx context.Context, ref backupdelete.BackupRef) (Collection, error)
	// Volumes lists the volume names, sorted.
	Volumes(ctx context.Context) ([]string, error)
	// Backups lists a volume's backup names, sorted.
	Backups(ctx context.Context, volume string) ([]string, error)
	// ReadVolume reads volume.cfg (backupdelete.ErrNotFound if missing).
	ReadVolume(ctx context.Context, volume string) (Volume, error)
	// ReadBackup reads a backup cfg (backupdelete.ErrNotFound if missing).
	ReadBackup(ctx context.Context, ref backupdelete.BackupRef) (Backup, error)
	// WriteVolume, WriteBackup and WriteBlock write Longhorn's files.
	WriteVolume(ctx context.Context, v Volume) error
	WriteBackup(ctx context.Context, b Backup) error
	WriteBlock(ctx context.Context, volume, checksum string, data []byte) error
	// Lock takes Longhorn's lock of type t on the volume (a backup
	// creator's LockBackup around writing blocks and cfgs).
	Lock(ctx context.Context, volume string, t LockType) (*Lock, error)
	// BlockFiles counts a volume's blocks.
	BlockFiles(ctx context.Context, volume string) (int, error)
}

var _ LonghornStore = (*Store)(nil)
