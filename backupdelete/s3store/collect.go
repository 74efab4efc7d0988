package s3store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// Collection says what a deletion did to the volume's blocks: Removed,
// Referenced, Full, Skipped, Abandoned. It is the same type as
// fsstore.Collection.
type Collection = lhstore.Collection

// BackupExists reports whether the backup's cfg is in the bucket (in
// progress or not). It lists the cfg's exact key (one ListObjectsV2)
// rather than asking HeadObject, whose 404 has no body and so cannot tell
// a missing object from a missing bucket: a wrong bucket is
// ErrNoSuchBucket, never "gone". See backupdelete.Backupstore.
func (s *Store) BackupExists(ctx context.Context, ref backupdelete.BackupRef) (_ bool, err error) {
	defer prefixErr(&err)
	if err := ref.Validate(); err != nil {
		return false, err
	}
	dir := lhformat.VolumePath(ref.Volume) + "/" + lhformat.BackupsDir
	want := lhformat.BackupPrefix + ref.Name + lhformat.CfgSuffix
	found := false
	err = s.listExact(ctx, dir, want, func() { found = true })
	if err != nil {
		return false, fmt.Errorf("s3store: backup %s: %w", ref, err)
	}
	return found, nil
}

// listExact lists the one key dir/name (a listing whose prefix is the key
// itself) and calls f if it is there.
func (s *Store) listExact(ctx context.Context, dir, name string, f func()) error {
	return s.listPrefix(ctx, dir, name, func(objs []listed) {
		for _, o := range objs {
			if o.name == name {
				f()
			}
		}
	})
}

// DeleteBackup deletes a backup and collects its blocks. See
// backupdelete.Backupstore and DeleteBackupReport.
func (s *Store) DeleteBackup(ctx context.Context, ref backupdelete.BackupRef) (err error) {
	defer prefixErr(&err)
	_, err = s.DeleteBackupReport(ctx, ref)
	return err
}

// DeleteBackupReport deletes a backup under a deletion lock in Longhorn's
// order (see the package documentation, "Deletion"), and says what it
// did to the blocks. A backup or volume already gone is success.
func (s *Store) DeleteBackupReport(ctx context.Context, ref backupdelete.BackupRef) (_ Collection, err error) {
	defer prefixErr(&err)
	return s.deleteBackup(ctx, ref, false)
}

// DeleteCompletedBackup is DeleteBackup for a backup whose creation has
// finished: under the deletion lock, before anything is removed, it
// reads the backup's cfg and deletes nothing if it cannot be read, or if
// its CreatedTime is empty while a backup lock of the volume is live (a
// *BackupRunningError wrapping backupdelete.ErrInProgress). With no live
// backup lock, an in-progress cfg was abandoned by a writer that died and
// is deleted. See backupdelete.CompletedBackupDeleter.
func (s *Store) DeleteCompletedBackup(ctx context.Context, ref backupdelete.BackupRef) (err error) {
	defer prefixErr(&err)
	_, err = s.deleteBackup(ctx, ref, true)
	return err
}

// CollectBlocks lists every block object of the volume and deletes those
// no backup references, under a deletion lock, deleting no backup: the
// full collection Longhorn runs on every deletion. A deletion by this
// Store already does it after a collection of its own in the volume was
// interrupted or skipped; a host runs it to collect what a process that
// crashed between a cfg's deletion and its blocks' left (see the package
// documentation, "Crash safety"), or on a schedule.
func (s *Store) CollectBlocks(ctx context.Context, volume string) (_ Collection, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return Collection{}, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	c, err := s.runCollection(ctx, backupdelete.BackupRef{Volume: volume}, false, true)
	if err != nil {
		return c, fmt.Errorf("s3store: collect blocks of %s: %w", volume, err)
	}
	return c, nil
}

// CollectVolume is CollectBlocks for ref's volume: the
// backupdelete.Collector the Driver calls before it finalizes a backup
// whose deletion it did not see succeed, so that a deletion cut short
// between the backup's cfg and its blocks is finished by the Driver's
// recovery.
func (s *Store) CollectVolume(ctx context.Context, ref backupdelete.BackupRef) (err error) {
	defer prefixErr(&err)
	_, err = s.CollectBlocks(ctx, ref.Volume)
	return err
}

