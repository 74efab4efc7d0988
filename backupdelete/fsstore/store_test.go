package fsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/bounded"
)

func openFast(t testing.TB, mount string, opts Options) *Store {
	t.Helper()
	opts.Clock = fastClock{}
	opts.Dir = mount
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	ckA = checksum("a") // only in backup-1
	ckS = checksum("s") // shared by all
	ckB = checksum("b") // only in backup-2
	ckC = checksum("c") // only in backup-3
)

// threeBackups is a Longhorn-written volume: backup-1 {a, s}, backup-2
// {s, b}, backup-3 {s, c}; backup-3 is the last.
func threeBackups(t *testing.T) (string, *lhVolume) {
	mount := t.TempDir()
	v := newLonghornVolume(t, mount, "vol-a")
	v.volumeCfg("backup-3", "2026-11-03T00:00:00Z", 4)
	v.backup("backup-1", "2026-11-01T00:00:00Z", ckA, ckS)
	v.backup("backup-2", "2026-11-02T00:00:00Z", ckS, ckB)
	v.backup("backup-3", "2026-11-03T00:00:00Z", ckS, ckC)
	for _, ck := range []string{ckA, ckS, ckB, ckC} {
		v.block(ck)
	}
	return mount, v
}

var ref1 = backupdelete.BackupRef{Volume: "vol-a", Name: "backup-1"}

