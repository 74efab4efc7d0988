package orphan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// DefaultConcurrency is how many store or delete calls a Sweeper runs at
// once when Sweeper.Concurrency is zero.
const DefaultConcurrency = 4

// Sweeper is the thin driver that carries out plans: it creates, marks
// and forgets records through a Store and purges data through an
// Adapter, re-judging and re-checking each purge at the moment it
// happens. Create it with NewSweeper. A Sweeper is safe for concurrent
// use, but two concurrent syncs of plans over the same records race each
// other's re-checks for nothing; hosts run one at a time per node.
type Sweeper struct {
	store   Store
	adapter Adapter
	clock   clock.Clock
	limit   int
	log     *slog.Logger
	hooks   Hooks

	mu       sync.Mutex
	purged   map[string]time.Time // record name → when this Sweeper purged it
	inflight map[string]bool      // record names being purged now (Sync and PurgeRecord)

	maxCreates int // SweeperOptions.MaxCreates

	ledgerMu sync.Mutex  // held by Reconcile from reading the ledger to keeping the plan's
	ledger   []AutoPurge // the last plan's Plan.AutoPurges, if the Store is no LedgerStore
	started  time.Time   // when NewSweeper made it: the in-memory ledger begins here
}

// SweeperOptions configure a Sweeper. The zero value is usable.
type SweeperOptions struct {
	// Clock stamps created records and conditions. Nil means the real clock.
	Clock clock.Clock
	// Concurrency bounds the store and delete calls in flight. Zero means
	// DefaultConcurrency.
	Concurrency int
	// Logger, if set, receives what each Sync decided and did, one record
	// per record touched, with the attributes "orphan" (the record's
	// name), "kind" and "node": Info "orphan: record created", "orphan:
	// record forgotten" (reason, message) and "orphan: data purged"
	// (auto); Warn "orphan: purge refused" (reason, and at: "plan" for the
	// Guard's refusals, which carry no kind or node, "deletion" for the
	// re-checks at the moment of deletion); Error "orphan: sync step failed" (op, err); Debug
	// "orphan: conditions marked" (conditions). Nil means no logging at
	// all. Logging never changes what Sync does.
	Logger *slog.Logger
	// Hooks, if set, observe an Event after each step of a sync: each
	// record created, forgotten, marked (as listed in Result.Marked),
	// purged, refused or guarded, each failure, and the Finisher's
	// FinishInterrupted; each timed by Clock. Nil means none. See Hooks
	// for when and how they are called.
	Hooks Hooks
	// MaxCreates, if positive, bounds the records one Reconcile creates. When a
	// plan has more (the first scan of a disk with thousands of orphans),
	// Reconcile creates the first MaxCreates of them, carries out the rest of
	// the plan, and sets the plan's RequeueAt to now: the host runs again
	// at once, with the records and deletion requests read anew, so a
	// user's deletion waits for one batch of creates, not for the whole
	// backlog. The creates left out are planned again by the next Reconcile.
	// Zero means no bound. Sync carries out whatever plan it is given.
	MaxCreates int
}

// ErrIncomplete is wrapped by the error of a constructor given options it
// cannot use: a nil part, or (NewAdapter) no kind or an unknown one.
// backupdelete's constructors wrap it too.
var ErrIncomplete = errors.New("orphan: incomplete")

