package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	clocktesting "k8s.io/utils/clock/testing"
)

func blockDirsOf(ck string) (first, second string) {
	return filepath.Join("blocks", ck[0:2]), filepath.Join("blocks", ck[0:2], ck[2:4])
}

// TestDeletionRemovesEmptiedDirectories: as Longhorn's fsops Remove does,
// a deletion removes the bucket directories it emptied (blocks/<a>/<b>,
// then blocks/<a>, then blocks), backups/ once the last cfg is gone, and
// locks/ once its lock file is, in a full collection and a targeted one;
// never the volume directory, nor a bucket another block is still in.
func TestDeletionRemovesEmptiedDirectories(t *testing.T) {
	for _, full := range []bool{true, false} {
		t.Run(map[bool]string{true: "full", false: "targeted"}[full], func(t *testing.T) {
			mount, v := threeBackups(t)
			s := openFast(t, mount, Options{FullCollection: full})
			ctx := context.Background()
			if !full {
				// Sweep once: the next deletions are targeted.
				if _, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0"}); err != nil {
					t.Fatal(err)
				}
			}
			c, err := s.DeleteBackupReport(ctx, ref1)
			if err != nil {
				t.Fatal(err)
			}
			if c.Removed != 1 || c.Full != full {
				t.Fatalf("collection %+v", c)
			}
			a, ab := blockDirsOf(ckA)
			if v.exists(ab) {
				t.Errorf("%s is still there after its only block went", ab)
			}
			if v.exists(a) && !sharesFirst(ckA, ckS, ckB, ckC) {
				t.Errorf("%s is still there after its only bucket went", a)
			}
			if v.exists("locks") {
				t.Error("locks/ is still there after the lock was released")
			}
			for _, ck := range []string{ckS, ckB, ckC} {
				if !v.blockExists(ck) {
					t.Fatalf("block %s removed", ck[:8])
				}
			}
			for _, name := range []string{"backup-2", "backup-3"} {
				if _, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: name}); err != nil {
					t.Fatal(err)
				}
			}
			for _, dir := range []string{"blocks", "backups", "locks"} {
				if v.exists(dir) {
					t.Errorf("%s/ is still there after the last backup went", dir)
				}
			}
			if !v.exists("volume.cfg") {
				t.Fatal("volume.cfg removed")
			}
		})
	}
}

func sharesFirst(ck string, others ...string) bool {
	for _, o := range others {
		if o[0:2] == ck[0:2] {
			return true
		}
	}
	return false
}

// TestDeletionKeepsNonEmptyDirectories: a bucket that still holds
// anything (a concurrent writer's temporary file, Longhorn's
// "<ck>.blk.tmp.<unixnano>", or a stray directory) stays, and so does
// what is in it, and so does locks/ with another holder's lock in it.
func TestDeletionKeepsNonEmptyDirectories(t *testing.T) {
	mount, v := threeBackups(t)
	_, ab := blockDirsOf(ckA)
	tmp := filepath.Join(ab, ckA+".blk.tmp.1763700000000000000")
	v.write(tmp, "half a block")
	_, bb := blockDirsOf(ckB)
	if err := os.MkdirAll(filepath.Join(v.dir, bb, "stray"), 0o700); err != nil {
		t.Fatal(err)
	}
	v.lock("lock-00000000000000d1", 2, true, time.Now())
	v.backup("backup-9", "2026-11-09T00:00:00Z", ckS)
	s := openFast(t, mount, Options{})
	for _, ref := range []backupdelete.BackupRef{ref1, {Volume: "vol-a", Name: "backup-2"}} {
		if _, err := s.DeleteBackupReport(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
	}
	if v.blockExists(ckA) || v.blockExists(ckB) {
		t.Fatal("blocks not collected")
	}
	if !v.exists(tmp) || !v.exists(filepath.Join(bb, "stray")) {
		t.Fatal("a directory that was not empty was removed")
	}
	if !v.exists("locks/lock-00000000000000d1.lck") {
		t.Fatal("another holder's lock was removed")
	}
}

// TestRmdirEmpty: only an empty directory goes; a file, a symlink (to an
// empty directory, even) and a directory that is not empty stay.
func TestRmdirEmpty(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"empty", "full/x", "target"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		name string
		gone bool
	}{{"empty", true}, {"full", false}, {"file", false}, {"link", false}, {"missing", false}} {
		err := rmdirEmpty(root, c.name)
		if (err == nil) != c.gone {
			t.Errorf("rmdirEmpty(%s): %v", c.name, err)
		}
	}
	for _, p := range []string{"full/x", "file", "link", "target"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "empty")); err == nil {
		t.Error("the empty directory is still there")
	}
}

