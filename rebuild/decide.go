package rebuild

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Options tune the decision. The zero value is the documented default for
// every field.
type Options struct {
	// DataEngines are the engines offline rebuilding applies to.
	// Default: only DataEngineV2, as in seed 003 (v1 rebuilds online).
	DataEngines []DataEngine

	// Priority of the rebuilding ticket. Default DefaultPriority (800).
	// It must stay below WorkloadPriority.
	Priority int
	// WorkloadPriority is the lowest priority of a workload ticket.
	// Default DefaultWorkloadPriority (900).
	WorkloadPriority int

	// StallTimeout: how long the ticket may stay without progress before it
	// is deleted so the volume can detach. Default 10 minutes. Progress is
	// only what the host can observe, and each kind is a high-water mark
	// within the attempt, so a flapping state cannot restart the clock:
	//   - the volume seen attached for the first time in the attempt;
	//   - more replicas healthy than ever before in the attempt;
	//   - Volume.RebuildProgress above its highest value since the attempt
	//     started, a replica became healthy, or a rebuild was counted as
	//     failed (a new rebuild starts from zero; failed rebuilds are
	//     bounded by MaxFailedRebuilds).
	// A replica merely staying ReplicaRebuilding is not progress: a hung
	// rebuild releases the volume StallTimeout after the last progress.
	StallTimeout time.Duration
	// MaxFailedRebuilds: how many rebuilds may fail within one attachment
	// before it is given up. Default 3.
	MaxFailedRebuilds int

	// InitialBackoff is the wait after the first attempt that was given up;
	// it doubles with each further one up to MaxBackoff.
	// Defaults: 1 minute, growing to 1 hour.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// ErrInvalidOptions is wrapped by the error NewPlanner and NewDriver return
// for Options they cannot honour.
var ErrInvalidOptions = errors.New("rebuild: invalid options")

// Validate reports Options that cannot be honoured: negative values, a
// ticket priority not below the workload priority (the ticket would then
// outrank a workload), an initial backoff above the cap, or an unknown data
// engine. The error wraps ErrInvalidOptions.
func (o Options) Validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Priority < 0 || o.WorkloadPriority < 0 || o.StallTimeout < 0 || o.MaxFailedRebuilds < 0 ||
		o.InitialBackoff < 0 || o.MaxBackoff < 0 {
		return invalid("negative value in %+v", o)
	}
	for _, e := range o.DataEngines {
		if e != DataEngineV1 && e != DataEngineV2 {
			return invalid("unknown data engine %q (known: v1, v2)", e)
		}
	}
	d := o.withDefaults()
	if d.Priority >= d.WorkloadPriority {
		return invalid("ticket priority %d is not below workload priority %d", d.Priority, d.WorkloadPriority)
	}
	if d.InitialBackoff > d.MaxBackoff {
		return invalid("initial backoff %s is above max backoff %s", d.InitialBackoff, d.MaxBackoff)
	}
	return nil
}

// Planner makes the offline rebuilding decision for one volume at a time.
// It holds only its options: it is immutable, has no goroutines, does no I/O
// and reads no clock, so any number of goroutines may share one. The zero
// Planner uses the default Options.
type Planner struct {
	opts Options
}

// NewPlanner returns a Planner for opts, or an error wrapping
// ErrInvalidOptions.
func NewPlanner(opts Options) (Planner, error) {
	if err := opts.Validate(); err != nil {
		return Planner{}, err
	}
	return Planner{opts: opts}, nil
}

// Observation is everything the decision looks at.
type Observation struct {
	Volume Volume
	// Tickets are all attachment tickets of the volume, including the
	// rebuilding ticket if it exists.
	Tickets []Ticket
	// Global is the parsed global setting (see ParseGlobalSetting).
	Global bool
	// Record is the Record of the previous Decision for this volume, or the
	// zero Record for a volume seen the first time.
	Record Record
	// Now is the current time; the planner has no clock of its own.
	Now time.Time
}

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
	// Record must be passed back in the next Observation of this volume.
	Record Record
	// RequeueAfter, when positive, is when the decision should be made again
	// even if nothing changes (a backoff ends, a stall would be detected).
	RequeueAfter time.Duration
}

