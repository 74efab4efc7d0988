package instance_test

import (
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
)

// lhRecord is the part of a Longhorn Engine or Replica object that
// longhorn-manager's isInstanceOrphanedInInstanceManager reads.
type lhRecord struct {
	deleting          bool
	desired, current  instance.State
	specNode, ownerID string
	im                string // status.instanceManagerName
}

// longhornOrphaned restates isInstanceOrphanedInInstanceManager
// (controller/instance_manager_controller.go) for a record that exists:
// a record out of transition is orphaned when it runs on another instance
// manager than the one the runtime was seen in, or is stopped.
func longhornOrphaned(r lhRecord, im string) bool {
	if r.deleting || r.current != r.desired || r.ownerID != r.specNode {
		return false
	}
	switch r.current {
	case instance.StateRunning:
		return r.im != im
	case instance.StateStopped:
		return true
	}
	return false
}

// viewOf is how a host fills View from the record: DesiredNodeID from
// spec.nodeID and Unscheduled from its being empty.
func viewOf(r lhRecord) instance.View {
	return instance.View{Exists: true, Deleting: r.deleting, DesiredState: r.desired, CurrentState: r.current,
		DesiredNodeID: r.specNode, Unscheduled: r.specNode == "", OwnerNodeID: r.ownerID, InstanceManager: r.im}
}

// TestVerdictAgainstLonghorn runs Verdict and Longhorn's rule over every
// combination of the fields the rule reads, for v1 engines and replicas:
// caretaker never calls an orphan what Longhorn does not, and where
// Longhorn calls an orphan that caretaker does not, the record is owned
// by another node or by none (the cases Verdict's doc lists).
func TestVerdictAgainstLonghorn(t *testing.T) {
	states := []instance.State{"", instance.StateRunning, instance.StateStopped, instance.StateStarting, instance.StateError}
	nodes := []string{"", instNode, "node-2"}
	ims := []string{instIM, "instance-manager-node-2", ""}
	differ := map[string]int{}
	n := 0
	for _, kind := range []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance} {
		item := instItem(kind, "vol-x-0", "uuid-1")
		item.DataEngine = orphan.DataEngineV1
		for _, deleting := range []bool{false, true} {
			for _, desired := range states {
				for _, current := range states {
					for _, spec := range nodes {
						for _, owner := range nodes {
							for _, im := range ims {
								r := lhRecord{deleting, desired, current, spec, owner, im}
								lh := longhornOrphaned(r, instIM)
								got := instance.Verdict(item, viewOf(r))
								ct := got.Outcome == orphan.OutcomeOrphan
								n++
								if ct && !lh {
									t.Errorf("%s %+v: caretaker says orphan (%s), Longhorn does not", kind, r, got.Reason)
								}
								if lh && !ct {
									switch {
									case owner == "" && spec == "":
										differ["no owner, no node"]++
									case owner != instNode:
										differ["owned by another node"]++
									default:
										t.Errorf("%s %+v: Longhorn says orphan, caretaker %s (%s): an undocumented difference", kind, r, got.Outcome, got.Reason)
									}
									if got.Outcome != orphan.OutcomeUndecided {
										t.Errorf("%s %+v: where Longhorn says orphan caretaker must be undecided, got %s", kind, r, got.Outcome)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if differ["no owner, no node"] == 0 || differ["owned by another node"] == 0 {
		t.Errorf("the documented differences were not exercised: %v", differ)
	}
	t.Logf("%d combinations; differences: %v", n, differ)
}

// TestUnscheduledRecordIsInTransition: a replica record with an owner but
// no node (spec.nodeID empty) is in transition, never an orphan, in
// every state; without Unscheduled the same view is judged as before.
func TestUnscheduledRecordIsInTransition(t *testing.T) {
	item := instItem(orphan.KindReplicaInstance, "vol-x-r-1", "uuid-1")
	item.DataEngine = orphan.DataEngineV1
	for _, st := range []instance.State{instance.StateStopped, instance.StateRunning} {
		t.Run(string(st), func(t *testing.T) {
			v := instance.View{Exists: true, DesiredState: st, CurrentState: st, OwnerNodeID: instNode,
				InstanceManager: "instance-manager-node-2", Unscheduled: true}
			got := instance.Verdict(item, v)
			if got.Outcome != orphan.OutcomeUndecided {
				t.Fatalf("unscheduled %s record: %s (%s), want undecided", st, got.Outcome, got.Reason)
			}
			v.Unscheduled = false
			if got := instance.Verdict(item, v); got.Outcome != orphan.OutcomeOrphan {
				t.Fatalf("the same record scheduled here: %s (%s), want orphan", got.Outcome, got.Reason)
			}
		})
	}
}

func ExampleVerdict_unscheduled() {
	item := orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{orphan.ParamInstanceName: "pvc-1-r-0", orphan.ParamInstanceUUID: "u1",
			orphan.ParamInstanceManager: "instance-manager-1"}}
	// The Replica object: spec.nodeID "" (not scheduled), owned by node-1.
	v := instance.View{Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped,
		OwnerNodeID: "node-1", DesiredNodeID: "", Unscheduled: true}
	fmt.Println(instance.Verdict(item, v).Outcome)
	// Output: undecided
}
