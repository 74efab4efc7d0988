package fsstore

import (
	"bytes"
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
// would be most of a full collection's memory.
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

// blockLists is a volume's listing, one blockList per first-level bucket
// (kept apart: merging them would copy every checksum once more).
type blockLists []blockList

func (ls blockLists) len() int {
	n := 0
	for i := range ls {
		n += ls[i].len()
	}
	return n
}

func (ls blockLists) each(f func(ck []byte)) {
	for i := range ls {
		ls[i].each(f)
	}
}

// listBlocks lists every block file of the volume by checksum. Entries
// that do not look like block files, or sit in the wrong bucket, are
// ignored (and never removed); so is anything but a directory at a bucket
// level. The first-level buckets are listed by several workers: a large
// volume has tens of thousands of bucket directories, and on NFS each
// listing is a round trip. How a bucket is listed is the platform's
// (bucketLister): on Linux with openat and getdents in large batches.
func listBlocks(vol *os.Root) (blockLists, error) {
	return listBlocksWith(vol, newBucketLister)
}

// bucketLister lists one first-level bucket; each listing worker has its
// own.
type bucketLister interface {
	// list adds the block files under blocks/<a>/ to out.
	list(a string, out *blockList) error
}

// listBlocksWith is listBlocks with the given listers (tests compare the
// platform's with rootLister).
func listBlocksWith(vol *os.Root, newLister func(vol *os.Root, blocks *os.File) (bucketLister, error)) (blockLists, error) {
	blocks, err := openDirFile(vol, blocksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list blocks: %w", err)
	}
	defer blocks.Close()
	entries, err := blocks.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list blocks: %w", err)
	}
	l1 := bucketDirs(entries)
	type listing struct {
		list blockList
		err  error
	}
	out := make([]listing, len(l1))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(len(l1), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lister, err := newLister(vol, blocks)
			for i := range work {
				if err != nil {
					out[i].err = err
					continue
				}
				out[i].err = lister.list(l1[i], &out[i].list)
			}
		}()
	}
	for i := range l1 {
		work <- i
	}
	close(work)
	wg.Wait()
	all := make(blockLists, len(out))
	for i, l := range out {
		if l.err != nil {
			return nil, fmt.Errorf("list blocks: %w", l.err)
		}
		all[i] = l.list
	}
	return all, nil
}

// rootLister lists a bucket through os.Root: Lstat, then open and
// compare, for each directory (see openDir).
type rootLister struct{ vol *os.Root }

func (l rootLister) list(a string, out *blockList) error {
	bucket, err := openDir(l.vol, blocksDir+"/"+a)
	if err != nil {
		return err
	}
	defer bucket.Close()
	l2, err := readDirs(bucket, ".")
	if err != nil {
		return err
	}
	for _, b := range l2 {
		files, err := readDirNames(bucket, b)
		if err != nil {
			return err
		}
		for _, f := range files {
			if ck, ok := blockFileIn([]byte(f), a, b); ok {
				out.add(ck)
			}
		}
	}
	return nil
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

// sameSet compares two sorted listings.
func sameSet(a, b []string) bool { return slices.Equal(a, b) }
