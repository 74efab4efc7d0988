package orphan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// PurgeOutcome says how a PurgeRecord call ended that was not refused.
type PurgeOutcome string

// The outcomes of PurgeRecord.
const (
	// PurgePurged: the data was deleted, then the record.
	PurgePurged PurgeOutcome = "Purged"
	// PurgeReleased: the rules forget the record (its item is gone or
	// owned, its node or disk evicted, down, removed; or it is marked
	// DataCleanable=False): the record was deleted and the data kept,
	// as Longhorn releases an Orphan that is not cleanable.
	PurgeReleased PurgeOutcome = "Released"
	// PurgeGone: there was no record of that name.
	PurgeGone PurgeOutcome = "Gone"
)

// PurgeRecordOptions say what PurgeRecord weighs the record's purge
// against. The zero value scans with the Sweeper's Adapter.
type PurgeRecordOptions struct {
	// Snapshot, if set, is an observation of the record's node (a
	// Monitor's latest, for a finalizer that must not wait for a scan of
	// a large disk), judged now with the Adapter's Judge. Nil: the
	// Adapter's Scan is called.
	Snapshot *Snapshot
	// Judged, if set, is the host's own judgement instead (see Judged):
	// its evidence is then required, as by ReconcileJudged.
	Judged *Judged
}

// PurgeRecord purges one record's data on request, for a host whose
// deletion path is not the Sweeper's cycle: a finalizer that runs when a
// user deletes an Orphan (longhorn-manager's orphan controller,
// controller/orphan_controller.go, cleans up in its finalizer). It
// applies every rule Reconcile applies to a requested purge, and purges through
// the same path:
//
//  1. It re-reads the record from the Store: gone is PurgeGone; a record
//     whose deletion is not requested is refused (RuleNotRequested), and
//     one whose name is not the one its parameters give (forged, or
//     written by hand) is refused (RuleMismatch).
//  2. It observes the record's node: opts.Snapshot or opts.Judged, or a
//     Scan of the Adapter; a failed Scan is an error and purges nothing.
//  3. It decides with Decide over that observation (judged now with the
//     Adapter's Judge unless opts.Judged), c's scopes, guard, volumes and
//     overrides, and this one record: the record's scope must be Ready
//     (c.Scopes must list its node, as for Reconcile), its item seen and judged
//     an orphan, the record DataCleanable=True, the mass-deletion guard
//     must not read the scope as a broken view (NoneExpected and
//     WholeScope weigh the observation's whole group; AutoShare and
//     Budget never stop a requested purge), and the last-copy guard must
//     let it through (a faulted volume's copy only with c.LastCopyOverride).
//     A plan that forgets the record releases it (PurgeReleased: record
//     deleted, data kept); one that keeps it is a refusal.
//  4. It purges as Sync does: the record re-read, its item re-judged, the
//     volume looked up again with c.LookupVolume, then the Deleter with
//     its own re-checks, then the record deleted. A purge of the same
//     record already under way in this Sweeper (its Reconcile) is refused
//     (RuleInProgress); retry later.
//
// A refusal is returned as a *Refusal (errors.Is ErrRefused) saying the
// rule and why; the record is then marked Error=True (ReasonPurgeRefused,
// the refusal as the message) and, where the rules say so,
// PurgeGuarded=True, and nothing was deleted. A host's finalizer keeps
// its finalizer and tries again later: Decide keeps Error=True on a
// requested record until it is purged or released. Other errors (the
// Store, the scan, the Judge, the Deleter failing) are returned as they
// are and leave the record for a retry.
//
// c.Selector, c.Policy and c.ObservedAt are not used. PurgeRecord never
// creates or forgets other records: the host's own cycle does.
func (s *Sweeper) PurgeRecord(ctx context.Context, name string, c Cycle, opts PurgeRecordOptions) (PurgeOutcome, error) {
	// A record not yet marked DataCleanable=True is marked and decided
	// again, once: a new record is created marked, so one pass is enough
	// unless a host left the mark out.
	for range 2 {
		outcome, again, err := s.purgeRecord(ctx, name, c, opts)
		if !again {
			return outcome, err
		}
	}
	return "", s.refused(ctx, Record{Name: name}, &Refusal{Name: name, Rule: RuleNotPlanned,
		Reason: "the record's DataCleanable=True could not be recorded"})
}

