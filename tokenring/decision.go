package tokenring

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations scylla-operator keeps on each member Service and cleanup Job.
// Same names, same values: a host can take over clusters the operator ran.
const (
	// CurrentTokenRingHashAnnotation holds HashTokens of the ring the node
	// sees now; the node's sidecar keeps it current.
	CurrentTokenRingHashAnnotation = "internal.scylla-operator.scylladb.com/current-token-ring-hash"
	// LastCleanedUpTokenRingHashAnnotation holds the ring hash the last
	// finished cleanup ran for, or NeverCleanedUp.
	LastCleanedUpTokenRingHashAnnotation = "internal.scylla-operator.scylladb.com/last-cleaned-up-token-ring-hash"
	// CleanupJobTokenRingHashAnnotation on a cleanup Job says which ring
	// hash the Job cleans for; copied to LastCleanedUp when it completes.
	CleanupJobTokenRingHashAnnotation = "internal.scylla-operator.scylladb.com/cleanup-token-ring-hash"
	// NeverCleanedUp is the value LastCleanedUp is seeded with: the node has
	// not been cleaned since it joined. It never equals a hash, so the next
	// ring change after a node appears always cleans it. An absent
	// annotation is a different state: not seeded yet.
	NeverCleanedUp = "NeverCleanedUp"
)

// Condition types: the three the decision reads from the cluster status and
// the two it writes (scylla-operator's names; its design document called
// the latter CleanupController..., the shipped operator does not).
const (
	StatefulSetControllerProgressingCondition = "StatefulSetControllerProgressing"
	AvailableCondition                        = "Available"
	DegradedCondition                         = "Degraded"
	JobControllerProgressingCondition         = "JobControllerProgressing"
	JobControllerDegradedCondition            = "JobControllerDegraded"
)

// Reasons a Decision carries; also used as condition reasons.
const (
	ReasonAsExpected              = "AsExpected"
	ReasonWaitingForServiceState  = "WaitingForServiceState"
	ReasonUnexpectedServiceState  = "UnexpectedServiceState"
	ReasonSeedingLastCleanedUp    = "SeedingLastCleanedUp"
	ReasonProgressing             = "Progressing"
	ReasonWaitingForJobCompletion = "WaitingForJobCompletion"
	ReasonJobCompleted            = "JobCompleted"
	ReasonTokenRingChanged        = "TokenRingChanged"
	ReasonRangesLost              = "RangesLost"
	ReasonNoRangesLost            = "NoRangesLost"
	ReasonNotInRing               = "NotInRing"
)

// Member is what the decision reads about one node: its member Service's
// annotations, the cleanup Job for it if one exists, and (for
// TriggerOwnership) its endpoint in the ownership analysis.
type Member struct {
	Name        string
	Annotations map[string]string
	// Job is the node's existing cleanup Job, nil if there is none.
	Job *CleanupJob
	// Endpoint names the node in DecideOptions.Analysis.
	Endpoint string
}

// CleanupJob is the state of a node's cleanup Job.
type CleanupJob struct {
	// TokenRingHash is the Job's CleanupJobTokenRingHashAnnotation.
	TokenRingHash string
	// Complete is true once the Job has a completion time.
	Complete bool
}

// ClusterStatus is the part of the ScyllaCluster the preconditions read.
type ClusterStatus struct {
	Generation int64
	// ObservedGeneration is nil until the cluster controller has written
	// status once.
	ObservedGeneration *int64
	Conditions         []metav1.Condition
}

// Action is what the host should do for one member.
type Action int

const (
	// ActionNone: the node is clean for the ring it sees.
	ActionNone Action = iota
	// ActionWait: do nothing now, Reason and Message say why; requeue.
	ActionWait
	// ActionSeed: set LastCleanedUpTokenRingHashAnnotation to
	// NeverCleanedUp on the member Service.
	ActionSeed
	// ActionStartCleanup: ensure a cleanup Job exists for the node with
	// CleanupJobTokenRingHashAnnotation = Decision.TokenRingHash, replacing
	// a Job for another hash.
	ActionStartCleanup
	// ActionRecordCleanup: set LastCleanedUpTokenRingHashAnnotation to
	// Decision.TokenRingHash. With TriggerOwnership, also save the topology
	// the analysis used as "after" as the node's new baseline.
	ActionRecordCleanup
)

// String returns the action's name, as the constants spell it without "Action".
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "None"
	case ActionWait:
		return "Wait"
	case ActionSeed:
		return "Seed"
	case ActionStartCleanup:
		return "StartCleanup"
	case ActionRecordCleanup:
		return "RecordCleanup"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is what Decide says to do for one member.
