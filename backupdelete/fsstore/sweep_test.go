//go:build unix

package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// sameBucket returns a valid checksum in the same second-level bucket as
// ck (its first four digits).
func sameBucket(ck, seed string) string { return ck[:4] + checksum(seed)[4:] }

// TestSweepUnlinksOnlyUnreferencedBlockFiles sweeps a blocks tree in which
// referenced and unreferenced blocks share a bucket, and where a FIFO, a
// symlink, an empty directory and a directory sit at block names, a
// symlinked bucket leads outside the volume, and a block sits in the
// wrong bucket. With the platform's lister and with the portable one,
// exactly the two unreferenced block files go; everything else stays and
// no symlink is followed.
func TestSweepUnlinksOnlyUnreferencedBlockFiles(t *testing.T) {
	for _, lister := range []string{"platform", "os.Root"} {
		t.Run(lister, func(t *testing.T) {
			mount := t.TempDir()
			v := newLonghornVolume(t, mount, "vol-a")
			keep := checksum("keep")
			drop := sameBucket(keep, "drop")
			dropElsewhere := checksum("drop elsewhere")
			for _, ck := range []string{keep, drop, dropElsewhere} {
				v.block(ck)
			}
			bucket := filepath.Join("blocks", keep[0:2], keep[2:4])
			fifo, link, emptyDir, fullDir := sameBucket(keep, "fifo"), sameBucket(keep, "link"), sameBucket(keep, "empty"), sameBucket(keep, "full")
			v.mkfifo(filepath.Join(bucket, fifo+".blk"))
			outside := t.TempDir()
			target := filepath.Join(outside, "target.blk")
			if err := os.WriteFile(target, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(v.dir, bucket, link+".blk")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(v.dir, bucket, emptyDir+".blk"), 0o755); err != nil {
				t.Fatal(err)
			}
			v.write(filepath.Join(bucket, fullDir+".blk", "x"), "x")
			wrong := checksum("wrong bucket")
			v.write(filepath.Join(bucket, wrong+".blk"), "x")
			// A second-level bucket that is a symlink to a directory
			// outside holding a block that would belong there.
			linked := checksum("linked")
			if err := os.MkdirAll(filepath.Join(v.dir, "blocks", linked[0:2]), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, linked+".blk"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(v.dir, "blocks", linked[0:2], linked[2:4])); err != nil {
				t.Fatal(err)
			}

			root, err := os.OpenRoot(v.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			newLister := newBucketLister
			if lister == "os.Root" {
				newLister = func(vol *os.Root, _ *os.File) (bucketLister, error) { return rootLister{vol}, nil }
			}
			var mu sync.Mutex
			var asked []string
			referenced := map[string]bool{keep: true, fifo: false, link: false, emptyDir: false, fullDir: false}
			removed, failed, err := sweepBlocksWith(context.Background(), root, newLister, func(ck []byte) bool {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, string(ck))
				return !referenced[string(ck)]
			})
			if err != nil || removed != 2 || len(failed) != 0 {
				t.Fatalf("removed %d, failed %q, %v; want the 2 unreferenced blocks removed", removed, failed, err)
			}
			slices.Sort(asked)
			want := []string{keep, drop, dropElsewhere}
			slices.Sort(want)
			if !slices.Equal(asked, want) {
				t.Fatalf("asked about %q, want only the block files %q", asked, want)
			}
			if !v.blockExists(keep) || v.blockExists(drop) || v.blockExists(dropElsewhere) {
				t.Fatal("wrong block files removed")
			}
			for _, rel := range []string{fifo, link, emptyDir, fullDir, wrong} {
				if _, err := os.Lstat(filepath.Join(v.dir, bucket, rel+".blk")); err != nil {
					t.Fatalf("%s.blk (not a block file) was removed: %v", rel[:8], err)
				}
			}
			for _, p := range []string{target, filepath.Join(outside, linked+".blk")} {
				if _, err := os.Stat(p); err != nil {
					t.Fatalf("a file outside the volume was removed through a symlink: %v", err)
				}
			}
		})
	}
}

// TestFullCollectionKeepsBlocksInTheBucketItSweeps: a remaining backup
// references a block in the very bucket whose unreferenced blocks a full
// collection unlinks while listing it; the referenced one stays, the
// others go, and a cancelled context unlinks nothing.
func TestFullCollectionKeepsBlocksInTheBucketItSweeps(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		mount, v := threeBackups(t)
		kept := sameBucket(ckA, "kept")
		leaked := sameBucket(ckA, "leaked")
		v.block(kept)
		v.block(leaked)
		v.backup("backup-3", "2026-11-03T00:00:00Z", ckS, ckC, kept)
		s := openFast(t, mount, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		if cancelled {
			beforeStep(t, "unlink the unreferenced blocks", cancel)
		}
		col, err := s.DeleteBackupReport(ctx, ref1)
		cancel()
		if cancelled {
			if err == nil || col.Removed != 0 || !v.blockExists(ckA) || !v.blockExists(leaked) {
				t.Fatalf("cancelled: %+v %v, want an error and nothing unlinked", col, err)
			}
			continue
		}
		if err != nil || !col.Full || col.Removed != 2 {
			t.Fatalf("%+v %v, want a full collection removing a and the leaked block", col, err)
		}
		if !v.blockExists(kept) || !v.blockExists(ckS) || !v.blockExists(ckB) || !v.blockExists(ckC) {
			t.Fatal("a referenced block was removed")
		}
		if v.blockExists(ckA) || v.blockExists(leaked) {
			t.Fatal("an unreferenced block in the swept bucket survived")
		}
	}
}
