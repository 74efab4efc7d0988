package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
	"github.com/caretaker-storage/caretaker/internal/clocks"
	"k8s.io/utils/clock"
)

// Options configure a Store: Dir is required, every other field's zero
// value is the documented default.
type Options struct {
	// Dir is the backupstore's mount point: the directory that holds
	// "backupstore/" (an NFS or CIFS mount, or a local directory). It must
	// exist.
	Dir string
	// Clock times the lock protocol (the settle wait, lock expiry, refresh,
	// waiting for a conflicting lock); default the real clock.
	Clock clock.Clock
	// LockWait is how long a deletion waits for a conflicting lock (a
	// backup or restore running on the volume) before failing with
	// backupdelete.ErrLocked. Zero fails after the first look, about
	// LockSettle after the attempt, exactly as Longhorn's FileLock.Lock
	// does; waiting is caretaker's own option. A wait longer than
	// LockRefresh rewrites our waiting lock file every LockRefresh, so that
	// it never looks expired to others while we still count its rank
	// (otherwise a taker that saw our lock as expired and we, who still
	// ranked it first, could both proceed).
	LockWait time.Duration
	// LockCheckInterval is how often a waiting taker looks again; default
	// 10 s.
	LockCheckInterval time.Duration
	// MaxConfigBytes bounds the size of a cfg file read; a larger one is
	// corrupt. Default 256 MiB (a 1 TiB volume of 2 MiB blocks has a
	// ~50 MiB backup cfg).
	MaxConfigBytes int64
	// FullCollection makes every deletion list all block files of the
	// volume, as Longhorn does. By default a Store lists them (collecting
	// blocks leaked by earlier skipped or interrupted collections, ours or
	// Longhorn's) on its first deletion in a volume, and after any
	// collection of its own in that volume that was skipped or failed, or
	// when the deleted cfg is already gone or unreadable; otherwise only
	// the deleted backup's blocks are candidates, which is what keeps
	// collection close to the cost of the unlinks themselves.
	FullCollection bool
}

// ErrNoDir: New was given no Options.Dir.
var ErrNoDir = errors.New("fsstore: Options.Dir is empty: name the backupstore's mount point")

// DefaultMaxConfigBytes is Options.MaxConfigBytes's default.
const DefaultMaxConfigBytes = 256 << 20

// Store is a backupstore on a filesystem, in Longhorn's layout, under a
// mount point (an NFS or CIFS mount, or a local directory). It implements
// backupdelete.Backupstore. All file access is confined to the mount point
// with os.Root: no symlink leads out of it.
//
// A Store is safe for concurrent use; concurrent deletions in one volume
// coordinate through the lock files, like separate processes would.
type Store struct {
	root  *os.Root
	opts  Options
	clock clock.Clock

	// listBackups lists a volume's backups (listBackupNames; tests give a
	// listing that lies).
	listBackups func(vol *os.Root) ([]string, error)

	// leaks holds the volumes in which this Store completed a full
	// collection and every collection since: no block can have leaked
	// through us, so the deleted backup's blocks are the only candidates.
	leaks *lhstore.Leaks
}

// New opens the backupstore mounted at opts.Dir (the directory that
// holds "backupstore/"), which must exist; a missing Dir is an error
// wrapping ErrNoDir.
func New(opts Options) (_ *Store, err error) {
	defer prefixErr(&err)
	dir := opts.Dir
	if dir == "" {
		return nil, ErrNoDir
	}
	// Opening a FIFO blocks; the mount point's type is checked first (it
	// may be a symlink to a directory: the host chose the path).
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: open %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, &FileTypeError{Path: dir, Mode: info.Mode(), Want: "directory"}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: open %s: %w", dir, err)
	}
	if opts.MaxConfigBytes <= 0 {
		opts.MaxConfigBytes = DefaultMaxConfigBytes
	}
	return &Store{root: root, opts: opts, clock: clocks.Or(opts.Clock), listBackups: listBackupNames, leaks: lhstore.NewLeaks(false)}, nil
}

// Close releases the mount point's handle.
func (s *Store) Close() error { return s.root.Close() }

