// Package fsstore is a backupstore on a filesystem in Longhorn's on-disk
// layout, with Longhorn's lock protocol: point it at an NFS or CIFS mount
// that Longhorn backs up to, and it deletes backups interoperably with
// Longhorn's own backupstore module. Store implements
// backupdelete.Backupstore and passes backupstoretest.RunConformanceTests.
//
// # In short
//
//	store, err := fsstore.New(fsstore.Options{Dir: "/mnt/nfs-backups"}) // the directory holding backupstore/
//	defer store.Close()
//	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{}) // drv.Reconcile(ctx, req) per backup the user deletes
//	// or directly, under Longhorn's deletion lock:
//	err = store.DeleteBackup(ctx, backupdelete.BackupRef{Volume: "pvc-1", Name: "backup-0123456789abcdef"})
//
// Package s3store is the same store on an S3 backup target.
//
// # Format (every decision, with its source)
//
// Checked against longhorn/backupstore (backupstore.go, config.go, deltablock.go, lock.go,
// vfs/vfs.go). Package s3store shares this format code, so an S3 bucket
// holds the same bytes under the same keys:
//
//   - Paths: <mount>/backupstore/volumes/<c[0:2]>/<c[2:4]>/<volume>/, c
//     the lowercase hex SHA-512 of the volume name; inside, volume.cfg,
//     backups/backup_<name>.cfg, blocks/<ck[0:2]>/<ck[2:4]>/<ck>.blk,
//     locks/<lock>.lck. Volume and backup names must match Longhorn's
//     ValidateName, ^[a-zA-Z0-9][a-zA-Z0-9_.-]+$, so no name is a path.
//   - volume.cfg and backup cfgs are JSON with Go-style capitalised keys,
//     exactly the field names of Longhorn's Volume and Backup structs.
//     int64 fields (Size, BlockCount, NewlyUploadedDataSize,
//     ReUploadedDataSize) are JSON strings ("Size":"2097152"), as
//     `json:",string"` makes them. Longhorn also tags the Volume's string
//     fields BackingImageName, BackingImageChecksum, CompressionMethod,
//     StorageClassName and DataEngine `json:",string"`, which double-encodes
//     them ("DataEngine":"\"v1\""): ParseVolume unwraps them (and accepts a
//     plain string), WriteVolume writes them double-encoded.
//   - A backup cfg is written with Longhorn's field order; ProcessingBlocks
//     (an untagged exported pointer) is null; Blocks is omitted when empty
//     (omitempty); SingleFile is always {"FilePath":""} (omitempty does not
//     drop structs). Readers ignore fields they do not know.
//   - Block checksums are 4..128 lowercase hex digits (Longhorn writes 64:
//     the first half of a SHA-512). Anything else makes the cfg corrupt,
//     never a path.
//   - An empty CreatedTime marks a backup in progress.
//   - A block is named by the first 64 hex digits of the SHA-512 of its
//     uncompressed content (util.GetChecksum, applied in backupBlock
//     before compression; see BlockChecksum); the file holds the
//     compressed bytes, and Longhorn's restore verifies the name against
//     the decompressed block.
//   - Files are written to a temporary name and renamed. Longhorn's
//     temporary name is "<file>.tmp.<unixnano>" (fsops/fsops.go Write and
//     Upload), and so is ours (created exclusively, so two writers never
//     share one). No listing takes one for a cfg, block or lock: each
//     keeps only names ending in its suffix, as Longhorn's
//     util.ExtractNames does. A temporary file a crashed writer left is
//     never removed, and keeps its directory from being removed.
//   - Directories are created with Longhorn's mode, 0700 (fsops
//     preparePath), and removed when a deletion empties them, as
//     Longhorn's fsops Remove does: an emptied blocks/<a>/<b>/,
//     blocks/<a>/, blocks/, backups/ and locks/, never the volume
//     directory, and only with rmdir semantics (a directory that is not
//     empty stays). A backup writer creates a directory and then writes
//     in it; the block and backup directories are removed only under the
//     deletion lock, which excludes backup writers, so none is between
//     the two. locks/ is removed after our lock file, holding nothing, as
//     Longhorn does: a taker that just created it may then fail its
//     attempt (ours create it again), and nothing is lost.
//   - volume.cfg is rewritten key by key: only LastBackupName,
//     LastBackupAt and BlockCount change, every other key keeps its bytes,
//     so fields added by newer Longhorn versions survive. The keys are
//     written in the field order of Longhorn's Volume struct (Name, Size,
//     Labels, CreatedTime, LastBackupName, LastBackupAt, BlockCount,
//     BackingImageName, BackingImageChecksum, CompressionMethod,
//     StorageClassName, DataEngine), as its json.Marshal writes them, then
//     any others in the order the file had them. A key spelled in another
//     case ("blockcount") is the field Longhorn reads it as
//     (encoding/json matches keys regardless of case) and is written under
//     the field's name.
//   - Every cfg read is bounded (Options.MaxConfigBytes, default 256 MiB);
//     a lock file read is bounded at 64 KiB. Going over is ErrTooLarge
//     (caretaker's one "too large" class) and ErrCorrupt.
//
// # Deletion
//
// Store.DeleteBackup follows Longhorn's DeleteDeltaBlockBackup, under a
// deletion lock: read the backup's cfg (an unreadable one is still
// removed), read volume.cfg, list the remaining backups and check the
// listing (below), remove the cfg, read every remaining
// backup cfg to collect the referenced blocks and, if the deleted backup
// was the volume's LastBackupName, the latest remaining backup by
// SnapshotCreatedAt; list the backups again and compare; unlink the
// unreferenced candidate blocks; write volume.cfg (LastBackupName,
// LastBackupAt; BlockCount = the distinct referenced blocks). No block is
// unlinked if a remaining backup is in progress or unreadable, or if the
// backup list changed, and then LastBackupName is cleared rather than
// guessed, as Longhorn does. Last, the bucket directories it unlinked
// from and backups/ are removed if they are empty, and locks/ when the
// lock is released (see the format notes on directories).
//
// A departure for safety: the listing of backups/ is checked against
// volume.cfg before anything is removed. Longhorn's DeleteDeltaBlockBackup
// (longhorn/backupstore deltablock.go, getBackupNamesForVolume) takes the
// directory listing as complete, and a backup it leaves out (an NFS
// client's stale directory cache can) is a backup whose blocks it
// unlinks. Here the backup volume.cfg names as its last (LastBackupName)
// must be listed unless it is the one being deleted, LastBackupName is
// empty, or an Lstat of its cfg (a lookup by name, not a read of the
// directory) finds it gone: a deletion removed it and died before it
// rewrote volume.cfg, which Longhorn's deletion leaves too. Otherwise
// the deletion stops with an error wrapping
// backupdelete.ErrListingInconsistent before the cfg or any block is
// removed; the Driver keeps the backup in Error and retries it after its
// backoff, and the retry finishes once the listing is honest. A
// LastBackupName that is not a valid backup name cannot be checked:
// volume.cfg is corrupt (ErrCorrupt) and nothing is removed. A listing
// that leaves out another backup is not detected, and is trusted as
// Longhorn trusts it. volume.cfg's BlockCount is no check: it drifts from
// the truth in volumes Longhorn wrote (see below), and a mismatch would
// refuse legitimate volumes.
//
// One departure, for speed (Collection.Full, Options.FullCollection):
// Longhorn lists every block file of the volume on every deletion, which
// on a large volume costs far more than the unlinks. A Store lists them on
// its first deletion in a volume, after any collection of its own there
// that was skipped or failed, and when the deleted cfg is already gone or
// unreadable (a retry after a partial deletion); those full listings also
// collect blocks leaked by anyone's earlier skipped or interrupted
// collections. Otherwise only the deleted backup's own blocks are
// candidates. Blocks leaked by another process between two of our
// deletions wait for our next full listing (a new Store, or
// FullCollection).
//
// BlockCount is the number of distinct blocks the remaining backups
// reference; Longhorn counts those that are also present. A full
// collection counts them; a targeted one, so as not to build the set of
// every referenced block, only finds which of its candidates are still
// referenced and writes the old BlockCount less the distinct candidates
// that are not, as Longhorn's backup creation adds its newly uploaded
// blocks to it. It counts them in full instead when volume.cfg has no
// BlockCount or the result is less than the candidates still referenced.
// So a count that drifted (a writer that does not maintain it) is carried
// along until the Store's next full collection.
//
// Store.DeleteCompletedBackup (backupdelete.CompletedBackupDeleter, which
// the failed-backup purge requires) is the same deletion with one more
// check under the deletion lock, before anything is removed: the backup's
// cfg must be a readable, parsable regular file (ErrCorrupt or ErrFileType
// otherwise), and if its CreatedTime is empty, no backup lock (type 1) of
// the volume may be live, by Longhorn's expiry rule on the Store's clock
// (a *BackupRunningError wrapping backupdelete.ErrInProgress otherwise,
// naming the lock; a fresh lock file that cannot be read counts as one).
// Longhorn's backup creation (deltablock.go CreateDeltaBlockBackup) holds
// its backup lock, refreshed every 60 s, from before performBackup writes
// the in-progress cfg until it has written the final one; a backup whose
// cfg still has an empty CreatedTime once no backup lock is live was
// abandoned by a writer that died, and is deleted (Collection.Abandoned).
// Since an in-progress cfg lists none of the blocks its backup uploaded,
// deleting one lists every block file of the volume. Longhorn's
// DeleteDeltaBlockBackup has no such check: it removes the backup whatever
// its CreatedTime (only another backup in progress holds back its block
// collection, as here), and DeleteBackup does the same.
//
// Why a live backup lock cannot appear unseen: the deletion lock is
// acquired only when no live lock of another type ranks before it, and a
// backup taker that comes later ranks after it and, seeing it, gives up
// (Longhorn's FileLock.canAcquire). So while a deletion holds its lock no
// backup writes blocks or cfgs in the volume; the check above also
// refuses on a later taker's lock that has not given up yet.
//
// # Locks
//
// Lock files are locks/lock-<16 hex>.lck holding {"Name","Type","Acquired"};
// type 1 is backup and restore (compatible with each other), 2 is
// deletion. A lock's time is its file's modification time; one older than
// LockExpiry (150 s) is dead; holders rewrite theirs every LockRefresh
// (60 s). To take a lock: write it (not acquired), wait LockSettle (2 s),
// list the locks; a lock of another type that is not expired and ranks
// first (acquired first, then older file time, then smaller name) blocks.
// A lock file that does not parse, or is not a regular file, is skipped, as
// Longhorn does; one that cannot be read for another reason (an I/O error)
// fails the attempt, where Longhorn's lock.go skips it too: a live lock
// skipped that way would let two exclusive takers proceed. The protocol,
// like block collection, is the same code as s3store's. Longhorn's
// FileLock.Lock (longhorn/backupstore lock.go) looks once, after the
// settle, and fails ("failed to acquire lock ... please try again later");
// its old loop that looked again every 10 s for up to 30 s was removed in
// 2020 so that callers retry with backoff instead. By default a Store
// does the same: one look, a refusal about LockSettle after the attempt.
// Options.LockWait is caretaker's own option to wait instead (looking
// every Options.LockCheckInterval). A failure is a *LockConflictError
// wrapping backupdelete.ErrLocked that names the blocking lock. All
// protocol time runs on Options.Clock, so tests use a fake clock; expiry
// compares that clock with file times, which on a shared mount come from
// the server.
//
// A deletion's lock is refreshed until the deletion returns or its
// context ends, whichever is first; once the context has ended no block
// is unlinked and volume.cfg is not written, so a deletion stuck past its
// context (a hung NFS server) holds the volume for at most LockExpiry. A
// Lock from Store.Lock is refreshed until Release. A failed rewrite of
// the lock file is tried again every 10 s; when none has succeeded for
// LockHeldFor (90 s: LockExpiry less a minute for clock skew and work in
// flight), others may soon see the lock expire, so the deletion unlinks
// nothing more and fails with ErrLockLost (Lock.Context ends with that
// cause). Longhorn's refresh ignores failures and its deletion goes on.
//
// # Safety
//
// All access goes through an os.Root at the mount point: no symlink leads
// outside it. On Linux, block files are listed and unlinked through
// descriptors instead (openat, getdents64 and unlinkat relative to the
// blocks directory, itself opened through the os.Root), each bucket level
// opened with O_DIRECTORY|O_NOFOLLOW: stricter still, as no symlinked
// bucket is followed at all, and a FIFO at a bucket's place is refused
// before it is opened. Deleting what is already gone is success, and the block
// collection still runs, so a retry finishes an interrupted deletion.
// Files that are not cfgs, blocks or locks are never removed; a
// directory only when it is empty.
//
// No file is opened before its type is known. Lstat (which opens nothing
// and follows no symlink) comes first; a regular file is then opened
// O_RDONLY|O_NONBLOCK and its fstat must be the file Lstat saw; a
// directory is opened as "<dir>/.", which the kernel refuses at once when
// <dir> is not one. A FIFO, socket, device or symlink where the layout has
// a lock file, a cfg, volume.cfg, a blocks directory level, the backups or
// locks directory or the volume directory is a *FileTypeError (ErrFileType,
// also backupdelete.ErrCorrupt), never a blocked open: as a lock file or a
// remaining backup's cfg it is skipped like an unreadable one (the latter
// stops block collection); as the deleted backup's cfg, volume.cfg or a
// directory it fails the deletion, which then releases its lock. Nothing
// of the wrong type is removed. A full collection lists and unlinks only
// regular files at block names (the directory entry's type, or Lstat when
// the filesystem gives none); it lists a bucket whole, then unlinks its
// unreferenced blocks through the descriptor it listed it with, the
// decision having been made before the listing began; just before each
// unlink the name is looked at again (fstatat with AT_SYMLINK_NOFOLLOW:
// nothing opened, no symlink followed), and what replaced the block file
// meanwhile (a FIFO, a symlink, a directory) stays. A targeted collection
// unlinks its candidates by name with the same check just before each
// unlink, through the descriptor of the bucket it unlinks from: only a
// regular file goes; a FIFO, symlink or directory (empty or not) at a
// candidate's name stays, counted neither removed nor failed.
//
// # Host duties
//
//  1. Open the mount point with New(Options{Dir: ...}); Close it when done.
//  2. Pass the Store to backupdelete.NewDriver (or call DeleteBackup
//     yourself).
//  3. If you also create backups, take Store.Lock(ctx, volume, LockBackup)
//     around writing blocks and the cfg, and release it.
//
// # A complete loop
//
//	store, err := fsstore.New(fsstore.Options{Dir: "/mnt/backupstore", LockWait: time.Minute})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	vols, _ := store.Volumes(ctx)
//	for _, v := range vols {
//		names, _ := store.Backups(ctx, v)
//		fmt.Println(v, names)
//	}
//	c, err := store.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0123456789abcdef"})
//	fmt.Println(c.Removed, "blocks removed", err)
//
// # Errors
//
// backupdelete.ErrInvalidRef for invalid names; backupdelete.ErrLocked
// (as *LockConflictError) for a conflicting lock;
// backupdelete.ErrInProgress (as *BackupRunningError, naming the lock)
// from DeleteCompletedBackup for a backup in progress while a backup lock
// of its volume is live; backupdelete.ErrCorrupt
// for an unparsable or oversized file (oversized also wraps ErrTooLarge,
// as a *bounded.TooLargeError naming the file and the limit), and
// ErrFileType (as *FileTypeError, also ErrCorrupt) for a path of the wrong
// type; backupdelete.ErrNotFound from the Read methods; filesystem errors (EIO, EPERM from an immutable file) are
// returned wrapped, with the path.
//
// # Concurrency
//
// A Store is safe for concurrent use. Deletions in one volume coordinate
// through lock files exactly as separate processes (or Longhorn itself)
// would; two deletions are compatible, and each only removes blocks that
// none of the backups it read references.
package fsstore
