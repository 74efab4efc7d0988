package fsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
)

// This file lists what a volume directory holds: its backups and its block
// files, never following a symlink (see openDir).

// listBackupNames lists backups/ (sorted); a missing directory is none.
func listBackupNames(vol *os.Root) ([]string, error) {
	files, err := readDirNames(vol, backupsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var names []string
	for _, f := range files {
		if n := backupNameFromFile(f); n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// blockList is a listing of block files by checksum, packed one after
// another: a large volume has hundreds of thousands, and a string each
// would cost an allocation apiece.
type blockList struct {
	data []byte
	lens []uint8 // a checksum is at most 128 digits
}

func (l *blockList) add(ck []byte) {
	l.data = append(l.data, ck...)
	l.lens = append(l.lens, uint8(len(ck)))
}

func (l *blockList) len() int { return len(l.lens) }

// each calls f with every checksum (a slice of the list's storage).
func (l *blockList) each(f func(ck []byte)) {
	off := 0
	for _, n := range l.lens {
		f(l.data[off : off+int(n)])
		off += int(n)
	}
}

// listBlocks lists every block file of the volume by checksum (see
// sweepBlocks for what counts as one); it unlinks nothing.
func listBlocks(vol *os.Root) (*blockList, error) {
	return listBlocksWith(vol, newBucketLister)
}

// listBlocksWith is listBlocks with the given listers (tests compare the
// platform's with rootLister).
func listBlocksWith(vol *os.Root, newLister func(vol *os.Root, blocks *os.File) (bucketLister, error)) (*blockList, error) {
	var mu sync.Mutex
	out := &blockList{}
	_, _, err := sweepBlocksWith(context.Background(), vol, newLister, func(ck []byte) bool {
		mu.Lock()
		out.add(ck)
		mu.Unlock()
		return false
	})
	return out, err
}

// bucketLister lists, and sweeps, one first-level bucket; each worker of
// sweepBlocks has its own.
type bucketLister interface {
	// sweep lists each second-level bucket under blocks/<a>/ whole, then
	// calls unlink with each of its block files (a regular file with a
	// block's name that belongs in that bucket) and unlinks those it
	// chooses, in that same directory. A file already gone counts as
	// removed; one that could not be unlinked is in failed. Once ctx ends
	// it unlinks nothing more.
	sweep(ctx context.Context, a string, unlink func(ck []byte) bool) (removed int, failed []string, err error)
}

// rootLister lists a bucket through os.Root: Lstat, then open and
// compare, for each directory (see openDir).
type rootLister struct{ vol *os.Root }

func (l rootLister) sweep(ctx context.Context, a string, unlink func(ck []byte) bool) (removed int, failed []string, err error) {
	bucket, err := openDir(l.vol, blocksDir+"/"+a)
	if errors.Is(err, fs.ErrNotExist) {
		// Another deletion (compatible with ours) emptied and removed
		// it since blocks/ was listed: no block is left there.
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer bucket.Close()
	l2, err := readDirs(bucket, ".")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil // removed, empty, by another deletion
	}
	if err != nil {
		return 0, nil, err
	}
	for _, b := range l2 {
		if err := ctx.Err(); err != nil {
			return removed, failed, err
		}
		f, err := openDirFile(bucket, b)
		if errors.Is(err, fs.ErrNotExist) {
			continue // emptied and removed by another deletion
		}
		if err != nil {
			return removed, failed, err
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed, empty, by another deletion
		}
		if err != nil {
			return removed, failed, err
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return removed, failed, err
			}
			ck, ok := blockFileIn([]byte(e.Name()), a, b)
			if !ok || !e.Type().IsRegular() || !unlink(ck) || ctx.Err() != nil {
				continue
			}
			// Re-checked at the moment of the removal: what replaced the
			// block file since the listing (a FIFO, a symlink, a
			// directory, which Remove would take if empty) stays.
			fi, err := bucket.Lstat(b + "/" + e.Name())
			switch {
			case errors.Is(err, fs.ErrNotExist):
				removed++ // already gone
				continue
			case err != nil:
				failed = append(failed, string(ck))
				continue
			case !fi.Mode().IsRegular():
				continue
			}
			if err := bucket.Remove(b + "/" + e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				failed = append(failed, string(ck))
				continue
			}
			removed++
		}
	}
	return removed, failed, nil
}

// blockFileIn returns the checksum a file name in bucket a/b names, or
// false if it is not a block file that belongs there.
func blockFileIn(name []byte, a, b string) ([]byte, bool) {
	ck, ok := bytes.CutSuffix(name, []byte(blockSuffix))
	return ck, ok && validChecksumBytes(ck) && string(ck[0:2]) == a && string(ck[2:4]) == b
}

// bucketName: two lowercase hex digits.
func bucketName(n string) bool { return len(n) == 2 && lowerHex[n[0]] && lowerHex[n[1]] }

// bucketDirs keeps the bucket subdirectories among a level's entries.
func bucketDirs(entries []fs.DirEntry) []string {
	var out []string
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && bucketName(n) {
			out = append(out, n)
		}
	}
	return out
}

// readDirs lists the bucket subdirectories (two lowercase hex digits) of
// a blocks directory level.
func readDirs(root *os.Root, dir string) ([]string, error) {
	f, err := openDirFile(root, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	return bucketDirs(entries), nil
}

// readDirNames lists a directory inside root.
func readDirNames(root *os.Root, dir string) ([]string, error) {
	f, err := openDirFile(root, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
