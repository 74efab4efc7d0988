package rebuild

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Planner makes the offline rebuilding decision for one volume at a time.
// It holds only its options: it is immutable, has no goroutines, does no I/O
// and reads no clock, so any number of goroutines may share one. The zero
// Planner uses the default Options.
type Planner struct {
	opts Options
}

// NewPlanner returns a Planner for opts. It returns an error naming the
// option that is invalid, wrapping ErrInvalidOptions: Options that
// Options.Validate refuses.
func NewPlanner(opts Options) (Planner, error) {
	if err := opts.Validate(); err != nil {
		return Planner{}, err
	}
	return Planner{opts: opts}, nil
}

// Input is everything the decision looks at, for one volume.
type Input struct {
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
func (p Planner) Decide(obs Input) Decision {
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
	obs      Input
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
		dec.RequeueAt = rec.RetryAt
	}
	return dec
}

// start handles a degraded volume without a ticket.
func (d decider) start() Decision {
	v, now, rec := d.obs.Volume, d.obs.Now, d.obs.Record.endAttempt()
	wait := func(reason, msg string, at time.Time) Decision {
		return Decision{Action: ActionWait, Ticket: Ticket{ID: d.id}, Required: true, Record: rec,
			Condition: d.condition(metav1.ConditionFalse, reason, msg), RequeueAt: at}
	}
	if now.Before(rec.RetryAt) {
		// The message names the time, not the time left, so that it stays
		// the same across reconciles and causes no status writes.
		return wait(ReasonBackingOff, fmt.Sprintf("attempt %d gave up (%s); next attempt at %s", rec.Failures, rec.LastFailure, rec.RetryAt.UTC().Format(time.RFC3339)), rec.RetryAt)
	}
	if v.State != StateDetached {
		return wait(ReasonWaitingForDetach, fmt.Sprintf("degraded (%d of %d replicas healthy); rebuilding starts once the volume is detached", v.HealthyReplicas(), v.DesiredReplicas), time.Time{})
	}
	if !v.CanReuseFailedReplica && !v.CanScheduleReplica {
		// Creating the ticket now would attach the volume for nothing, and
		// Longhorn's loop of create, attach, give up is what kept volumes
		// attached: do not start, look again later.
		return wait(ReasonCannotProgress, "no failed replica can be reused and no new replica can be scheduled; not attaching", now.Add(d.o.InitialBackoff))
	}
	rec = rec.startAttempt(now, v)
	return Decision{Action: ActionCreate, Ticket: d.ticket(), Required: true, Record: rec,
		Condition: d.condition(metav1.ConditionTrue, ReasonAttaching, fmt.Sprintf("degraded (%d of %d replicas healthy); attaching in maintenance mode on %s", v.HealthyReplicas(), v.DesiredReplicas, v.OwnerNode)),
		RequeueAt: now.Add(d.o.StallTimeout)}
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
		RequeueAt: rec.LastProgressAt.Add(d.o.StallTimeout)}
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
	wait := d.o.backoff().Delay(rec.Failures)
	rec.RetryAt, rec.LastFailure = d.obs.Now.Add(wait), why
	return Decision{Action: ActionDelete, Ticket: d.ours, Required: true, Record: rec, RequeueAt: rec.RetryAt,
		Condition: d.condition(metav1.ConditionFalse, ReasonCannotProgress, fmt.Sprintf("%s; released the volume, next attempt in %s", why, wait))}
}

func (d decider) ticket() Ticket {
	return Ticket{ID: d.id, Type: AttacherType, NodeID: d.obs.Volume.OwnerNode, Priority: d.o.Priority, DisableFrontend: true}
}

func (d decider) condition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionType, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(d.obs.Now)}
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
