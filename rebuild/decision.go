package rebuild

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Action is what to do with the rebuilding ticket.
type Action int

const (
	// ActionWait: there is no ticket and none should be created now.
	ActionWait Action = iota
	// ActionCreate: create Decision.Ticket, or replace the ticket with that ID.
	ActionCreate
	// ActionKeep: the ticket exists and stays as it is.
	ActionKeep
	// ActionDelete: delete the ticket with ID Decision.Ticket.ID.
	ActionDelete
)

// String returns the action's name, as in "create".
func (a Action) String() string {
	switch a {
	case ActionWait:
		return "wait"
	case ActionCreate:
		return "create"
	case ActionKeep:
		return "keep"
	case ActionDelete:
		return "delete"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// ConditionType is the type of the condition the decision reports.
const ConditionType = "OfflineRebuilding"

// Reasons of the OfflineRebuilding condition. The condition is True while
// the rebuilding ticket exists and False otherwise.
const (
	ReasonDisabled         = "Disabled"         // setting off, or the data engine is not covered
	ReasonVolumeDeleting   = "VolumeDeleting"   // deletion requested: never attach for rebuilding
	ReasonVolumeFaulted    = "VolumeFaulted"    // no data to rebuild from
	ReasonHealthy          = "Healthy"          // no rebuild needed
	ReasonCompleted        = "Completed"        // rebuilt; the ticket is deleted so the volume detaches
	ReasonInterrupted      = "Interrupted"      // a higher-priority ticket (a workload) wants the volume
	ReasonWaitingForDetach = "WaitingForDetach" // degraded, but attached for someone else
	ReasonCannotProgress   = "CannotProgress"   // no replica to rebuild, or rebuilding failed or stalled
	ReasonBackingOff       = "BackingOff"       // waiting before the next attempt after CannotProgress
	ReasonAttaching        = "Attaching"        // ticket exists, waiting for the maintenance attachment
	ReasonRebuilding       = "Rebuilding"       // attached in maintenance mode, replicas rebuilding
)

// Decision is the result of Decide: what to do with the ticket, what to
// show, what to remember and when to look again.
type Decision struct {
	Action Action
	// Ticket is the ticket to create (ActionCreate), or the one to keep or
	// delete; for ActionWait it holds the ID the ticket would have.
	Ticket Ticket
	// Required is Longhorn's Status.OfflineReplicaRebuildingRequired: the
	// volume is degraded and offline rebuilding applies to it.
	Required bool
	// Condition is the OfflineRebuilding condition. LastTransitionTime is
	// Now; merge it with meta.SetStatusCondition so that the time only moves
	// when the status changes.
	Condition metav1.Condition
	// Record must be passed back in the next Input of this volume.
	Record Record
	// RequeueAt, when not zero, is when the decision should be made again
	// even if nothing changes (a backoff ends, a stall would be detected).
	// It is never before the Input's Now.
	RequeueAt time.Time
}