type Decision struct {
	Member  string
	Action  Action
	Reason  string
	Message string
	// TokenRingHash is the hash to put on the Job (ActionStartCleanup) or
	// in LastCleanedUp (ActionRecordCleanup).
	TokenRingHash string
}

// Trigger chooses what makes a node need cleanup.
type Trigger int

const (
	// TriggerHash is scylla-operator's rule and the default: the current
	// ring hash differs from the last cleaned-up one. It also cleans nodes
	// that only gained ranges, and misses replication factor decreases.
	TriggerHash Trigger = iota
	// TriggerOwnership cleans a node only when DecideOptions.Analysis says
	// it lost ranges: ring changes that only gave it ranges are recorded
	// as cleaned without a Job, and a lost replica with an unchanged ring
	// (replication factor decrease, strategy change) starts one.
	TriggerOwnership
)

// DecideOptions; the zero value is scylla-operator's behaviour.
type DecideOptions struct {
	Trigger Trigger
	// Analysis is Analyze(baseline, now) for TriggerOwnership. When it is
	// nil, TriggerOwnership falls back to TriggerHash and says so in the
	// Message, because missing a cleanup is worse than an extra one.
	Analysis *Analysis
}

// Decide returns what to do for one member. It is pure and cheap: call it
// for every member on every reconcile.
//
// Order of checks: the annotations must be well-formed (absent current hash
// → wait; absent last-cleaned-up → seed NeverCleanedUp; empty or garbage
// values → wait with ReasonUnexpectedServiceState, never a Job); a running
// Job is waited for; a completed Job is recorded; then the trigger decides
// whether the node needs cleanup, and only then do the cluster
// preconditions gate it (observed generation current,
// StatefulSetControllerProgressing not True, Available True, Degraded False).
func Decide(m Member, status ClusterStatus, opts DecideOptions) Decision {
	v := Decision{Member: m.Name}
	wait := func(reason, format string, args ...any) Decision {
		v.Action, v.Reason, v.Message = ActionWait, reason, fmt.Sprintf(format, args...)
		return v
	}

	current, ok := m.Annotations[CurrentTokenRingHashAnnotation]
	switch {
	case !ok:
		return wait(ReasonWaitingForServiceState, "Service %q is missing the current token ring hash annotation", m.Name)
	case current == "":
		return wait(ReasonUnexpectedServiceState, "Service %q has an empty current token ring hash annotation", m.Name)
	case !validHash(current):
		return wait(ReasonUnexpectedServiceState, "Service %q has a current token ring hash %q that is not a base64 SHA-512", m.Name, shorten(current))
	}
	last, ok := m.Annotations[LastCleanedUpTokenRingHashAnnotation]
	switch {
	case !ok:
		v.Action, v.Reason = ActionSeed, ReasonSeedingLastCleanedUp
		v.Message = fmt.Sprintf("Service %q has no last cleaned up token ring hash; seeding %s", m.Name, NeverCleanedUp)
		v.TokenRingHash = NeverCleanedUp
		return v
	case last == "":
		return wait(ReasonUnexpectedServiceState, "Service %q has an empty last cleaned up token ring hash annotation", m.Name)
	case last != NeverCleanedUp && !validHash(last):
		return wait(ReasonUnexpectedServiceState, "Service %q has a last cleaned up token ring hash %q that is neither %s nor a base64 SHA-512", m.Name, shorten(last), NeverCleanedUp)
	}

	if j := m.Job; j != nil {
		if !j.Complete {
			return wait(ReasonWaitingForJobCompletion, "Waiting for the cleanup Job of %q to complete", m.Name)
		}
		if j.TokenRingHash != "" && j.TokenRingHash != last {
			v.Action, v.Reason, v.TokenRingHash = ActionRecordCleanup, ReasonJobCompleted, j.TokenRingHash
			v.Message = fmt.Sprintf("Cleanup Job of %q completed", m.Name)
			return v
		}
	}

	action, reason, message := needsCleanup(m, current, last, opts)
	if action == ActionNone || action == ActionWait {
		v.Action, v.Reason, v.Message = action, reason, message
		return v
	}
	if unmet := unmetPreconditions(status); len(unmet) > 0 {
		return wait(ReasonProgressing, "%s", strings.Join(unmet, "\n"))
	}
	v.Action, v.Reason, v.Message, v.TokenRingHash = action, reason, message, current
	return v
}

