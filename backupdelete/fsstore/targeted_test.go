package fsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// recount is the number of distinct blocks the volume's backups
// reference, counted from scratch.
func recount(t *testing.T, s *Store, volume string) int {
	t.Helper()
	ctx := context.Background()
	names, err := s.Backups(ctx, volume)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, n := range names {
		b, err := s.ReadBackup(ctx, backupdelete.BackupRef{Volume: volume, Name: n})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range b.Blocks {
			set[m.BlockChecksum] = true
		}
	}
	return len(set)
}

// incrementalVolume is a Longhorn-written volume of six incremental
// backups: each replaces two of the previous backup's six blocks, and
// every backup also references the shared block twice (at two offsets).
// It returns the backups' blocks.
func incrementalVolume(t *testing.T) (string, *lhVolume, [][]string) {
	mount := t.TempDir()
	v := newLonghornVolume(t, mount, "vol-a")
	shared := checksum("shared")
	v.block(shared)
	current := make([]string, 6)
	for i := range current {
		current[i] = checksum(fmt.Sprint("0-", i))
	}
	var all [][]string
	for n := range 6 {
		if n > 0 {
			for i := (n - 1) % 3 * 2; i < (n-1)%3*2+2; i++ {
				current[i] = checksum(fmt.Sprint(n, "-", i))
			}
		}
		blocks := append([]string{shared}, current...)
		blocks = append(blocks, shared)
		all = append(all, blocks)
		for _, ck := range blocks {
			v.block(ck)
		}
		at := fmt.Sprintf("2026-11-%02dT00:00:00Z", n+1)
		v.backup(fmt.Sprint("backup-", n), at, blocks...)
	}
	v.volumeCfg("backup-5", "2026-11-06T00:00:00Z", 0) // a full collection sets it
	return mount, v, all
}

// setVolumeKey rewrites one key of volume.cfg (deletes it when raw is "").
func setVolumeKey(t *testing.T, v *lhVolume, key, raw string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v.read("volume.cfg")), &m); err != nil {
		t.Fatal(err)
	}
	if raw == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(raw)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	v.write("volume.cfg", string(data))
}

// checkCollected checks, after deleting a backup whose blocks were
// deleted, that every block a remaining backup references is still there,
// that the deleted backup's other blocks are gone, and that BlockCount is
// a full recount.
func checkCollected(t *testing.T, s *Store, v *lhVolume, c Collection, deleted []string, remaining [][]string) {
	t.Helper()
	kept := map[string]bool{}
	for _, blocks := range remaining {
		for _, ck := range blocks {
			kept[ck] = true
			if !v.blockExists(ck) {
				t.Fatalf("block %s, referenced by a remaining backup, was removed", ck[:8])
			}
		}
	}
	gone := map[string]bool{}
	for _, ck := range deleted {
		if !kept[ck] {
			gone[ck] = true
			if v.blockExists(ck) {
				t.Fatalf("unreferenced block %s survived", ck[:8])
			}
		}
	}
	if c.Removed != len(gone) {
		t.Fatalf("%+v, want %d removed", c, len(gone))
	}
	want := recount(t, s, "vol-a")
	if want != len(kept) {
		t.Fatalf("recount %d, want %d", want, len(kept))
	}
	vol, err := s.ReadVolume(context.Background(), "vol-a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Referenced != want || vol.BlockCount != int64(want) {
		t.Fatalf("Referenced %d, BlockCount %d, want %d (a full recount)", c.Referenced, vol.BlockCount, want)
	}
}

// TestIncrementalBlockCountMatchesRecount: after one full collection sets
// BlockCount, targeted collections keep it equal to a full recount while
// removing exactly the deleted backups' unreferenced blocks.
func TestIncrementalBlockCountMatchesRecount(t *testing.T) {
	mount, v, blocks := incrementalVolume(t)
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	// Out of order, so that deletions free blocks in the middle too.
	for k, n := range []int{0, 3, 1, 5, 2} {
		c, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: fmt.Sprint("backup-", n)})
		if err != nil || c.Skipped != "" || c.Full != (k == 0) {
			t.Fatalf("deleting backup-%d: %+v %v, want a full collection first, then targeted ones", n, c, err)
		}
		deleted := blocks[n]
		blocks[n] = nil
		checkCollected(t, s, v, c, deleted, blocks)
	}
	// The last one holds only its own blocks.
	if n, _ := s.BlockFiles(ctx, "vol-a"); n != 7 {
		t.Fatalf("%d block files, want the last backup's 7", n)
	}
}

