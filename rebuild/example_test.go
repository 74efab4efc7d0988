package rebuild_test

import (
	"context"
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/rebuildtest"
)

func ExampleParseGlobalSetting() {
	for _, v := range []string{"enabled", "false", "true\n", "on"} {
		on, err := rebuild.ParseGlobalSetting(v)
		fmt.Printf("%q: %v %v\n", v, on, err)
	}
	// Output:
	// "enabled": true <nil>
	// "false": false <nil>
	// "true\n": true <nil>
	// "on": false setting offline-replica-rebuilding="on": unknown value (accepted: enabled, disabled, true, false)
}

func ExampleEnabled() {
	fmt.Println(rebuild.Enabled(true, rebuild.VolumeSettingIgnored))
	fmt.Println(rebuild.Enabled(true, rebuild.VolumeSettingDisabled))
	fmt.Println(rebuild.Enabled(false, rebuild.VolumeSettingEnabled))
	// Output:
	// true
	// false
	// true
}

// The planner is a pure function: the host observes, decides, applies, and
// passes the record back next time.
func ExamplePlanner_Decide() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	vol := rebuild.Volume{
		Name: "pvc-1", OwnerNode: "node-1", DataEngine: rebuild.DataEngineV2, State: rebuild.StateDetached,
		DesiredReplicas: 3, CanScheduleReplica: true,
		Replicas: []rebuild.Replica{
			{Name: "r1", State: rebuild.ReplicaHealthy},
			{Name: "r2", State: rebuild.ReplicaHealthy},
			{Name: "r3", State: rebuild.ReplicaFailed},
		},
	}
	var p rebuild.Planner // the zero Planner uses the default Options

	d := p.Decide(rebuild.Input{Volume: vol, Global: true, Now: now})
	fmt.Println(d.Action, d.Ticket.ID, d.Ticket.Priority, d.Ticket.DisableFrontend)
	fmt.Println(d.Condition.Reason+":", d.Condition.Message)

	// A pod wants the volume while the rebuilding ticket exists.
	pod := rebuild.Ticket{ID: "csi-abc", Type: "csi-attacher", NodeID: "node-2", Priority: 900}
	d = p.Decide(rebuild.Input{Volume: vol, Tickets: []rebuild.Ticket{d.Ticket, pod}, Global: true, Record: d.Record, Now: now.Add(time.Minute)})
	fmt.Println(d.Action, d.Ticket.ID)
	fmt.Println(d.Condition.Reason+":", d.Condition.Message)
	// Output:
	// create volume-rebuilding-controller-pvc-1 800 true
	// Attaching: degraded (2 of 3 replicas healthy); attaching in maintenance mode on node-1
	// delete volume-rebuilding-controller-pvc-1
	// Interrupted: ticket csi-abc (priority 900) outranks offline rebuilding (priority 800); rebuilding stopped
}

// The driver applies decisions through the host's interfaces; here the
// in-memory cluster of rebuildtest plays the host.
func ExampleDriver() {
	ctx := context.Background()
	sim, err := rebuildtest.NewSim(rebuild.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sim.Cluster
	_ = c.CreateVolume(rebuildtest.VolumeSpec{Name: "pvc-1", OwnerNode: "node-1"})
	_ = c.LoseReplica("pvc-1")

	dec, err := sim.Driver.Reconcile(ctx, "pvc-1")
	fmt.Println(dec.Action, dec.Condition.Reason, dec.RequeueAt.Sub(sim.Clock.Now()), err)

	// Let the attachment controller and the rebuild run.
	_, _ = sim.RunUntil(ctx, 20, func() bool {
		s := c.Inspect("pvc-1")
		return s.Healthy == 3 && s.State == rebuild.StateDetached && len(s.Tickets) == 0
	})
	s := c.Inspect("pvc-1")
	fmt.Println(s.State, s.Healthy, "healthy,", s.Status.Condition.Reason)
	// Output:
	// create Attaching 10m0s <nil>
	// detached 3 healthy, Healthy
}

func ExampleTicketID() {
	fmt.Println(rebuild.TicketID("pvc-1"))
	// Output: volume-rebuilding-controller-pvc-1
}
