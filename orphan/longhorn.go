package orphan

import (
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds what a host built on longhorn-manager's own types needs
// to use the orphan core without conversion code of its own: the state
// of a volume for the last-copy guard, Longhorn's Orphan objects as
// Records, and caretaker's condition changes applied to Longhorn's
// condition list. It imports nothing of Longhorn's: each Longhorn type is
// mirrored by a struct of plain fields, named like Longhorn's.

// Longhorn's volume robustness and volume state values
// (longhorn-manager k8s/pkg/apis/longhorn/v1beta2/volume.go), as
// LonghornVolumeState reads them.
const (
	RobustnessHealthy  = "healthy"
	RobustnessDegraded = "degraded"
	RobustnessFaulted  = "faulted"
	RobustnessUnknown  = "unknown"

	VolumeStateDetached = "detached"
)

// ReplicaCopy is what LonghornVolumeState reads of one Longhorn Replica
// object of a volume.
type ReplicaCopy struct {
	// Name is the Replica's name, for messages.
	Name string
	// HealthyAt and FailedAt are spec.healthyAt and spec.failedAt: when the
	// replica last became a healthy (RW) copy, and when it failed; "" when
	// never.
	HealthyAt, FailedAt string
	// Active is spec.active: false for a leftover of an engine upgrade or
	// a migration, which Longhorn never counts as a copy.
	Active bool
	// Deleting says the object's deletion timestamp is set: it is going
	// away, and is no copy to rely on.
	Deleting bool
}

// Healthy reports whether the replica is a healthy copy of its volume's
// data while the volume is detached: it became healthy once (HealthyAt
// set), has not failed since (FailedAt empty), is active and is not being
// deleted. It is longhorn-manager's getHealthyAndActiveReplicaCount
// (controller/volume_controller.go) for one replica, with deletion added.
func (r ReplicaCopy) Healthy() bool {
	return r.HealthyAt != "" && r.FailedAt == "" && r.Active && !r.Deleting
}

// LonghornVolumeState returns the last-copy guard's state of a Longhorn
// volume from its status.robustness and status.state, its
// spec.numberOfReplicas, and every Replica object of the volume (Longhorn
// labels them longhornvolume=<volume>).
//
// Longhorn computes robustness only while a volume is attached: its
// VolumeController.ReconcileEngineReplicaState counts the replicas the
// engine reports RW, and calls the volume faulted with none, healthy with
// at least numberOfReplicas and degraded in between; on detaching,
// ReconcileVolumeState sets robustness "unknown" unless it is faulted.
// A detached volume's orphans would then never be auto-deleted (an
// unknown volume holds its recoverable orphans). So, in order:
//
//  1. robustness healthy, degraded or faulted: that state, whatever the
//     replicas say (Longhorn keeps faulted on a detached volume);
//  2. robustness unknown or empty and the volume detached: the same
//     counting over the Replica objects, with a healthy copy as
//     ReplicaCopy.Healthy says: none (also no Replica at all) is
//     VolumeFaulted, at least numberOfReplicas is VolumeHealthy, fewer is
//     VolumeDegraded, and so is any count when numberOfReplicas is below 1
//     (it was not read);
//  3. anything else (attaching, detaching, attached with an engine in
//     state unknown, a state this function does not know): "", which the
//     guard treats as unknown.
//
// replicas must be every Replica of the volume, read at the time of the
// call (a host lists them each cycle, not from a cache a Volume event
// refreshes): a replica left out can only lower the count, which keeps
// more orphans; a stale healthy replica that has since failed would raise
// it. A host that cannot list them passes no state for the volume (or
// ""), never a guess.
//
// What rule 2 still lets through: a healthy Replica whose node is down
// counts as a copy (the data is on that disk, not lost), so the orphan of
// a detached volume whose healthy replicas are all on unreachable nodes
// is auto-deleted after the grace period as for an attached healthy
// volume.
func LonghornVolumeState(robustness, state string, numberOfReplicas int, replicas []ReplicaCopy) VolumeState {
	switch robustness {
	case RobustnessHealthy, RobustnessDegraded, RobustnessFaulted: // 1
		return VolumeState(robustness)
	}
	if !LonghornVolumeNeedsReplicas(robustness, state) { // 3
		return ""
	}
	healthy := 0 // 2
	for _, r := range replicas {
		if r.Healthy() {
			healthy++
		}
	}
	switch {
	case healthy == 0:
		return VolumeFaulted
	case numberOfReplicas >= 1 && healthy >= numberOfReplicas:
		return VolumeHealthy
	}
	return VolumeDegraded
}

// LonghornVolumeNeedsReplicas reports whether LonghornVolumeState of a
// volume with this status.robustness and status.state counts the
// volume's Replicas (its rule 2: robustness unknown or empty, and the
// volume detached). For every other volume the replicas change nothing,
// so a host lists a volume's Replicas only when this is true, and may
// pass nil for the others.
func LonghornVolumeNeedsReplicas(robustness, state string) bool {
	return state == VolumeStateDetached && (robustness == RobustnessUnknown || robustness == "")
}

// LonghornCondition mirrors longhorn-manager's Condition
// (k8s/pkg/apis/longhorn/v1beta2/common.go), the element of an Orphan's
// status.conditions: Longhorn keeps times as strings (RFC 3339, UTC, as
// its util.Now writes them) and has a LastProbeTime that
// metav1.Condition lacks. A host converts with a loop over its
// []longhorn.Condition (Status is a named string type there).
type LonghornCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      string `json:"lastProbeTime"`
	LastTransitionTime string `json:"lastTransitionTime"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
}

// ApplyLonghornConditions applies caretaker's condition changes (a Plan's
// Mark, Forget and Keep conditions, or a Sweeper's; only their Type,
// Status, Reason and Message are read) to conds, as longhorn-manager's
// types.SetCondition (types/condition.go) does: a condition of the same
// type is updated in place, a new one appended; LastTransitionTime
// becomes now (UTC, RFC 3339) when the status changes, a missing
// condition counting as Unknown; LastProbeTime is kept (Longhorn's orphan controllers never set
// it). It returns the new list, leaving conds as it was, and whether
// anything changed.
//
// The reasons are caretaker's (see "Reasons" in the package doc): where
// Longhorn writes an empty reason (DataCleanable=True, Error=False),
// caretaker writes Ready and NoError.
func ApplyLonghornConditions(conds []LonghornCondition, changes []metav1.Condition, now time.Time) ([]LonghornCondition, bool) {
	out := make([]LonghornCondition, len(conds), len(conds)+len(changes))
	copy(out, conds)
	stamp := now.UTC().Format(time.RFC3339)
	changed := false
	for _, ch := range changes {
		i := 0
		for i < len(out) && out[i].Type != ch.Type {
			i++
		}
		if i == len(out) {
			// Longhorn's GetCondition gives a missing condition the
			// status Unknown.
			out = append(out, LonghornCondition{Type: ch.Type, Status: string(metav1.ConditionUnknown)})
			changed = true
		}
		c := out[i]
		if c.Status != string(ch.Status) {
			c.LastTransitionTime = stamp
		}
		c.Status, c.Reason, c.Message = string(ch.Status), ch.Reason, ch.Message
		if c != out[i] {
			changed = true
		}
		out[i] = c
	}
	return out, changed
}

// MetaConditions returns conds as metav1.Conditions, for Record.Conditions:
// the type, status, reason and message as they are, LastTransitionTime
// parsed from RFC 3339 (the zero time when it is empty or not RFC 3339),
// LastProbeTime dropped. A status other than True, False or Unknown is
// kept as it is; the core reads it as neither True nor False, so such a
// record is never cleanable.
func MetaConditions(conds []LonghornCondition) []metav1.Condition {
	if conds == nil {
		return nil
	}
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		var at metav1.Time
		if t, err := time.Parse(time.RFC3339, c.LastTransitionTime); err == nil {
			at = metav1.NewTime(t)
		}
		out[i] = metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: at}
	}
	return out
}

// LonghornOrphanSpec mirrors longhorn-manager's OrphanSpec
// (k8s/pkg/apis/longhorn/v1beta2/orphan.go).
type LonghornOrphanSpec struct {
	NodeID     string            `json:"nodeID"`
	OrphanType string            `json:"orphanType"`
	DataEngine string            `json:"dataEngine,omitempty"`
	Parameters map[string]string `json:"parameters"`
}

// RecordFromLonghorn builds the Record of a Longhorn Orphan object from
// its metadata, spec and status.conditions:
//
//	Name, Labels, ResourceVersion  metadata's
//	CreatedAt                      metadata.creationTimestamp
//	DeletionRequested              metadata.deletionTimestamp is set
//	Dismissed                      label LabelDismissed, read by ParseDismissal (any value but a clear no)
//	Kind, NodeID, DataEngine,      spec.orphanType, spec.nodeID,
//	Parameters                     spec.dataEngine, spec.parameters (copied)
//	Conditions                     MetaConditions(conds)
//
// An Orphan of a type caretaker does not handle (shard-instance,
// shardgroup-instance, anything newer) becomes a Record all the same, which
// Decide keeps as it is. A name that is not the one the spec gives is not
// an error here either: Decide forgets such a record (ReasonMismatch),
// its data kept. The only error, wrapping ErrInvalidItem, is an empty
// name.
func RecordFromLonghorn(meta metav1.ObjectMeta, spec LonghornOrphanSpec, conds []LonghornCondition) (Record, error) {
	if meta.Name == "" {
		return Record{}, fmt.Errorf("%w: Orphan object has no name", ErrInvalidItem)
	}
	dv, dp := meta.Labels[LabelDismissed]
	dismissed, _ := ParseDismissal(dv, dp)
	r := Record{
		Name:              meta.Name,
		Kind:              Kind(spec.OrphanType),
		NodeID:            spec.NodeID,
		DataEngine:        DataEngine(spec.DataEngine),
		CreatedAt:         meta.CreationTimestamp.Time,
		DeletionRequested: meta.DeletionTimestamp != nil,
		Dismissed:         dismissed,
		Conditions:        MetaConditions(conds),
		ResourceVersion:   meta.ResourceVersion,
	}
	r.Parameters = maps.Clone(spec.Parameters)
	r.Labels = maps.Clone(meta.Labels)
	return r, nil
}
