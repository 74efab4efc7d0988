package salvage_test

import (
	"maps"
	"testing"

	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// snapshot records every entry under root (salvagetest.TreeState).
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	st, err := salvagetest.TreeState(root)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func equalSnapshots(a, b map[string]string) bool { return maps.Equal(a, b) }
