package backupdelete

import "context"

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=interfaces.go -destination=mocks/interfaces.go -package=mocks

// Backupstore is the host adapter to a backup target: the two things the
// deletion engine needs to do there. fsstore.Store implements it on a
// filesystem in Longhorn's layout (an NFS or CIFS mount); a host wraps its
// own engine binary or S3 client the same way. Every implementation should
// pass backupstoretest.RunConformanceTests.
type Backupstore interface {
	// DeleteBackup deletes the backup and everything only it references
	// (for Longhorn's layout: its cfg, then the blocks no remaining backup
	// references). It is called by the Driver from its command
	// goroutines; it must be safe for concurrent use, including for two
	// backups of one volume. It may run for a long time
	// and should return promptly with ctx.Err() when ctx is cancelled.
	//
	// A backup that is already gone is success (nil): a retry after a
	// partial deletion finishes the job. An invalid ref is ErrInvalidRef
	// (not retryable); a conflicting lock is ErrLocked (retryable); any
	// other error is retried with backoff.
	DeleteBackup(ctx context.Context, ref BackupRef) error

	// BackupExists reports whether the backup is still in the backupstore.
	// A backup still being written (Longhorn: its cfg has an empty
	// CreatedTime) exists. It is called by the Driver on every reconcile of
	// a Deleting backup, and by Orphans for each failed backup it scans
	// or judges, from many goroutines at once. An error means "could
	// not tell" and is retried on the next reconcile; it must not be
	// ErrNotFound (that is false, nil).
	BackupExists(ctx context.Context, ref BackupRef) (bool, error)
}

// Collector is an optional ability of a Backupstore, found by type
// assertion: collecting the blocks of a volume that no backup references
// any more, deleting no backup. A Backupstore implements it when its
// DeleteBackup can be cut short after the backup is gone and before the
// blocks only that backup referenced are: s3store.Store's deletion does
// not list every block object (that listing is most of what Longhorn's
// deletion costs on S3), so a process that dies between the two leaves
// those blocks behind, and the backup, being gone, is never deleted again.
//
// The Driver calls it when it is about to finalize a backup whose
// deletion it did not see succeed: it has no record of a command (the
// host restarted: once per volume and Driver) or its command failed. If
// the collection fails, the backup stays Deleting and is reconciled again,
// so its record outlives the leftovers of its deletion. Never called while
// a command for the backup runs. It must delete only blocks that no backup
// of the volume references, in-progress ones included, decided under the
// backupstore's deletion lock.
type Collector interface {
	// CollectVolume collects ref.Volume's unreferenced blocks in
	// ref.Target's backupstore. ref.Name is the backup whose interrupted
	// deletion asks for it, for errors and logs.
	CollectVolume(ctx context.Context, ref BackupRef) error
}

// CompletedBackupDeleter is an optional ability of a Backupstore, found by
// type assertion: deleting a backup only if nothing is writing it any
// more (its creation finished, or died mid-upload), decided where the
// deletion happens. NewOrphans requires it: a failed backup's data is
// purged automatically, and a backup the host reports failed (Unknown:
// the host lost track of it) may still be being written. fsstore.Store
// and backupstoretest.MemStore implement it.
type CompletedBackupDeleter interface {
	// DeleteCompletedBackup is DeleteBackup, except that a backup that
	// may still be being written is not touched: the error wraps
	// ErrInProgress, or ErrLocked when the writer's lock keeps the store
	// from looking. In Longhorn's layout that is a cfg with an empty
	// CreatedTime while a backup lock of its volume is live (not expired:
	// see fsstore); with no live backup lock, the backup's writer died
	// (the backup failed mid-upload, the most common failed backup) and
	// it is deleted with the blocks only it uploaded. A backup whose state
	// cannot be read is not touched either (an error wrapping ErrCorrupt,
	// or a retryable error). The check must hold at the moment of
	// deletion: the store makes it under the same exclusion that keeps
	// backup creators out (fsstore: under the deletion lock). A backup
	// already gone is success. Safe for concurrent use.
	DeleteCompletedBackup(ctx context.Context, ref BackupRef) error
}

// BackupLister is the host adapter to its backup records (Longhorn's Backup
// custom resources, usually from an informer cache). Orphans uses it to
// find failed backups and to re-check one at the moment of deletion. Both
// methods may be called concurrently.
type BackupLister interface {
	// ListBackups returns every backup record, in any order. An error
	// fails the scan that called it (nothing is created or forgotten).
	ListBackups(ctx context.Context) ([]Backup, error)

	// GetBackup returns the record of exactly ref (the same target,
	// volume and name), or an error wrapping ErrNotFound if the host has
	// no record of it; never another backup's record. Other errors are
	// retryable.
	GetBackup(ctx context.Context, ref BackupRef) (Backup, error)
}

// StatusSource is the host adapter the ProgressMonitor polls while a backup
// is being created: in Longhorn, the engine's backup status call.
type StatusSource interface {
	// BackupStatus returns the creation progress of the backup. It is
	// called from the monitor's goroutine, one call at a time per backup,
	// concurrently for different backups. An error means the status is
	// not readable now (the engine is restarting, the replica is gone); the
	// monitor retries with backoff and gives up after the maximum retry
	// period. A backup the source does not know is such an error, never a
	// zero Progress (which would read as "in progress" forever).
	BackupStatus(ctx context.Context, ref BackupRef) (Progress, error)
}

// Progress is one reading of a backup's creation progress.
type Progress struct {
	State    State  // InProgress, Completed or Error (other states are kept as reported)
	Percent  int    // 0..100
	Error    string // the engine's error text when State is Error
	Snapshot string // the snapshot being backed up, if reported
}