func (s *Store) deleteBackup(ctx context.Context, ref backupdelete.BackupRef, requireComplete bool) (Collection, error) {
	if err := ref.Validate(); err != nil {
		return Collection{}, err
	}
	c, err := s.runCollection(ctx, ref, requireComplete, false)
	if err != nil {
		return c, fmt.Errorf("s3store: delete backup %s: %w", ref, err)
	}
	return c, nil
}

// runCollection runs the collection (lhstore.Collect, the algorithm
// fsstore runs too) under a deletion lock. With sweep, no backup is
// deleted and every block object is a candidate.
func (s *Store) runCollection(ctx context.Context, ref backupdelete.BackupRef, requireComplete, sweep bool) (Collection, error) {
	lock, err := s.acquire(ctx, ref.Volume, LockDeletion)
	if err != nil {
		return Collection{}, err
	}
	defer lock.Release()
	// Every request of the collection runs under the lock's context: once
	// the lock can no longer be proven held, nothing more is deleted.
	lctx := lock.Context()
	c, err := lhstore.Collect(lctx, &volumeObjects{lockObjects: lockObjects{s: s, volume: ref.Volume}, ref: ref}, lhstore.CollectOptions{
		Clock: s.clock, Ref: ref, RequireComplete: requireComplete, Sweep: sweep, FullCollection: s.opts.FullCollection, CountExactly: true,
	}, s.leaks)
	return c, lhformat.WithLockLost(err, context.Cause(lctx))
}

// volumeObjects is a volume's objects as an lhstore.VolumeStorage. Its
// lock methods are lockObjects'.
type volumeObjects struct {
	lockObjects
	ref backupdelete.BackupRef
	// proven: a listing of backups/ of this collection was proven
	// complete (see ListBackups).
	proven bool
}

func (d *volumeObjects) key(rel string) string { return lhformat.VolumePath(d.volume) + "/" + rel }

// ReadVolumeCfg gets volume.cfg, bounded.
func (d *volumeObjects) ReadVolumeCfg(ctx context.Context) ([]byte, error) {
	data, _, err := d.s.get(ctx, d.key(lhformat.VolumeCfg), d.s.opts.MaxConfigBytes)
	return data, err
}

// BackupExists is Store.BackupExists: a listing of the cfg's exact key,
// which tells a missing bucket from a missing object.
func (d *volumeObjects) BackupExists(ctx context.Context, name string) (bool, error) {
	ref := d.ref
	ref.Name = name
	return d.s.BackupExists(ctx, ref)
}

// CfgExists asks HeadObject for the cfg: a lookup by key, not through a
// listing.
func (d *volumeObjects) CfgExists(ctx context.Context, name string) (bool, error) {
	return d.s.exists(ctx, d.key(lhformat.BackupCfgPath(name)))
}

// ReadDeleted gets and parses the deleted backup's cfg.
func (d *volumeObjects) ReadDeleted(ctx context.Context, name string) (lhstore.Deleted, error) {
	data, _, err := d.s.get(ctx, d.key(lhformat.BackupCfgPath(name)), d.s.opts.MaxConfigBytes)
	if err != nil {
		return lhstore.Deleted{}, err
	}
	b, err := lhformat.ParseBackup(data)
	if err != nil {
		return lhstore.Deleted{}, err
	}
	return lhstore.Deleted{Checksums: checksumsOf(b), CreatedTime: b.CreatedTime}, nil
}

func checksumsOf(b lhformat.Backup) [][]byte {
	cks := make([][]byte, len(b.Blocks))
	for i, m := range b.Blocks {
		cks[i] = []byte(m.BlockChecksum)
	}
	return cks
}

// ListBackups lists the backups, a full last page checked (backupNames).
// The first listing of a collection is also proven to end where it says
// (endsAt): the collection's later listings must equal it.
func (d *volumeObjects) ListBackups(ctx context.Context) ([]string, error) {
	names, err := d.s.backupNames(ctx, d.volume, !d.proven)
	if err == nil {
		d.proven = true
	}
	return names, err
}

// RemoveCfg deletes the cfg object (gone already is success).
func (d *volumeObjects) RemoveCfg(ctx context.Context, name string) error {
	return d.s.del(ctx, d.key(lhformat.BackupCfgPath(name)))
}

