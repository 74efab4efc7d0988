package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// This file is block collection on a filesystem: the one algorithm both
// stores run (lhstore.Collect, in Longhorn's order; see
// Store.DeleteBackupReport) over a volume directory.

// Collection says what a deletion did to the volume's blocks: Removed
// (block files unlinked), Referenced, Full, Skipped, Abandoned. It is the
// same type as s3store.Collection.
type Collection = lhstore.Collection

// beforeStepHook, if not nil, runs before each collection step (tests:
// see beforeStep).
var beforeStepHook func(step string)

// collect runs the collection under the lock (ctx is the lock's).
func (s *Store) collect(ctx context.Context, vol *os.Root, ref backupdelete.BackupRef, requireComplete bool) (Collection, error) {
	d := &volumeDir{lockDir: lockDir{vol: vol, clk: s.clock}, s: s}
	return lhstore.Collect(ctx, d, lhstore.CollectOptions{
		Clock: s.clock, Ref: ref, RequireComplete: requireComplete,
		FullCollection: s.opts.FullCollection, BeforeStep: beforeStepHook,
	}, s.leaks)
}

// volumeDir is a volume directory as an lhstore.VolumeStorage. Its
// lock methods are lockDir's.
type volumeDir struct {
	lockDir
	s *Store
	// emptied are the buckets blocks were unlinked from (see Tidy).
	emptied bucketSet
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", backupdelete.ErrNotFound, err)
	}
	return err
}

// ReadVolumeCfg reads volume.cfg, bounded.
func (d *volumeDir) ReadVolumeCfg(context.Context) ([]byte, error) {
	data, _, err := readBounded(d.vol, volumeCfg, d.s.opts.MaxConfigBytes)
	return data, notFound(err)
}

// BackupExists is CfgExists: on a filesystem both are an Lstat.
func (d *volumeDir) BackupExists(ctx context.Context, name string) (bool, error) {
	return d.CfgExists(ctx, name)
}

// CfgExists looks the cfg up with Lstat: a lookup by name, not a read of
// the directory, which an NFS client's stale directory cache can serve.
func (d *volumeDir) CfgExists(_ context.Context, name string) (bool, error) {
	_, err := d.vol.Lstat(backupCfgPath(name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// ReadDeleted reads the deleted backup's cfg into pooled buffers (as the
// remaining backups' are: see scanBuffers), which the checksums alias
// until Release.
func (d *volumeDir) ReadDeleted(_ context.Context, name string) (lhstore.Deleted, error) {
	bufs := getScanBuffers()
	data, _, err := readBoundedInto(d.vol, backupCfgPath(name), d.s.opts.MaxConfigBytes, bufs.data)
	if err != nil {
		putScanBuffers(bufs)
		return lhstore.Deleted{}, notFound(err)
	}
	bufs.data = data
	refs, err := scanBackupInto(data, bufs.cks)
	if err == nil {
		bufs.cks = refs.checksums
	}
	return lhstore.Deleted{Checksums: refs.checksums, CreatedTime: refs.createdTime, Release: func() { putScanBuffers(bufs) }}, err
}

// ListBackups lists backups/ (Store.listBackups: tests give a listing
// that lies).
func (d *volumeDir) ListBackups(context.Context) ([]string, error) { return d.s.listBackups(d.vol) }

// RemoveCfg removes the backup's cfg. Only a regular file is a cfg:
// anything else at its name (a FIFO, a directory, a symlink) stops the
// deletion before it removes anything.
func (d *volumeDir) RemoveCfg(_ context.Context, name string) error {
	cfg := backupCfgPath(name)
	if err := checkRegularOrAbsent(d.vol, cfg); err != nil {
		return err
	}
	if err := d.vol.Remove(cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", cfg, err)
	}
	return nil
}

// ScanBackups reads and scans the cfgs in parallel (see scanAll).
func (d *volumeDir) ScanBackups(ctx context.Context, names []string, add func([][]byte)) []lhstore.Scan {
	return d.s.scanAll(ctx, d.vol, names, add)
}

// RemoveBlocks unlinks the block files (see removeBlocks), noting their
// buckets for Tidy.
func (d *volumeDir) RemoveBlocks(ctx context.Context, cks []string) (int, []string, error) {
	for _, ck := range cks {
		d.emptied.add([]byte(ck))
	}
	removed, failed := removeBlocks(ctx, d.vol, cks)
	return removed, failed, nil
}

// SweepBlocks lists every block file and unlinks the unreferenced ones in
// the same pass (see sweepBlocks), noting their buckets for Tidy.
func (d *volumeDir) SweepBlocks(ctx context.Context, unref func([]byte) bool) (int, []string, error) {
	return sweepBlocks(ctx, d.vol, func(ck []byte) bool {
		if !unref(ck) {
			return false
		}
		d.emptied.add(ck)
		return true
	})
}

// WriteVolumeCfg writes volume.cfg to a temporary file and renames it.
func (d *volumeDir) WriteVolumeCfg(_ context.Context, data []byte) error {
	return writeAtomic(d.vol, volumeCfg, data, d.s.clock)
}

// Tidy removes the bucket directories the collection emptied
// (blocks/<a>/<b>, then blocks/<a>, then blocks) and backups/ if the
// deleted cfg was the last (see tidy.go).
func (d *volumeDir) Tidy(ctx context.Context) {
	if buckets := d.emptied.sorted(); len(buckets) > 0 {
		removeEmptyBuckets(ctx, d.vol, buckets)
	}
	_ = rmdirEmpty(d.vol, backupsDir)
}