// NewSweeper returns a Sweeper that keeps records in store and judges and
// deletes through a (one adapter's value, or Combine of several). It
// returns an error naming the option that is invalid, wrapping
// ErrIncomplete: a nil store or a.
func NewSweeper(store Store, a Adapter, opts SweeperOptions) (*Sweeper, error) {
	if store == nil || a == nil {
		return nil, fmt.Errorf("%w: NewSweeper needs a Store and an Adapter", ErrIncomplete)
	}
	limit := opts.Concurrency
	if limit <= 0 {
		limit = DefaultConcurrency
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := clocks.Or(opts.Clock)
	return &Sweeper{store: store, adapter: a, clock: clk, limit: limit, log: log, hooks: noHooks(opts.Hooks),
		maxCreates: max(opts.MaxCreates, 0), started: clk.Now()}, nil
}

// Result says what a sync did. Names are record names; lists are in no
// particular order.
type Result struct {
	Created   []string
	Forgotten []string
	Purged    []string
	// Marked are the records whose conditions were written.
	Marked []string
	// Refused are purges that did not happen, with why: the plan's own
	// (the Guard's) and those the re-check at the moment of deletion
	// stopped. They are not errors: the next plan sorts them out.
	Refused []Refusal
	// Failed are the records whose step failed, as the error returned
	// beside the Result also carries them.
	Failed []RecordError
}

// Refusal is a purge that did not happen because its preconditions did
// not hold. As an error (Sweeper.PurgeRecord returns one), it wraps
// ErrRefused.
type Refusal struct {
	Name string
	// Rule names the rule that refused, as one word fit for a
	// condition's reason: a GuardRule, or one of the Rule* constants.
	Rule string
	// Reason says why, for a person.
	Reason string
}

// ErrRefused is wrapped by every *Refusal returned as an error: a purge
// that the rules or a re-check stopped. Nothing was deleted.
var ErrRefused = errors.New("orphan: purge refused")

// Error returns "orphan: purge of <name> refused (<rule>): <reason>".
func (r *Refusal) Error() string {
	return "orphan: purge of " + r.Name + " refused (" + r.Rule + "): " + r.Reason
}

// Unwrap returns ErrRefused.
func (r *Refusal) Unwrap() error { return ErrRefused }

// Op names the step of a sync that failed.
type Op string

// The steps of a sync.
const (
	OpCreate Op = "create" // Store.Create of a new record
	OpForget Op = "forget" // marking a record not cleanable and deleting it
	OpMark   Op = "mark"   // writing a kept record's conditions
	OpPurge  Op = "purge"  // the re-checks, Deleter.Delete and the record's deletion
	OpFinish Op = "finish" // Finisher.FinishInterrupted (Name is empty)
)

// RecordError is one record's failure in a sync.
type RecordError struct {
	Name string // the record; empty for OpFinish
	Op   Op
	Err  error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("orphan: %s %s: %s", e.Op, e.Name, strings.TrimPrefix(e.Err.Error(), "orphan: "))
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// Sync carries out a plan. Every record is handled on its own: one that
// fails never stops the others. The failures come back as values in
// Result.Failed and together as a *multierror.Error of *RecordError
// values (nil if none).
//
// For each purge, Sync re-reads the record from the Store (gone, its
// deletion request withdrawn, dismissed, or not marked DataCleanable=True:
// refused),
// re-judges its item with the Judge (anything but orphan: refused),
// under Reconcile with Cycle.LookupVolume set looks the volume of a copy the
// last-copy guard covers up again (the guard refuses: refused),
// records an auto-deletion as a deletion request in the Store so that a
// crash leaves the intent behind (the record the Store answers must still
// be cleanable and requested, or the purge is refused), and only then
// calls the Deleter, whose
// own re-checks follow. The record is deleted only after its data is.
// Planned conditions are written on a fresh read of each record, so a
// deletion request made meanwhile is never overwritten. The plan's
// refusals are copied into the Result. A purge that fails, or that a
// re-check refuses while its record remains, marks the record Error=True
// (reason PurgeFailed or PurgeRefused); the next plan that keeps the
// record clears it. When the Adapter is a Finisher, Sync finally asks it
// to finish purges a crash interrupted.
func (s *Sweeper) Sync(ctx context.Context, plan Plan) (Result, error) {
	return s.sync(ctx, plan, nil)
}

// sync is Sync, with the last-copy guard's re-check of each purge's
// volume when vr is not nil (Reconcile's Cycle.LookupVolume).
func (s *Sweeper) sync(ctx context.Context, plan Plan, vr *volumeRecheck) (Result, error) {
	var (
		mu   sync.Mutex
		res  Result
		errs *multierror.Error
	)
	fail := func(r Record, op Op, err error, started time.Time) {
		mu.Lock()
		res.Failed = append(res.Failed, RecordError{Name: r.Name, Op: op, Err: err})
		errs = multierror.Append(errs, &RecordError{Name: r.Name, Op: op, Err: err})
		mu.Unlock()
		attrs := []slog.Attr{slog.String("op", string(op)), slog.Any("err", err)}
		if r.Name != "" {
			attrs = append(recordAttrs(r), attrs...)
		}
		s.log.LogAttrs(ctx, slog.LevelError, "orphan: sync step failed", attrs...)
		s.hooks.Observe(recordEvent(r, op, EventFailed, s.clock.Since(started), err))
	}
	done := func(list *[]string, name string) {
		mu.Lock()
		*list = append(*list, name)
		mu.Unlock()
	}

	res.Refused = append(res.Refused, plan.Refused...)
	guarded := recordsOf(plan.Keep, plan.Refused)
	for _, r := range plan.Refused {
		s.log.LogAttrs(ctx, slog.LevelWarn, "orphan: purge refused",
			slog.String("orphan", r.Name), slog.String("reason", r.Reason), slog.String("at", "plan"))
		outcome := EventGuarded
		switch r.Rule {
		case RuleDismissed, RuleUndecided, RuleScopeUnknown, RuleDuplicateName:
			outcome = EventRefused
		}
		e := recordEvent(guarded[r.Name], OpPurge, outcome, 0, nil)
		e.Name, e.Reason = r.Name, r.Reason
		s.hooks.Observe(e)
	}

	var g errgroup.Group
	g.SetLimit(s.limit)
	for _, c := range plan.Conditions {
		g.Go(func() error {
			started := s.clock.Now()
			if err := s.mark(ctx, c); err != nil {
				fail(c.Record, OpMark, err, started)
				return nil
			}
			done(&res.Marked, c.Record.Name)
			s.logMarked(ctx, c.Record, c.Conditions)
			s.hooks.Observe(recordEvent(c.Record, OpMark, EventOK, s.clock.Since(started), nil))
			return nil
		})
	}
	for _, r := range plan.Create {
		g.Go(func() error {
			started := s.clock.Now()
			if _, err := s.store.Create(ctx, r); err != nil && !errors.Is(err, ErrAlreadyExists) {
				fail(r, OpCreate, err, started)
				return nil
			}
			done(&res.Created, r.Name)
			s.log.LogAttrs(ctx, slog.LevelInfo, "orphan: record created", recordAttrs(r)...)
			s.hooks.Observe(recordEvent(r, OpCreate, EventOK, s.clock.Since(started), nil))
			return nil
		})
	}
	for _, f := range plan.Forget {
		g.Go(func() error {
			started := s.clock.Now()
			if err := s.forget(ctx, f); err != nil {
				fail(f.Record, OpForget, err, started)
				return nil
			}
			done(&res.Forgotten, f.Record.Name)
			s.log.LogAttrs(ctx, slog.LevelInfo, "orphan: record forgotten", append(recordAttrs(f.Record),
				slog.String("reason", string(f.Reason)), slog.String("message", f.Message))...)
			e := recordEvent(f.Record, OpForget, EventOK, s.clock.Since(started), nil)
			e.Reason = string(f.Reason)
			s.hooks.Observe(e)
			return nil
		})
	}
	purging := make(map[string]bool, len(plan.Purge))
	for _, p := range plan.Purge {
		// One name purged twice at once would break the Deleter's contract
		// (never twice at once for one record): a plan of duplicate
		// records (a Store.List that repeats one, a host that concatenates
		// two lists) has two purges of one name. The first does the work.
		if purging[p.Record.Name] {
			continue
		}
		purging[p.Record.Name] = true
		g.Go(func() error {
			started := s.clock.Now()
			refusal, err := s.purge(ctx, p, vr)
			took := s.clock.Since(started)
			e := recordEvent(p.Record, OpPurge, EventOK, took, nil)
			e.Auto = p.Auto
			switch {
			case err != nil:
				fail(p.Record, OpPurge, err, started) // the hooks see the failure here
				s.markError(ctx, p.Record, ReasonPurgeFailed, err.Error(), fail)
				return nil
			case refusal != nil:
				mu.Lock()
				res.Refused = append(res.Refused, *refusal)
				mu.Unlock()
				s.log.LogAttrs(ctx, slog.LevelWarn, "orphan: purge refused", append(recordAttrs(p.Record),
					slog.String("reason", refusal.Reason), slog.String("at", "deletion"))...)
				e.Outcome, e.Reason = EventRefused, refusal.Reason
				s.hooks.Observe(e)
				if refusal.marks() {
					s.markError(ctx, p.Record, ReasonPurgeRefused, refusal.Reason, fail)
				}
			default:
				done(&res.Purged, p.Record.Name)
				s.log.LogAttrs(ctx, slog.LevelInfo, "orphan: data purged", append(recordAttrs(p.Record),
					slog.Bool("auto", p.Auto))...)
				s.hooks.Observe(e)
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through fail, never through the group

	if f, ok := s.adapter.(Finisher); ok {
		started := s.clock.Now()
		if err := f.FinishInterrupted(ctx); err != nil {
			fail(Record{}, OpFinish, err, started)
		} else {
			s.hooks.Observe(Event{Op: OpFinish, Outcome: EventOK, Duration: s.clock.Since(started)})
		}
	}
	return res, errs.ErrorOrNil()
}

// forget writes the forget's conditions (DataCleanable=False), so that a
// host whose deletion path purges (a finalizer) knows to keep the data,
// then deletes the record.
func (s *Sweeper) forget(ctx context.Context, f Forget) error {
	r := f.Record.Clone()
	now := metav1.NewTime(s.clock.Now())
	conds := f.Conditions
	if meta.FindStatusCondition(conds, ConditionDataCleanable) == nil {
		// A hand-built Forget still never leaves a record cleanable.
		conds = append(slices.Clip(conds), metav1.Condition{Type: ConditionDataCleanable, Status: metav1.ConditionFalse,
			Reason: string(f.Reason), Message: f.Message})
	}
	for _, c := range conds {
		c.LastTransitionTime = now
		meta.SetStatusCondition(&r.Conditions, c)
	}
	r.ResourceVersion = "" // the condition is right whatever changed meanwhile
	if _, err := s.store.Update(ctx, r); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return s.store.Delete(ctx, r.Name)
}

// markError sets Error=True on a record whose purge failed or was
// refused; a failure to write it is reported as an OpMark failure.
func (s *Sweeper) markError(ctx context.Context, r Record, reason, msg string, fail func(Record, Op, error, time.Time)) {
	c := metav1.Condition{Type: ConditionError, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
	started := s.clock.Now()
	if err := s.mark(ctx, SetConditions{Record: Record{Name: r.Name}, Conditions: []metav1.Condition{c}}); err != nil {
		fail(r, OpMark, err, started)
		return
	}
	s.logMarked(ctx, r, []metav1.Condition{c})
}

// logMarked reports conditions written (or found already set) on a record.
func (s *Sweeper) logMarked(ctx context.Context, r Record, conds []metav1.Condition) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	list := make([]string, 0, len(conds))
	for _, c := range conds {
		list = append(list, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "orphan: conditions marked", append(recordAttrs(r),
		slog.Any("conditions", list))...)
}

// recordEvent is what the hooks see of one step on record r.
func recordEvent(r Record, op Op, outcome EventOutcome, took time.Duration, err error) Event {
	return Event{Op: op, Outcome: outcome, Kind: r.Kind, NodeID: r.NodeID, Name: r.Name, Duration: took, Err: err}
}

// recordsOf finds the kept records of the Guard's refusals, for their
// kind and node: a Refusal carries only the name. Decide keeps every
// record it refuses; a hand-built plan may not, and its events then lack
// the kind and node.
func recordsOf(keep []Keep, refused []Refusal) map[string]Record {
	if len(refused) == 0 {
		return nil
	}
	out := make(map[string]Record, len(refused))
	for _, r := range refused {
		out[r.Name] = Record{}
	}
	for _, k := range keep {
		if _, ok := out[k.Record.Name]; ok {
			out[k.Record.Name] = k.Record
		}
	}
	return out
}

// recordAttrs are the attributes every record-level log line carries.
func recordAttrs(r Record) []slog.Attr {
	return []slog.Attr{slog.String("orphan", r.Name), slog.String("kind", string(r.Kind)), slog.String("node", r.NodeID)}
}

// markRetries bounds the conflicts mark rides out before it reports one.
const markRetries = 3

// mark writes a kept record's planned conditions on a fresh read of it, so
// nothing else on the record (a deletion request made since the plan) is
// overwritten. A record that is gone needs no conditions.
func (s *Sweeper) mark(ctx context.Context, c SetConditions) error {
	var err error
	for range markRetries {
		var cur Record
		cur, err = s.store.Get(ctx, c.Record.Name)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now := metav1.NewTime(s.clock.Now())
		changed := false
		for _, cond := range c.Conditions {
			cond.LastTransitionTime = now
			changed = meta.SetStatusCondition(&cur.Conditions, cond) || changed
		}
		if !changed {
			return nil
		}
		if _, err = s.store.Update(ctx, cur); err == nil || errors.Is(err, ErrNotFound) {
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return err
}

// Refusals that are no error of the record's: nothing to mark.
const (
	refusalGone      = "the record is gone"
	refusalWithdrawn = "the deletion request was withdrawn"
)

// marks reports whether a refusal at the moment of deletion is marked on
// its record as Error=True: not when the record is gone, its request
// withdrawn, or another purge of it is under way.
func (r *Refusal) marks() bool {
	return r.Reason != refusalGone && r.Reason != refusalWithdrawn && r.Rule != RuleInProgress
}

// purge re-checks and deletes: the one purge path, for Sync's purges and
// PurgeRecord's. It returns a refusal when a precondition no longer
// holds.
func (s *Sweeper) purge(ctx context.Context, p Purge, vr *volumeRecheck) (*Refusal, error) {
	refuse := func(rule, reason string) (*Refusal, error) {
		return &Refusal{Name: p.Record.Name, Rule: rule, Reason: reason}, nil
	}
	if !s.claim(p.Record.Name) {
		return refuse(RuleInProgress, "another purge of this record is in progress")
	}
	defer s.release(p.Record.Name)
	cur, err := s.store.Get(ctx, p.Record.Name)
	if errors.Is(err, ErrNotFound) {
		return refuse(RuleRecheck, refusalGone)
	}
	if err != nil {
		return nil, err
	}
	if !p.Auto && !cur.DeletionRequested {
		return refuse(RuleRecheck, refusalWithdrawn)
	}
	if cur.Dismissed {
		return refuse(RuleDismissed, "the orphan is dismissed: its data is never purged")
	}
	if !cur.Cleanable() {
		return refuse(RuleRecheck, "the record is not marked DataCleanable=True")
	}
	if name, err := cur.Item().Name(); err != nil || name != cur.Name {
		return refuse(RuleMismatch, "the record's parameters changed")
	}
	v, err := s.adapter.Judge(ctx, cur.Item())
	if err != nil {
		return nil, errclass.Wrapf("orphan", err, "re-judging")
	}
	if v.Outcome != OutcomeOrphan {
		return refuse(RuleRecheck, "re-judged "+v.Outcome.String()+": "+v.Reason)
	}
	// Before the auto-deletion is recorded: a refusal after it would leave
	// the purge stored as a deletion request, which the guard lets through
	// for a degraded volume.
	if refusal := vr.refusal(ctx, &cur, &p.Candidate.Item); refusal != "" {
		rule, _, _ := strings.Cut(refusal, ":") // the guard's rule leads its refusal
		return refuse(rule, refusal)
	}
	if !cur.DeletionRequested {
		cur.DeletionRequested = true
		if cur, err = s.store.Update(ctx, cur); err != nil {
			if errors.Is(err, ErrNotFound) {
				return refuse(RuleRecheck, refusalGone)
			}
			return nil, errclass.Wrapf("orphan", err, "recording the auto-deletion")
		}
		// What the Store answers is the record as stored: a Store that let
		// another writer's change through (a forget's DataCleanable=False)
		// must not have the purge go on over it.
		if !cur.Cleanable() || !cur.DeletionRequested || cur.Dismissed {
			return refuse(RuleRecheck, "the record changed while its auto-deletion was recorded")
		}
	}
	if err := s.adapter.Delete(ctx, cur); err != nil {
		if errors.Is(err, ErrPreconditionFailed) {
			return refuse(RuleRecheck, err.Error())
		}
		return nil, err
	}
	s.notePurged(cur.Name)
	return nil, s.store.Delete(ctx, cur.Name)
}

// claim marks a record's purge in progress; false if one is already.
// Sync and PurgeRecord (a host's finalizer) may purge one record at once:
// the Deleter is never called twice at once for one record.
func (s *Sweeper) claim(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[name] {
		return false
	}
	if s.inflight == nil {
		s.inflight = map[string]bool{}
	}
	s.inflight[name] = true
	return true
}

func (s *Sweeper) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, name)
}

func (s *Sweeper) notePurged(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.purged == nil {
		s.purged = map[string]time.Time{}
	}
	s.purged[name] = s.clock.Now()
}

// dropPurgedSince removes from creates the records whose data this Sweeper
// purged at or after since: the snapshot they come from predates the
// purge. Purges before since can no longer matter to a snapshot that new,
// and are forgotten; a zero since forgets them all.
func (s *Sweeper) dropPurgedSince(since time.Time, creates []Record) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	if since.IsZero() {
		clear(s.purged)
		return creates
	}
	for name, at := range s.purged {
		if at.Before(since) {
			delete(s.purged, name)
		}
	}
	if len(s.purged) == 0 {
		return creates
	}
	kept := creates[:0:0]
	for _, r := range creates {
		if _, stale := s.purged[r.Name]; !stale {
			kept = append(kept, r)
		}
	}
	return kept
}