// TestDirectoriesHaveLonghornsMode: every directory the Store creates has
// Longhorn's mode, 0700 (fsops preparePath: os.ModeDir|0700).
func TestDirectoriesHaveLonghornsMode(t *testing.T) {
	mount := t.TempDir()
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	ck := BlockChecksum([]byte("block"))
	if err := s.WriteVolume(ctx, Volume{Name: "vol-a", Size: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBlock(ctx, "vol-a", ck, []byte("lz4 block")); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBackup(ctx, Backup{Name: "backup-1", VolumeName: "vol-a", Blocks: []BlockMapping{{Offset: 0, BlockChecksum: ck}}}); err != nil {
		t.Fatal(err)
	}
	lock, err := s.Lock(ctx, "vol-a", LockBackup)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	n := 0
	err = filepath.WalkDir(filepath.Join(mount, BaseDir), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if info.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", strings.TrimPrefix(p, mount), info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d directories seen", n)
	}
}

// TestTemporaryFilesAreLonghorns: our writer's temporary file is named as
// Longhorn's, "<file>.tmp.<unixnano>" on the store's clock; one already
// there (a concurrent writer's, or a crashed one's) is neither truncated
// nor replaced, and the write goes through under the next nanosecond.
func TestTemporaryFilesAreLonghorns(t *testing.T) {
	if got := tmpName("volume.cfg", 1763700000123456789); got != "volume.cfg.tmp.1763700000123456789" {
		t.Fatalf("tmpName = %q", got)
	}
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	at := time.Unix(0, 1763700000123456789)
	taken := filepath.Join(dir, "volume.cfg.tmp.1763700000123456789")
	if err := os.WriteFile(taken, []byte("someone else's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(root, "volume.cfg", []byte("ours"), clocktesting.NewFakeClock(at)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(taken); string(b) != "someone else's" {
		t.Fatalf("the other temporary file now holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "volume.cfg")); string(b) != "ours" {
		t.Fatalf("volume.cfg holds %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left %d files, want volume.cfg and the other's", len(entries))
	}
}

// TestLonghornTemporaryFilesAreIgnored: Longhorn's leftover temporary
// files (a writer that crashed before its rename) are no backup, block or
// lock to our listings, and a deletion leaves them.
func TestLonghornTemporaryFilesAreIgnored(t *testing.T) {
	mount, v := threeBackups(t)
	leftovers := []string{
		"backups/backup_backup-7.cfg.tmp.1763700000000000001",
		filepath.Join("blocks", ckD[0:2], ckD[2:4], ckD+".blk.tmp.1763700000000000002"),
		"locks/lock-00000000000000b1.lck.tmp.1763700000000000003",
		"volume.cfg.tmp.1763700000000000004",
	}
	for _, p := range leftovers {
		v.write(p, longhornLock("lock-00000000000000b1", 1, true))
	}
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	names, err := s.Backups(ctx, "vol-a")
	if err != nil || strings.Join(names, ",") != "backup-1,backup-2,backup-3" {
		t.Fatalf("Backups = %v, %v", names, err)
	}
	if n, err := s.BlockFiles(ctx, "vol-a"); err != nil || n != 4 {
		t.Fatalf("BlockFiles = %d, %v", n, err)
	}
	// A temporary lock file holding a live backup lock is no lock: an
	// abandoned backup is still purged.
	dead := deadBackup(t, v)
	if err := s.DeleteCompletedBackup(ctx, dead); err != nil {
		t.Fatal(err)
	}
	for _, p := range leftovers {
		if !v.exists(p) {
			t.Errorf("%s removed", p)
		}
	}
}

// TestBlockChecksum: Longhorn's util.GetChecksum, the first 64 hex digits
// of the SHA-512 of the uncompressed block.
func TestBlockChecksum(t *testing.T) {
	if got := BlockChecksum(nil); got != "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce" {
		t.Fatalf("BlockChecksum(empty) = %s", got)
	}
	if got := BlockChecksum([]byte("s")); got != checksum("s") {
		t.Fatalf("BlockChecksum disagrees with the fixture's Longhorn checksum: %s", got)
	}
}
