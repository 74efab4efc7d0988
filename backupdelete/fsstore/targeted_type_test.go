//go:build unix

package fsstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// TestTargetedCollectionUnlinksOnlyRegularFiles guards a targeted
// collection's unlinks, which go by the deleted backup's checksums rather
// than by a listing: a FIFO, a symlink (to a file outside the volume), an
// empty directory and a directory with content where an unreferenced
// block file was must all stay (they are no block files: neither removed
// nor failed, and the deletion succeeds), the symlink's target too, while
// the one block file still regular goes. Both removers are held to it:
// the platform's through a whole deletion, os.Root's directly.
func TestTargetedCollectionUnlinksOnlyRegularFiles(t *testing.T) {
	setup := func(t *testing.T) (string, *lhVolume, map[string]string, string, string) {
		mount, v := threeBackups(t)
		outside := filepath.Join(t.TempDir(), "outside.blk")
		if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		plain := checksum("plain")
		blocks := []string{ckS, plain}
		swapped := map[string]string{}
		for _, k := range nonBlockKinds {
			ck := checksum("where a block was: " + k)
			swapped[ck] = k
			blocks = append(blocks, ck)
		}
		v.backup("backup-4", "2026-11-04T00:00:00Z", blocks...)
		for _, ck := range blocks {
			v.block(ck)
		}
		for ck, k := range swapped {
			p := filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4], ck+".blk")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			err := putNonBlock(p, k, outside)
			if err != nil {
				t.Skip(err)
			}
		}
		return mount, v, swapped, plain, outside
	}
	check := func(t *testing.T, v *lhVolume, swapped map[string]string, plain, outside string) {
		t.Helper()
		for ck, k := range swapped {
			fi, err := os.Lstat(filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4], ck+".blk"))
			if err != nil {
				t.Errorf("the %s at an unreferenced block's name was removed: %v", k, err)
			} else if fi.Mode().IsRegular() {
				t.Errorf("%s: not in place (%v)", k, fi.Mode())
			}
		}
		if _, err := os.Stat(outside); err != nil {
			t.Errorf("the symlink's target outside the volume went: %v", err)
		}
		if v.blockExists(plain) {
			t.Error("the unreferenced block file still regular was kept")
		}
		if !v.blockExists(ckS) {
			t.Error("a referenced block was removed")
		}
	}

	t.Run("deletion", func(t *testing.T) {
		mount, v, swapped, plain, outside := setup(t)
		s := openFast(t, mount, Options{})
		ctx := context.Background()
		// The first deletion lists the volume (and sees the entries that
		// are no block files, and leaves them); the next is targeted.
		c, err := s.DeleteBackupReport(ctx, ref1)
		if err != nil || !c.Full || c.Removed != 1 {
			t.Fatalf("first: %+v %v, want a full listing that removes block a", c, err)
		}
		// Longhorn's backup creation adds its new blocks to BlockCount.
		v.volumeCfg("backup-4", "2026-11-04T00:00:00Z", c.Referenced)
		c, err = s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-4"})
		if err != nil || c.Full || c.Skipped != "" || c.Removed != 1 {
			t.Fatalf("second: %+v %v, want a targeted collection removing only the regular block file", c, err)
		}
		check(t, v, swapped, plain, outside)
	})
	t.Run("os.Root remover", func(t *testing.T) {
		_, v, swapped, plain, outside := setup(t)
		root, err := os.OpenRoot(v.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		r := rootGroupRemover(root)
		removed := 0
		for _, ck := range append([]string{plain}, keys(swapped)...) {
			n, bad := r(context.Background(), []string{ck})
			if len(bad) != 0 {
				t.Fatalf("%s failed", ck)
			}
			removed += n
		}
		if removed != 1 {
			t.Fatalf("%d removed, want 1", removed)
		}
		check(t, v, swapped, plain, outside)
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// nonBlockKinds are the entries that are no block file, which a test puts
// where a block file was: see putNonBlock.
var nonBlockKinds = []string{"fifo", "symlink", "empty dir", "dir"}

// putNonBlock makes at p (now free) an entry of kind, one of
// nonBlockKinds: a FIFO, a symlink to outside, an empty directory or a
// directory with content.
func putNonBlock(p, kind, outside string) error {
	switch kind {
	case "fifo":
		return syscall.Mkfifo(p, 0o644)
	case "symlink":
		return os.Symlink(outside, p)
	case "empty dir":
		return os.Mkdir(p, 0o755)
	case "dir":
		return os.MkdirAll(filepath.Join(p, "x"), 0o755)
	}
	return fmt.Errorf("no such kind of entry: %q", kind)
}
