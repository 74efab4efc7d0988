package fsstore

import (
	"os"
	"testing"
)

// beforeStep makes every collection run f just before its step named
// step (see collectionSteps), until the test ends. Tests use it to change
// the backupstore, or cancel a deletion, between two steps.
func beforeStep(t *testing.T, step string, f func()) {
	t.Helper()
	saved := collectionSteps
	t.Cleanup(func() { collectionSteps = saved })
	var steps []collectionStep
	found := false
	for _, st := range saved {
		if st.name == step {
			found = true
			steps = append(steps, collectionStep{"test: before " + step, func(*collection) error { f(); return nil }})
		}
		steps = append(steps, st)
	}
	if !found {
		t.Fatalf("no collection step %q", step)
	}
	collectionSteps = steps
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
