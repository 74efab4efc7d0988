package rebuild_test

import (
	"context"
	"fmt"

	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/rebuildtest"
)

// Hooks count what the Driver decides, here ticket changes by action and
// reason over one offline rebuild: what a host exports as metrics.
func ExampleHooksFunc() {
	changes := map[string]int{}
	hooks := rebuild.HooksFunc(func(e rebuild.Event) {
		if e.Outcome == rebuild.EventOK && (e.Action == rebuild.ActionCreate || e.Action == rebuild.ActionDelete) {
			changes[e.Action.String()+" "+e.Reason]++ // one goroutine reconciles here; no lock needed
		}
	})
	ctx := context.Background()
	sim, err := rebuildtest.NewSim(rebuild.Options{Hooks: hooks})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sim.Cluster
	_ = c.CreateVolume(rebuildtest.VolumeSpec{Name: "pvc-1", OwnerNode: "node-1"})
	_ = c.LoseReplica("pvc-1")
	_, _ = sim.RunUntil(ctx, 20, func() bool {
		s := c.Inspect("pvc-1")
		return s.Healthy == 3 && s.State == rebuild.StateDetached && len(s.Tickets) == 0
	})
	fmt.Println("create Attaching:", changes["create Attaching"])
	fmt.Println("delete Completed:", changes["delete Completed"])
	// Output:
	// create Attaching: 1
	// delete Completed: 1
}
