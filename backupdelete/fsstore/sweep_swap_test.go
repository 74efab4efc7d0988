//go:build unix

package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSweepLeavesWhatReplacedABlockFileAfterTheListing guards the moment a
// full collection acts: a bucket is listed whole, then its unreferenced
// block files are unlinked, so between the listing and each unlink a block
// file can be replaced by something that is not one. unlink (the caller's
// decision) runs in exactly that window, so the test swaps the file there:
// a FIFO, a symlink (to a file outside the volume), an empty directory or
// a directory with content put at the block's name must stay, as such an
// entry listed before the sweep stays (the package promises nothing of the
// wrong type is removed). A block file still regular goes, a block file
// already gone counts as removed, and a hard link's other name is kept.
func TestSweepLeavesWhatReplacedABlockFileAfterTheListing(t *testing.T) {
	eachLister(t, func(t *testing.T, v *lhVolume, sweep sweepFunc) {
		outside := filepath.Join(t.TempDir(), "outside.blk")
		if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		keep := checksum("keep")
		plain := sameBucket(keep, "plain")
		gone := sameBucket(keep, "gone")
		// hardlinked is an unreferenced name hard-linked to keep's file.
		hardlinked := sameBucket(keep, "hardlinked")
		swapped := map[string]string{}
		for _, k := range nonBlockKinds {
			ck := sameBucket(keep, k)
			swapped[ck] = k
			v.block(ck)
		}
		for _, ck := range []string{keep, plain, gone} {
			v.block(ck)
		}
		blockPath := func(ck string) string { return filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4], ck+".blk") }
		if err := os.Link(blockPath(keep), blockPath(hardlinked)); err != nil {
			t.Fatal(err)
		}
		removed, failed, err := sweep(context.Background(), func(ck []byte) bool {
			c := string(ck)
			p := blockPath(c)
			switch k := swapped[c]; {
			case c == keep:
				return false
			case c == gone:
				if err := os.Remove(p); err != nil {
					t.Error(err)
				}
			case k != "":
				if err := os.Remove(p); err != nil {
					t.Error(err)
				}
				if err := putNonBlock(p, k, outside); err != nil {
					t.Error(err)
				}
			}
			return true
		})
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		for ck, k := range swapped {
			fi, err := os.Lstat(blockPath(ck))
			if err != nil {
				t.Errorf("a %s put at an unreferenced block's name after the listing was removed: %v", k, err)
				continue
			}
			if fi.Mode().IsRegular() {
				t.Errorf("%s: the swap did not happen (%v)", k, fi.Mode())
			}
		}
		if _, err := os.Stat(outside); err != nil {
			t.Fatalf("the symlink's target outside the volume went: %v", err)
		}
		if v.blockExists(plain) || v.blockExists(hardlinked) {
			t.Fatal("an unreferenced block file still regular was kept")
		}
		if fi, err := os.Lstat(blockPath(keep)); err != nil || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Fatalf("the referenced block (hard-linked to an unreferenced name) lost data: %v", err)
		}
		// plain, gone and hardlinked are removed; the swapped entries are
		// neither removed nor failed (they are no block files).
		if removed != 3 || len(failed) != 0 {
			t.Fatalf("removed %d, failed %q; want 3 removed, none failed", removed, failed)
		}
	})
}
