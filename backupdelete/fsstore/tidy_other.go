//go:build !linux

package fsstore

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
)

// removeEmptyBuckets removes blocks/<a>/<b> for each "<a><b>" in buckets,
// then each blocks/<a>, then blocks, each only if it is an empty
// directory (see rmdirEmpty).
func removeEmptyBuckets(ctx context.Context, vol *os.Root, buckets []string) {
	var firsts []string
	for _, ab := range buckets {
		if ctx.Err() != nil {
			return
		}
		_ = rmdirEmpty(vol, path.Join(blocksDir, ab[0:2], ab[2:4]))
		firsts = append(firsts, ab[0:2])
	}
	for _, a := range slices.Compact(firsts) {
		_ = rmdirEmpty(vol, path.Join(blocksDir, a))
	}
	_ = rmdirEmpty(vol, blocksDir)
}

// rmdirEmpty removes vol/name only if it is an empty directory: Lstat
// says it is a directory (not a symlink), and os.Root.Remove removes a
// directory only when it is empty. Only here, off Linux, could a file
// that replaced the directory between the two be removed instead.
func rmdirEmpty(vol *os.Root, name string) error {
	info, err := vol.Lstat(name)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory", name)
	}
	return vol.Remove(name)
}
