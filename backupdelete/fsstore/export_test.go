package fsstore

import "testing"

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