// Record is the memory the decision needs between two observations: how
// often rebuilding was given up, until when to wait, and how the current
// attempt is going. Hosts store it with the volume (in memory or in a
// status field) and pass it back unchanged. Losing it once resets the
// backoff and restarts the current attempt's stall clock (the ticket is
// adopted as a new attempt); a host that never passes it back gets no
// stall limit, so a hung rebuild would keep its volume.
type Record struct {
	// Failures counts consecutive attempts that were given up.
	Failures int `json:"failures,omitempty"`
	// RetryAt: no new ticket before this time.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// LastFailure says why the last attempt was given up.
	LastFailure string `json:"lastFailure,omitempty"`

	// The current attempt; zero while there is no ticket.
	AttemptStartedAt time.Time `json:"attemptStartedAt,omitzero"`
	LastProgressAt   time.Time `json:"lastProgressAt,omitzero"`
	SawAttached      bool      `json:"sawAttached,omitempty"`
	BestHealthy      int       `json:"bestHealthy,omitempty"`
	// BestProgress is the highest Volume.RebuildProgress seen since the
	// attempt started, a replica became healthy or a rebuild failed.
	BestProgress   int64     `json:"bestProgress,omitempty"`
	WasRebuilding  bool      `json:"wasRebuilding,omitempty"`
	FailedRebuilds int       `json:"failedRebuilds,omitempty"`
	LastFailedAt   time.Time `json:"lastFailedAt,omitzero"` // newest Replica.LastFailedAt seen
}

// Decide returns the decision for one volume. It is a pure function of the
// observation and the planner's options: same input, same output. It never
// panics, whatever the input.
//
// The rules, in order (the first that matches decides):
//  1. Data engine not covered, or rebuilding disabled: delete the ticket; forget the record.
//  2. Volume being deleted, or faulted (or no replica healthy): delete the ticket.
//  3. Not degraded: delete the ticket (Completed) or wait (Healthy); forget the record.
//  4. A ticket with a higher priority than the rebuilding ticket exists:
//     delete the ticket (the workload wins; the rebuild is interrupted).
//  5. Degraded, no ticket: wait out a backoff; wait while attached for
//     someone else; wait when no replica can be reused or scheduled;
//     otherwise create the ticket.
//  6. Degraded, ticket present: give up (delete, back off) when nothing is
//     rebuilding and no replica can be reused or scheduled, when
//     MaxFailedRebuilds rebuilds failed, or when nothing progressed for
//     StallTimeout (see Options.StallTimeout for what progress is; a
//     replica that stays rebuilding without progress is not); otherwise
//     keep it.
//
// A Record from the future (the clock stepped back, or a corrupt stored
// record) is clamped first, so that no wait exceeds StallTimeout or
// MaxBackoff from Now.
func (p Planner) Decide(obs Observation) Decision {
	o := p.opts.withDefaults()
	obs.Record = obs.Record.sane(obs.Now, o)
	v := obs.Volume
	id := TicketID(v.Name)
	ours, present := findTicket(obs.Tickets, id)
	d := decider{o: o, obs: obs, id: id, ours: ours, present: present}

	if !o.covers(v.DataEngine) {
		return d.release(ReasonDisabled, fmt.Sprintf("offline rebuilding does not apply to data engine %q", v.DataEngine), Record{})
	}
	if !Enabled(obs.Global, v.Setting) {
		return d.release(ReasonDisabled, fmt.Sprintf("offline rebuilding is disabled (global %t, volume %q)", obs.Global, v.Setting), Record{})
	}
	if v.Deleting {
		return d.release(ReasonVolumeDeleting, "the volume is being deleted", obs.Record.endAttempt())
	}
	if v.Robustness == RobustnessFaulted || v.DesiredReplicas > 0 && v.HealthyReplicas() == 0 {
		// Robustness is often unknown while detached: count replicas too.
		return d.release(ReasonVolumeFaulted, "the volume is faulted: no healthy replica to rebuild from", obs.Record.endAttempt())
	}
	if !v.Degraded() {
		if present {
			return d.release(ReasonCompleted, fmt.Sprintf("%d of %d replicas healthy; releasing the maintenance attachment", v.HealthyReplicas(), v.DesiredReplicas), Record{})
		}
		return d.release(ReasonHealthy, fmt.Sprintf("%d of %d replicas healthy", v.HealthyReplicas(), v.DesiredReplicas), Record{})
	}
	d.required = true
	if t, ok := highestAbove(obs.Tickets, id, o.Priority); ok {
		if present {
			return d.release(ReasonInterrupted, fmt.Sprintf("ticket %s (priority %d) outranks offline rebuilding (priority %d); rebuilding stopped", t.ID, t.Priority, o.Priority), obs.Record.endAttempt())
		}
		return d.release(ReasonWaitingForDetach, fmt.Sprintf("degraded (%d of %d replicas healthy); ticket %s (priority %d) has the volume, rebuilding waits for it to go", v.HealthyReplicas(), v.DesiredReplicas, t.ID, t.Priority), obs.Record.endAttempt())
	}
	if !present {
		return d.start()
	}
	return d.follow()
}