func TestDeleteLonghornWrittenBackup(t *testing.T) {
	mount, v := threeBackups(t)
	s := openFast(t, mount, Options{})
	c, err := s.DeleteBackupReport(context.Background(), ref1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Removed != 1 || c.Referenced != 3 || !c.Full || c.Skipped != "" {
		t.Fatalf("collection %+v, want 1 removed, 3 referenced, by a full listing (the Store's first in the volume)", c)
	}
	if v.exists("backups/backup_backup-1.cfg") || v.blockExists(ckA) {
		t.Fatal("backup-1's cfg or its only block survived")
	}
	for _, ck := range []string{ckS, ckB, ckC} {
		if !v.blockExists(ck) {
			t.Fatalf("referenced block %s removed", ck[:8])
		}
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(v.read("volume.cfg")), &raw); err != nil {
		t.Fatal(err)
	}
	if raw["BlockCount"] != "3" || raw["LastBackupName"] != "backup-3" {
		t.Fatalf("volume.cfg %v", raw)
	}
	// Fields we do not manage survive exactly, double encoding included.
	for k, want := range map[string]string{"DataEngine": `"v1"`, "StorageClassName": `"longhorn"`, "CompressionMethod": `"lz4"`, "Size": "2147483648"} {
		if raw[k] != want {
			t.Fatalf("%s = %q, want %q", k, raw[k], want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(v.dir, "locks")); len(entries) != 0 {
		t.Fatalf("lock files left: %v", entries)
	}
}

// TestTargetedCollectionAfterASweep: after a complete full collection the
// Store only considers the deleted backup's blocks; after a skipped one it
// lists everything again, collecting what the skip left behind.
func TestTargetedCollectionAfterASweep(t *testing.T) {
	mount, v := threeBackups(t)
	stray := checksum("leaked by Longhorn")
	v.block(stray)
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	c, err := s.DeleteBackupReport(ctx, ref1)
	if err != nil || !c.Full || c.Removed != 2 || v.blockExists(stray) {
		t.Fatalf("first: %+v %v, want a full listing that also collects the leaked block", c, err)
	}
	// A crashed backup's in-progress cfg makes the next collection skip...
	v.inProgressBackup("backup-8", ckS)
	v.block(checksum("leaked again"))
	c, err = s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"})
	if err != nil || c.Full || c.Skipped == "" || !v.blockExists(ckB) {
		t.Fatalf("second: %+v %v, want a targeted, skipped collection", c, err)
	}
	// ...so once it is gone, the next deletion lists everything again.
	if err := os.Remove(filepath.Join(v.dir, "backups/backup_backup-8.cfg")); err != nil {
		t.Fatal(err)
	}
	c, err = s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-3"})
	if err != nil || !c.Full || c.Removed != 4 { // s, c, b (left by the skip) and the block leaked meanwhile
		t.Fatalf("third: %+v %v, want a full listing", c, err)
	}
	if n, _ := s.BlockFiles(ctx, "vol-a"); n != 0 {
		t.Fatalf("%d block files left with no backups", n)
	}
	// With nothing left unswept, a new volume state is collected targeted.
	v.backup("backup-5", "2026-11-05T00:00:00Z", ckA)
	v.backup("backup-6", "2026-11-06T00:00:00Z", ckA, ckC)
	v.block(ckA)
	v.block(ckC)
	c, err = s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-6"})
	if err != nil || c.Full || c.Removed != 1 || v.blockExists(ckC) || !v.blockExists(ckA) {
		t.Fatalf("fourth: %+v %v, want a targeted collection of block c", c, err)
	}
}

func TestDeleteLastBackupMovesLastBackupName(t *testing.T) {
	mount, v := threeBackups(t)
	s := openFast(t, mount, Options{})
	if err := s.DeleteBackup(context.Background(), backupdelete.BackupRef{Volume: "vol-a", Name: "backup-3"}); err != nil {
		t.Fatal(err)
	}
	vol, err := s.ReadVolume(context.Background(), "vol-a")
	if err != nil {
		t.Fatal(err)
	}
	if vol.LastBackupName != "backup-2" || vol.LastBackupAt != "2026-11-02T00:00:00Z" || vol.BlockCount != 3 {
		t.Fatalf("volume %+v", vol)
	}
	if v.blockExists(ckC) || !v.blockExists(ckB) {
		t.Fatal("wrong blocks collected")
	}
}

func TestNoBlockRemovedWhileABackupIsInProgressOrUnreadable(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(v *lhVolume)
		why   string
	}{
		{"in progress", func(v *lhVolume) { v.inProgressBackup("backup-9", ckS) }, "in progress"},
		{"corrupt cfg", func(v *lhVolume) {
			v.write("backups/backup_backup-9.cfg", `{"Name":"backup-9","Blocks":[{"BlockChecksum":`)
		}, "unreadable"},
		{"path-like checksum", func(v *lhVolume) {
			v.write("backups/backup_backup-9.cfg", longhornBackupCfg("backup-9", "vol-a", "2026-11-09T00:00:00Z", "2026-11-09T00:00:00Z", []string{"../../../../etc"}))
		}, "unreadable"},
		{"wrong type", func(v *lhVolume) {
			v.write("backups/backup_backup-9.cfg", `{"Name":"backup-9","VolumeName":"vol-a","CreatedTime":"x","Blocks":{"a":1}}`)
		}, "unreadable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mount, v := threeBackups(t)
			c.setup(v)
			s := openFast(t, mount, Options{})
			col, err := s.DeleteBackupReport(context.Background(), ref1)
			if err != nil {
				t.Fatal(err)
			}
			if col.Removed != 0 || !strings.Contains(col.Skipped, c.why) {
				t.Fatalf("collection %+v, want nothing removed because %s", col, c.why)
			}
			if !v.blockExists(ckA) {
				t.Fatal("a block was removed")
			}
			if v.exists("backups/backup_backup-1.cfg") {
				t.Fatal("the cfg removal should stand")
			}
			// BlockCount is not touched when nothing was collected.
			if vol, _ := s.ReadVolume(context.Background(), "vol-a"); vol.BlockCount != 4 {
				t.Fatalf("BlockCount %d, want 4 unchanged", vol.BlockCount)
			}
		})
	}
}

func TestNoBlockRemovedWhenTheBackupListChanges(t *testing.T) {
	mount, v := threeBackups(t)
	s := openFast(t, mount, Options{})
	beforeStep(t, "list the backups again", func() {
		// A creator slipped in a new backup referencing block a.
		v.backup("backup-4", "2026-11-04T00:00:00Z", ckA)
	})
	col, err := s.DeleteBackupReport(context.Background(), ref1)
	if err != nil {
		t.Fatal(err)
	}
	if col.Removed != 0 || col.Skipped != "backup list changed during collection" || !v.blockExists(ckA) {
		t.Fatalf("collection %+v; block a must survive", col)
	}
}

func TestRetryAfterPartialDeletionCollectsByListing(t *testing.T) {
	mount, v := threeBackups(t)
	// A previous deletion removed backup-1's cfg and died before the blocks.
	if err := os.Remove(filepath.Join(v.dir, "backups/backup_backup-1.cfg")); err != nil {
		t.Fatal(err)
	}
	leaked := checksum("leaked")
	v.block(leaked)
	v.write("blocks/zz/not-a-block.txt", "stray")
	v.write("blocks/ab/cd", "a file where a bucket should be")
	v.write(filepath.Join("blocks", ckS[0:2], ckS[2:4], "stray.blk.tmp"), "temporary")
	s := openFast(t, mount, Options{})
	col, err := s.DeleteBackupReport(context.Background(), ref1)
	if err != nil {
		t.Fatal(err)
	}
	if !col.Full || col.Removed != 2 || v.blockExists(ckA) || v.blockExists(leaked) {
		t.Fatalf("collection %+v, want a full listing removing a and the leaked block", col)
	}
	if !v.exists("blocks/zz/not-a-block.txt") {
		t.Fatal("a file that is not a block was removed")
	}
}

func TestDeleteInMissingVolumeIsSuccess(t *testing.T) {
	s := openFast(t, t.TempDir(), Options{})
	if err := s.DeleteBackup(context.Background(), ref1); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.BackupExists(context.Background(), ref1); ok || err != nil {
		t.Fatal(ok, err)
	}
}

func TestSymlinkedVolumeIsNotFollowed(t *testing.T) {
	mount := t.TempDir()
	outside := t.TempDir()
	victim := newLonghornVolume(t, outside, "vol-a")
	victim.volumeCfg("backup-1", "2026-11-01T00:00:00Z", 1)
	victim.backup("backup-1", "2026-11-01T00:00:00Z", ckA)
	victim.block(ckA)
	link := newLonghornVolume(t, mount, "vol-a").dir
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim.dir, link); err != nil {
		t.Fatal(err)
	}
	s := openFast(t, mount, Options{})
	err := s.DeleteBackup(context.Background(), ref1)
	if err == nil {
		t.Fatal("deleted through a symlink leading out of the mount")
	}
	if !victim.exists("backups/backup_backup-1.cfg") || !victim.blockExists(ckA) {
		t.Fatal("files outside the mount were touched")
	}
}