// TestTargetedBlockCountFallback: when volume.cfg's BlockCount is absent
// or cannot be the previous count (the result would be negative, or less
// than the candidates still referenced), a targeted collection counts the
// referenced blocks in full instead.
func TestTargetedBlockCountFallback(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
	}{
		{"absent", ""},
		{"null", "null"},
		{"negative result", `"0"`},
		{"fewer than still referenced", `"6"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mount, v, blocks := incrementalVolume(t)
			s := openFast(t, mount, Options{})
			ctx := context.Background()
			if c, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0"}); err != nil || !c.Full {
				t.Fatalf("first: %+v %v", c, err)
			}
			blocks[0] = nil
			setVolumeKey(t, v, "BlockCount", tc.raw)
			c, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-1"})
			if err != nil || c.Skipped != "" || c.Full {
				t.Fatalf("%+v %v, want a targeted collection", c, err)
			}
			deleted := blocks[1]
			blocks[1] = nil
			checkCollected(t, s, v, c, deleted, blocks)
			// volume.cfg's other keys are untouched.
			if got := v.read("volume.cfg"); !strings.Contains(got, `"DataEngine":"\"v1\""`) {
				t.Fatalf("volume.cfg %s", got)
			}
		})
	}
}

// TestTargetedCollectionKeepsReferencedCandidates: in a targeted
// collection, candidates a remaining backup references survive however
// that backup's cfg is written (canonical mappings or not), and nothing is
// removed or counted while a remaining backup is in progress.
func TestTargetedCollectionKeepsReferencedCandidates(t *testing.T) {
	mount, v := threeBackups(t)
	s := openFast(t, mount, Options{})
	ctx := context.Background()
	if c, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-3"}); err != nil || !c.Full {
		t.Fatalf("first: %+v %v", c, err)
	}
	// backup-1 {a, s} and backup-2 {s, b} remain. backup-4 references s
	// and b with mappings in another key order and case, which the fast
	// scanner's canonical path does not read; backup-5 holds a, b, s and
	// its own block twice.
	own := checksum("own")
	v.block(own)
	v.write("backups/backup_backup-4.cfg", fmt.Sprintf(`{"Name":"backup-4","VolumeName":"vol-a","SnapshotCreatedAt":"2026-11-04T00:00:00Z","CreatedTime":"2026-11-04T00:00:00Z",
		"Blocks":[ {"blockchecksum":%q, "Offset":0}, {"BlockChecksum":%q,"Offset":2097152,"Extra":[1]} ]}`, ckS, ckB))
	v.backup("backup-5", "2026-11-05T00:00:00Z", ckA, own, ckB, ckS, own)
	setVolumeKey(t, v, "BlockCount", `"4"`) // a, s, b and own

	// While a backup is in progress, nothing goes and BlockCount stays.
	v.inProgressBackup("backup-9", ckC)
	c, err := s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-5"})
	if err != nil || c.Full || c.Removed != 0 || !strings.Contains(c.Skipped, "in progress") || !v.blockExists(own) {
		t.Fatalf("%+v %v, want a targeted collection skipped for the backup in progress", c, err)
	}
	if vol, _ := s.ReadVolume(ctx, "vol-a"); vol.BlockCount != 4 {
		t.Fatalf("BlockCount %d, want 4 untouched", vol.BlockCount)
	}

	// A skip means the next collection lists everything; sweep again and
	// delete a backup whose blocks are all referenced elsewhere.
	if err := os.Remove(filepath.Join(v.dir, "backups/backup_backup-9.cfg")); err != nil {
		t.Fatal(err)
	}
	v.backup("backup-5", "2026-11-05T00:00:00Z", ckA, own, ckB, ckS, own)
	c, err = s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-5"})
	if err != nil || !c.Full || c.Referenced != 3 {
		t.Fatalf("sweep: %+v %v", c, err)
	}
	v.backup("backup-6", "2026-11-06T00:00:00Z", ckS, ckB, ckA, ckS)
	c, err = s.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-6"})
	if err != nil || c.Full || c.Skipped != "" || c.Removed != 0 || c.Referenced != 3 {
		t.Fatalf("%+v %v, want a targeted collection removing nothing", c, err)
	}
	for _, ck := range []string{ckA, ckS, ckB} {
		if !v.blockExists(ck) {
			t.Fatalf("referenced block %s removed", ck[:8])
		}
	}
	// Deleting backup-1 frees a only.
	c, err = s.DeleteBackupReport(ctx, ref1)
	if err != nil || c.Full || c.Removed != 1 || v.blockExists(ckA) || !v.blockExists(ckS) || c.Referenced != 2 {
		t.Fatalf("%+v %v, want a targeted collection of block a", c, err)
	}
	if vol, _ := s.ReadVolume(ctx, "vol-a"); vol.BlockCount != 2 || recount(t, s, "vol-a") != 2 {
		t.Fatalf("BlockCount %d, want 2", vol.BlockCount)
	}
}
