package orphan_test

import (
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// A driver keeps one Planner per node and plans each cycle with it: the
// plans are Decide's, and a cycle that sees what the last one saw does not
// hash the names again.
func ExamplePlanner() {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	dir := func(name string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: name, orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn/",
				orphan.ParamDiskUUID: "9d7c6a52-0d1e-4c1b-8f55-2f1d5b6f1a01",
			}}
	}
	in := orphan.Input{
		Scopes: map[orphan.Scope]orphan.ScopeStatus{
			{NodeID: "node-1"}:                 {Health: orphan.HealthReady},
			{NodeID: "node-1", Disk: "disk-1"}: {Health: orphan.HealthReady},
		},
		Candidates: []orphan.Candidate{
			{Item: dir("pvc-a-1a2b3c4d"), Verdict: orphan.Orphan("no replica uses it")},
			{Item: dir("pvc-b-5e6f7a8b"), Verdict: orphan.Owned("replica pvc-b-r-1")},
		},
	}
	var planner orphan.Planner // the zero value is ready; one per node
	for cycle := range 3 {
		in.Now = start.Add(time.Duration(cycle) * 30 * time.Second)
		plan := planner.Decide(in)
		// The host applies the plan: here, its store is in.Records.
		in.Records = append(in.Records, plan.Create...)
		fmt.Printf("cycle %d: create %d, keep %d\n", cycle, len(plan.Create), len(plan.Keep))
	}
	// Output:
	// cycle 0: create 1, keep 0
	// cycle 1: create 0, keep 1
	// cycle 2: create 0, keep 1
}
