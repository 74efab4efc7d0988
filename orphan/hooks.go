package orphan

import "time"

// Hooks let a host count and time what the Monitor and the Sweeper do,
// for metrics: set MonitorOptions.Hooks and SweeperOptions.Hooks (one
// value may serve both). Observe receives one Event after each act.
//
// The drivers call Observe synchronously, after the act is done and its
// outcome is final, and outside every lock they hold. The Monitor calls it
// from its goroutine; the Sweeper from up to its Concurrency goroutines at
// once, so Observe must be safe for concurrent use. An Event is a copy: a
// hook can never change a decision or an outcome, only see it. The
// drivers do not guard against a hook's failure: a slow Observe delays the
// Monitor's next scan and the Sweeper's sync (keep it to counting), and a
// panicking one crashes the program as any panic in its goroutine does,
// after the act it reports (which leaves what any crash leaves: the next
// sync finishes the job).
//
// backupdelete.Hooks and rebuild.Hooks have the same shape.
type Hooks interface {
	Observe(Event)
}

// HooksFunc adapts a function to Hooks. A nil HooksFunc observes nothing.
type HooksFunc func(Event)

// Observe calls f(e).
func (f HooksFunc) Observe(e Event) {
	if f != nil {
		f(e)
	}
}

// OpScan is the Op of the Monitor's events: one Inventory scan. It never
// appears in a RecordError.
const OpScan Op = "scan"

// EventOutcome says how an act ended. Its values are few and fixed, so
// that it can be a metric's label.
type EventOutcome string

// The outcomes of the orphan drivers' acts.
const (
	// EventOK: the act was done (a scan finished, a record created,
	// forgotten or marked, data purged, interrupted purges finished).
	EventOK EventOutcome = "ok"
	// EventFailed: the act failed; Event.Err says why (the same error
	// Result.Failed or Observation.Err carries).
	EventFailed EventOutcome = "failed"
	// EventRefused: a purge a re-check at the moment of deletion stopped
	// (a Refusal of Sync's own, or of PurgeRecord's purge), or a deletion
	// requested of a dismissed record, of an undecided item, in a scope
	// not scanned completely or of a name several records hold (rules
	// RuleDismissed, RuleUndecided, RuleScopeUnknown, RuleDuplicateName,
	// in Plan.Refused); Event.Reason says why.
	EventRefused EventOutcome = "refused"
	// EventGuarded: a purge the mass-deletion Guard refused in the plan
	// (a Refusal of Plan.Refused); Event.Reason says why. A burst of them
	// means a broken view of the cluster, worth an alert.
	EventGuarded EventOutcome = "guarded"
)

// Event is one act of the Monitor or the Sweeper, as a metric needs it.
// Op, Outcome and Kind are of low cardinality and fit as labels; Name,
// NodeID, Reason and Err do not belong in a label (one series per record
// or message), except NodeID on a per-node agent where it is constant.
type Event struct {
	// Op is the act: OpScan (the Monitor) or one of the steps of a sync:
	// OpCreate, OpForget, OpMark, OpPurge, OpFinish (the Sweeper).
	Op      Op
	Outcome EventOutcome
	// Kind, NodeID and Name are the record's; empty for OpScan and
	// OpFinish.
	Kind   Kind
	NodeID string
	Name   string
	// Reason is why a record was forgotten (a ForgetReason: a closed set)
	// or a purge refused or guarded (free text); empty otherwise.
	Reason string
	// Auto says a purge that was done or refused was due by the
	// auto-deletion policy rather than requested by a user (false on
	// failed purges).
	Auto bool
	// Duration is how long the act took by the driver's clock
	// (MonitorOptions.Clock, SweeperOptions.Clock): for a scan, from
	// Observation.StartedAt to Observation.At; zero for EventGuarded,
	// which no act of the Sweeper's preceded.
	Duration time.Duration
	// Err is the failure; set exactly when Outcome is EventFailed.
	Err error
}

// noHooks makes a nil Hooks, or a nil HooksFunc in it, a no-op.
func noHooks(h Hooks) Hooks {
	if f, ok := h.(HooksFunc); h == nil || (ok && f == nil) {
		return HooksFunc(nil)
	}
	return h
}
