package tokenring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caretaker-storage/caretaker/internal/backoff"
	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/hashicorp/go-multierror"
	"k8s.io/utils/clock"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=cleanupdriver.go -destination=mocks/cleanupdriver.go -package=mocks

// CleanupState is what a CleanupDriver records of one cleanup campaign
// (the cleanups one topology change asks for), so that a new driver after
// a restart goes on where the last one stopped.
type CleanupState struct {
	// Done lists, sorted, the nodes whose cleanup the API proved finished.
	Done []string `json:"done,omitempty"`
	// Running lists, sorted, the nodes whose cleanup was started and has
	// not ended (or whose driver stopped while it ran: ScyllaDB goes on
	// cleaning after its client went away).
	Running []string `json:"running,omitempty"`
}

// CleanupStateStore keeps a CleanupState. Keep one per campaign: when the
// ring or a replication changes, the nodes to clean change with it, so
// start a new campaign with an empty state.
//
// A CleanupDriver calls it from Run's goroutine only, never concurrently;
// ctx bounds each call. Load of a store never saved returns the zero
// state and no error. Save replaces the whole state and returns only once
// it is durable: the driver saves a node as running before it starts the
// node's cleanup, and a failed Save stops the run. Any error is returned
// by Run as it is, so it may be retryable or not as the store decides.
type CleanupStateStore interface {
	Load(ctx context.Context) (CleanupState, error)
	Save(ctx context.Context, s CleanupState) error
}

// MemCleanupStateStore is a CleanupStateStore in memory, for tests and
// for hosts that keep the state themselves (a status field) and copy it
// in and out. The zero value is an empty store; it is safe for concurrent
// use.
type MemCleanupStateStore struct {
	mu    sync.Mutex
	state CleanupState
	saves int
}

