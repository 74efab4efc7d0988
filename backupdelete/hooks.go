package backupdelete

import "time"

// Hooks let a host count and time what a Driver does, for metrics: set
// DriverOptions.Hooks. Observe receives one Event after each act.
//
// The Driver calls Observe synchronously, after the act is done and its
// outcome is final, and outside every lock it holds: from Reconcile's
// goroutine for OpCheck and OpReconcile, and from the command's worker
// goroutine for OpDelete (before OnDone). Calls come from many goroutines
// at once, so Observe must be safe for concurrent use. An Event is a
// copy: a hook can never change a decision, only see it. The Driver does
// not guard against a hook's failure: a slow Observe delays the host's
// reconcile and holds a command slot (keep it to counting), and a
// panicking one crashes the program as any panic in its goroutine does,
// after the act it reports (a crash the Driver's design already
// survives: a new Driver turns a lost record into an Error and a retry).
//
// orphan.Hooks and rebuild.Hooks have the same shape.
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

// Op names an act of the Driver.
type Op string

// The acts of a Driver.
const (
	// OpCheck is Backupstore.BackupExists, made by Reconcile for a backup
	// that is Deleting.
	OpCheck Op = "check"
	// OpReconcile is one Reconcile call: its Outcome is the step it took.
	OpReconcile Op = "reconcile"
	// OpDelete is one delete command (Backupstore.DeleteBackup) in a
	// worker goroutine.
	OpDelete Op = "delete"
	// OpCollect is Collector.CollectVolume, made by Reconcile before it
	// finalizes a backup whose deletion it did not see succeed.
	OpCollect Op = "collect"
)

// EventOutcome says how an act ended. Its values are few and fixed, so
// that it can be a metric's label.
type EventOutcome string

// The outcomes. OpCheck, OpDelete and OpCollect end EventOK or EventFailed;
// OpReconcile ends in the step it took, or EventFailed when Reconcile
// returned no result (an invalid ref, a closed Driver).
const (
	EventOK     EventOutcome = "ok"
	EventFailed EventOutcome = "failed" // Event.Err says why
	// EventStarted: the delete command was started (StepResult.StartCommand).
	EventStarted EventOutcome = "started"
	// EventFinished: the backup is gone and may be finalized
	// (StepResult.Finalize).
	EventFinished EventOutcome = "finished"
	// EventErrored: the backup went to Error (a command failed, or no
	// record survived a restart); Event.Why says which.
	EventErrored EventOutcome = "error"
	// EventBackingOff: a backup not Deleting waits for its backoff.
	EventBackingOff EventOutcome = "backoff"
	// EventWaiting: anything else; a command runs, or the presence is
	// unknown. Event.Why says which.
	EventWaiting EventOutcome = "waiting"
)

// Event is one act of a Driver, as a metric needs it. Op, Outcome, State
// and Why are of low cardinality and fit as labels; Ref and Err do not
// belong in a label (one series per backup or message).
type Event struct {
	Op      Op
	Outcome EventOutcome
	Ref     BackupRef
	// State is the backup's next state (StepResult.State); set on
	// OpReconcile events that have a result.
	State State
	// Why is StepResult.Why on OpReconcile events: the transition taken,
	// one of a dozen fixed phrases.
	Why string
	// Attempt counts the commands this Driver started for the backup, as
	// the log's "attempt".
	Attempt int
	// Duration is how long the act took by DriverOptions.Clock: the
	// presence check, the whole Reconcile call (check included), or the
	// command.
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

// stepOutcome classes what Reconcile decided, as its log line does.
func stepOutcome(req Request, res StepResult) EventOutcome {
	switch {
	case res.StartCommand:
		return EventStarted
	case res.Finalize:
		return EventFinished
	case res.State == StateError && req.State != StateError:
		return EventErrored
	case res.State == req.State && req.State != StateDeleting && !res.RequeueAt.IsZero():
		return EventBackingOff
	}
	return EventWaiting
}
