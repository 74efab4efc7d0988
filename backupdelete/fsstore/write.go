package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/hashicorp/go-multierror"
	"k8s.io/utils/clock"
)

// This file is the writing and reading side a backup creator and an
// operator's tools need: volumes, backups and blocks in Longhorn's layout,
// each file written to a temporary name and renamed.

// WriteVolume writes the volume's volume.cfg, creating its directory.
func (s *Store) WriteVolume(ctx context.Context, v Volume) (err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(v.Name) {
		return fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, v.Name)
	}
	data, err := encodeVolume(v)
	if err != nil {
		return err
	}
	return s.writeInVolume(ctx, v.Name, volumeCfg, data)
}

// WriteBackup writes the backup's cfg. It takes no lock: a backup creator
// holds a LockBackup lock (Store.Lock) around writing blocks and the cfg.
// An empty CreatedTime marks the backup as in progress.
func (s *Store) WriteBackup(ctx context.Context, b Backup) (err error) {
	defer prefixErr(&err)
	if err := checkBackup(b.Name, b.VolumeName, b.Blocks); err != nil {
		return fmt.Errorf("%w: %v", backupdelete.ErrInvalidRef, err)
	}
	data, err := encodeBackup(b)
	if err != nil {
		return err
	}
	return s.writeInVolume(ctx, b.VolumeName, backupCfgPath(b.Name), data)
}

// WriteBlock writes one block file: data is the block as stored
// (Longhorn compresses it with the volume's CompressionMethod), and
// checksum must be BlockChecksum of the block's uncompressed content, as
// Longhorn's backupBlock names it (longhorn/backupstore deltablock.go:
// util.GetChecksum of the block read from the snapshot, before
// util.CompressData). Longhorn's restore decompresses a block and
// verifies that checksum, so a block named by any other digest (of the
// compressed bytes, say) cannot be restored. The content is opaque here.
func (s *Store) WriteBlock(ctx context.Context, volume, checksum string, data []byte) (err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) || !validChecksum(checksum) {
		return fmt.Errorf("%w: block %q of volume %q", backupdelete.ErrInvalidRef, checksum, volume)
	}
	return s.writeInVolume(ctx, volume, blockPath(checksum), data)
}

// BlockChecksum is the name Longhorn gives a block: the first 64 hex
// digits of the SHA-512 of its uncompressed content (longhorn/backupstore
// util.GetChecksum, PRESERVED_CHECKSUM_LENGTH).
func BlockChecksum(uncompressed []byte) string { return lhformat.BlockChecksum(uncompressed) }

// Lock takes a lock of the given type on a volume with Longhorn's
// protocol (see LockFile); release it with Lock.Release. A backup creator
// takes LockBackup, which DeleteBackup's LockDeletion excludes.
func (s *Store) Lock(ctx context.Context, volume string, t LockType) (_ *Lock, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return nil, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	if err := s.root.MkdirAll(VolumePath(volume), dirMode); err != nil {
		return nil, err
	}
	vol, err := openDir(s.root, VolumePath(volume))
	if err != nil {
		return nil, err
	}
	l, err := s.acquire(ctx, vol, volume, t, nil, func() { vol.Close() })
	if err != nil {
		vol.Close()
		return nil, err
	}
	return l, nil
}

// Volumes lists the volume names in the backupstore, sorted.
func (s *Store) Volumes(ctx context.Context) (_ []string, err error) {
	defer prefixErr(&err)
	base := path.Join(BaseDir, volumesDir)
	l1, err := readDirNames(s.root, base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range l1 {
		l2, err := readDirNames(s.root, base+"/"+a)
		if err != nil {
			return nil, err
		}
		for _, b := range l2 {
			vs, err := readDirNames(s.root, base+"/"+a+"/"+b)
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				// Only a name that hashes to where it is is a volume.
				if backupdelete.ValidName(v) && VolumePath(v) == base+"/"+a+"/"+b+"/"+v {
					out = append(out, v)
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
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
	data, _, err := readBounded(s.root, path.Join(VolumePath(volume), volumeCfg), s.opts.MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Volume{}, fmt.Errorf("fsstore: volume %s: %w", volume, backupdelete.ErrNotFound)
	}
	if err != nil {
		return Volume{}, err
	}
	return ParseVolume(data)
}

// Backups lists the names of a volume's backups, sorted.
func (s *Store) Backups(ctx context.Context, volume string) (_ []string, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return nil, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	vol, err := openDir(s.root, VolumePath(volume))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer vol.Close()
	return listBackupNames(vol)
}

// ReadBackup reads one backup cfg; a missing one is an error wrapping
// backupdelete.ErrNotFound.
func (s *Store) ReadBackup(ctx context.Context, ref backupdelete.BackupRef) (_ Backup, err error) {
	defer prefixErr(&err)
	if err := ref.Validate(); err != nil {
		return Backup{}, err
	}
	data, _, err := readBounded(s.root, path.Join(VolumePath(ref.Volume), backupCfgPath(ref.Name)), s.opts.MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Backup{}, fmt.Errorf("fsstore: backup %s: %w", ref, backupdelete.ErrNotFound)
	}
	if err != nil {
		return Backup{}, err
	}
	return ParseBackup(data)
}

// BlockFiles counts a volume's block files: regular files named
// <checksum>.blk in the bucket their checksum names (what a full
// collection may unlink), never through a symlinked bucket.
func (s *Store) BlockFiles(ctx context.Context, volume string) (_ int, err error) {
	defer prefixErr(&err)
	if !backupdelete.ValidName(volume) {
		return 0, fmt.Errorf("%w: volume name %q", backupdelete.ErrInvalidRef, volume)
	}
	vol, err := openDir(s.root, VolumePath(volume))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer vol.Close()
	blocks, err := listBlocks(vol)
	return blocks.len(), err
}

// writeInVolume writes a file relative to the volume directory.
func (s *Store) writeInVolume(ctx context.Context, volume, rel string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := VolumePath(volume)
	if err := s.root.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	vol, err := openDir(s.root, dir)
	if err != nil {
		return err
	}
	defer vol.Close()
	// A deletion removes the directories it empties (see tidy.go); a
	// backup creator holding its backup lock never races one, but a
	// writer without it may find its directory gone between the mkdir
	// and the write, and makes it again.
	for range 2 {
		if err := vol.MkdirAll(path.Dir(rel), dirMode); err != nil {
			return err
		}
		if err = writeAtomic(vol, rel, data, s.clock); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

// writeAtomic writes data to "<name>.tmp.<unixnano>" next to name and
// renames it over name, so a reader sees the old file or the new one,
// never half. That is Longhorn's own temporary name (fsops Write and
// Upload: dst + ".tmp." + UnixNano), so whoever recognises Longhorn's
// leftovers recognises ours; no listing, Longhorn's (util.ExtractNames
// keeps only names ending in the suffix it lists) or ours, takes one for
// a cfg, block or lock. The time is the store's clock; the file is
// created exclusively, and a name taken by a concurrent writer moves on
// to the next nanosecond, so two writers never share a temporary file.
func writeAtomic(root *os.Root, name string, data []byte, clk clock.PassiveClock) error {
	nano := clk.Now().UnixNano()
	var f *os.File
	var tmp string
	for {
		var err error
		tmp = tmpName(name, nano)
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			nano++
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := multierror.Append(werr, cerr).ErrorOrNil(); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return nil
}

// tmpName is Longhorn's temporary name for name: "<name>.tmp.<unixnano>".
func tmpName(name string, unixNano int64) string {
	return name + tmpInfix + strconv.FormatInt(unixNano, 10)
}