// Load implements CleanupStateStore.
func (m *MemCleanupStateStore) Load(ctx context.Context) (CleanupState, error) {
	if err := ctx.Err(); err != nil {
		return CleanupState{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneState(m.state), nil
}

// Save implements CleanupStateStore.
func (m *MemCleanupStateStore) Save(ctx context.Context, s CleanupState) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = cloneState(s)
	m.saves++
	return nil
}

// Saves counts the Save calls that succeeded.
func (m *MemCleanupStateStore) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

func cloneState(s CleanupState) CleanupState {
	return CleanupState{Done: slices.Clone(s.Done), Running: slices.Clone(s.Running)}
}

// CleanerFor returns the Cleaner that speaks to one node (a Client on the
// node's API, or through its Manager Agent). An error counts as a failed
// attempt of that node's cleanup.
type CleanerFor func(endpoint string) (Cleaner, error)

// CleanupDriverOptions configure a CleanupDriver. Scheduler, CleanerFor
// and Store are required; the zero value of every other field is its
// documented default.
type CleanupDriverOptions struct {
	// Scheduler decides which nodes may clean at once; required.
	Scheduler *Scheduler
	// CleanerFor gives the Cleaner of each node; required.
	CleanerFor CleanerFor
	// Store keeps what runs and what is done, so that a new driver
	// resumes; required (MemCleanupStateStore keeps it in memory).
	Store CleanupStateStore
	// Backoff is the wait before a failed node's next attempt: Initial,
	// doubling up to Max. Zero fields take DefaultCleanupBackoffInitial
	// and DefaultCleanupBackoffMax.
	Backoff CleanupBackoff
	// MaxAttempts is how many times a node's cleanup is tried before the
	// run gives it up and reports it failed; zero means
	// DefaultCleanupMaxAttempts.
	MaxAttempts int
	// Clock times the backoff and the events; nil is the real clock.
	Clock clock.Clock
	// Logger, if set, receives Info "tokenring: cleanup started"
	// (endpoint, attempt), "tokenring: cleanup resumed" (endpoint: a node
	// recorded as running, re-run) and "tokenring: cleanup done"
	// (endpoint, attempt, keyspaces); Warn "tokenring: cleanup failed"
	// (endpoint, attempt, err, retry_in); Error "tokenring: cleanup given
	// up" (endpoint, attempts, err); Debug "tokenring: cleanup held"
	// (endpoint, reason, by). Nil means no logging.
	Logger *slog.Logger
	// Hooks, if set, observe a CleanupEvent after each node's attempt
	// ends; see CleanupHooks.
	Hooks CleanupHooks
	// Precondition, if set, is asked right before each attempt at a
	// node's cleanup (first attempts, retries and resumed nodes alike),
	// from the attempt's goroutine, with the node's endpoint. A campaign
	// runs for hours, and a cleanup started while the cluster scales (a
	// node joining or leaving: ranges are pending) may delete data
	// streamed to the node for ranges it is about to own (Cassandra
	// refuses cleanup then; nothing here relies on the database doing
	// so); so a host passes what Decide's preconditions read
	// now (observed generation current, StatefulSetControllerProgressing
	// not True, Available True, Degraded False) and its own checks. A
	// non-nil error fails the attempt before any request to the node (an
	// error wrapping ErrPreconditionUnmet, retried after the backoff like
	// any failed attempt); a node that may be cleaning from before (a
	// resumed node) has its cleanups stopped, and holds its neighbours
	// while that fails. Nil: no check beyond the Scheduler's.
	Precondition func(ctx context.Context, endpoint string) error
}

// CleanupBackoff is CleanupDriverOptions.Backoff.
type CleanupBackoff struct {
	Initial time.Duration
	Max     time.Duration
}

// Defaults of CleanupDriverOptions.
const (
	DefaultCleanupBackoffInitial = 30 * time.Second
	DefaultCleanupBackoffMax     = 10 * time.Minute
	DefaultCleanupMaxAttempts    = 5
)

// CleanupHooks let a host count and time a CleanupDriver's cleanups, for
// metrics. The driver calls Observe synchronously from Run's goroutine,
// after the attempt's outcome is recorded in the state store, never
// concurrently within one Run. An event is a copy: a hook only sees. A
// slow Observe delays the next cleanups; a panicking one panics out of
// Run after the state was saved, which a new Run survives.
//
// orphan.Hooks, backupdelete.Hooks and rebuild.Hooks have the same shape.
type CleanupHooks interface {
	Observe(CleanupEvent)
}

// CleanupHooksFunc adapts a function to CleanupHooks; nil observes nothing.
type CleanupHooksFunc func(CleanupEvent)

// Observe calls f(e).
func (f CleanupHooksFunc) Observe(e CleanupEvent) {
	if f != nil {
		f(e)
	}
}

// CleanupOutcome says how a node's attempt ended; few fixed values, fit
// for a metric label.
type CleanupOutcome string

// The outcomes of an attempt.
const (
	// CleanupDone: RunCleanup proved every listed keyspace cleaned (or
	// dropped): the node is recorded done.
	CleanupDone CleanupOutcome = "done"
	// CleanupRetry: the attempt failed; the node is tried again after the
	// backoff.
	CleanupRetry CleanupOutcome = "retry"
	// CleanupGivenUp: the attempt failed and was the last allowed.
	CleanupGivenUp CleanupOutcome = "given-up"
	// CleanupInterrupted: Run's context ended during the attempt; the node
	// stays recorded as running.
	CleanupInterrupted CleanupOutcome = "interrupted"
)

// CleanupEvent is one node's attempt. Outcome fits a label; Endpoint and
// Err do not (one series per node or message).
type CleanupEvent struct {
	Endpoint string
	Outcome  CleanupOutcome
	// Attempt counts this Run's attempts of the node, from 1.
	Attempt int
	// Duration is how long the attempt took by the driver's clock.
	Duration time.Duration
	// Report is RunCleanup's report.
	Report CleanupReport
	// Err is why the attempt did not prove the cleanup; nil for
	// CleanupDone.
	Err error
}

// CleanupRunReport says what a Run did.
type CleanupRunReport struct {
	// Done lists, sorted, every node recorded done, by this Run or before.
	Done []string
	// Failed maps each node given up to its last error.
	Failed map[string]error
	// Attempts counts this Run's attempts per node.
	Attempts map[string]int
}

// ErrCleanupNotProven is wrapped by the error of an attempt whose
// RunCleanup returned no error but whose report does not show every
// listed keyspace cleaned or dropped: the attempt does not count as done.
var ErrCleanupNotProven = errors.New("tokenring: cleanup not proven by the API")

// ErrPreconditionUnmet is wrapped by the error of an attempt that
// CleanupDriverOptions.Precondition refused: no cleanup was started.
var ErrPreconditionUnmet = errors.New("tokenring: cleanup precondition not met")

// CleanupDriver runs the cleanups of one campaign: it asks the Scheduler
// what to start, starts each through RunCleanup on the node's Cleaner, in
// one goroutine per running node, records what runs and what is done in
// the CleanupStateStore, and retries a failed node with backoff.
//
// A new driver on the same store resumes: nodes recorded done are not
// cleaned again, and nodes recorded running count as running for the
// Scheduler until they are re-run, which happens first (a cleanup is
// idempotent: RunCleanup stops the cleanup still running there and starts
// again). So no two replicas of one range ever clean together, across
// restarts too.
type CleanupDriver struct {
	sched   *Scheduler
	cleaner CleanerFor
	store   CleanupStateStore
	opts    CleanupDriverOptions
	policy  backoff.Policy
	clock   clock.Clock
	log     *slog.Logger
	hooks   CleanupHooks
}

// ErrInvalidOptions is wrapped by the error NewCleanupDriver returns for
// options it cannot use.
var ErrInvalidOptions = errors.New("tokenring: invalid options")

// NewCleanupDriver returns a driver over opts.Scheduler, opts.CleanerFor
// and opts.Store. It returns an error naming the option that is invalid,
// wrapping ErrInvalidOptions: a missing Scheduler, CleanerFor or Store.
func NewCleanupDriver(opts CleanupDriverOptions) (*CleanupDriver, error) {
	var missing []string
	if opts.Scheduler == nil {
		missing = append(missing, "CleanupDriverOptions.Scheduler")
	}
	if opts.CleanerFor == nil {
		missing = append(missing, "CleanupDriverOptions.CleanerFor")
	}
	if opts.Store == nil {
		missing = append(missing, "CleanupDriverOptions.Store")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: NewCleanupDriver needs %s", ErrInvalidOptions, strings.Join(missing, ", "))
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultCleanupMaxAttempts
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var hooks CleanupHooks = CleanupHooksFunc(nil)
	if f, ok := opts.Hooks.(CleanupHooksFunc); opts.Hooks != nil && !(ok && f == nil) {
		hooks = opts.Hooks
	}
	return &CleanupDriver{sched: opts.Scheduler, cleaner: opts.CleanerFor, store: opts.Store, opts: opts, clock: clocks.Or(opts.Clock), log: log, hooks: hooks,
		policy: backoff.Policy{Initial: opts.Backoff.Initial, Max: opts.Backoff.Max}.Or(
			backoff.Policy{Initial: DefaultCleanupBackoffInitial, Max: DefaultCleanupBackoffMax})}, nil
}

// saveTimeout bounds a state Save made after Run's context ended.
const saveTimeout = 30 * time.Second

// attemptResult is what a node's goroutine sends back.
type attemptResult struct {
	endpoint string
	report   CleanupReport
	err      error
	took     time.Duration
	// started: RunCleanup was called, so a cleanup may have begun on the
	// node. stopped: after the failure, StopCleanups succeeded, so none
	// runs there now. resumed: the node may have been cleaning before
	// this attempt (recorded running, or a failed attempt it could not
	// stop), so an attempt that never reached it leaves it cleaning.
	started, stopped, resumed bool
}

// settleTimeout bounds the StopCleanups a failed attempt sends to make
// sure the node is not still cleaning.
const settleTimeout = 30 * time.Second

// Run cleans every node of needed that the state does not record done,
// and returns when each is done or given up, or when ctx ends. needed
// nodes must be in the Scheduler's ring (ErrUnknownEndpoint otherwise,
// before anything starts).
//
// When ctx ends, Run cancels the running cleanups' contexts, waits for
// their goroutines, leaves them recorded as running (the node may still
// be cleaning) and returns ctx's error. Nodes given up are in the
// report's Failed and in the returned *multierror.Error. A store error
// stops the run the same way and is returned. Saves are made even after
// ctx ended (a cleanup that finished as the run stopped is recorded
// done), each bounded by 30 seconds instead.
//
// A failed attempt (RunCleanup returned an error: the node answered, or
// the connection failed) may leave the node cleaning: ScyllaDB goes on
// after its client is gone. So the driver then stops the node's cleanups
// (StopCleanups, bounded by 30 seconds). Only when that succeeds does the
// node stop counting as running; a node that may have been cleaning
// before the attempt (recorded running, or not stopped after an earlier
// failure) and that the attempt never reached (CleanerFor failed) is not
// stopped either. Until then it holds every node it shares a range
// with, through its backoff, and its next attempt, which
// adds no concurrency, starts as soon as the backoff ends. A node given up
// while it could not be stopped stays recorded as running and keeps
// holding its neighbours: those left unstarted at the end are reported
// failed with the reason, never started beside it.
func (d *CleanupDriver) Run(ctx context.Context, needed []string) (CleanupRunReport, error) {
	rep := CleanupRunReport{Failed: map[string]error{}, Attempts: map[string]int{}}
	if _, err := d.sched.Next(needed, nil); err != nil {
		return rep, err
	}
	state, err := d.store.Load(ctx)
	if err != nil {
		return rep, fmt.Errorf("tokenring: load the cleanup state: %w", err)
	}
	if _, err := d.sched.Next(state.Done, state.Running); err != nil {
		return rep, fmt.Errorf("tokenring: the recorded cleanup state: %w", err)
	}
	done := setOf(state.Done)
	running := setOf(state.Running) // recorded, not yet re-run
	todo := map[string]bool{}
	for _, ep := range needed {
		if !done[ep] {
			todo[ep] = true
		}
	}
	for ep := range running {
		todo[ep] = true // re-run: idempotent, and it is counted as running anyway
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	results := make(chan attemptResult)
	active := map[string]bool{} // goroutines of this Run
	// mayRun: nodes whose failed attempt could not be stopped: they may
	// still be cleaning, and count as running until a stop succeeds.
	mayRun := map[string]bool{}
	retryAt := map[string]time.Time{}
	var failures *multierror.Error
	var stopErr error

	save := func() error {
		st := CleanupState{Done: sortedKeys(done), Running: sortedKeys(union(union(running, active), mayRun))}
		// Save even after ctx ended: a cleanup that finished as the run
		// stopped must be recorded done, one that was cut short running.
		saveCtx, cancelSave := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancelSave()
		if err := d.store.Save(saveCtx, st); err != nil {
			return fmt.Errorf("tokenring: save the cleanup state: %w", err)
		}
		return nil
	}
	start := func(ep string, resumed bool) {
		active[ep] = true
		delete(mayRun, ep) // this attempt's own StopCleanups comes first
		rep.Attempts[ep]++
		attempt := rep.Attempts[ep]
		msg := "tokenring: cleanup started"
		if resumed {
			msg = "tokenring: cleanup resumed"
		}
		d.log.LogAttrs(ctx, slog.LevelInfo, msg, slog.String("endpoint", ep), slog.Int("attempt", attempt))
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := d.clock.Now()
			res := d.attempt(runCtx, ep, resumed)
			res.took, res.resumed = d.clock.Since(began), resumed
			results <- res
		}()
	}

	// finish records one attempt's end; an error (from the store) stops
	// the run. An attempt cut short by the run's end stays running.
	finish := func(res attemptResult) error {
		ep, attempt := res.endpoint, rep.Attempts[res.endpoint]
		ev := CleanupEvent{Endpoint: ep, Attempt: attempt, Duration: res.took, Report: res.report, Err: res.err}
		switch {
		case res.err == nil:
			delete(active, ep)
			delete(todo, ep)
			done[ep] = true
			ev.Outcome = CleanupDone
			if err := save(); err != nil {
				return err
			}
			d.log.LogAttrs(ctx, slog.LevelInfo, "tokenring: cleanup done", slog.String("endpoint", ep), slog.Int("attempt", attempt),
				slog.Any("keyspaces", res.report.Cleaned))
		case runCtx.Err() != nil:
			// Interrupted: ScyllaDB may still be cleaning; keep it recorded
			// as running (the state already says so), for the next Run.
			ev.Outcome = CleanupInterrupted
			delete(active, ep)
			running[ep] = true
			d.hooks.Observe(ev)
			return nil
		case attempt >= d.opts.MaxAttempts:
			delete(active, ep)
			d.settled(ep, res, mayRun)
			delete(todo, ep)
			rep.Failed[ep] = res.err
			failures = multierror.Append(failures, errclass.Wrapf("tokenring", res.err, "node %s, %d attempts", ep, attempt))
			ev.Outcome = CleanupGivenUp
			if err := save(); err != nil {
				return err
			}
			d.log.LogAttrs(ctx, slog.LevelError, "tokenring: cleanup given up", slog.String("endpoint", ep), slog.Int("attempts", attempt),
				slog.Any("err", res.err))
		default:
			delete(active, ep)
			d.settled(ep, res, mayRun)
			delay := d.policy.Delay(attempt)
			retryAt[ep] = d.clock.Now().Add(delay)
			ev.Outcome = CleanupRetry
			if err := save(); err != nil {
				return err
			}
			d.log.LogAttrs(ctx, slog.LevelWarn, "tokenring: cleanup failed", slog.String("endpoint", ep), slog.Int("attempt", attempt),
				slog.Any("err", res.err), slog.Duration("retry_in", delay))
		}
		d.hooks.Observe(ev)
		return nil
	}

	// Nodes recorded as running are running already: re-run them first,
	// which adds no concurrency.
	for _, ep := range sortedKeys(running) {
		delete(running, ep)
		start(ep, true)
	}

	for stopErr == nil && (len(todo) > 0 || len(active) > 0) {
		// Start what the Scheduler allows beside the running ones.
		now := d.clock.Now()
		var ready, resume []string
		var wake time.Time
		for ep := range todo {
			if active[ep] {
				continue
			}
			if at, ok := retryAt[ep]; ok && now.Before(at) {
				if wake.IsZero() || at.Before(wake) {
					wake = at
				}
				continue
			}
			if mayRun[ep] {
				// It may still be cleaning: its next attempt adds no
				// concurrency, so it needs no room from the Scheduler.
				resume = append(resume, ep)
				continue
			}
			ready = append(ready, ep)
		}
		for _, ep := range resume {
			start(ep, true)
		}
		step, err := d.sched.Next(ready, sortedKeys(union(active, mayRun)))
		if err != nil {
			stopErr = err
			break
		}
		for _, h := range step.Held {
			d.log.LogAttrs(ctx, slog.LevelDebug, "tokenring: cleanup held", slog.String("endpoint", h.Endpoint),
				slog.String("reason", string(h.Reason)), slog.Any("by", h.By))
		}
		if len(step.Start) > 0 {
			for _, ep := range step.Start {
				active[ep] = true
			}
			// Record them running before they start.
			if err := save(); err != nil {
				for _, ep := range step.Start {
					delete(active, ep)
				}
				stopErr = err
				break
			}
			for _, ep := range step.Start {
				delete(active, ep)
				start(ep, false)
			}
		}
		if len(active) == 0 && len(step.Start) == 0 && wake.IsZero() {
			// Nothing runs, nothing waits: the Scheduler starts a node
			// whenever nothing runs, so todo must be empty here.
			break
		}

		var timer clock.Timer
		var fire <-chan time.Time
		if !wake.IsZero() {
			timer = d.clock.NewTimer(wake.Sub(now))
			fire = timer.C()
		}
		select {
		case res := <-results:
			stopErr = finish(res)
		case <-fire:
		case <-ctx.Done():
			stopErr = ctx.Err()
		}
		if timer != nil {
			timer.Stop()
		}
	}

	// Stopping: cancel what runs, collect every goroutine, keep the
	// interrupted ones recorded as running.
	cancel()
	go func() { wg.Wait(); close(results) }()
	for res := range results {
		if err := finish(res); err != nil && stopErr == nil {
			stopErr = err
		}
	}
	if stopErr == nil {
		// What is left was held by a node that could not be stopped.
		for _, ep := range sortedKeys(todo) {
			if done[ep] || rep.Failed[ep] != nil {
				continue
			}
			err := fmt.Errorf("%w: never started: held while %v, whose cleanup could not be confirmed stopped, counts as running", ErrCleanupNotProven, sortedKeys(mayRun))
			rep.Failed[ep] = err
			failures = multierror.Append(failures, errclass.Wrapf("tokenring", err, "node %s", ep))
		}
	}
	rep.Done = sortedKeys(done)
	if stopErr != nil {
		return rep, stopErr
	}
	return rep, failures.ErrorOrNil()
}

// attempt runs one node's cleanup and says whether the API proved it: a
// nil error only when RunCleanup succeeded and its report shows every
// listed keyspace cleaned or dropped. After a failure (not a cancelled
// run, whose node stays recorded as running) it stops the node's
// cleanups, so that the node can stop counting as running. A panicking
// Cleaner is a failed attempt, not a crash of the run. A Precondition
// that refuses fails the attempt before RunCleanup; a resumed node, which
// may be cleaning, then has its cleanups stopped.
func (d *CleanupDriver) attempt(ctx context.Context, ep string, resumed bool) (res attemptResult) {
	res.endpoint = ep
	var c Cleaner
	defer func() {
		if p := recover(); p != nil {
			res.err = fmt.Errorf("tokenring: the cleaner of %s panicked: %v\n%s", ep, p, debug.Stack())
		}
		if res.err != nil && res.started && ctx.Err() == nil {
			res.stopped = stopSafely(ctx, c)
		}
	}()
	c, err := d.cleaner(ep)
	if err != nil {
		res.err = errclass.Wrapf("tokenring", err, "cleaner for %s", ep)
		return res
	}
	if c == nil {
		res.err = fmt.Errorf("tokenring: cleaner for %s: nil Cleaner", ep)
		return res
	}
	if check := d.opts.Precondition; check != nil {
		if err := check(ctx, ep); err != nil {
			if res.err = err; !errors.Is(err, ErrPreconditionUnmet) {
				res.err = fmt.Errorf("%w: %w", ErrPreconditionUnmet, err)
			}
			if resumed && ctx.Err() == nil {
				res.stopped = stopSafely(ctx, c)
			}
			return res
		}
	}
	res.started = true
	res.report, res.err = RunCleanup(ctx, c)
	if res.err == nil {
		res.err = proven(res.report)
	}
	return res
}

// stopSafely stops a node's cleanups after a failed attempt, bounded by
// settleTimeout; a panic is a failure to stop.
func stopSafely(ctx context.Context, c Cleaner) (stopped bool) {
	defer func() {
		if recover() != nil {
			stopped = false
		}
	}()
	stopCtx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	return c.StopCleanups(stopCtx) == nil
}

// settled updates mayRun after a failed attempt: a node whose cleanups
// were stopped is not cleaning; one where a cleanup may have begun (by
// this attempt, or before it: a resumed node the attempt never reached,
// its Cleaner unavailable) and could not be stopped may be, and keeps
// holding its neighbours.
func (d *CleanupDriver) settled(ep string, res attemptResult, mayRun map[string]bool) {
	switch {
	case res.stopped:
		delete(mayRun, ep)
	case res.started, res.resumed:
		mayRun[ep] = true
		d.log.LogAttrs(context.Background(), slog.LevelWarn, "tokenring: cleanup may still run, held as running", slog.String("endpoint", ep))
	}
}

// proven says whether a report shows every listed keyspace cleaned or
// dropped. RunCleanup's own reports always do when it returns no error;
// this is the driver's own check of what it records as done.
func proven(rep CleanupReport) error {
	ok := map[string]bool{}
	for _, ks := range rep.Cleaned {
		ok[ks] = true
	}
	for _, ks := range rep.Dropped {
		ok[ks] = true
	}
	for _, ks := range rep.Keyspaces {
		if !ok[ks] {
			return fmt.Errorf("%w: keyspace %q was listed and neither cleaned nor dropped", ErrCleanupNotProven, ks)
		}
	}
	return nil
}

func setOf(eps []string) map[string]bool {
	m := make(map[string]bool, len(eps))
	for _, ep := range eps {
		m[ep] = true
	}
	return m
}

func union(a, b map[string]bool) map[string]bool {
	m := make(map[string]bool, len(a)+len(b))
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
