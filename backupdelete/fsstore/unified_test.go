package fsstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// The tests in this file pin the rules fsstore took from the one
// collection algorithm both stores now run (internal/lhstore) where the
// two used to differ.

// TestDeleteInVolumeWithoutVolumeCfg: a volume directory whose volume.cfg
// and backup cfg are both gone (a Longhorn volume removal interrupted,
// or a retry after one) holds nothing to delete: success, as on S3. A
// volume.cfg missing while the backup is there is corrupt, and nothing
// is removed.
func TestDeleteInVolumeWithoutVolumeCfg(t *testing.T) {
	mount, v := threeBackups(t)
	if err := os.Remove(v.dir + "/volume.cfg"); err != nil {
		t.Fatal(err)
	}
	s := openFast(t, mount, Options{})
	gone := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-9"}
	if err := s.DeleteBackup(context.Background(), gone); err != nil {
		t.Fatalf("deleting a backup that is gone, in a volume without volume.cfg: %v", err)
	}
	err := s.DeleteBackup(context.Background(), ref1)
	if !errors.Is(err, backupdelete.ErrCorrupt) {
		t.Fatalf("volume.cfg missing while the backup is there: %v, want ErrCorrupt", err)
	}
	if !v.exists("backups/backup_backup-1.cfg") || !v.blockExists(ckA) {
		t.Fatal("something was removed")
	}
}

// TestSkippedCollectionCountsNothing: a full collection skipped because a
// remaining backup is in progress reports Referenced 0 (it did not count
// the referenced blocks), as the targeted one and s3store's do.
func TestSkippedCollectionCountsNothing(t *testing.T) {
	mount, v := threeBackups(t)
	v.inProgressBackup("backup-4", ckS)
	s := openFast(t, mount, Options{FullCollection: true})
	c, err := s.DeleteBackupReport(context.Background(), ref1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Skipped == "" || c.Referenced != 0 || c.Removed != 0 {
		t.Fatalf("%+v, want a skip with Referenced 0 and nothing removed", c)
	}
	if !v.blockExists(ckA) {
		t.Fatal("a block was removed by a skipped collection")
	}
}

// TestRelistFailureFailsDeletion: when backups/ cannot be listed again
// after the scan, no block is removed and the deletion fails (it used to
// report success with a skip); the Driver then retries it, and the retry,
// finding the cfg gone, lists every block.
func TestRelistFailureFailsDeletion(t *testing.T) {
	mount, v := threeBackups(t)
	s := openFast(t, mount, Options{})
	calls := 0
	listBackupsWith(t, s, func(vol *os.Root) ([]string, error) {
		calls++
		if calls == 2 {
			return nil, errors.New("EIO")
		}
		return listBackupNames(vol)
	})
	_, err := s.DeleteBackupReport(context.Background(), ref1)
	if err == nil || !strings.Contains(err.Error(), "EIO") || !strings.HasPrefix(err.Error(), "fsstore: ") {
		t.Fatalf("%v, want the listing's error, prefixed", err)
	}
	if !v.blockExists(ckA) {
		t.Fatal("a block was removed though the re-listing failed")
	}
	listBackupsWith(t, s, listBackupNames)
	c, err := s.DeleteBackupReport(context.Background(), ref1)
	if err != nil || !c.Full || c.Removed != 1 || v.blockExists(ckA) {
		t.Fatalf("the retry: %+v %v, want a full collection removing block a", c, err)
	}
}

// TestErrorsCarryThePrefix: every error an exported function returns
// starts with "fsstore: ", an invalid reference's and a parse failure's
// included; and the constructor has the one shape both stores share.
func TestErrorsCarryThePrefix(t *testing.T) {
	var _ func(Options) (*Store, error) = New
	if _, err := New(Options{}); !errors.Is(err, ErrNoDir) || !strings.HasPrefix(err.Error(), "fsstore: ") {
		t.Fatalf("New without Dir: %v", err)
	}
	mount, _ := threeBackups(t)
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	for name, err := range map[string]error{
		"ReadVolume": func() error { _, err := s.ReadVolume(ctx, "../x"); return err }(),
		"ReadBackup": func() error {
			_, err := s.ReadBackup(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-9"})
			return err
		}(),
		"Lock":         func() error { _, err := s.Lock(ctx, "a/b", LockBackup); return err }(),
		"WriteBlock":   s.WriteBlock(ctx, "vol-a", "XYZ", nil),
		"DeleteBackup": s.DeleteBackup(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "x"}),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "fsstore: ") {
			t.Errorf("%s: %v, want an error starting with fsstore: ", name, err)
		}
	}
	// The package's parse functions: the prefix, and still the corrupt
	// class a caller tests for.
	for name, err := range map[string]error{
		"ParseVolume":   func() error { _, err := ParseVolume([]byte(`{"Name":"../x"}`)); return err }(),
		"ParseBackup":   func() error { _, err := ParseBackup([]byte(`[]`)); return err }(),
		"ParseLockFile": func() error { _, err := ParseLockFile([]byte(`{"Name":"a/b"}`)); return err }(),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "fsstore: ") || !errors.Is(err, backupdelete.ErrCorrupt) {
			t.Errorf("%s: %v, want an error starting with fsstore: that wraps backupdelete.ErrCorrupt", name, err)
		}
	}
}
