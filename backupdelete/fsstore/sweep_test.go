//go:build unix

package fsstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// sameBucket returns a valid checksum in the same second-level bucket as
// ck (its first four digits).
func sameBucket(ck, seed string) string { return ck[:4] + checksum(seed)[4:] }

// sweepFunc sweeps the volume's blocks tree as a full collection does,
// asking unlink about each block file; the calls are serialised.
type sweepFunc func(ctx context.Context, unlink func(ck []byte) bool) (removed int, failed []string, err error)

// eachLister runs f in a subtest for the platform's bucket lister and one
// for the portable os.Root one, each on a fresh volume vol-a; sweep runs
// sweepBlocksWith over that volume with the subtest's lister.
func eachLister(t *testing.T, f func(t *testing.T, v *lhVolume, sweep sweepFunc)) {
	for _, lister := range []string{"platform", "os.Root"} {
		t.Run(lister, func(t *testing.T) {
			v := newLonghornVolume(t, t.TempDir(), "vol-a")
			newLister := newBucketLister
			if lister == "os.Root" {
				newLister = func(vol *os.Root, _ *os.File) (bucketLister, error) { return rootLister{vol}, nil }
			}
			f(t, v, func(ctx context.Context, unlink func(ck []byte) bool) (int, []string, error) {
				root, err := os.OpenRoot(v.dir)
				if err != nil {
					t.Fatal(err)
				}
				defer root.Close()
				var mu sync.Mutex
				return sweepBlocksWith(ctx, root, newLister, func(ck []byte) bool {
					mu.Lock()
					defer mu.Unlock()
					return unlink(ck)
				})
			})
		})
	}
}

// TestSweepUnlinksOnlyUnreferencedBlockFiles sweeps a blocks tree in which
// referenced and unreferenced blocks share a bucket, and where a FIFO, a
// symlink, an empty directory and a directory sit at block names, a
// symlinked bucket leads outside the volume, and a block sits in the
// wrong bucket. With the platform's lister and with the portable one,
// exactly the two unreferenced block files go; everything else stays and
// no symlink is followed.
func TestSweepUnlinksOnlyUnreferencedBlockFiles(t *testing.T) {
	eachLister(t, func(t *testing.T, v *lhVolume, sweep sweepFunc) {
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

		var asked []string
		referenced := map[string]bool{keep: true, fifo: false, link: false, emptyDir: false, fullDir: false}
		removed, failed, err := sweep(context.Background(), func(ck []byte) bool {
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

// sweepModes runs f for a full collection (a new Store) and a targeted one
// (after a first deletion has swept the volume).
func sweepModes(t *testing.T, f func(t *testing.T, s *Store, v *lhVolume, ref backupdelete.BackupRef, full bool)) {
	for _, full := range []bool{true, false} {
		name := map[bool]string{true: "full", false: "targeted"}[full]
		t.Run(name, func(t *testing.T) {
			mount, v := threeBackups(t)
			s := openFast(t, mount, Options{})
			ref := ref1
			if !full {
				if err := s.DeleteBackup(context.Background(), ref1); err != nil {
					t.Fatal(err)
				}
				ref = backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"}
			}
			f(t, s, v, ref, full)
		})
	}
}

// TestBackupWriterIsHeldOffUntilTheUnlinksAreDone: between the re-list
// and the unlinks (where a new cfg would go unseen), a backup creator
// following the lock protocol cannot take its lock: the deletion lock
// holds it off, so no cfg can appear that references a block being
// unlinked.
func TestBackupWriterIsHeldOffUntilTheUnlinksAreDone(t *testing.T) {
	sweepModes(t, func(t *testing.T, s *Store, v *lhVolume, ref backupdelete.BackupRef, full bool) {
		other := openFast(t, v.mount, Options{})
		var lockErr error
		tried := false
		beforeStep(t, "unlink the unreferenced blocks", func() {
			tried = true
			l, err := other.Lock(context.Background(), "vol-a", LockBackup)
			if err == nil {
				l.Release()
			}
			lockErr = err
		})
		col, err := s.DeleteBackupReport(context.Background(), ref)
		if err != nil || col.Full != full || col.Removed != 1 {
			t.Fatalf("%+v %v, want one block removed", col, err)
		}
		if !tried || !errors.Is(lockErr, backupdelete.ErrLocked) {
			t.Fatalf("a backup lock taken during the unlinks: %v, want ErrLocked", lockErr)
		}
	})
}

// TestTruncatedRemainingCfgStopsTheCollection: a remaining backup's cfg
// cut off in the middle of its block list is unreadable, never "fewer
// references": nothing is unlinked, in either mode.
func TestTruncatedRemainingCfgStopsTheCollection(t *testing.T) {
	sweepModes(t, func(t *testing.T, s *Store, v *lhVolume, ref backupdelete.BackupRef, full bool) {
		leaked := checksum("leaked")
		v.block(leaked)
		cfg := longhornBackupCfg("backup-3", "vol-a", "2026-11-03T00:00:00Z", "2026-11-03T00:00:00Z", []string{ckS, ckC, ckA, ckB})
		cut := strings.Index(cfg, ckS) + len(ckS) + 2 // after ckS's mapping
		v.write("backups/backup_backup-3.cfg", cfg[:cut])
		col, err := s.DeleteBackupReport(context.Background(), ref)
		if err != nil || col.Removed != 0 || !strings.Contains(col.Skipped, "backup-3 unreadable") {
			t.Fatalf("%+v %v, want nothing removed because backup-3 is unreadable", col, err)
		}
		for _, ck := range []string{ckS, ckB, ckC, leaked} {
			if !v.blockExists(ck) {
				t.Fatalf("block %s removed", ck[:8])
			}
		}
	})
}
