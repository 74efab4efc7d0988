package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// This file is block collection: what a deletion does under the volume's
// deletion lock, in Longhorn's order (see Store.DeleteBackupReport).

// Collection says what a deletion did to the volume's blocks: Removed
// (block files unlinked), Referenced, Full, Skipped, Abandoned. It is the
// same type as s3store.Collection.
type Collection = lhstore.Collection

// collectionSteps are a deletion's steps, in order. Each one reads and
// fills the collection; an error stops the deletion there (what was done
// stands: a later deletion finishes the job).
var collectionSteps = []collectionStep{
	{"read the deleted cfg", (*collection).readDeleted},
	{"read volume.cfg", (*collection).readVolume},
	{"list the backups", (*collection).listBackups},
	{"remove the deleted cfg", (*collection).removeCfg},
	{"scan the remaining backups", (*collection).scan},
	{"list the backups again", (*collection).relist},
	{"unlink the unreferenced blocks", (*collection).unlink},
	{"update volume.cfg", (*collection).updateVolume},
	{"remove the directories it emptied", (*collection).tidy},
}

type collectionStep struct {
	name string
	run  func(*collection) error
}

// collection is one deletion in progress: its input, what each step
// found, and the result.
type collection struct {
	s               *Store
	ctx             context.Context
	vol             *os.Root
	ref             backupdelete.BackupRef
	requireComplete bool
	// targeted: this Store collected every block leaked in this volume
	// before, so the deleted backup's blocks are the only candidates.
	targeted bool

	out Collection
	// candidates are the deleted backup's blocks (slices of its cfg's
	// bytes, possibly repeated); nil means "list every block file".
	candidates [][]byte
	volRaw     rawObject
	last       string   // volume.cfg's LastBackupName
	updateLast bool     // the deleted backup was volume.cfg's LastBackupName
	names      []string // the remaining backups, sorted
	latest     lhformat.LatestBackup
	// A targeted collection marks the referenced candidates in idx; a
	// full one (or a recount) builds the set of every referenced block.
	idx        *candidateIndex
	referenced *blockSet
	// emptied are the buckets blocks were unlinked from (see tidy).
	emptied bucketSet
	// bufs hold the deleted cfg's bytes and checksums (candidates alias
	// them); back to the pool when the collection ends.
	bufs *scanBuffers
}

// collect runs the steps under the lock.
func (s *Store) collect(ctx context.Context, vol *os.Root, ref backupdelete.BackupRef, requireComplete bool) (Collection, error) {
	s.mu.Lock()
	targeted := !s.opts.FullCollection && s.swept[ref.Volume]
	s.mu.Unlock()
	c := &collection{s: s, ctx: ctx, vol: vol, ref: ref, requireComplete: requireComplete, targeted: targeted}
	defer func() {
		if c.bufs != nil {
			putScanBuffers(c.bufs)
		}
	}()
	var err error
	for _, step := range collectionSteps {
		if err = step.run(c); err != nil {
			break
		}
	}
	// Only a complete collection vouches for the next targeted one.
	s.mu.Lock()
	s.swept[ref.Volume] = err == nil && c.out.Skipped == "" && (c.out.Full || s.swept[ref.Volume])
	s.mu.Unlock()
	return c.out, err
}

// readDeleted reads the deleted backup's cfg: with requireComplete, an
// unreadable cfg, or one in progress while a backup lock of the volume is
// live (see Store.backupRunning), stops the deletion before anything is
// removed; one in progress with no live backup lock is abandoned and is
// deleted. A cfg in progress makes every block file a candidate. Otherwise Longhorn goes on when the cfg cannot be read: the
// cfg still goes, and the blocks are found by listing. The cfg is read
// into pooled buffers (as the remaining backups' are: see scanBuffers),
// which the candidates alias until the collection ends.
func (c *collection) readDeleted() error {
	if !c.requireComplete && !c.targeted {
		return nil // nothing here needs it: every block file is a candidate
	}
	cfg := backupCfgPath(c.ref.Name)
	c.bufs = getScanBuffers()
	data, _, readErr := readBoundedInto(c.vol, cfg, c.s.opts.MaxConfigBytes, c.bufs.data)
	if readErr != nil {
		if c.requireComplete && !errors.Is(readErr, fs.ErrNotExist) {
			return fmt.Errorf("read %s: %w", cfg, readErr)
		}
		return nil
	}
	c.bufs.data = data
	refs, err := scanBackupInto(data, c.bufs.cks)
	if err == nil {
		c.bufs.cks = refs.checksums
	}
	if c.requireComplete {
		if err != nil {
			return err
		}
		if refs.createdTime == "" {
			// Longhorn's backup creation (deltablock.go
			// CreateDeltaBlockBackup) holds a backup lock, refreshed,
			// from before it writes this in-progress cfg (performBackup)
			// until it has written the final one with a CreatedTime. We
			// hold the deletion lock, which no backup takes beside us;
			// with no backup lock live either, the writer died and the
			// backup never completes.
			if err := c.s.backupRunning(c.vol, c.ref); err != nil {
				return err
			}
			c.out.Abandoned = true
		}
	}
	if err == nil && refs.createdTime == "" {
		// A cfg in progress lists none of the blocks its backup
		// uploaded (performBackup writes them only into the final
		// cfg): they are found by listing every block file.
		return nil
	}
	if err == nil && c.targeted {
		c.candidates = refs.checksums
		if c.candidates == nil {
			c.candidates = [][]byte{}
		}
	}
	return nil
}

