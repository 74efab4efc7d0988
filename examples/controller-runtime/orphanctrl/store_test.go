package orphanctrl_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// TestStoreConformance runs the orphan.Store contract on the real API
// server, each subtest in a namespace of its own. Lists go through the
// direct client here: the contract expects a List to see the writes before
// it, which a cache only does eventually (the controller tests cover the
// cached List).
func TestStoreConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(t *testing.T) orphan.Store {
		e := newEnv(t)
		return orphanctrl.NewStore(e.c, e.c, e.ns, "")
	}})
}

// TestStoreLedger runs the orphan.LedgerStore contract on the real API
// server: the ledger is a ConfigMap per node, saved at the resourceVersion
// read, so a new Store and Sweeper every cycle, and two Sweepers of one
// node at once, stay within one allowance an hour.
func TestStoreLedger(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Ledger: func(t *testing.T) func() orphan.Store {
		e := newEnv(t)
		return func() orphan.Store { return orphanctrl.NewStore(e.c, e.c, e.ns, "node-1") }
	}})
}
