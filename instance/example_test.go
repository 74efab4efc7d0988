package instance_test

import (
	"context"
	"fmt"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
)

// A host's records, as a Lookup over an informer cache would answer, and
// three v2 engines found in node-1's SPDK target: one with no record, one
// whose record runs here, one whose record is being deleted.
func Example() {
	records := map[string]instance.View{
		"vol-a-e-0": {Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning,
			OwnerNodeID: "node-1", InstanceManager: "im-node-1"},
		"vol-b-e-0": {Exists: true, Deleting: true, DesiredState: instance.StateStopped, CurrentState: instance.StateRunning,
			OwnerNodeID: "node-1", InstanceManager: "im-node-1"},
	}
	lookup := instance.LookupFunc(func(_ context.Context, _ orphan.Kind, name string) (instance.View, error) {
		return records[name], nil // a missing name is View{Exists: false}: no record
	})
	judge := instance.NewJudge(lookup)

	for _, name := range []string{"vol-gone-e-0", "vol-a-e-0", "vol-b-e-0"} {
		item := orphan.Item{Kind: orphan.KindEngineInstance, NodeID: "node-1", DataEngine: orphan.DataEngineV2,
			Parameters: map[string]string{
				orphan.ParamInstanceName:    name,
				orphan.ParamInstanceUUID:    "0b7e2c4a-9d1f-4e3b-8a6c-" + fmt.Sprintf("%012d", len(name)),
				orphan.ParamInstanceManager: "im-node-1",
			}}
		v, _ := judge.Judge(context.Background(), item) // a Judge never fails: a failed lookup is undecided
		fmt.Printf("%-13s %s\n", name, v.Outcome)
	}
	// Output:
	// vol-gone-e-0  orphan
	// vol-a-e-0     owned
	// vol-b-e-0     undecided
}