// BackupExists reports whether the backup's cfg is in the backupstore
// (in progress or not). See backupdelete.Backupstore.
func (s *Store) BackupExists(ctx context.Context, ref backupdelete.BackupRef) (_ bool, err error) {
	defer prefixErr(&err)
	if err := ref.Validate(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	_, err = s.root.Stat(path.Join(VolumePath(ref.Volume), backupCfgPath(ref.Name)))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("fsstore: stat backup %s: %w", ref, err)
	}
}

// DeleteBackup deletes a backup and collects its blocks. See
// backupdelete.Backupstore and DeleteBackupReport.
func (s *Store) DeleteBackup(ctx context.Context, ref backupdelete.BackupRef) (err error) {
	defer prefixErr(&err)
	_, err = s.DeleteBackupReport(ctx, ref)
	return err
}

// DeleteBackupReport deletes a backup under a deletion lock, in
// Longhorn's order but for a check first: list the backups and check the
// listing against volume.cfg (its LastBackupName must be listed unless it
// is this backup or really gone; see the package documentation,
// "Deletion": otherwise an error wrapping
// backupdelete.ErrListingInconsistent, and nothing is removed); remove
// backups/backup_<name>.cfg; read every
// remaining backup cfg to find the blocks still referenced and the latest
// backup; list the backups again and compare; unlink the unreferenced
// candidate blocks; update volume.cfg (LastBackupName, LastBackupAt,
// BlockCount); remove the bucket directories (and backups/) it emptied,
// as Longhorn's fsops Remove does. Releasing the lock removes locks/ if
// that leaves it empty. No block is unlinked if any remaining backup is in progress
// or unreadable, or if the backup list changed during the collection; the
// cfg removal stands and a later deletion collects those blocks.
//
// A volume or backup that is already gone is success: the cfg removal is
// skipped and the blocks are still collected, so a retry after a partial
// deletion finishes the job.
func (s *Store) DeleteBackupReport(ctx context.Context, ref backupdelete.BackupRef) (_ Collection, err error) {
	defer prefixErr(&err)
	return s.deleteBackup(ctx, ref, false)
}

// DeleteCompletedBackup is DeleteBackup for a backup whose creation has
// finished: under the deletion lock (which no backup creator holds at the
// same time), before anything is removed, it reads the backup's cfg and
// deletes nothing if the cfg has an empty CreatedTime (an error wrapping
// backupdelete.ErrInProgress) or cannot be read (a FIFO or anything but a
// regular file: ErrFileType; unparsable or oversized: ErrCorrupt; an I/O
// error as it is). A cfg that is already gone is success, and the blocks
// are still collected. See backupdelete.CompletedBackupDeleter.
func (s *Store) DeleteCompletedBackup(ctx context.Context, ref backupdelete.BackupRef) (err error) {
	defer prefixErr(&err)
	_, err = s.deleteBackup(ctx, ref, true)
	return err
}

func (s *Store) deleteBackup(ctx context.Context, ref backupdelete.BackupRef, requireComplete bool) (Collection, error) {
	if err := ref.Validate(); err != nil {
		return Collection{}, err
	}
	vol, err := openDir(s.root, VolumePath(ref.Volume))
	if errors.Is(err, fs.ErrNotExist) {
		return Collection{}, nil
	}
	if err != nil {
		return Collection{}, fmt.Errorf("fsstore: open volume %s: %w", ref.Volume, err)
	}
	defer vol.Close()

	// The lock stops being refreshed when the deletion returns or ctx
	// ends, whichever comes first: a deletion stuck past its context does
	// not hold the volume for longer than LockExpiry (and, cancelled, it
	// unlinks nothing more: see removeBlocks).
	lock, err := s.acquire(ctx, vol, ref.Volume, LockDeletion, ctx.Done(), nil)
	if err != nil {
		return Collection{}, fmt.Errorf("fsstore: delete backup %s: %w", ref, err)
	}
	defer lock.Release()

	// The collection runs under the lock's context: once the lock can no
	// longer be proven held, it unlinks nothing more.
	lctx := lock.Context()
	c, err := s.collect(lctx, vol, ref, requireComplete)
	err = lhformat.WithLockLost(err, context.Cause(lctx))
	if err != nil {
		return c, fmt.Errorf("fsstore: delete backup %s: %w", ref, err)
	}
	return c, nil
}

var (
	_ backupdelete.Backupstore            = (*Store)(nil)
	_ backupdelete.CompletedBackupDeleter = (*Store)(nil)
)