// decider carries one Decide call's inputs so the branches read as sentences.
type decider struct {
	o        Options // with defaults
	obs      Observation
	id       string
	ours     Ticket
	present  bool
	required bool // degraded, and nothing rules rebuilding out
}

// release ends any rebuilding: the ticket goes if it exists.
func (d decider) release(reason, msg string, rec Record) Decision {
	dec := Decision{Action: ActionWait, Ticket: Ticket{ID: d.id}, Record: rec,
		Condition: d.condition(metav1.ConditionFalse, reason, msg)}
	if d.present {
		dec.Action, dec.Ticket = ActionDelete, d.ours
	}
	dec.Required = d.required
	if !rec.RetryAt.IsZero() && d.obs.Now.Before(rec.RetryAt) {
		dec.RequeueAfter = rec.RetryAt.Sub(d.obs.Now)
	}
	return dec
}

// start handles a degraded volume without a ticket.
func (d decider) start() Decision {
	v, now, rec := d.obs.Volume, d.obs.Now, d.obs.Record.endAttempt()
	wait := func(reason, msg string, after time.Duration) Decision {
		return Decision{Action: ActionWait, Ticket: Ticket{ID: d.id}, Required: true, Record: rec,
			Condition: d.condition(metav1.ConditionFalse, reason, msg), RequeueAfter: after}
	}
	if now.Before(rec.RetryAt) {
		// The message names the time, not the time left, so that it stays
		// the same across reconciles and causes no status writes.
		return wait(ReasonBackingOff, fmt.Sprintf("attempt %d gave up (%s); next attempt at %s", rec.Failures, rec.LastFailure, rec.RetryAt.UTC().Format(time.RFC3339)), rec.RetryAt.Sub(now))
	}
	if v.State != StateDetached {
		return wait(ReasonWaitingForDetach, fmt.Sprintf("degraded (%d of %d replicas healthy); rebuilding starts once the volume is detached", v.HealthyReplicas(), v.DesiredReplicas), 0)
	}
	if !v.CanReuseFailedReplica && !v.CanScheduleReplica {
		// Creating the ticket now would attach the volume for nothing, and
		// Longhorn's loop of create, attach, give up is what kept volumes
		// attached: do not start, look again later.
		return wait(ReasonCannotProgress, "no failed replica can be reused and no new replica can be scheduled; not attaching", d.o.InitialBackoff)
	}
	rec = rec.startAttempt(now, v)
	return Decision{Action: ActionCreate, Ticket: d.ticket(), Required: true, Record: rec,
		Condition:    d.condition(metav1.ConditionTrue, ReasonAttaching, fmt.Sprintf("degraded (%d of %d replicas healthy); attaching in maintenance mode on %s", v.HealthyReplicas(), v.DesiredReplicas, v.OwnerNode)),
		RequeueAfter: d.o.StallTimeout}
}

