package s3store

import (
	"context"
	"errors"
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

// runCollection runs the steps under a deletion lock. With sweep, no
// backup is deleted and every block object is a candidate.
func (s *Store) runCollection(ctx context.Context, ref backupdelete.BackupRef, requireComplete, sweep bool) (Collection, error) {
	lock, err := s.acquire(ctx, ref.Volume, LockDeletion)
	if err != nil {
		return Collection{}, err
	}
	defer lock.Release()
	s.mu.Lock()
	dirty := s.dirty[ref.Volume]
	s.mu.Unlock()
	// Every request of the collection runs under the lock's context: once
	// the lock can no longer be proven held, nothing more is deleted.
	c := &collection{s: s, ctx: lock.Context(), ref: ref, vol: lhformat.VolumePath(ref.Volume), requireComplete: requireComplete,
		sweep: sweep, full: sweep || dirty || s.opts.FullCollection}
	steps := []func() error{c.readVolume, c.readDeleted, c.listBackups, c.removeCfg, c.scan, c.relist, c.remove, c.updateVolume}
	if sweep {
		steps = []func() error{c.readVolume, c.listBackups, c.scan, c.relist, c.remove, c.updateVolume}
	}
	for _, step := range steps {
		if c.done {
			break
		}
		if err = step(); err != nil {
			break
		}
	}
	err = lhformat.WithLockLost(err, context.Cause(c.ctx))
	// A collection that removed a cfg and did not finish deleting its
	// blocks, or skipped them, leaves blocks no backup references; this
	// Store's next deletion in the volume lists them. One that listed
	// every block and finished leaves none.
	s.mu.Lock()
	switch {
	case (err != nil && c.cfgRemoved) || (err == nil && c.out.Skipped != "" && !c.done):
		s.dirty[ref.Volume] = true
	case err == nil && c.out.Full && c.out.Skipped == "":
		delete(s.dirty, ref.Volume)
	}
	s.mu.Unlock()
	return c.out, err
}

// collection is one deletion in progress under its lock.
type collection struct {
	s               *Store
	ctx             context.Context
	ref             backupdelete.BackupRef
	vol             string // the volume's directory
	requireComplete bool
	sweep           bool // CollectBlocks: no backup is deleted
	full            bool // every block object is a candidate
	done            bool // nothing more to do
	cfgRemoved      bool

	out Collection
	// candidates are the deleted backup's distinct blocks; nil means
	// "list every block object".
	candidates []string
	volRaw     lhformat.RawObject
	last       string // volume.cfg's LastBackupName
	updateLast bool
	names      []string // the remaining backups, sorted
	referenced map[string]struct{}
	latest     lhformat.LatestBackup
}

// readVolume reads volume.cfg, which the last step rewrites. A volume
// with no volume.cfg and no cfg for the backup is gone: success.
func (c *collection) readVolume() error {
	data, _, err := c.s.get(c.ctx, c.vol+"/"+lhformat.VolumeCfg, c.s.opts.MaxConfigBytes)
	if errors.Is(err, backupdelete.ErrNotFound) && c.sweep {
		c.done = true // no volume.cfg: no volume to collect in
		return nil
	}
	if errors.Is(err, backupdelete.ErrNotFound) {
		exists, xerr := c.s.BackupExists(c.ctx, c.ref)
		if xerr != nil {
			return xerr
		}
		if !exists {
			c.done = true
			return nil
		}
		return lhformat.Corrupt("volume.cfg", fmt.Errorf("missing while backup %s is there", c.ref.Name))
	}
	if err != nil {
		return fmt.Errorf("read volume.cfg: %w", err)
	}
	v, err := lhformat.ParseVolume(data)
	if err != nil {
		return err
	}
	raw, err := lhformat.ParseVolumeObject(data)
	if err != nil {
		return lhformat.Corrupt("volume.cfg", err)
	}
	c.volRaw, c.last, c.updateLast = raw, v.LastBackupName, v.LastBackupName == c.ref.Name
	return nil
}

// readDeleted reads the deleted backup's cfg for its blocks, the
// candidates. A cfg already gone (a retry after a partial deletion), or
// unparsable, or in progress (which lists none of the blocks its backup
// uploaded) makes every block object a candidate: they are listed.
// With requireComplete, an unparsable cfg, or one in progress while a
// backup lock is live, stops the deletion before anything is removed. A
// read that fails otherwise (the network, the server) stops it too:
// unlike a filesystem's, such a failure says nothing about the cfg.
func (c *collection) readDeleted() error {
	data, _, err := c.s.get(c.ctx, c.vol+"/"+lhformat.BackupCfgPath(c.ref.Name), c.s.opts.MaxConfigBytes)
	if errors.Is(err, backupdelete.ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, backupdelete.ErrCorrupt) {
		return fmt.Errorf("read %s: %w", lhformat.BackupCfgPath(c.ref.Name), err)
	}
	var b lhformat.Backup
	if err == nil {
		b, err = lhformat.ParseBackup(data)
	}
	if c.requireComplete {
		if err != nil {
			return err
		}
		if b.InProgress() {
			// As fsstore: Longhorn's backup creation holds its backup
			// lock from before it writes this in-progress cfg until it
			// writes the final one; we hold the deletion lock, which no
			// backup takes beside us. No live backup lock: the writer
			// died.
			if err := c.s.backupRunning(c.ctx, c.ref); err != nil {
				return err
			}
			c.out.Abandoned = true
		}
	}
	if err != nil || b.InProgress() || c.full {
		return nil
	}
	seen := make(map[string]struct{}, len(b.Blocks))
	c.candidates = make([]string, 0, len(b.Blocks))
	for _, m := range b.Blocks {
		if _, dup := seen[m.BlockChecksum]; !dup {
			seen[m.BlockChecksum] = struct{}{}
			c.candidates = append(c.candidates, m.BlockChecksum)
		}
	}
	return nil
}

// listBackups lists the backups that remain (every one but the deleted
// backup) and checks the listing before anything is deleted, the deleted
// backup's cfg included, so that a refused deletion leaves the backup
// there for the Driver to retry:
//
//  1. a last page of exactly the page size marked complete must agree
//     with a listing in smaller pages (see backupNames);
//  2. the backup volume.cfg names as its last must be listed, unless it
//     is the one being deleted or it is really gone: a HeadObject of its
//     cfg finds it missing (a deletion removed it and died before it
//     rewrote volume.cfg, see lhformat.UnlistedLast).
//
// Either contradiction is an error wrapping
// backupdelete.ErrListingInconsistent. Longhorn's DeleteDeltaBlockBackup
// (longhorn/backupstore deltablock.go) checks neither and deletes the
// blocks of a backup its listing left out.
func (c *collection) listBackups() error {
	names, err := c.s.backupNames(c.ctx, c.ref.Volume) // 1
	if err != nil {
		return err
	}
	if !c.sweep {
		names = slices.DeleteFunc(names, func(n string) bool { return n == c.ref.Name })
	}
	last, err := lhformat.UnlistedLast(c.last, c.ref.Name, names) // 2
	if err != nil {
		return err
	}
	if last != "" {
		there, err := c.s.exists(c.ctx, c.vol+"/"+lhformat.BackupCfgPath(last))
		if err != nil {
			return fmt.Errorf("look up %s, volume.cfg's last backup, missing from the listing: %w", lhformat.BackupCfgPath(last), err)
		}
		if there {
			return lhformat.UnlistedLastError(c.ref.Volume, last, len(names))
		}
	}
	c.names = names
	return nil
}

// removeCfg deletes the deleted backup's cfg (gone already is success).
func (c *collection) removeCfg() error {
	c.cfgRemoved = true // or perhaps, if the answer is lost
	return c.s.del(c.ctx, c.vol+"/"+lhformat.BackupCfgPath(c.ref.Name))
}

// scan reads the remaining backups listBackups listed (DeleteConcurrency
// at a time), to find the blocks they still reference and, if the deleted
// backup was the last, the latest one. An unreadable or in-progress
// backup means no block is collected (Collection.Skipped).
func (c *collection) scan() error {
	names := c.names
	c.referenced = map[string]struct{}{}
	type result struct {
		b   lhformat.Backup
		err error
	}
	results := make([]result, len(names))
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range min(c.s.opts.DeleteConcurrency, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				data, _, err := c.s.get(c.ctx, c.vol+"/"+lhformat.BackupCfgPath(names[i]), c.s.opts.MaxConfigBytes)
				if err == nil {
					results[i].b, err = lhformat.ParseBackup(data)
				}
				results[i].err = err
			}
		}()
	}
	for i := range names {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err := c.ctx.Err(); err != nil {
		return err
	}
	for i, r := range results {
		n := names[i]
		switch {
		case r.err != nil:
			c.out.Skipped = fmt.Sprintf("backup %s unreadable: %v", n, r.err)
		case r.b.InProgress():
			c.out.Skipped = fmt.Sprintf("backup %s in progress", n)
		case c.updateLast:
			if err := c.latest.Consider(n, r.b.SnapshotCreatedAt); err != nil {
				c.out.Skipped = err.Error()
			}
		}
		if c.out.Skipped != "" {
			c.out.Referenced = 0
			return nil
		}
		for _, m := range r.b.Blocks {
			c.referenced[m.BlockChecksum] = struct{}{}
		}
	}
	c.out.Referenced = len(c.referenced)
	return nil
}