// purgeRecord is one pass of PurgeRecord; again says the plan only wrote
// the record's conditions and asks to be decided again.
func (s *Sweeper) purgeRecord(ctx context.Context, name string, c Cycle, opts PurgeRecordOptions) (_ PurgeOutcome, again bool, _ error) {
	// 1. The record as stored now.
	cur, err := s.store.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return PurgeGone, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("orphan: reading record %s: %w", name, err)
	}
	if !cur.DeletionRequested {
		return "", false, &Refusal{Name: name, Rule: RuleNotRequested, Reason: "the record's deletion is not requested"}
	}
	if own, err := cur.Item().Name(); err != nil || own != name {
		return "", false, s.refused(ctx, cur, &Refusal{Name: name, Rule: RuleMismatch,
			Reason: "the record's name is not the one its parameters give: it names no data this library may delete"})
	}

	// 2. The observation of its node.
	var (
		cands    []Candidate
		scopes   map[Scope]ScopeStatus
		evidence bool
	)
	switch {
	case opts.Judged != nil:
		cands, scopes, evidence = opts.Judged.Candidates, opts.Judged.Scopes, true
	default:
		snap := opts.Snapshot
		if snap == nil {
			fresh, err := s.adapter.Scan(ctx)
			if err != nil {
				return "", false, fmt.Errorf("orphan: scanning for the purge of %s: %w", name, err)
			}
			snap = &fresh
		}
		if cands, err = JudgeAll(ctx, s.adapter, snap.Items); err != nil {
			return "", false, err
		}
		scopes = snap.Scopes
	}

	// 3. The rules, for this one record.
	plan := Decide(c.input(s.clock.Now(), cands, scopes, []Record{cur}, nil, evidence))
	for _, sc := range plan.Conditions {
		if sc.Record.Name == name {
			if err := s.mark(ctx, sc); err != nil {
				return "", false, fmt.Errorf("orphan: marking %s: %w", name, err)
			}
		}
	}
	for _, f := range plan.Forget {
		if f.Record.Name == name {
			if err := s.forget(ctx, f); err != nil {
				return "", false, fmt.Errorf("orphan: releasing %s: %w", name, err)
			}
			s.log.LogAttrs(ctx, slog.LevelInfo, "orphan: record forgotten", append(recordAttrs(cur),
				slog.String("reason", string(f.Reason)), slog.String("message", f.Message))...)
			return PurgeReleased, false, nil
		}
	}
	for _, r := range plan.Refused {
		if r.Name == name {
			return "", false, s.refused(ctx, cur, &r)
		}
	}
	var due *Purge
	for i := range plan.Purge {
		if plan.Purge[i].Record.Name == name {
			due = &plan.Purge[i]
		}
	}
	if due == nil {
		why := "the record's scope is outside the scopes given (Cycle.Scopes must list its node)"
		for _, k := range plan.Keep {
			if k.Record.Name == name {
				why = k.Reason
			}
		}
		if !plan.RequeueAt.IsZero() && !cur.Cleanable() {
			return "", true, nil // its DataCleanable=True was just written
		}
		return "", false, s.refused(ctx, cur, &Refusal{Name: name, Rule: RuleNotPlanned, Reason: why})
	}

	// 4. The one purge path.
	started := s.clock.Now()
	refusal, err := s.purge(ctx, *due, c.recheck())
	e := recordEvent(cur, OpPurge, EventOK, s.clock.Since(started), nil)
	switch {
	case err != nil:
		e.Outcome, e.Err = EventFailed, err
		s.hooks.Observe(e)
		s.markError(ctx, cur, ReasonPurgeFailed, err.Error(), s.logFailure(ctx))
		return "", false, fmt.Errorf("orphan: purging %s: %w", name, err)
	case refusal != nil:
		e.Outcome, e.Reason = EventRefused, refusal.Reason
		s.hooks.Observe(e)
		if !refusal.marks() {
			if refusal.Reason == refusalGone {
				return PurgeGone, false, nil
			}
			return "", false, refusal
		}
		return "", false, s.refused(ctx, cur, refusal)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "orphan: data purged", append(recordAttrs(cur), slog.Bool("auto", false))...)
	s.hooks.Observe(e)
	return PurgePurged, false, nil
}

// refused marks a refusal of PurgeRecord on its record (Error=True,
// ReasonPurgeRefused) and returns it as the error.
func (s *Sweeper) refused(ctx context.Context, r Record, ref *Refusal) error {
	s.log.LogAttrs(ctx, slog.LevelWarn, "orphan: purge refused", append(recordAttrs(r),
		slog.String("reason", ref.Reason), slog.String("at", "request"))...)
	switch ref.Rule {
	case RuleUndecided, RuleScopeUnknown:
		// The plan's conditions, written already, carry Decide's Error=True:
		// writing another message would flip it every cycle.
		return ref
	}
	msg := ref.Reason
	if !strings.HasPrefix(msg, ref.Rule+":") {
		msg = ref.Rule + ": " + msg
	}
	s.markError(ctx, r, ReasonPurgeRefused, msg, s.logFailure(ctx))
	return ref
}

// logFailure reports a failure to write a record's Error condition, for
// markError outside a sync: logged, and seen by the hooks.
func (s *Sweeper) logFailure(ctx context.Context) func(Record, Op, error, time.Time) {
	return func(r Record, op Op, err error, started time.Time) {
		s.log.LogAttrs(ctx, slog.LevelError, "orphan: sync step failed", append(recordAttrs(r),
			slog.String("op", string(op)), slog.Any("err", err))...)
		s.hooks.Observe(recordEvent(r, op, EventFailed, s.clock.Since(started), err))
	}
}