// removeCfg removes the deleted backup's cfg. Only a regular file is a
// cfg: anything else at its name (a FIFO, a directory, a symlink) stops
// the deletion before it removes anything.
func (c *collection) removeCfg() error {
	cfg := backupCfgPath(c.ref.Name)
	if err := checkRegularOrAbsent(c.vol, cfg); err != nil {
		return err
	}
	if err := c.vol.Remove(cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", cfg, err)
	}
	return nil
}

// readVolume reads volume.cfg, which the last step rewrites.
func (c *collection) readVolume() error {
	volRaw, volCfg, err := c.s.readVolumeRaw(c.vol)
	if err != nil {
		return err
	}
	c.volRaw, c.last, c.updateLast = volRaw, volCfg.LastBackupName, volCfg.LastBackupName == c.ref.Name
	return nil
}

// listBackups lists the backups that remain (every one but the deleted
// backup) and checks the listing against volume.cfg before anything is
// removed, the deleted backup's cfg included, so that a refused deletion
// leaves the backup there for the Driver to retry: the backup volume.cfg
// names as its last must be listed, unless it is the one being deleted
// or it is really gone (an Lstat of its cfg, a lookup by name rather than
// a read of the directory, finds nothing: a deletion removed it and died
// before it rewrote volume.cfg; see lhformat.UnlistedLast). Otherwise the
// directory listing left out a backup that is there (an NFS client's
// stale directory cache does), and the deletion stops with an error
// wrapping backupdelete.ErrListingInconsistent. Longhorn's
// DeleteDeltaBlockBackup (longhorn/backupstore deltablock.go) trusts the
// listing and deletes the blocks of the backup it left out.
func (c *collection) listBackups() error {
	names, err := c.s.listBackups(c.vol)
	if err != nil {
		return err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == c.ref.Name })
	last, err := lhformat.UnlistedLast(c.last, c.ref.Name, names)
	if err != nil {
		return err
	}
	if last != "" {
		_, err := c.vol.Lstat(backupCfgPath(last))
		switch {
		case err == nil:
			return lhformat.UnlistedLastError(c.ref.Volume, last, len(names))
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("look up %s, volume.cfg's last backup, missing from the listing: %w", backupCfgPath(last), err)
		}
	}
	c.names = names
	return nil
}

// scan reads the remaining backups listBackups listed, to find which
// blocks they still reference and, with updateLast, the latest one.
//
// A targeted collection only needs to know which candidates the remaining
// backups reference: the scanners mark them in an index of the
// candidates, and the new BlockCount is the old one less the distinct
// candidates left unmarked (what the deleted backup alone referenced), the
// way Longhorn's backup creation adds its new blocks to it. That saves
// building the set of every referenced block, which costs more than the
// unlinks. Without an old BlockCount, or when the result is less than the
// candidates still referenced (so the old count was not that of the
// distinct referenced blocks), the referenced set is built after all.
// Full collections always build it.
func (c *collection) scan() error {
	names := c.names
	var add func([][]byte)
	oldCount, haveOld := blockCountOf(c.volRaw)
	if c.candidates != nil && haveOld && len(c.candidates) <= maxIndexed {
		c.idx = newCandidateIndex(c.candidates)
		add = c.idx.mark
	} else {
		c.referenced = newBlockSet()
		add = c.referenced.addAll
	}
	latest, skipped, err := checkScans(names, c.s.scanAll(c.ctx, c.vol, names, add), c.updateLast)
	if err != nil {
		return err
	}
	c.latest, c.out.Skipped = latest, skipped
	switch {
	case c.idx == nil:
		c.out.Referenced = c.referenced.len()
	case c.out.Skipped == "":
		c.out.Referenced = oldCount - c.idx.unmarked()
		if c.out.Referenced < c.idx.marked() {
			// The old BlockCount cannot have been the distinct blocks
			// referenced before this deletion: count them all.
			c.referenced = newBlockSet()
			_, skipped, err := checkScans(names, c.s.scanAll(c.ctx, c.vol, names, c.referenced.addAll), false)
			if err != nil {
				return err
			}
			c.out.Skipped = skipped
			c.out.Referenced = c.referenced.len()
			if c.out.Skipped != "" {
				c.out.Referenced = 0
			}
		}
	}
	return nil
}