// ScanBackups gets and parses the cfgs, DeleteConcurrency at a time.
func (d *volumeObjects) ScanBackups(ctx context.Context, names []string, add func([][]byte)) []lhstore.Scan {
	out := make([]lhstore.Scan, len(names))
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range min(d.s.opts.DeleteConcurrency, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				data, _, err := d.s.get(ctx, d.key(lhformat.BackupCfgPath(names[i])), d.s.opts.MaxConfigBytes)
				var b lhformat.Backup
				if err == nil {
					b, err = lhformat.ParseBackup(data)
				}
				if err == nil {
					add(checksumsOf(b))
				}
				out[i] = lhstore.Scan{CreatedTime: b.CreatedTime, SnapshotCreatedAt: b.SnapshotCreatedAt, Err: err}
			}
		}()
	}
	for i := range names {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

// RemoveBlocks deletes the block objects (DeleteObjects, in batches).
func (d *volumeObjects) RemoveBlocks(ctx context.Context, cks []string) (int, []string, error) {
	rels := make([]string, len(cks))
	for i, ck := range cks {
		rels[i] = d.key(lhformat.BlockPath(ck))
	}
	return d.s.delMany(ctx, rels)
}

// SweepBlocks lists every block object of the volume, then deletes the
// unreferenced ones.
func (d *volumeObjects) SweepBlocks(ctx context.Context, unref func([]byte) bool) (int, []string, error) {
	var cks []string
	err := d.s.list(ctx, d.key(lhformat.BlocksDir), true, func(objs []listed, _ []string) error {
		for _, o := range objs {
			if ck, ok := lhformat.BlockFromPath(o.name); ok && unref([]byte(ck)) {
				cks = append(cks, ck)
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return d.RemoveBlocks(ctx, cks)
}

// WriteVolumeCfg puts volume.cfg (a PUT replaces an object whole).
func (d *volumeObjects) WriteVolumeCfg(ctx context.Context, data []byte) error {
	return d.s.put(ctx, d.key(lhformat.VolumeCfg), data)
}

// Tidy: an object store has no directories to remove.
func (d *volumeObjects) Tidy(context.Context) {}

// backupNames lists the names of a volume's backups, sorted: the objects
// backups/backup_<name>.cfg with a valid name, as Longhorn's
// getBackupNamesForVolume keeps them. A listing whose last page holds
// exactly the page size and is marked complete is listed again in pages
// half as large (see checkPageSize), and must agree: a gateway or cache
// that cuts a listing at the page size and drops its continuation would
// otherwise hide every backup past it. Disagreement is an error wrapping
// backupdelete.ErrListingInconsistent.
//
// With prove, a listing that ended on a key is also proven to end there
// (endsAt): a gateway that cuts listings at its own limit, below the page
// size, and marks them complete hides every backup past the cut, which no
// page check sees.
func (s *Store) backupNames(ctx context.Context, volume string, prove bool) ([]string, error) {
	dir := lhformat.VolumePath(volume) + "/" + lhformat.BackupsDir
	names, last, fullEnd, err := s.backupNamesIn(ctx, dir, s.opts.ListPageSize)
	if err != nil {
		return nil, err
	}
	if fullEnd {
		again, _, _, err := s.backupNamesIn(ctx, dir, checkPageSize(s.opts.ListPageSize))
		if err != nil {
			return nil, err
		}
		if !slices.Equal(names, again) {
			return nil, lhformat.PageDisagreement(volume, s.opts.ListPageSize, len(names), len(again))
		}
	}
	if prove && last != "" {
		if err := s.endsAt(ctx, volume, dir, last); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// checkPageSize is the page size of the listing that checks one whose
// last page was full: half as large, or two keys when pages hold one (a
// listing cut at the page size holds a different number of keys at
// either size, unless it really ends there).
func checkPageSize(pageSize int) int {
	if pageSize > 1 {
		return pageSize / 2
	}
	return 2
}

// backupNamesIn lists the backups in dir (see backupNames) in pages of
// pageSize keys, and says whether the last page was full and complete.
// It also returns the name of the last object listed (the greatest), ""
// if none.
func (s *Store) backupNamesIn(ctx context.Context, dir string, pageSize int) (names []string, last string, fullEnd bool, err error) {
	fullEnd, err = s.listFrom(ctx, dir, "", false, pageSize, func(objs []listed, _ []string) error {
		for _, o := range objs {
			last = max(last, o.name)
			if strings.Contains(o.name, "/") {
				continue
			}
			if n := lhformat.BackupNameFromFile(o.name); n != "" && backupdelete.ValidName(n) {
				names = append(names, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", false, err
	}
	slices.Sort(names)
	return names, last, fullEnd, nil
}
