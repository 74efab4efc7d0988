package rebuild

import "time"

// Hooks let a host count and time what a Driver does, for metrics: set
// Options.Hooks. Observe receives one Event after each Reconcile.
//
// The Driver calls Observe synchronously, after the ticket change and the
// status update are done, outside every lock it holds, from the goroutine
// that called Reconcile; hosts that reconcile from several goroutines
// need an Observe safe for concurrent use. An Event is a copy: a hook can
// never change a decision, only see it. The Driver does not guard against
// a hook's failure: a slow Observe delays the host's reconcile (keep it to
// counting), and a panicking one panics out of Reconcile after the act it
// reports, which the Driver survives (the next Reconcile decides again).
//
// orphan.Hooks and backupdelete.Hooks have the same shape.
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
	// OpReconcile is a Reconcile of a volume that exists.
	OpReconcile Op = "reconcile"
	// OpForget is a Reconcile of a volume that is gone: its ticket is
	// deleted and its record forgotten.
	OpForget Op = "forget"
)

// EventOutcome says how an act ended. Its values are few and fixed, so
// that it can be a metric's label.
type EventOutcome string

// The outcomes: an Event mirrors what Reconcile returned.
const (
	EventOK     EventOutcome = "ok"     // Reconcile returned no error
	EventFailed EventOutcome = "failed" // it returned Event.Err
)

// Event is one Reconcile of a Driver, as a metric needs it. Op, Outcome,
// Action and Reason are of low cardinality and fit as labels; Volume and
// Err do not belong in a label (one series per volume or message).
type Event struct {
	Op      Op
	Outcome EventOutcome
	Volume  string
	// Decided says a decision was made, and Action and Reason are its
	// action and its condition's reason (empty for OpForget). A Reconcile
	// that failed before deciding (reading the volume, the setting or the
	// tickets) has none; one whose ticket change or status update failed
	// has one.
	Decided bool
	Action  Action
	Reason  string
	// Duration is how long the Reconcile took by Options.Clock.
	Duration time.Duration
	// Err is Reconcile's error; set exactly when Outcome is EventFailed.
	// An unknown global setting is one (a *SettingError), though its
	// decision, as "disabled", was applied.
	Err error
}

// noHooks makes a nil Hooks, or a nil HooksFunc in it, a no-op.
func noHooks(h Hooks) Hooks {
	if f, ok := h.(HooksFunc); h == nil || (ok && f == nil) {
		return HooksFunc(nil)
	}
	return h
}
