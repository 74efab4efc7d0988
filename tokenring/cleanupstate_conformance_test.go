package tokenring_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestMemCleanupStateStoreConformance: the in-memory store honours the
// CleanupStateStore contract.
func TestMemCleanupStateStoreConformance(t *testing.T) {
	tokenringtest.RunConformanceTests(t, tokenringtest.Harness{
		CleanupStateStore: func(*testing.T) tokenring.CleanupStateStore { return &tokenring.MemCleanupStateStore{} },
	})
}
