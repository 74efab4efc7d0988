package fsstore

import (
	"os"
	"slices"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
)

// beforeStep makes every collection run f just before its step named
// step (see lhstore.StepNames), until the test ends. Tests use it to
// change the backupstore, or cancel a deletion, between two steps.
func beforeStep(t *testing.T, step string, f func()) {
	t.Helper()
	if !slices.Contains(lhstore.StepNames(), step) {
		t.Fatalf("no collection step %q", step)
	}
	saved := beforeStepHook
	t.Cleanup(func() { beforeStepHook = saved })
	beforeStepHook = func(name string) {
		if saved != nil {
			saved(name)
		}
		if name == step {
			f()
		}
	}
}

// listBackupsWith makes s list a volume's backups with f (a listing that
// lies, as an NFS client's stale directory cache can), until the test
// ends.
func listBackupsWith(t *testing.T, s *Store, f func(vol *os.Root) ([]string, error)) {
	t.Helper()
	saved := s.listBackups
	t.Cleanup(func() { s.listBackups = saved })
	s.listBackups = f
}
