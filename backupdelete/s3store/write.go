package s3store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

// This file is the writing and reading side a backup creator, an
// operator's tools and the tests need: volumes, backups and blocks in
// Longhorn's layout, with fsstore.Store's method set, so the two stores
// are interchangeable.

// Volume is volume.cfg (the same type as fsstore.Volume).
type Volume = lhformat.Volume

// Backup is backups/backup_<name>.cfg (the same type as fsstore.Backup).
// An empty CreatedTime means the backup is still being written.
type Backup = lhformat.Backup

// BlockMapping is one block of a backup.
type BlockMapping = lhformat.BlockMapping

// BlockChecksum is the name Longhorn gives a block: the first 64 hex
// digits of the SHA-512 of its uncompressed content.
func BlockChecksum(uncompressed []byte) string { return lhformat.BlockChecksum(uncompressed) }

// Check tests the connection the way Longhorn's driver does when it
// loads (longhorn/backupstore s3/s3.go initFunc lists the target's path):
// one listing of the prefix. A wrong endpoint, wrong credentials, a
// missing bucket or a redirect is a *RequestError of its class.
func (s *Store) Check(ctx context.Context) (err error) {
	defer prefixErr(&err)
	_, err = s.listFrom(ctx, lhformat.BaseDir, "", false, s.opts.ListPageSize, func([]listed, []string) error { return nil })
	if err != nil {
		return fmt.Errorf("s3store: check %s: %w", s.target, err)
	}
	return nil
}

// WriteVolume writes the volume's volume.cfg, as Longhorn's
// saveVolumeConfig does.
func (s *Store) WriteVolume(ctx context.Context, v Volume) (err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(v.Name) {
		return fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, v.Name)
	}
	data, err := lhformat.EncodeVolume(v)
	if err != nil {
		return err
	}
	return s.put(ctx, lhformat.VolumePath(v.Name)+"/"+lhformat.VolumeCfg, data)
}

// WriteBackup writes the backup's cfg. It takes no lock: a backup creator
// holds a LockBackup lock (Store.Lock) around writing blocks and the cfg.
// An empty CreatedTime marks the backup as in progress.
func (s *Store) WriteBackup(ctx context.Context, b Backup) (err error) {
	defer prefixErr(&err)
	if err := lhformat.CheckBackup(b.Name, b.VolumeName, b.Blocks); err != nil {
		return fmt.Errorf("%w: %v", backupdelete.ErrInvalidRef, err)
	}
	data, err := lhformat.EncodeBackup(b)
	if err != nil {
		return err
	}
	return s.put(ctx, lhformat.VolumePath(b.VolumeName)+"/"+lhformat.BackupCfgPath(b.Name), data)
}

// WriteBlock writes one block object: data is the block as stored, and
// checksum must be BlockChecksum of its uncompressed content (see
// fsstore.Store.WriteBlock).
func (s *Store) WriteBlock(ctx context.Context, volume, checksum string, data []byte) (err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) || !lhformat.ValidChecksum(checksum) {
		return fmt.Errorf("%w: block %q of volume %q", backupdelete.ErrInvalidRef, checksum, volume)
	}
	return s.put(ctx, lhformat.VolumePath(volume)+"/"+lhformat.BlockPath(checksum), data)
}

// Volumes lists the volume names in the backupstore, sorted: three
// levels of delimited listings, as Longhorn's getVolumeNames walks them
// (never a listing of every object).
func (s *Store) Volumes(ctx context.Context) (_ []string, err error) {
	defer prefixErr(&err)
	base := lhformat.BaseDir + "/" + lhformat.VolumesDir
	dirs := func(rel string) ([]string, error) {
		var out []string
		err := s.list(ctx, rel, false, func(_ []listed, ds []string) error {
			out = append(out, ds...)
			return nil
		})
		return out, err
	}
	l1, err := dirs(base)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range l1 {
		l2, err := dirs(base + "/" + a)
		if err != nil {
			return nil, err
		}
		for _, b := range l2 {
			vs, err := dirs(base + "/" + a + "/" + b)
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				if backupdelete.ValidName(v) && lhformat.VolumePath(v) == base+"/"+a+"/"+b+"/"+v {
					out = append(out, v)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// ReadVolume reads a volume's volume.cfg; a missing volume is an error
// wrapping backupdelete.ErrNotFound.
func (s *Store) ReadVolume(ctx context.Context, volume string) (_ Volume, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return Volume{}, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	data, _, err := s.get(ctx, lhformat.VolumePath(volume)+"/"+lhformat.VolumeCfg, s.opts.MaxConfigBytes)
	if errors.Is(err, backupdelete.ErrNotFound) {
		return Volume{}, fmt.Errorf("s3store: volume %s: %w", volume, backupdelete.ErrNotFound)
	}
	if err != nil {
		return Volume{}, err
	}
	return lhformat.ParseVolume(data)
}

// Backups lists the names of a volume's backups, sorted.
func (s *Store) Backups(ctx context.Context, volume string) (_ []string, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return nil, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	return s.backupNames(ctx, volume, false)
}

// ReadBackup reads one backup cfg; a missing one is an error wrapping
// backupdelete.ErrNotFound.
func (s *Store) ReadBackup(ctx context.Context, ref backupdelete.BackupRef) (_ Backup, err error) {
	defer prefixErr(&err)
	if err := ref.Validate(); err != nil {
		return Backup{}, err
	}
	data, _, err := s.get(ctx, lhformat.VolumePath(ref.Volume)+"/"+lhformat.BackupCfgPath(ref.Name), s.opts.MaxConfigBytes)
	if errors.Is(err, backupdelete.ErrNotFound) {
		return Backup{}, fmt.Errorf("s3store: backup %s: %w", ref, backupdelete.ErrNotFound)
	}
	if err != nil {
		return Backup{}, err
	}
	return lhformat.ParseBackup(data)
}

// BlockFiles counts a volume's block objects (keys
// blocks/<a>/<b>/<checksum>.blk in the bucket their checksum names). It
// lists every block: a tool's and a test's call, never a deletion's.
func (s *Store) BlockFiles(ctx context.Context, volume string) (_ int, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return 0, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	n := 0
	err = s.list(ctx, lhformat.VolumePath(volume)+"/"+lhformat.BlocksDir, true, func(objs []listed, _ []string) error {
		for _, o := range objs {
			if _, ok := lhformat.BlockFromPath(o.name); ok {
				n++
			}
		}
		return nil
	})
	return n, err
}

var (
	_ backupdelete.Backupstore            = (*Store)(nil)
	_ backupdelete.CompletedBackupDeleter = (*Store)(nil)
)
