package instance

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=instance.go -destination=mocks/mocks.go -package=mocks

import (
	"context"
	"fmt"

	"github.com/caretaker-storage/caretaker/orphan"
)

// State is the state of an engine or replica record, as Longhorn
// spells spec.desireState and status.currentState.
type State string

// The instance states.
const (
	StateRunning  State = "running"
	StateStopped  State = "stopped"
	StateStarting State = "starting"
	StateStopping State = "stopping"
	StateError    State = "error"
	StateUnknown  State = "unknown"
)

// View is the host's view of the engine or replica record that a
// runtime instance item corresponds to (Longhorn: the Engine or Replica
// custom resource named like the instance).
type View struct {
	// Exists says a record of that name exists. When false the other
	// fields are ignored.
	Exists bool
	// Deleting says the record is being deleted (Longhorn: a deletion
	// timestamp is set). Longhorn counts that as a transition.
	Deleting bool
	// DesiredState is the record's desired state (spec.desireState).
	DesiredState State
	// CurrentState is the record's observed state (status.currentState).
	CurrentState State
	// DesiredNodeID is the node the record is scheduled to (spec.nodeID),
	// or "" when the host does not know it or the record is not scheduled.
	// When set and different from OwnerNodeID, the record is moving
	// between nodes: a transition.
	DesiredNodeID string
	// Unscheduled says the record is scheduled to no node (spec.nodeID is
	// empty, which a host that reads spec.nodeID knows apart from not
	// knowing it): a replica being scheduled, or one whose node was
	// taken away. Whatever its owner and states, it is in transition
	// (Longhorn's isInstanceOrphanedInInstanceManager compares
	// status.ownerID with spec.nodeID), never an orphan. A host that
	// fills DesiredNodeID from spec.nodeID sets Unscheduled to
	// DesiredNodeID == "".
	Unscheduled bool
	// OwnerNodeID is the node whose controller owns the record
	// (status.ownerID).
	OwnerNodeID string
	// InstanceManager is the instance manager the record says runs the
	// instance (status.instanceManagerName).
	InstanceManager string
}

