package orphan_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

func TestMemStoreConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(*testing.T) orphan.Store { return orphan.NewMemStore() },
		// Every Sweeper given the same MemStore shares its ledger.
		Ledger: func(*testing.T) func() orphan.Store {
			s := orphan.NewMemStore()
			return func() orphan.Store { return s }
		}})
}

func TestMemStoreZeroValue(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(*testing.T) orphan.Store { return new(orphan.MemStore) }})
}