// follow handles a degraded volume whose ticket exists: it records progress
// and gives up when the attempt cannot succeed.
func (d decider) follow() Decision {
	v, now, rec := d.obs.Volume, d.obs.Now, d.obs.Record
	healthy, rebuilding, attached := v.HealthyReplicas(), v.Rebuilding(), v.State == StateAttached
	if rec.AttemptStartedAt.IsZero() {
		// A ticket without an attempt: the record was lost (a restart) or
		// the ticket was made by someone else. Adopt it; the stall clock
		// starts now, so it still cannot stay forever.
		rec = rec.startAttempt(now, v)
	}

	// Only what the host can observe moving counts as progress, and each
	// mark is a high-water mark, so that a state that flaps cannot restart
	// the stall clock. Being "rebuilding" is not progress: a rebuild that
	// hangs would otherwise hold the volume forever.
	newestFailure := v.lastFailure()
	failedNow := newestFailure.After(rec.LastFailedAt)
	grew := healthy > rec.BestHealthy
	progress := v.RebuildProgress()
	if grew {
		// A replica finished: the next rebuild's progress starts afresh.
		rec.BestHealthy, rec.BestProgress, rec.LastProgressAt = healthy, progress, now
	}
	failedRebuild := false
	switch {
	case rec.SawAttached && failedNow:
		// A replica failed while we held the volume: a rebuild failed.
		failedRebuild = true
	case rec.SawAttached && rec.WasRebuilding && !rebuilding && !grew && newestFailure.IsZero():
		// For hosts that do not report failure times: a rebuild ended and
		// no replica more is healthy, so it failed.
		failedRebuild = true
	}
	if failedRebuild {
		// The next rebuild starts from zero; it may progress again, and the
		// failures themselves are bounded by MaxFailedRebuilds.
		rec.FailedRebuilds++
		rec.BestProgress = progress
	}
	if failedNow {
		rec.LastFailedAt = newestFailure
	}
	if attached && !rec.SawAttached {
		rec.SawAttached, rec.LastProgressAt = true, now
	}
	if progress > rec.BestProgress {
		rec.BestProgress, rec.LastProgressAt = progress, now
	}
	rec.WasRebuilding = rebuilding

	switch {
	case rec.FailedRebuilds >= d.o.MaxFailedRebuilds:
		return d.giveUp(rec, fmt.Sprintf("rebuilding failed %d times", rec.FailedRebuilds))
	case !rebuilding && !v.CanReuseFailedReplica && !v.CanScheduleReplica:
		// Before the attachment this saves a useless attach; after it, the
		// volume would stay attached with nothing to do.
		return d.giveUp(rec, "no failed replica can be reused and no new replica can be scheduled")
	case now.Sub(rec.LastProgressAt) >= d.o.StallTimeout:
		return d.giveUp(rec, fmt.Sprintf("no progress for %s", now.Sub(rec.LastProgressAt)))
	}

	dec := Decision{Action: ActionKeep, Ticket: d.ours, Required: true, Record: rec,
		RequeueAfter: rec.LastProgressAt.Add(d.o.StallTimeout).Sub(now)}
	if v.State == StateDetached && d.ours.NodeID != v.OwnerNode {
		// The owner moved before the attachment happened: ask for the new one.
		dec.Action, dec.Ticket = ActionCreate, d.ticket()
	}
	if attached {
		dec.Condition = d.condition(metav1.ConditionTrue, ReasonRebuilding, fmt.Sprintf("attached for rebuilding; %d of %d replicas healthy", healthy, v.DesiredReplicas))
	} else {
		dec.Condition = d.condition(metav1.ConditionTrue, ReasonAttaching, fmt.Sprintf("waiting for the maintenance attachment (volume %s)", v.State))
	}
	return dec
}

