package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// This file is a full collection's last step: list every block file of
// the volume and unlink the unreferenced ones in the same pass.

// sweepBlocks lists every block file of the volume and unlinks each one
// for which unlink (called concurrently) returns true. The decision is
// the caller's, made before the sweep starts (the set of referenced
// blocks is complete and the backup list re-checked): listing and
// unlinking in one pass only saves opening each bucket twice, so a bucket
// is listed whole and its unreferenced blocks are unlinked through the
// descriptor it was listed with.
//
// A block file is a regular file named <checksum>.blk in the bucket its
// checksum names. Anything else (a look-alike name, a block in the wrong
// bucket, a directory, FIFO or symlink at a block's name) is neither
// listed nor removed; nor is anything but a directory at a bucket level
// entered. The first-level buckets are swept by several workers: a large
// volume has tens of thousands of bucket directories, and on NFS each
// listing is a round trip. How a bucket is swept is the platform's
// (bucketLister): on Linux with openat, getdents and unlinkat.
//
// A listing error stops the sweep with an error; what was unlinked before
// it stays unlinked (each unlink was decided independently of the
// listing) and is counted in removed. So does the end of ctx: no bucket
// more is listed, nothing more is unlinked, and the error is ctx's.
func sweepBlocks(ctx context.Context, vol *os.Root, unlink func(ck []byte) bool) (removed int, failed []string, err error) {
	return sweepBlocksWith(ctx, vol, newBucketLister, unlink)
}

func sweepBlocksWith(ctx context.Context, vol *os.Root, newLister func(vol *os.Root, blocks *os.File) (bucketLister, error), unlink func(ck []byte) bool) (removed int, failed []string, err error) {
	blocks, err := openDirFile(vol, blocksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("list blocks: %w", err)
	}
	// blocks stays open (its descriptor valid) until every worker is done.
	defer blocks.Close()
	entries, err := blocks.ReadDir(-1)
	if err != nil {
		return 0, nil, fmt.Errorf("list blocks: %w", err)
	}
	l1 := bucketDirs(entries)
	errs := make([]error, len(l1))
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(len(l1), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lister, err := newLister(vol, blocks)
			n := 0
			var bad []string
			for i := range work {
				if err != nil {
					errs[i] = err
					continue
				}
				// Once ctx ends no bucket more is listed: the sweep
				// stops, incomplete, with ctx's error.
				if cerr := ctx.Err(); cerr != nil {
					errs[i] = cerr
					continue
				}
				gn, gbad, gerr := lister.sweep(ctx, l1[i], unlink)
				n += gn
				bad = append(bad, gbad...)
				errs[i] = gerr
			}
			mu.Lock()
			removed += n
			failed = append(failed, bad...)
			mu.Unlock()
		}()
	}
	for i := range l1 {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return removed, failed, fmt.Errorf("list blocks: %w", err)
		}
	}
	return removed, failed, nil
}
