package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
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

// listBlocks lists every block file of the volume by checksum. Entries
// that do not look like block files, or sit in the wrong bucket, are
// ignored (and never removed). The first-level buckets are listed by
// several workers: a large volume has tens of thousands of bucket
// directories, and on NFS each listing is a round trip.
func listBlocks(vol *os.Root) (map[string]struct{}, error) {
	l1, err := readDirs(vol, blocksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]struct{}{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list blocks: %w", err)
	}
	type listing struct {
		cks []string
		err error
	}
	out := make([]listing, len(l1))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(len(l1), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i].cks, out[i].err = listBucket(vol, l1[i])
			}
		}()
	}
	for i := range l1 {
		work <- i
	}
	close(work)
	wg.Wait()
	all := map[string]struct{}{}
	for _, l := range out {
		if l.err != nil {
			return nil, fmt.Errorf("list blocks: %w", l.err)
		}
		for _, ck := range l.cks {
			all[ck] = struct{}{}
		}
	}
	return all, nil
}

// listBucket lists the block files under blocks/<a>/.
func listBucket(vol *os.Root, a string) ([]string, error) {
	bucket, err := openDir(vol, blocksDir+"/"+a)
	if err != nil {
		return nil, err
	}
	defer bucket.Close()
	l2, err := readDirs(bucket, ".")
	if err != nil {
		return nil, err
	}
	var cks []string
	for _, b := range l2 {
		files, err := readDirNames(bucket, b)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			ck, ok := strings.CutSuffix(f, blockSuffix)
			if ok && validChecksum(ck) && ck[0:2] == a && ck[2:4] == b {
				cks = append(cks, ck)
			}
		}
	}
	return cks, nil
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
	var out []string
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && len(n) == 2 && validChecksum(n+n) {
			out = append(out, n)
		}
	}
	return out, nil
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
