package orphan_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

func TestMemStoreConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(*testing.T) orphan.Store { return orphan.NewMemStore() }})
}

func TestMemStoreZeroValue(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(*testing.T) orphan.Store { return new(orphan.MemStore) }})
}
