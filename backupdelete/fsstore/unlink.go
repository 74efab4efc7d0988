package fsstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
)

// removeWorkers unlink block files at once: each unlink is a round trip
// on NFS, and a few in flight hide that latency.
const removeWorkers = 8

// removeBlocks unlinks block files; one already gone counts as removed.
// The files are grouped by first-level bucket, and each bucket directory
// is opened once as an os.Root, so an unlink walks one directory level
// instead of three while still never following a symlink. Once ctx ends
// nothing more is unlinked (the lock may no longer be refreshed), and the
// blocks left count as neither removed nor failed.
func removeBlocks(ctx context.Context, vol *os.Root, cks []string) (removed int, failed []string) {
	groups := map[string][]string{}
	for _, ck := range cks {
		groups[ck[0:2]] = append(groups[ck[0:2]], ck)
	}
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
				bucket, err := openDir(vol, blocksDir+"/"+group[0][0:2])
				if errors.Is(err, fs.ErrNotExist) {
					n += len(group) // the whole bucket is gone
					continue
				}
				if err != nil {
					bad = append(bad, group...)
					continue
				}
				for _, ck := range group {
					if ctx.Err() != nil {
						break
					}
					if err := bucket.Remove(ck[2:4] + "/" + ck + blockSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
						bad = append(bad, ck)
						continue
					}
					n++
				}
				bucket.Close()
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