// relist lists the backups again: a backup created during the scan may
// reference a candidate, so a changed list collects nothing.
func (c *collection) relist() error {
	if c.out.Skipped != "" {
		return nil
	}
	again, err := c.s.backupNames(c.ctx, c.ref.Volume)
	if err != nil {
		return err
	}
	if !slices.Equal(c.names, again) {
		c.out.Skipped = "backup list changed during collection"
		c.out.Referenced = 0
	}
	return nil
}

// remove deletes the candidates no remaining backup references. Every
// decision is made after the scan and the re-list, under the lock.
func (c *collection) remove() error {
	if c.out.Skipped != "" {
		return nil
	}
	var unref []string
	if c.candidates == nil {
		c.out.Full = true
		err := c.s.list(c.ctx, c.vol+"/"+lhformat.BlocksDir, true, func(objs []listed, _ []string) error {
			for _, o := range objs {
				ck, ok := lhformat.BlockFromPath(o.name)
				if !ok {
					continue
				}
				if _, ref := c.referenced[ck]; !ref {
					unref = append(unref, ck)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	} else {
		for _, ck := range c.candidates {
			if _, ref := c.referenced[ck]; !ref {
				unref = append(unref, ck)
			}
		}
	}
	rels := make([]string, len(unref))
	for i, ck := range unref {
		rels[i] = c.vol + "/" + lhformat.BlockPath(ck)
	}
	removed, failed, err := c.s.delMany(c.ctx, rels)
	c.out.Removed = removed
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Errorf("failed to remove %d blocks (first %s)", len(failed), failed[0])
	}
	return nil
}

// updateVolume rewrites volume.cfg's LastBackupName, LastBackupAt and
// BlockCount when they changed, every other member as it was.
func (c *collection) updateVolume() error {
	if !c.volRaw.ApplyDeletion(c.updateLast, c.out.Skipped == "", c.latest, c.out.Referenced) {
		return nil
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	data, err := c.volRaw.MarshalVolume()
	if err != nil {
		return err
	}
	if err := c.s.put(c.ctx, c.vol+"/"+lhformat.VolumeCfg, data); err != nil {
		return fmt.Errorf("update volume.cfg: %w", err)
	}
	return nil
}

// backupNames lists the names of a volume's backups, sorted: the objects
// backups/backup_<name>.cfg with a valid name, as Longhorn's
// getBackupNamesForVolume keeps them. A listing whose last page holds
// exactly the page size and is marked complete is listed again in pages
// half as large (see checkPageSize), and must agree: a gateway or cache
// that cuts a listing at the page size and drops its continuation would
// otherwise hide every backup past it. Disagreement is an error wrapping
// backupdelete.ErrListingInconsistent.
func (s *Store) backupNames(ctx context.Context, volume string) ([]string, error) {
	dir := lhformat.VolumePath(volume) + "/" + lhformat.BackupsDir
	names, fullEnd, err := s.backupNamesIn(ctx, dir, s.opts.ListPageSize)
	if err != nil || !fullEnd {
		return names, err
	}
	again, _, err := s.backupNamesIn(ctx, dir, checkPageSize(s.opts.ListPageSize))
	if err != nil {
		return nil, err
	}
	if !slices.Equal(names, again) {
		return nil, lhformat.PageDisagreement(volume, s.opts.ListPageSize, len(names), len(again))
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
func (s *Store) backupNamesIn(ctx context.Context, dir string, pageSize int) (names []string, fullEnd bool, err error) {
	fullEnd, err = s.listFrom(ctx, dir, "", false, pageSize, func(objs []listed, _ []string) error {
		for _, o := range objs {
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
		return nil, false, err
	}
	slices.Sort(names)
	return names, fullEnd, nil
}
