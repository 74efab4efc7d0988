package main

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/examples/internal/cli"
)

func ck(s string) string {
	sum := sha512.Sum512([]byte(s))
	return hex.EncodeToString(sum[:])[:64]
}

// seed returns a backupstore root holding volume pvc-1 with backup-1
// (blocks x, y) and backup-2 (blocks x, z, w).
func seed(t *testing.T) string {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := fsstore.New(fsstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteVolume(ctx, fsstore.Volume{Name: "pvc-1", Size: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	for i, b := range []struct {
		name   string
		blocks []string
	}{{"backup-1", []string{"x", "y"}}, {"backup-2", []string{"x", "z", "w"}}} {
		var maps []fsstore.BlockMapping
		for j, c := range b.blocks {
			if err := s.WriteBlock(ctx, "pvc-1", ck(c), []byte(c)); err != nil {
				t.Fatal(err)
			}
			maps = append(maps, fsstore.BlockMapping{Offset: int64(j) << 21, BlockChecksum: ck(c)})
		}
		ts := time.Date(2026, 11, 1+i, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		if err := s.WriteBackup(ctx, fsstore.Backup{Name: b.name, VolumeName: "pvc-1", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	return dir
}

func TestDryRunThenDelete(t *testing.T) {
	dir := seed(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, &out, dir, "pvc-1", "backup-2", false, time.Second); !errors.Is(err, cli.ErrDryRun) {
		t.Fatalf("dry run: err %v, want cli.ErrDryRun", err)
	}
	for _, want := range []string{"1 volume\n", "pvc-1: 2 backups, 4 block files", "backup-2  created 2026-11-02T00:00:00Z, 3 blocks",
		"deleting pvc-1/backup-2 would free 2 block files", "dry run: pass -yes to delete"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	check, _ := fsstore.New(fsstore.Options{Dir: dir})
	defer check.Close()
	if ok, _ := check.BackupExists(ctx, backupdelete.BackupRef{Volume: "pvc-1", Name: "backup-2"}); !ok {
		t.Fatal("the dry run deleted something")
	}

	out.Reset()
	if err := run(ctx, &out, dir, "pvc-1", "backup-2", true, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{" Completed\n", "Completed -> Deleting", " deleted\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n, _ := check.BlockFiles(ctx, "pvc-1"); n != 2 {
		t.Fatalf("%d block files left, want 2", n)
	}
}
