package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBackupPart(t *testing.T) {
	run := func() string {
		var buf bytes.Buffer
		if err := runBackup(context.Background(), &buf, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	out := run()
	for _, want := range []string{
		"backupstore in Longhorn's layout: backupstore/volumes/ad/ae/vol-quickstart/\n",
		"10 block files; LastBackupName backup-b\n",
		"  backup-b: Completed -> Deleting (delete command started in the background)\n",
		"  backup-c: Pending, \"Wait for backup backup-b to be deleted\"\n",
		"  backup-b: Deleting -> finalized (gone from the backupstore, finalizer removed)\n",
		"block GC: 10 block files before, 4 after",
		"volume.cfg BlockCount 4, LastBackupName backup-d\n",
		"  backup-c: gate open, InProgress -> Completed\n",
		"  record orphan-9c17098759ce11309c99b21a00aee57c8743d816dc0d9256651bfa9c480857f3 kind backup\n",
		"    BackupName=backup-d\n    BackupTarget=default\n    BackupVolume=vol-quickstart\n",
		"  judged orphan: backup failed: state Error\n",
		"backup-d still there = false\n",
		"scan after the purge, host still says Error: 0 failed backups listed\n",
		"  skipped default/vol-quickstart/backup-d: not in the backupstore (already purged, or never written): nothing to clean\n",
		"left: [backup-a backup-c], 4 block files\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The Pending message comes before the deletion finishes.
	if strings.Index(out, "Pending") > strings.Index(out, "finalized") {
		t.Errorf("backup-c was not held back while backup-b was Deleting:\n%s", out)
	}
	if again := run(); again != out {
		t.Errorf("output is not deterministic:\n%s\nthen\n%s", out, again)
	}
}
