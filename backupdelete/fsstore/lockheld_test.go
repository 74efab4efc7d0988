package fsstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// TestDeletionStopsWhenTheLockIsLost: between the scan and the unlinks,
// the lock file can no longer be rewritten (locks/ is replaced by a file,
// as a share gone read-only or a lost mount would fail the rewrite) for
// longer than the lock lives. Others may then see it expired and start a
// backup that reuses block a, so the deletion must unlink nothing: it
// ends with ErrLockLost and block a is still there. Longhorn's refresh
// ignores the failure and the deletion goes on.
func TestDeletionStopsWhenTheLockIsLost(t *testing.T) {
	s, v, clk := lockFixture(t, Options{})
	locks := filepath.Join(v.dir, locksDir)
	beforeStep(t, "unlink the unreferenced blocks", func() {
		if err := os.Rename(locks, locks+".away"); err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(locks, []byte("not a directory"), 0o600); err != nil {
			t.Error(err)
			return
		}
		// Time passes while the refreshes fail, past the lock's expiry.
		start := clk.Now()
		deadline := time.Now().Add(10 * time.Second)
		for clk.Since(start) <= LockExpiry+10*time.Second && time.Now().Before(deadline) {
			clk.Step(time.Second)
			time.Sleep(time.Millisecond) // lets the refresher run at each second
		}
	})
	err := runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref1) })
	if !errors.Is(err, ErrLockLost) || !errors.Is(err, backupdelete.ErrLocked) {
		t.Fatalf("deletion: %v, want ErrLockLost", err)
	}
	for _, ck := range []string{ckA, ckS, ckB, ckC} {
		if !v.blockExists(ck) {
			t.Errorf("block %s unlinked under a lost lock", ck[:8])
		}
	}
}
