package lhstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"k8s.io/utils/clock"
)

// This file is block collection: what a deletion does under the volume's
// deletion lock, in Longhorn's order (longhorn/backupstore deltablock.go
// DeleteDeltaBlockBackup), with the checks Longhorn lacks. It is one
// algorithm over a VolumeStorage, which a filesystem (fsstore) and an S3
// bucket (s3store) implement.

// VolumeStorage is one volume's directory in a backupstore, as block
// collection sees it: its cfgs, its blocks and its locks. Paths are the
// layout's (lhformat). Every method may be called under a context that
// has ended; it then returns promptly.
type VolumeStorage interface {
	LockStorage
	// ReadVolumeCfg reads volume.cfg, bounded; a missing one is an error
	// wrapping backupdelete.ErrNotFound.
	ReadVolumeCfg(ctx context.Context) ([]byte, error)
	// BackupExists reports whether the backup's cfg is there, as
	// backupdelete.Backupstore's BackupExists does.
	BackupExists(ctx context.Context, name string) (bool, error)
	// CfgExists looks the backup's cfg up by its name (never through a
	// listing of backups/): the check of a backup a listing left out.
	CfgExists(ctx context.Context, name string) (bool, error)
	// ReadDeleted reads and parses the deleted backup's cfg. A missing
	// cfg wraps backupdelete.ErrNotFound, one that does not parse (or is
	// not a cfg) backupdelete.ErrCorrupt. The result's checksums may
	// alias buffers the storage reuses after Release.
	ReadDeleted(ctx context.Context, name string) (Deleted, error)
	// ListBackups lists the volume's backup names, sorted: the cfgs
	// backups/backup_<name>.cfg with a valid name. A listing that
	// contradicts itself wraps backupdelete.ErrListingInconsistent.
	ListBackups(ctx context.Context) ([]string, error)
	// RemoveCfg removes the backup's cfg (gone is success); what is not
	// a cfg at its name stays, and is an error.
	RemoveCfg(ctx context.Context, name string) error
	// ScanBackups reads the named cfgs (concurrently, as the storage
	// sees fit) and passes the blocks of each readable one to add
	// (called concurrently; the slices may be reused once add returns),
	// one Scan per name. A cfg that turns out unreadable or in progress
	// may still have added what it had.
	ScanBackups(ctx context.Context, names []string, add func(checksums [][]byte)) []Scan
	// RemoveBlocks removes the named blocks (distinct, valid checksums).
	// One already gone counts as removed; what is at a block's name but
	// is no block stays, counted neither removed nor failed. Once ctx
	// ends nothing more is removed.
	RemoveBlocks(ctx context.Context, checksums []string) (removed int, failed []string, err error)
	// SweepBlocks lists every block of the volume (a valid checksum in
	// the bucket it names) and removes each one for which unref (called
	// concurrently) returns true.
	SweepBlocks(ctx context.Context, unref func(checksum []byte) bool) (removed int, failed []string, err error)
	// WriteVolumeCfg replaces volume.cfg atomically.
	WriteVolumeCfg(ctx context.Context, data []byte) error
	// Tidy removes what the collection emptied (a filesystem's bucket
	// directories and backups/); nothing once ctx has ended.
	Tidy(ctx context.Context)
}

// Deleted is what collection reads of the deleted backup's cfg.
type Deleted struct {
	// Checksums are its blocks, possibly repeated.
	Checksums [][]byte
	// CreatedTime is empty while the backup is in progress.
	CreatedTime string
	// Release, if not nil, gives back the buffers Checksums alias.
	Release func()
}

// Scan is what collection keeps of one remaining backup's cfg (its
// blocks go to ScanBackups's add).
type Scan struct {
	CreatedTime, SnapshotCreatedAt string
	Err                            error
}

// CollectOptions say what to collect.
type CollectOptions struct {
	// Clock judges backup locks (see BackupRunning).
	Clock clock.Clock
	// Ref is the backup being deleted; with Sweep, only its Volume.
	Ref backupdelete.BackupRef
	// RequireComplete: DeleteCompletedBackup (see readDeleted).
	RequireComplete bool
	// Sweep: no backup is deleted and every block is a candidate.
	Sweep bool
	// FullCollection: every block is a candidate, whatever Leaks says.
	FullCollection bool
	// CountExactly: volume.cfg's new BlockCount is always the distinct
	// blocks the remaining backups reference, counted, as Longhorn's is.
	// Without it, a targeted collection derives it from the old
	// BlockCount (see scan), which saves building the set of every
	// referenced block on a filesystem, where that costs more than the
	// unlinks; a count that drifted is then carried along until the next
	// full collection. On S3 the requests dominate, and counting costs
	// none.
	CountExactly bool
	// BeforeStep, if not nil, runs before each step, with its name
	// (tests change the store, or cancel, between two steps).
	BeforeStep func(step string)
}