// giveUp deletes the ticket so the volume detaches, and backs off.
func (d decider) giveUp(rec Record, why string) Decision {
	rec = rec.endAttempt()
	rec.Failures++
	wait := backoff(rec.Failures, d.o.InitialBackoff, d.o.MaxBackoff)
	rec.RetryAt, rec.LastFailure = d.obs.Now.Add(wait), why
	return Decision{Action: ActionDelete, Ticket: d.ours, Required: true, Record: rec, RequeueAfter: wait,
		Condition: d.condition(metav1.ConditionFalse, ReasonCannotProgress, fmt.Sprintf("%s; released the volume, next attempt in %s", why, wait))}
}

func (d decider) ticket() Ticket {
	return Ticket{ID: d.id, Type: AttacherType, NodeID: d.obs.Volume.OwnerNode, Priority: d.o.Priority, DisableFrontend: true}
}

func (d decider) condition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionType, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(d.obs.Now)}
}

// startAttempt begins following a ticket. Failures that happened before it
// are not the attempt's.
func (r Record) startAttempt(now time.Time, v Volume) Record {
	r = r.endAttempt()
	r.AttemptStartedAt, r.LastProgressAt = now, now
	r.BestHealthy, r.LastFailedAt = v.HealthyReplicas(), v.lastFailure()
	r.BestProgress = v.RebuildProgress() // progress from before the attempt is not the attempt's
	return r
}

// sane clamps a record that cannot come from this clock: times after now
// would stretch a stall or a backoff without bound.
func (r Record) sane(now time.Time, o Options) Record {
	if limit := now.Add(o.MaxBackoff); r.RetryAt.After(limit) {
		r.RetryAt = limit
	}
	if r.AttemptStartedAt.After(now) {
		r.AttemptStartedAt = now
	}
	if r.LastProgressAt.After(now) {
		r.LastProgressAt = now
	}
	if r.BestProgress < 0 {
		r.BestProgress = 0
	}
	if r.Failures < 0 || r.Failures > maxFailures {
		r.Failures = maxFailures // keeps Failures++ from overflowing
	}
	return r
}

// maxFailures is far beyond the doublings that reach any MaxBackoff.
const maxFailures = 1 << 20

// endAttempt keeps the backoff and drops the current attempt.
func (r Record) endAttempt() Record {
	return Record{Failures: r.Failures, RetryAt: r.RetryAt, LastFailure: r.LastFailure}
}

func (o Options) withDefaults() Options {
	if len(o.DataEngines) == 0 {
		o.DataEngines = []DataEngine{DataEngineV2}
	}
	if o.Priority <= 0 {
		o.Priority = DefaultPriority
	}
	if o.WorkloadPriority <= 0 {
		o.WorkloadPriority = DefaultWorkloadPriority
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 10 * time.Minute
	}
	if o.MaxFailedRebuilds <= 0 {
		o.MaxFailedRebuilds = 3
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = time.Minute
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	return o
}

func (o Options) covers(e DataEngine) bool {
	for _, c := range o.DataEngines {
		if c == e {
			return true
		}
	}
	return false
}

// backoff is initial·2^(failures-1), capped at max.
func backoff(failures int, initial, max time.Duration) time.Duration {
	wait := initial
	for i := 1; i < failures && wait > 0 && wait < max; i++ {
		wait *= 2
	}
	if wait > max || wait <= 0 {
		return max
	}
	return wait
}

func findTicket(tickets []Ticket, id string) (Ticket, bool) {
	for _, t := range tickets {
		if t.ID == id {
			return t, true
		}
	}
	return Ticket{}, false
}

// highestAbove returns the highest-priority ticket other than ours whose
// priority is above ours. Equal priorities do not interrupt, as in Longhorn.
func highestAbove(tickets []Ticket, ours string, priority int) (Ticket, bool) {
	var best Ticket
	found := false
	for _, t := range tickets {
		if t.ID != ours && t.Priority > priority && (!found || t.Priority > best.Priority) {
			best, found = t, true
		}
	}
	return best, found
}