// relist lists the backups again: a backup created during the scan may
// reference a candidate, so a changed list collects nothing.
func (c *collection) relist() error {
	if c.out.Skipped != "" {
		return nil
	}
	again, err := c.s.listBackups(c.vol)
	if err != nil || !sameSet(c.names, again) {
		c.out.Skipped = "backup list changed during collection"
	}
	return nil
}

// unlink removes the candidates no remaining backup references. Every
// decision here is made after the scan and the re-list, under the lock.
func (c *collection) unlink() error {
	if c.out.Skipped != "" {
		return nil
	}
	var unref []string
	switch {
	case c.idx != nil:
		// Unmarked by the scan, and absent from the recount if there
		// was one.
		c.idx.each(func(ck string, marked bool) {
			if !marked && (c.referenced == nil || !c.referenced.has([]byte(ck))) {
				unref = append(unref, ck)
			}
		})
	case c.candidates == nil:
		// Every block file is a candidate: list them and unlink the
		// unreferenced ones in one pass (the referenced set is complete
		// and read-only from here on).
		c.out.Full = true
		removed, failed, err := sweepBlocks(c.ctx, c.vol, func(ck []byte) bool {
			if c.referenced.has(ck) {
				return false
			}
			c.emptied.add(ck)
			return true
		})
		c.out.Removed = removed
		return c.unlinked(failed, err)
	default:
		seen := map[string]struct{}{}
		for _, ck := range c.candidates {
			if c.referenced.has(ck) {
				continue
			}
			if _, dup := seen[string(ck)]; !dup {
				seen[string(ck)] = struct{}{}
				unref = append(unref, string(ck))
			}
		}
	}
	for _, ck := range unref {
		c.emptied.add([]byte(ck))
	}
	removed, failed := removeBlocks(c.ctx, c.vol, unref)
	c.out.Removed = removed
	return c.unlinked(failed, nil)
}

// unlinked is the unlink step's error: the context's if it ended (what
// was left is neither removed nor failed), else the listing's, else
// which blocks could not be removed.
func (c *collection) unlinked(failed []string, err error) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
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
// BlockCount when they changed.
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
	if err := writeAtomic(c.vol, volumeCfg, data, c.s.clock); err != nil {
		return fmt.Errorf("update volume.cfg: %w", err)
	}
	return nil
}

// checkScans applies the collection's rules to the scans of names, in
// order: a cancelled read is an error; an unreadable or in-progress
// backup (or, with updateLast, an unparsable SnapshotCreatedAt) is why
// nothing may be collected. Otherwise it returns the latest backup (with
// updateLast).
func checkScans(names []string, scans []scanResult, updateLast bool) (latest lhformat.LatestBackup, skipped string, err error) {
	for i, sc := range scans {
		n := names[i]
		if sc.err != nil {
			if errors.Is(sc.err, context.Canceled) || errors.Is(sc.err, context.DeadlineExceeded) {
				return latest, "", sc.err
			}
			return latest, fmt.Sprintf("backup %s unreadable: %v", n, sc.err), nil
		}
		if sc.createdTime == "" {
			return latest, fmt.Sprintf("backup %s in progress", n), nil
		}
		if updateLast {
			if err := latest.Consider(n, sc.snapshotCreatedAt); err != nil {
				return latest, err.Error(), nil
			}
		}
	}
	return latest, "", nil
}

// blockCountOf is volume.cfg's BlockCount, if it has one.
func blockCountOf(volRaw rawObject) (int, bool) { return volRaw.BlockCount() }

// readVolumeRaw reads volume.cfg both as its members with raw values
// (rewritten with only the changed values replaced, in Longhorn's field
// order, so fields this package does not know survive byte for byte) and
// parsed.
func (s *Store) readVolumeRaw(vol *os.Root) (rawObject, Volume, error) {
	data, _, err := readBounded(vol, volumeCfg, s.opts.MaxConfigBytes)
	if err != nil {
		return rawObject{}, Volume{}, fmt.Errorf("read volume.cfg: %w", err)
	}
	v, err := ParseVolume(data)
	if err != nil {
		return rawObject{}, Volume{}, err
	}
	raw, err := parseVolumeObject(data)
	if err != nil {
		return rawObject{}, Volume{}, corrupt("volume.cfg", err)
	}
	return raw, v, nil
}
