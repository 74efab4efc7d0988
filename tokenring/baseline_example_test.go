package tokenring_test

import (
	"fmt"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// A cluster provisioned node after node, SimpleStrategy RF 2, data
// written once the first node runs. The host observes the ring before
// each join; once all three run, A and B lost ranges to the nodes that
// joined after them and need a cleanup; C, the last, does not.
func ExampleBaselines() {
	shop := map[string]tokenring.Replication{
		"system": {Strategy: tokenring.LocalStrategy},
		"shop":   {Strategy: tokenring.SimpleStrategy, ReplicationFactor: 2},
	}
	owners := []tokenring.TokenOwner{{Token: 10, Endpoint: "A"}, {Token: 20, Endpoint: "B"}, {Token: 30, Endpoint: "C"}}

	var b tokenring.Baselines // the host saves it after each Observe
	var now tokenring.Topology
	for n := 1; n <= 3; n++ {
		now = tokenring.Topology{Ring: tokenring.Ring{Owners: owners[:n]}, Keyspaces: shop}
		var err error
		if b, err = b.Observe(now, tokenring.ObserveOptions{}); err != nil {
			fmt.Println(err)
			return
		}
	}
	a, err := b.Analyze(now) // pass &a in DecideOptions.Analysis
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("needs cleanup:", a.NeedsCleanup())
	fmt.Println("A lost:", a.Nodes["A"].Keyspaces["shop"].Lost)
	fmt.Println("C's baseline:", b.Nodes["C"].Reason)

	// Each finished cleanup moves that node's baseline to now.
	for _, ep := range a.NeedsCleanup() {
		b, _ = b.RecordCleanup(ep, now)
	}
	a, _ = b.Analyze(now)
	fmt.Println("after the cleanups:", a.NeedsCleanup())
	// Output:
	// needs cleanup: [A B]
	// A lost: [{10 20}]
	// C's baseline: Joined
	// after the cleanups: []
}
