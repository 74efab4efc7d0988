package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
)

// TestLockedVolumeIsRefused: deleting a backup while a backup of its
// volume holds the backupstore lock is a refusal by a safety rule: exit 4
// once -lock-wait is over, and the backup stays.
func TestLockedVolumeIsRefused(t *testing.T) {
	dir := seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := fsstore.New(fsstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lock, err := s.Lock(ctx, "pvc-1", fsstore.LockBackup)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	var out, errOut bytes.Buffer
	code := runCommand(ctx, []string{"-dir", dir, "-volume", "pvc-1", "-backup", "backup-2", "-yes", "-lock-wait", "1s"}, &out, &errOut)
	if code != 4 || !strings.Contains(errOut.String(), "lock") {
		t.Fatalf("exit %d, want 4\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if ok, err := s.BackupExists(context.Background(), backupdelete.BackupRef{Volume: "pvc-1", Name: "backup-2"}); !ok || err != nil {
		t.Fatalf("backup-2 is gone (%v)", err)
	}
}