// needsCleanup applies the trigger to well-formed annotations.
func needsCleanup(m Member, current, last string, opts DecideOptions) (Action, string, string) {
	if opts.Trigger == TriggerOwnership && opts.Analysis != nil {
		node, ok := opts.Analysis.Nodes[m.Endpoint]
		switch {
		case !ok:
			return ActionWait, ReasonNotInRing, fmt.Sprintf("Endpoint %q of %q is not in the analysed ring", m.Endpoint, m.Name)
		case node.NeedsCleanup():
			return ActionStartCleanup, ReasonRangesLost, fmt.Sprintf("%q lost ranges of keyspaces %s", m.Name, strings.Join(node.LostKeyspaces(), ", "))
		case current != last:
			return ActionRecordCleanup, ReasonNoRangesLost, fmt.Sprintf("%q lost no ranges; recording the new ring as clean without a Job", m.Name)
		}
		return ActionNone, ReasonAsExpected, ""
	}
	if current == last {
		return ActionNone, ReasonAsExpected, ""
	}
	msg := fmt.Sprintf("Token ring of %q changed since its last cleanup", m.Name)
	if last == NeverCleanedUp {
		msg = fmt.Sprintf("%q was never cleaned up", m.Name)
	}
	if opts.Trigger == TriggerOwnership {
		msg += " (no ownership analysis: falling back to the token ring hash)"
	}
	return ActionStartCleanup, ReasonTokenRingChanged, msg
}

// ClusterPreconditions returns nil when status meets every cluster
// precondition Decide gates a cleanup on (observed generation current,
// StatefulSetControllerProgressing not True, Available True, Degraded
// False), else an error wrapping ErrPreconditionUnmet that lists those
// unmet. A CleanupDriver's Precondition returns it for the status read
// at that moment, so that a campaign stops starting cleanups while the
// cluster scales.
func ClusterPreconditions(status ClusterStatus) error {
	if unmet := unmetPreconditions(status); len(unmet) > 0 {
		return fmt.Errorf("%w: %s", ErrPreconditionUnmet, strings.Join(unmet, "; "))
	}
	return nil
}

// unmetPreconditions lists, in a fixed order, the cluster preconditions for
// starting a cleanup that do not hold.
func unmetPreconditions(s ClusterStatus) []string {
	var unmet []string
	if s.ObservedGeneration == nil || *s.ObservedGeneration != s.Generation {
		unmet = append(unmet, "Waiting for the cluster status to observe the current generation")
	}
	if meta.IsStatusConditionTrue(s.Conditions, StatefulSetControllerProgressingCondition) {
		unmet = append(unmet, "Waiting for the StatefulSet controller to finish progressing")
	}
	if !meta.IsStatusConditionTrue(s.Conditions, AvailableCondition) || !meta.IsStatusConditionFalse(s.Conditions, DegradedCondition) {
		unmet = append(unmet, "Waiting for all nodes to be available and not degraded")
	}
	return unmet
}

// SetJobConditions summarises decisions into JobControllerProgressing and
// JobControllerDegraded and sets them in conditions with apimachinery's
// meta.SetStatusCondition. now becomes LastTransitionTime of a condition
// whose status changes (time comes in: this function never reads the
// clock); an unchanged status keeps its transition time. Progressing is True while any member waits, seeds or has
// a Job to start; Degraded is True when any member's annotations are
// unexpected. Messages are sorted by member, so the result is stable. It
// reports whether conditions changed (whether status needs writing).
func SetJobConditions(conditions *[]metav1.Condition, decisions []Decision, generation int64, now metav1.Time) bool {
	sorted := append([]Decision(nil), decisions...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Member < sorted[j].Member })

	progressing := metav1.Condition{Type: JobControllerProgressingCondition, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, ObservedGeneration: generation, LastTransitionTime: now}
	degraded := metav1.Condition{Type: JobControllerDegradedCondition, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, ObservedGeneration: generation, LastTransitionTime: now}
	var busy, broken []string
	for _, v := range sorted {
		switch {
		case v.Reason == ReasonUnexpectedServiceState:
			broken = append(broken, v.Message)
		case v.Action == ActionWait || v.Action == ActionSeed || v.Action == ActionStartCleanup:
			busy = append(busy, v.Message)
			if progressing.Reason == ReasonAsExpected {
				progressing.Reason = v.Reason
			}
		}
	}
	if len(busy) > 0 {
		progressing.Status, progressing.Message = metav1.ConditionTrue, strings.Join(busy, "\n")
	}
	if len(broken) > 0 {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, ReasonUnexpectedServiceState, strings.Join(broken, "\n")
	}
	changedP := meta.SetStatusCondition(conditions, progressing)
	changedD := meta.SetStatusCondition(conditions, degraded)
	return changedP || changedD
}

func shorten(s string) string {
	const keep = 100
	if len(s) > keep {
		return s[:keep] + "..."
	}
	return s
}
