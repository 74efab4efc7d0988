package fsstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"sync"
)

// removeWorkers unlink block files at once: each unlink is a round trip
// on NFS, and a few in flight hide that latency.
const removeWorkers = 8

// removeBlocks unlinks block files; one already gone counts as removed.
// Only a regular file at a block's name is a block file: it is looked at
// just before its unlink, and anything else there stays, counted neither
// removed nor failed. The files are grouped by first-level bucket, and each bucket directory
// is opened once (see newGroupRemover). Once ctx ends nothing more is
// unlinked (the lock may no longer be refreshed), and the blocks left
// count as neither removed nor failed.
func removeBlocks(ctx context.Context, vol *os.Root, cks []string) (removed int, failed []string) {
	groups := map[string][]string{}
	for _, ck := range cks {
		groups[ck[0:2]] = append(groups[ck[0:2]], ck)
	}
	if len(groups) == 0 {
		return 0, nil
	}
	remover, done, err := newGroupRemover(vol)
	if err != nil {
		return 0, slices.Clone(cks)
	}
	defer done()
	var mu sync.Mutex
	work := make(chan []string)
	var wg sync.WaitGroup
	for range min(len(groups), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			var bad []string
			for group := range work {
				if ctx.Err() != nil {
					continue
				}
				gn, gbad := remover(ctx, group)
				n += gn
				bad = append(bad, gbad...)
			}
			mu.Lock()
			removed += n
			failed = append(failed, bad...)
			mu.Unlock()
		}()
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	return removed, failed
}

// groupRemover unlinks the block files of one first-level bucket (every
// checksum in group has the same first two digits) and returns how many
// are gone and which could not be removed; what is at a block's name but
// is no regular file stays and counts as neither. It stops when ctx ends;
// the blocks left then count as neither.
type groupRemover func(ctx context.Context, group []string) (removed int, failed []string)

// rootGroupRemover opens the bucket as an os.Root, so an unlink walks one
// directory level instead of three while still never following a
// symlink out of it. Like the Linux remover, it unlinks only a regular
// file, looked at (Lstat, no symlink followed) just before: anything else
// at a candidate's name stays, counted neither removed nor failed.
func rootGroupRemover(vol *os.Root) groupRemover {
	return func(ctx context.Context, group []string) (n int, bad []string) {
		bucket, err := openDir(vol, blocksDir+"/"+group[0][0:2])
		if errors.Is(err, fs.ErrNotExist) {
			return len(group), nil // the whole bucket is gone
		}
		if err != nil {
			return 0, group
		}
		defer bucket.Close()
		for _, ck := range group {
			if ctx.Err() != nil {
				break
			}
			name := ck[2:4] + "/" + ck + blockSuffix
			fi, err := bucket.Lstat(name)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				n++ // already gone
				continue
			case err != nil:
				bad = append(bad, ck)
				continue
			case !fi.Mode().IsRegular():
				continue // no block file: it stays
			}
			if err := bucket.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				bad = append(bad, ck)
				continue
			}
			n++
		}
		return n, bad
	}
}
