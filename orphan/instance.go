package orphan

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=instance.go -destination=mocks/instance.go -package=mocks

import (
	"context"
	"fmt"
)

// InstanceState is the state of an engine or replica record, as Longhorn
// spells spec.desireState and status.currentState.
type InstanceState string

// The instance states.
const (
	InstanceStateRunning  InstanceState = "running"
	InstanceStateStopped  InstanceState = "stopped"
	InstanceStateStarting InstanceState = "starting"
	InstanceStateStopping InstanceState = "stopping"
	InstanceStateError    InstanceState = "error"
	InstanceStateUnknown  InstanceState = "unknown"
)

// InstanceView is the host's view of the engine or replica record that a
// runtime instance item corresponds to (Longhorn: the Engine or Replica
// custom resource named like the instance).
type InstanceView struct {
	// Exists says a record of that name exists. When false the other
	// fields are ignored.
	Exists bool
	// DesiredState is the record's desired state (spec.desireState).
	DesiredState InstanceState
	// CurrentState is the record's observed state (status.currentState).
	CurrentState InstanceState
	// OwnerNodeID is the node whose controller owns the record
	// (status.ownerID).
	OwnerNodeID string
	// InstanceManager is the instance manager the record says runs the
	// instance (status.instanceManagerName).
	InstanceManager string
}

// JudgeInstance is seed 001's instance judgement, for v1 and v2 runtime
// instances alike. item is an engine-instance or replica-instance item seen
// on item.NodeID by the instance manager in its InstanceManager parameter;
// view is the host's record of that instance. The rules, in order:
//
//  1. no record: orphan;
//  2. current state differs from desired state: undecided (in transition);
//  3. the record is owned by another node: undecided (that node judges);
//  4. running on another instance manager: orphan; running on this one: owned;
//  5. stopped, while the runtime object still exists (it does: it is the
//     item): orphan, because stopped does not mean the runtime resources
//     were deleted;
//  6. starting, stopping, error, unknown or any other state: undecided.
//
// It is pure. Items of another kind are undecided.
func JudgeInstance(item Item, view InstanceView) Verdict {
	if item.Kind != KindEngineInstance && item.Kind != KindReplicaInstance {
		return Undecided(fmt.Sprintf("kind %q is not a runtime instance", item.Kind))
	}
	what := string(item.Kind) + " " + item.Param(ParamInstanceName)
	if !view.Exists {
		return Orphan(what + ": no " + recordNoun(item.Kind) + " record exists")
	}
	if view.CurrentState != view.DesiredState {
		return Undecided(fmt.Sprintf("%s: current state %q differs from desired state %q", what, view.CurrentState, view.DesiredState))
	}
	if view.OwnerNodeID != item.NodeID {
		return Undecided(fmt.Sprintf("%s: record is owned by node %q, not %q", what, view.OwnerNodeID, item.NodeID))
	}
	im := item.Param(ParamInstanceManager)
	switch view.CurrentState {
	case InstanceStateRunning:
		if view.InstanceManager != im {
			return Orphan(fmt.Sprintf("%s: record runs on instance manager %q, not %q", what, view.InstanceManager, im))
		}
		return Owned(fmt.Sprintf("%s: running on instance manager %q", what, im))
	case InstanceStateStopped:
		return Orphan(what + ": record is stopped but the runtime object still exists")
	}
	return Undecided(fmt.Sprintf("%s: record is in state %q", what, view.CurrentState))
}

func recordNoun(k Kind) string {
	if k == KindEngineInstance {
		return "engine"
	}
	return "replica"
}

// InstanceLookup gives the host's view of engine and replica records.
type InstanceLookup interface {
	// LookupInstance returns the view of the engine (kind
	// KindEngineInstance) or replica (KindReplicaInstance) record named
	// name. A record that does not exist is a view with Exists false, not
	// an error. An error means the view is not available now (a cache not
	// synced, an API error); the judge then answers undecided.
	//
	// It is called by InstanceJudge.Judge, from the host's planning step
	// and from Sweeper right before a purge, possibly from several
	// goroutines at once: it must be safe for concurrent use.
	LookupInstance(ctx context.Context, kind Kind, name string) (InstanceView, error)
}

// InstanceLookupFunc adapts a function to InstanceLookup.
type InstanceLookupFunc func(ctx context.Context, kind Kind, name string) (InstanceView, error)

// LookupInstance calls f.
func (f InstanceLookupFunc) LookupInstance(ctx context.Context, kind Kind, name string) (InstanceView, error) {
	return f(ctx, kind, name)
}

// InstanceJudge is a Judge of runtime instance items: it looks the record
// up and applies JudgeInstance. Items of other kinds, and items with no
// InstanceName, are undecided. It is safe for concurrent use if Lookup is.
type InstanceJudge struct {
	Lookup InstanceLookup
}

var _ Judge = InstanceJudge{}

// Judge implements Judge. It never returns an error: a failed lookup is an
// undecided verdict carrying the error's text.
func (j InstanceJudge) Judge(ctx context.Context, item Item) (Verdict, error) {
	if item.Kind != KindEngineInstance && item.Kind != KindReplicaInstance {
		return Undecided(fmt.Sprintf("kind %q is not a runtime instance", item.Kind)), nil
	}
	name := item.Param(ParamInstanceName)
	if name == "" {
		return Undecided(string(item.Kind) + " item has no " + ParamInstanceName), nil
	}
	view, err := j.Lookup.LookupInstance(ctx, item.Kind, name)
	if err != nil {
		return Undecided(fmt.Sprintf("%s %s: record not available: %v", item.Kind, name, err)), nil
	}
	return JudgeInstance(item, view), nil
}