// Verdict judges one runtime instance against the host's record of
// it. item is an engine-instance or replica-instance item seen on
// item.NodeID by the instance manager in its InstanceManager parameter;
// view is the host's record of that instance. The rules, in order:
//
//  1. no record: orphan;
//  2. a v2 replica (any data engine but v1) with a record, in any state:
//     owned. Its head lvol and snapshots are the replica's data, and a
//     detached volume's replicas are stopped records whose lvols must
//     survive (see "Deviation from Longhorn's proposal" below);
//  3. the record is being deleted, has no owner or no current state yet,
//     its current state differs from its desired state, it is scheduled
//     to no node (Unscheduled) or to another node than its owner:
//     undecided (in transition; Longhorn's
//     isInstanceOrphanedInInstanceManager);
//  4. the record is owned by another node: undecided (that node judges);
//  5. running on another instance manager: orphan; running on this one:
//     owned;
//  6. stopped, while the runtime object still exists (it does: it is the
//     item): orphan;
//  7. starting, stopping, error, unknown or any other state: undecided.
//
// It is pure. Items of another kind are undecided.
//
// What a purge then removes (the Deleter's part; spdk.Orphans for v2):
//
//	record                          v1 engine/replica   v2 engine        v2 replica
//	none                            the process         the RAID bdev    head lvol and the lvols SPDK reports
//	                                                                     descending from its chain (spdk.PurgeOrder)
//	stopped (owner: this node)      the process         the RAID bdev    nothing: owned
//	running on another IM           the process         the RAID bdev    nothing: owned
//	running on this IM              nothing: owned      nothing: owned   nothing: owned
//	in transition, other owner,     nothing: undecided  nothing:         nothing: owned
//	starting/stopping/error/unknown                     undecided
//
// A RAID bdev holds no data: its base bdevs are the replicas' lvols,
// which an engine purge never touches.
//
// # Deviation from Longhorn's proposal
//
// Longhorn's "Orphaned V2 Volume Runtime Resource Cleanup" (longhorn/longhorn#10933) says "record stopped and the
// runtime object still exists: orphan" for both kinds, and cleans up with
// cleanupRequired=true, which deletes a v2 replica's lvols. A detached v2
// volume's replicas are exactly that: stopped records whose head lvol and
// snapshots hold the volume's data. Longhorn's code never applies the
// rule to v2 replicas:
//
//   - longhorn-manager controller/instance_manager_controller.go,
//     InstanceManagerMonitor.createOrphanForInstances: instance orphans are
//     created for data engine v1 only, and runtimes that are starting,
//     stopping or stopped, or have an empty UUID, are skipped (see
//     SkipReason); isInstanceOrphanedInInstanceManager: running on
//     another instance manager or stopped is an orphan; isEngineOrphaned /
//     isReplicaOrphaned skip records in transition;
//   - longhorn-manager controller/orphan_controller.go,
//     OrphanController.cleanupOrphanedInstance: InstanceDelete(...,
//     cleanupRequired=false), which for a v2 replica (longhorn-spdk-engine
//     pkg/spdk/replica.go, Replica.Delete) only stops the NVMe-oF exposure
//     and releases ports; lvols are deleted only with cleanupRequired=true,
//     which Longhorn uses when the Replica object itself is deleted.
//
// caretaker keeps the rule for engines and v1 replicas (rules 5 and 6),
// and a v2 replica with any record is owned. Its lvols are deleted only
// when no replica record of that name exists, which spdk.Orphans.Delete checks
// again at the moment of deletion.
//
// # Deviation from isInstanceOrphanedInInstanceManager
//
// Rule 4 is the proposal's ("CR owner is not current node: skip").
// longhorn-manager's InstanceManagerMonitor.isInstanceOrphanedInInstanceManager
// (controller/instance_manager_controller.go) has no such rule: once the
// record is out of transition (not being deleted, status.currentState
// equal to spec.desireState, status.ownerID equal to spec.nodeID) it
// calls the runtime an orphan when the record runs on another instance
// manager or is stopped, whichever node owns it. For a v1 engine or
// replica record that exists, the two differ exactly here, and caretaker
// is never the one that calls an orphan:
//
//	record (out of transition)               Longhorn     caretaker
//	owned by another node, running elsewhere orphan       undecided (rule 4)
//	owned by another node, stopped           orphan       undecided (rule 4)
//	no owner and no node, stopped            orphan       undecided (rule 3)
//	every other case                         the same verdict
//
// (TestVerdictAgainstLonghorn checks every combination.) caretaker keeps
// rule 4 because the only evidence that a runtime here is not the
// record's is the status of a record another node writes: a view that
// lags behind a record moving to this node (a stale "running on the other
// node's instance manager") would have this node kill the record's live
// instance. What it costs: a duplicate runtime of a record another node
// owns is not recorded here; Longhorn's instance manager removes it when
// the instance manager is restarted, and it becomes an orphan here once
// its record is deleted or owned by this node.
//
// The comparison holds for a host that fills DesiredNodeID from
// spec.nodeID and Unscheduled from its being empty. A host that leaves
// DesiredNodeID empty without Unscheduled gives up Longhorn's check that
// the owner is the node the record is scheduled to, and may then get an
// orphan verdict where Longhorn sees a transition.
func Verdict(item orphan.Item, view View) orphan.Verdict {
	if item.Kind != orphan.KindEngineInstance && item.Kind != orphan.KindReplicaInstance {
		return orphan.Undecided(fmt.Sprintf("kind %q is not a runtime instance", item.Kind))
	}
	what := string(item.Kind) + " " + item.Param(orphan.ParamInstanceName)
	if !view.Exists {
		return orphan.Orphan(what + ": no " + recordNoun(item.Kind) + " record exists")
	}
	if item.Kind == orphan.KindReplicaInstance && item.DataEngine != orphan.DataEngineV1 {
		return orphan.Owned(fmt.Sprintf("%s: a replica record exists (state %q); a v2 replica's lvols are its data and are kept while any record of that name exists", what, view.CurrentState))
	}
	switch {
	case view.Deleting:
		return orphan.Undecided(what + ": record is being deleted")
	case view.OwnerNodeID == "" || view.CurrentState == "":
		return orphan.Undecided(what + ": record status not reconciled yet (no owner or no current state)")
	case view.CurrentState != view.DesiredState:
		return orphan.Undecided(fmt.Sprintf("%s: current state %q differs from desired state %q", what, view.CurrentState, view.DesiredState))
	case view.Unscheduled:
		return orphan.Undecided(fmt.Sprintf("%s: record is scheduled to no node (owned by node %q): being scheduled", what, view.OwnerNodeID))
	case view.DesiredNodeID != "" && view.DesiredNodeID != view.OwnerNodeID:
		return orphan.Undecided(fmt.Sprintf("%s: record is scheduled to node %q but owned by node %q", what, view.DesiredNodeID, view.OwnerNodeID))
	case view.OwnerNodeID != item.NodeID:
		return orphan.Undecided(fmt.Sprintf("%s: record is owned by node %q, not %q", what, view.OwnerNodeID, item.NodeID))
	}
	im := item.Param(orphan.ParamInstanceManager)
	switch view.CurrentState {
	case StateRunning:
		if view.InstanceManager != im {
			return orphan.Orphan(fmt.Sprintf("%s: record runs on instance manager %q, not %q", what, view.InstanceManager, im))
		}
		return orphan.Owned(fmt.Sprintf("%s: running on instance manager %q", what, im))
	case StateStopped:
		return orphan.Orphan(what + ": record is stopped but the runtime object still exists")
	}
	return orphan.Undecided(fmt.Sprintf("%s: record is in state %q", what, view.CurrentState))
}