// Leaks remembers, per volume, whether a collection of this process may
// have left blocks that no backup references (it removed a cfg and did
// not finish collecting, or skipped the collection): the next deletion
// there then lists every block. A volume this process has not collected
// in is assumed clean or not, as the store decides: listing every block
// is cheap on a filesystem (so fsstore assumes not, and its first
// deletion in a volume also collects what others leaked) and costs a
// request per thousand blocks on S3 (so s3store assumes clean, and
// finishes interrupted deletions through backupdelete.Collector).
type Leaks struct {
	mu          sync.Mutex
	clean       map[string]bool
	assumeClean bool
}

// NewLeaks returns a Leaks that takes an unknown volume as clean or not.
func NewLeaks(assumeClean bool) *Leaks {
	return &Leaks{clean: map[string]bool{}, assumeClean: assumeClean}
}

// Clean reports whether no block can have leaked in volume through this
// process: the deleted backup's blocks are then the only candidates.
func (l *Leaks) Clean(volume string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.clean[volume]; ok {
		return c
	}
	return l.assumeClean
}

// Set records whether volume is clean (tests and benchmarks set it).
func (l *Leaks) Set(volume string, clean bool) {
	l.mu.Lock()
	l.clean[volume] = clean
	l.mu.Unlock()
}

// collectionSteps are a deletion's steps, in order. Each one reads and
// fills the collection; an error stops the deletion there (what was done
// stands: a later deletion finishes the job).
var collectionSteps = []struct {
	name  string
	run   func(*collection) error
	sweep bool // also part of a Sweep
}{
	{"read volume.cfg", (*collection).readVolume, true},
	{"read the deleted cfg", (*collection).readDeleted, false},
	{"list the backups", (*collection).listBackups, true},
	{"remove the deleted cfg", (*collection).removeCfg, false},
	{"scan the remaining backups", (*collection).scan, true},
	{"list the backups again", (*collection).relist, true},
	{"unlink the unreferenced blocks", (*collection).unlink, true},
	{"update volume.cfg", (*collection).updateVolume, true},
	{"remove the directories it emptied", (*collection).tidy, true},
}

// StepNames are the names BeforeStep is called with, in order.
func StepNames() []string {
	var out []string
	for _, s := range collectionSteps {
		out = append(out, s.name)
	}
	return out
}

// collection is one deletion in progress: its input, what each step
// found, and the result.
type collection struct {
	st   VolumeStorage
	ctx  context.Context
	o    CollectOptions
	full bool // every block is a candidate
	done bool // nothing more to do (the volume is gone)
	// cfgRemoved: the deleted cfg was (perhaps) removed.
	cfgRemoved bool

	out Collection
	// candidates are the deleted backup's blocks (possibly repeated);
	// nil means "list every block".
	candidates [][]byte
	release    func()
	volRaw     lhformat.RawObject
	last       string   // volume.cfg's LastBackupName
	updateLast bool     // the deleted backup was volume.cfg's LastBackupName
	names      []string // the remaining backups, sorted
	latest     lhformat.LatestBackup
	// A targeted collection marks the referenced candidates in idx; a
	// full one (or a recount) builds the set of every referenced block.
	idx        *candidateIndex
	referenced *blockSet
}

