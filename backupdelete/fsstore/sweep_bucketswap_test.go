//go:build unix

package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSweepNeverEntersABucketReplacedByASymlinkMidSweep guards the sweep
// against a second-level bucket that was a directory when its first-level
// bucket was listed and is a symlink (to a directory outside the volume
// holding a file at an unreferenced block's name) when its turn comes: it
// is swapped inside the decision about a block of the other bucket, which
// the lister sweeps first. Nothing outside is removed, and the sweep
// fails (the layout changed under it) rather than call it complete.
func TestSweepNeverEntersABucketReplacedByASymlinkMidSweep(t *testing.T) {
	eachLister(t, func(t *testing.T, v *lhVolume, sweep sweepFunc) {
		first := checksum("first")
		// other: same first-level bucket, another second-level one.
		var other string
		for i := 0; ; i++ {
			c := checksum(string(rune('a'+i%26)) + string(rune(i)))
			if c[0:2] == first[0:2] && c[2:4] != first[2:4] {
				other = c
				break
			}
		}
		v.block(first)
		v.block(other)
		outside := t.TempDir()
		for _, ck := range []string{first, other} {
			if err := os.WriteFile(filepath.Join(outside, ck+".blk"), []byte("not ours"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		swapped := false
		_, _, err := sweep(context.Background(), func(ck []byte) bool {
			if !swapped {
				swapped = true
				// Swap the bucket of whichever block is not this one.
				victim := other
				if string(ck) == other {
					victim = first
				}
				b := filepath.Join(v.dir, "blocks", victim[0:2], victim[2:4])
				if err := os.RemoveAll(b); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, b); err != nil {
					t.Error(err)
				}
			}
			return true
		})
		for _, ck := range []string{first, other} {
			if _, statErr := os.Lstat(filepath.Join(outside, ck+".blk")); statErr != nil {
				t.Fatalf("a file outside the volume was removed through a bucket symlinked mid-sweep: %v", statErr)
			}
		}
		if err == nil {
			t.Fatal("a sweep whose bucket turned into a symlink reported success")
		}
	})
}