// SkipReason says why a runtime instance must not be judged at all
// this cycle, or "" if it may be. A host that lists v1 instances from its
// instance managers (caretaker ships no v1 instance inventory) leaves out
// the instances for which it returns a reason, as Longhorn's
// createOrphanForInstances does: a starting instance is in transition; a
// stopping or stopped one is being cleaned up by its instance manager; one
// with an empty UUID cannot be told from its successor, so neither named
// nor deleted safely. state is the runtime's own state as the instance
// manager reports it, not the record's.
func SkipReason(state State, uuid string) string {
	switch {
	case state == StateStarting:
		return "runtime is starting; judged once it runs"
	case state == StateStopping || state == StateStopped:
		return "runtime is " + string(state) + "; its instance manager cleans it up"
	case uuid == "":
		return "runtime has an empty UUID; it cannot be named or deleted safely"
	}
	return ""
}

func recordNoun(k orphan.Kind) string {
	if k == orphan.KindEngineInstance {
		return "engine"
	}
	return "replica"
}

// Lookup gives the host's view of engine and replica records.
type Lookup interface {
	// LookupInstance returns the view of the engine (kind
	// KindEngineInstance) or replica (KindReplicaInstance) record named
	// name. A record that does not exist is a view with Exists false, not
	// an error. An error means the view is not available now (a cache not
	// synced, an API error); the judge then answers undecided.
	//
	// It is called by Judge.Judge, from the host's planning step
	// and from Sweeper right before a purge, possibly from several
	// goroutines at once: it must be safe for concurrent use.
	LookupInstance(ctx context.Context, kind orphan.Kind, name string) (View, error)
}

// LookupFunc adapts a function to Lookup.
type LookupFunc func(ctx context.Context, kind orphan.Kind, name string) (View, error)

// LookupInstance calls f.
func (f LookupFunc) LookupInstance(ctx context.Context, kind orphan.Kind, name string) (View, error) {
	return f(ctx, kind, name)
}

// Judge is an orphan.Judge of runtime instance items: it looks the
// record up and applies Verdict. Items of other kinds, and items with no
// InstanceName, are undecided. Create it with NewJudge.
type Judge struct {
	lookup Lookup
}

var _ orphan.Judge = (*Judge)(nil)

// NewJudge returns a Judge over lookup. A nil lookup judges every item
// undecided.
func NewJudge(lookup Lookup) *Judge { return &Judge{lookup: lookup} }

// Judge implements orphan.Judge. It never returns an error: a failed
// lookup is an undecided verdict carrying the error's text.
func (j *Judge) Judge(ctx context.Context, item orphan.Item) (orphan.Verdict, error) {
	if item.Kind != orphan.KindEngineInstance && item.Kind != orphan.KindReplicaInstance {
		return orphan.Undecided(fmt.Sprintf("kind %q is not a runtime instance", item.Kind)), nil
	}
	name := item.Param(orphan.ParamInstanceName)
	if name == "" {
		return orphan.Undecided(string(item.Kind) + " item has no " + orphan.ParamInstanceName), nil
	}
	if j == nil || j.lookup == nil {
		return orphan.Undecided("no record lookup configured"), nil
	}
	view, err := j.lookup.LookupInstance(ctx, item.Kind, name)
	if err != nil {
		return orphan.Undecided(fmt.Sprintf("%s %s: record not available: %v", item.Kind, name, err)), nil
	}
	return Verdict(item, view), nil
}