// Collect runs a deletion's collection (or, with Sweep, a collection
// that deletes no backup) on st. It must run under the volume's deletion
// lock, with ctx the lock's context: once the lock can no longer be
// proven held, nothing more is removed. It records the outcome in leaks.
func Collect(ctx context.Context, st VolumeStorage, o CollectOptions, leaks *Leaks) (Collection, error) {
	volume := o.Ref.Volume
	c := &collection{st: st, ctx: ctx, o: o, full: o.Sweep || o.FullCollection || !leaks.Clean(volume)}
	defer func() {
		if c.release != nil {
			c.release()
		}
	}()
	var err error
	for _, step := range collectionSteps {
		if c.done || (o.Sweep && !step.sweep) {
			continue
		}
		if o.BeforeStep != nil {
			o.BeforeStep(step.name)
		}
		if err = step.run(c); err != nil {
			break
		}
	}
	if c.out.Skipped != "" {
		c.out.Referenced = 0
	}
	// A collection that removed a cfg and did not finish collecting, or
	// skipped, leaves blocks no backup references; one that listed every
	// block and finished leaves none.
	switch {
	case (err != nil && c.cfgRemoved) || (err == nil && c.out.Skipped != "" && !c.done):
		leaks.Set(volume, false)
	case err == nil && c.out.Full && c.out.Skipped == "":
		leaks.Set(volume, true)
	}
	return c.out, err
}

// readVolume reads volume.cfg, which the last step rewrites. A volume
// with no volume.cfg and no cfg for the backup is gone: success.
func (c *collection) readVolume() error {
	data, err := c.st.ReadVolumeCfg(c.ctx)
	if errors.Is(err, backupdelete.ErrNotFound) {
		if c.o.Sweep {
			c.done = true // no volume.cfg: no volume to collect in
			return nil
		}
		exists, xerr := c.st.BackupExists(c.ctx, c.o.Ref.Name)
		if xerr != nil {
			return xerr
		}
		if !exists {
			c.done = true
			return nil
		}
		return lhformat.Corrupt("volume.cfg", fmt.Errorf("missing while backup %s is there", c.o.Ref.Name))
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
	c.volRaw, c.last, c.updateLast = raw, v.LastBackupName, v.LastBackupName == c.o.Ref.Name
	return nil
}

// readDeleted reads the deleted backup's cfg for its blocks, the
// candidates. A cfg already gone (a retry after a partial deletion),
// unparsable, or in progress (which lists none of the blocks its backup
// uploaded: performBackup writes them only into the final cfg) makes
// every block a candidate. With RequireComplete, an unparsable cfg, or
// one in progress while a backup lock of the volume is live, stops the
// deletion before anything is removed; one in progress with no live
// backup lock was abandoned by a writer that died, and is deleted. A
// read that fails otherwise (an I/O error, the network) stops the
// deletion: such a failure says nothing about the cfg.
func (c *collection) readDeleted() error {
	if !c.o.RequireComplete && c.full {
		return nil // nothing here needs it: every block is a candidate
	}
	d, err := c.st.ReadDeleted(c.ctx, c.o.Ref.Name)
	c.release = d.Release
	if errors.Is(err, backupdelete.ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, backupdelete.ErrCorrupt) {
		return fmt.Errorf("read %s: %w", lhformat.BackupCfgPath(c.o.Ref.Name), err)
	}
	if c.o.RequireComplete {
		if err != nil {
			return err
		}
		if d.CreatedTime == "" {
			// Longhorn's backup creation (deltablock.go
			// CreateDeltaBlockBackup) holds a backup lock, refreshed,
			// from before it writes this in-progress cfg (performBackup)
			// until it has written the final one with a CreatedTime. We
			// hold the deletion lock, which no backup takes beside us;
			// with no backup lock live either, the writer died and the
			// backup never completes.
			if err := BackupRunning(c.ctx, c.st, c.o.Clock, c.o.Ref); err != nil {
				return err
			}
			c.out.Abandoned = true
		}
	}
	if err != nil || d.CreatedTime == "" || c.full {
		return nil
	}
	c.candidates = d.Checksums
	if c.candidates == nil {
		c.candidates = [][]byte{}
	}
	return nil
}

// listBackups lists the backups that remain (every one but the deleted
// backup) and checks the listing against volume.cfg before anything is
// removed, the deleted backup's cfg included, so that a refused deletion
// leaves the backup there for the Driver to retry: the backup volume.cfg
// names as its last must be listed, unless it is the one being deleted
// or it is really gone (a lookup of its cfg by name, not through a
// listing, finds nothing: a deletion removed it and died before it
// rewrote volume.cfg; see lhformat.UnlistedLast). Otherwise the listing
// left out a backup that is there (an NFS client's stale directory
// cache, a gateway or cache that drops entries), and the deletion stops
// with an error wrapping backupdelete.ErrListingInconsistent. Longhorn's
// DeleteDeltaBlockBackup (longhorn/backupstore deltablock.go) trusts the
// listing and deletes the blocks of the backup it left out.
func (c *collection) listBackups() error {
	names, err := c.st.ListBackups(c.ctx)
	if err != nil {
		return err
	}
	if !c.o.Sweep {
		names = slices.DeleteFunc(names, func(n string) bool { return n == c.o.Ref.Name })
	}
	last, err := lhformat.UnlistedLast(c.last, c.o.Ref.Name, names)
	if err != nil {
		return err
	}
	if last != "" {
		there, err := c.st.CfgExists(c.ctx, last)
		if err != nil {
			return fmt.Errorf("look up %s, volume.cfg's last backup, missing from the listing: %w", lhformat.BackupCfgPath(last), err)
		}
		if there {
			return lhformat.UnlistedLastError(c.o.Ref.Volume, last, len(names))
		}
	}
	c.names = names
	return nil
}

// removeCfg removes the deleted backup's cfg (gone already is success).
func (c *collection) removeCfg() error {
	c.cfgRemoved = true // or perhaps, if the answer is lost
	return c.st.RemoveCfg(c.ctx, c.o.Ref.Name)
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
	var add func([][]byte)
	oldCount, haveOld := c.volRaw.BlockCount()
	if c.candidates != nil && haveOld && !c.o.CountExactly && len(c.candidates) <= maxIndexed {
		c.idx = newCandidateIndex(c.candidates)
		add = c.idx.mark
	} else {
		c.referenced = newBlockSet()
		add = c.referenced.addAll
	}
	latest, skipped, err := c.checkScans(add, c.updateLast)
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
			_, skipped, err := c.checkScans(c.referenced.addAll, false)
			if err != nil {
				return err
			}
			c.out.Skipped = skipped
			c.out.Referenced = c.referenced.len()
		}
	}
	return nil
}

