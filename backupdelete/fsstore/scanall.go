package fsstore

import (
	"context"
	"os"
	"runtime"
	"sync"
)

// scanResult is what block collection keeps of one remaining backup cfg
// (its blocks go straight to the scan's add).
type scanResult struct {
	createdTime, snapshotCreatedAt string
	err                            error
}

// scanAll reads and scans the cfgs in parallel (they are independent, and
// on a network mount each read waits on the server), passing the blocks
// each references to add (called concurrently; the slices, and the slice
// of them, alias buffers that are reused once add returns), one result
// per name. A cfg that turns out unreadable or in progress still adds
// what it had: then nothing is unlinked at all, so extra references
// cannot hurt.
func (s *Store) scanAll(ctx context.Context, vol *os.Root, names []string, add func([][]byte)) []scanResult {
	out := make([]scanResult, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	// Twice the CPUs: half of the workers are usually waiting on a read.
	for range min(len(names), max(4, 2*runtime.GOMAXPROCS(0))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte   // reused: a large volume's cfgs are tens of MB each
			var cks [][]byte // reused: and hundreds of thousands of blocks
			for i := range work {
				if err := ctx.Err(); err != nil {
					out[i].err = err
					continue
				}
				data, _, err := readBoundedInto(vol, backupCfgPath(names[i]), s.opts.MaxConfigBytes, buf)
				var refs backupRefs
				if err == nil {
					buf = data
					refs, err = scanBackupInto(data, cks)
				}
				if err == nil {
					add(refs.checksums)
					cks = refs.checksums
				}
				out[i] = scanResult{createdTime: refs.createdTime, snapshotCreatedAt: refs.snapshotCreatedAt, err: err}
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}
