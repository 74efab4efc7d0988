//go:build linux

package fsstore

import (
	"context"
	"os"
	"sync"
	"syscall"
)

// removeEmptyBuckets removes blocks/<a>/<b> for each "<a><b>" in buckets
// (sorted), then each blocks/<a> it emptied, then blocks, each only if
// empty: unlinkat(AT_REMOVEDIR) through the descriptor of the parent,
// each level opened with O_DIRECTORY|O_NOFOLLOW, as the unlinks were.
// First-level buckets are tidied by several workers, as they were
// unlinked from: on NFS each removal is a round trip.
func removeEmptyBuckets(ctx context.Context, vol *os.Root, buckets []string) {
	blocks, err := openDirFile(vol, blocksDir)
	if err != nil {
		return
	}
	rc, err := blocks.SyscallConn()
	if err != nil {
		blocks.Close()
		return
	}
	blocksFD := -1
	if err := rc.Control(func(u uintptr) { blocksFD = int(u) }); err != nil {
		blocks.Close()
		return
	}
	var groups [][]string
	for i := 0; i < len(buckets); {
		j := i
		for j < len(buckets) && buckets[j][0:2] == buckets[i][0:2] {
			j++
		}
		groups = append(groups, buckets[i:j])
		i = j
	}
	work := make(chan []string)
	var wg sync.WaitGroup
	for range min(len(groups), removeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for group := range work {
				if ctx.Err() != nil {
					continue
				}
				a := group[0][0:2]
				fa, err := openPathDir(blocksFD, a)
				if err != nil {
					continue
				}
				for _, ab := range group {
					_ = rmdirAt(fa, ab[2:4])
				}
				syscall.Close(fa)
				_ = rmdirAt(blocksFD, a)
			}
		}()
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	// blocks stayed open (its descriptor valid) until every worker was done.
	blocks.Close()
	if ctx.Err() == nil {
		_ = rmdirEmpty(vol, blocksDir)
	}
}

// rmdirEmpty removes vol/name (one component) only if it is an empty
// directory.
func rmdirEmpty(vol *os.Root, name string) error {
	dir, err := openDirFile(vol, ".")
	if err != nil {
		return err
	}
	defer dir.Close()
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	if err := rc.Control(func(u uintptr) { rerr = rmdirAt(int(u), name) }); err != nil {
		return err
	}
	return rerr
}

// rmdirAt is rmdir(2) of dirfd/name: unlinkat with AT_REMOVEDIR, which
// removes only an empty directory (never a file, never a symlink's target).
func rmdirAt(dirfd int, name string) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	return unlinkatPtr(dirfd, p, atRemoveDir)
}

// atRemoveDir is Linux's AT_REMOVEDIR (the same on every architecture Go
// supports; package syscall does not name it).
const atRemoveDir = 0x200