// checkScans scans the remaining backups and applies the collection's
// rules to the results, in order: a cancelled read is an error; an
// unreadable or in-progress backup (or, with updateLast, an unparsable
// SnapshotCreatedAt) is why nothing may be collected. Otherwise it
// returns the latest backup (with updateLast).
func (c *collection) checkScans(add func([][]byte), updateLast bool) (latest lhformat.LatestBackup, skipped string, err error) {
	scans := c.st.ScanBackups(c.ctx, c.names, add)
	if err := c.ctx.Err(); err != nil {
		return latest, "", err
	}
	for i, sc := range scans {
		n := c.names[i]
		if sc.Err != nil {
			if errors.Is(sc.Err, context.Canceled) || errors.Is(sc.Err, context.DeadlineExceeded) {
				return latest, "", sc.Err
			}
			return latest, fmt.Sprintf("backup %s unreadable: %v", n, sc.Err), nil
		}
		if sc.CreatedTime == "" {
			return latest, fmt.Sprintf("backup %s in progress", n), nil
		}
		if updateLast {
			if err := latest.Consider(n, sc.SnapshotCreatedAt); err != nil {
				return latest, err.Error(), nil
			}
		}
	}
	return latest, "", nil
}

// relist lists the backups again: a backup created during the scan may
// reference a candidate, so a changed list collects nothing.
func (c *collection) relist() error {
	if c.out.Skipped != "" {
		return nil
	}
	again, err := c.st.ListBackups(c.ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(c.names, again) {
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
		// Every block is a candidate: list them and remove the
		// unreferenced ones (the referenced set is complete and
		// read-only from here on).
		c.out.Full = true
		removed, failed, err := c.st.SweepBlocks(c.ctx, func(ck []byte) bool { return !c.referenced.has(ck) })
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
	removed, failed, err := c.st.RemoveBlocks(c.ctx, unref)
	c.out.Removed = removed
	return c.unlinked(failed, err)
}

// unlinked is the unlink step's error: the context's if it ended (what
// was left is neither removed nor failed), else the storage's, else
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
	if err := c.st.WriteVolumeCfg(c.ctx, data); err != nil {
		return fmt.Errorf("update volume.cfg: %w", err)
	}
	return nil
}

// tidy removes what the collection emptied; nothing once ctx has ended
// (the deletion lock is no longer refreshed).
func (c *collection) tidy() error {
	if c.ctx.Err() == nil {
		c.st.Tidy(c.ctx)
	}
	return nil
}