func TestOversizedCfgIsCorrupt(t *testing.T) {
	mount, v := threeBackups(t)
	v.write("backups/backup_backup-2.cfg", longhornBackupCfg("backup-2", "vol-a", "2026-11-02T00:00:00Z", "2026-11-02T00:00:00Z", []string{ckS, ckB})+strings.Repeat(" ", 4096))
	s := openFast(t, mount, Options{MaxConfigBytes: 2048})
	col, err := s.DeleteBackupReport(context.Background(), ref1)
	if err != nil {
		t.Fatal(err)
	}
	if col.Removed != 0 || !strings.Contains(col.Skipped, "larger than 2048 bytes") {
		t.Fatalf("%+v", col)
	}
	_, err = s.ReadBackup(context.Background(), backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"})
	var tl *bounded.TooLargeError
	if !errors.Is(err, backupdelete.ErrCorrupt) || !errors.Is(err, ErrTooLarge) || !errors.As(err, &tl) || tl.Limit != 2048 {
		t.Fatalf("ReadBackup: %v, want ErrCorrupt and a *bounded.TooLargeError of 2048 bytes", err)
	}
}

// TestOurFilesReadAsLonghorns decodes what WriteVolume and WriteBackup
// produce into structs declared exactly like Longhorn's (tags included):
// the reverse direction of interoperability.
func TestOurFilesReadAsLonghorns(t *testing.T) {
	type lhVolumeStruct struct {
		Name                 string
		Size                 int64 `json:",string"`
		Labels               map[string]string
		CreatedTime          string
		LastBackupName       string
		LastBackupAt         string
		BlockCount           int64  `json:",string"`
		BackingImageName     string `json:",string"`
		BackingImageChecksum string `json:",string"`
		CompressionMethod    string `json:",string"`
		StorageClassName     string `json:",string"`
		DataEngine           string `json:",string"`
	}
	type lhBlock struct {
		Offset        int64
		BlockChecksum string
	}
	type lhBackupStruct struct {
		Name, VolumeName, SnapshotName, SnapshotCreatedAt, CreatedTime string
		Size                                                           int64 `json:",string"`
		Labels, Parameters                                             map[string]string
		IsIncremental                                                  bool
		CompressionMethod                                              string
		NewlyUploadedDataSize                                          int64 `json:",string"`
		ReUploadedDataSize                                             int64 `json:",string"`
		ProcessingBlocks                                               *struct{}
		Blocks                                                         []lhBlock `json:",omitempty"`
		SingleFile                                                     struct{ FilePath string }
	}
	mount := t.TempDir()
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	if err := s.WriteVolume(ctx, Volume{Name: "vol-a", Size: 1 << 40, BlockCount: 2, LastBackupName: "backup-1", CompressionMethod: "lz4", DataEngine: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBackup(ctx, Backup{Name: "backup-1", VolumeName: "vol-a", CreatedTime: "2026-11-01T00:00:00Z", Size: 1 << 33, Blocks: []BlockMapping{{Offset: 0, BlockChecksum: ckA}, {Offset: 2097152, BlockChecksum: ckS}}}); err != nil {
		t.Fatal(err)
	}
	v := newLonghornVolume(t, mount, "vol-a")
	var lv lhVolumeStruct
	if err := json.Unmarshal([]byte(v.read("volume.cfg")), &lv); err != nil {
		t.Fatalf("Longhorn cannot read our volume.cfg: %v", err)
	}
	if lv.Size != 1<<40 || lv.BlockCount != 2 || lv.CompressionMethod != "lz4" || lv.DataEngine != "v1" || lv.LastBackupName != "backup-1" {
		t.Fatalf("%+v", lv)
	}
	var lb lhBackupStruct
	if err := json.Unmarshal([]byte(v.read("backups/backup_backup-1.cfg")), &lb); err != nil {
		t.Fatalf("Longhorn cannot read our backup cfg: %v", err)
	}
	if lb.Size != 1<<33 || len(lb.Blocks) != 2 || lb.Blocks[1].BlockChecksum != ckS || lb.Blocks[1].Offset != 2097152 {
		t.Fatalf("%+v", lb)
	}
	if !strings.Contains(v.read("volume.cfg"), `"Size":"1099511627776"`) {
		t.Fatal("64-bit sizes must be JSON strings")
	}
	// And ours reads ours.
	got, err := s.ReadBackup(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-1"})
	if err != nil || got.Size != 1<<33 || got.InProgress() {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestListing(t *testing.T) {
	mount, _ := threeBackups(t)
	newLonghornVolume(t, mount, "vol-b").volumeCfg("", "", 0)
	// A directory in the wrong hash bucket is not a volume.
	if err := os.MkdirAll(filepath.Join(mount, "backupstore/volumes/00/00/vol-c"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	vols, err := s.Volumes(ctx)
	if err != nil || fmt.Sprint(vols) != "[vol-a vol-b]" {
		t.Fatalf("Volumes %v %v", vols, err)
	}
	bs, err := s.Backups(ctx, "vol-a")
	if err != nil || fmt.Sprint(bs) != "[backup-1 backup-2 backup-3]" {
		t.Fatalf("Backups %v %v", bs, err)
	}
	n, err := s.BlockFiles(ctx, "vol-a")
	if err != nil || n != 4 {
		t.Fatalf("BlockFiles %d %v", n, err)
	}
}

func TestVolumePathMatchesLonghorn(t *testing.T) {
	// sha512("vol-a") starts with the two levels below.
	got := VolumePath("vol-a")
	v := newLonghornVolume(t, "/", "vol-a")
	if "/"+got != v.dir {
		t.Fatalf("%s vs %s", got, v.dir)
	}
	if !strings.HasPrefix(got, "backupstore/volumes/") || strings.Count(got, "/") != 4 {
		t.Fatal(got)
	}
	_ = time.Second
}
