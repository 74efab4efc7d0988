package backupdelete

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/caretaker-storage/caretaker/orphan"
	"k8s.io/utils/clock"
)

// DriverOptions configure a Driver. The zero value is the documented
// defaults.
type DriverOptions struct {
	// MaxConcurrent bounds the delete commands running at once; the rest
	// wait in a FIFO queue (their records say running). Default 4.
	MaxConcurrent int
	// Backoff is the per-backup backoff between commands; the zero value
	// is longhorn/longhorn#8746's 10 s initial, 1 min maximum. (Longhorn's controller
	// later moved to 1 min .. 24 h; set it here if you want that.)
	Backoff BackoffOptions
	// PollInterval is how soon Reconcile asks to be called again while a
	// command runs; default 2 s.
	PollInterval time.Duration
	// Clock gives the time for the backoff and times CommandTimeout; nil
	// is the real clock. Tests use k8s.io/utils/clock/testing.FakeClock.
	Clock clock.Clock
	// CommandTimeout, if positive, cancels a delete command's context after
	// this long (a hung NFS mount must not hold a slot forever); the
	// command then fails with ErrTimeout and is retried after the backoff.
	// Zero: no limit.
	CommandTimeout time.Duration
	// OnDone, if set, is called from the command's goroutine after a
	// command returns and its record is updated (err is nil on success).
	// Hosts use it to requeue the backup at once instead of waiting for
	// RequeueAt. It must not block and must not call Close.
	OnDone func(ref BackupRef, err error)
	// Logger, if set, receives the Driver's decisions and the commands'
	// outcomes, each with "backup" (the backup's name), "volume", "target"
	// (when set), "state" (the state Reconcile returns) and "attempt" (the
	// commands this Driver started for the backup): Info "backupdelete:
	// deletion started" (backoff) and "backupdelete: deletion finished";
	// Warn "backupdelete: deletion failed" (reason, message) when a backup
	// goes to Error, and "backupdelete: presence check failed" (err);
	// Debug "backupdelete: backing off" (retry_in) and "backupdelete:
	// waiting" (reason); Info "backupdelete: delete command succeeded" and
	// Error "backupdelete: delete command failed" (op="delete", err) from
	// the command's goroutine. Nil means no logging at all.
	Logger *slog.Logger
	// Hooks, if set, observe an Event after each presence check, each
	// Reconcile (with the step it took) and each delete command, each
	// timed by Clock. Nil means none. See Hooks for when and how they are
	// called.
	Hooks Hooks
}

// DefaultMaxConcurrent is DriverOptions.MaxConcurrent's default.
const DefaultMaxConcurrent = 4

// Request is one reconcile of a backup whose deletion was requested.
type Request struct {
	Ref     BackupRef
	State   State  // the backup's current state
	Message string // its current error message
}

// Driver runs Step against a Backupstore: it checks presence, keeps the
// in-progress records and the per-backup backoff in memory, and runs delete
// commands in goroutines with bounded concurrency. A command that returns
// an error or panics leaves a failed record, never a lost one.
//
// A Driver is safe for concurrent use by many reconcilers; calls for the
// same backup are serialised where it matters (at most one command per
// backup runs at a time). Its records live only in memory, on purpose: a
// new Driver after a crash has none, and Step turns that into longhorn/longhorn#8746's
// "No deletion in progress record" Error and a retry.
type Driver struct {
	store Backupstore
	opts  DriverOptions
	clock clock.Clock
	log   *slog.Logger
	hooks Hooks

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	entries map[BackupRef]*entry
	queue   []queued // commands waiting for a slot, FIFO
	active  int      // worker goroutines
	gen     uint64
	// collected are the volumes (by target and name) this Driver collected
	// for a backup it had no record of: one collection per volume covers
	// every deletion interrupted before the Driver started.
	collected map[BackupRef]bool
}

// entry is what the Driver keeps per backup.
type entry struct {
	record  *Record
	gen     uint64 // identifies the command the record is about
	backoff Backoff
	attempt int // commands started for the backup, for the log
}

type queued struct {
	ref     BackupRef
	gen     uint64
	attempt int
}

// NewDriver returns a Driver that deletes through store. It returns an
// error naming the option that is invalid, wrapping orphan.ErrIncomplete:
// a nil store.
func NewDriver(store Backupstore, opts DriverOptions) (*Driver, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: backupdelete.NewDriver needs a Backupstore", orphan.ErrIncomplete)
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Driver{store: store, opts: opts, clock: clocks.Or(opts.Clock), log: log, hooks: noHooks(opts.Hooks), ctx: ctx, cancel: cancel, entries: map[BackupRef]*entry{}, collected: map[BackupRef]bool{}}, nil
}

// Reconcile runs one step for a backup whose deletion was requested and
// applies it: it checks the backupstore when the backup is Deleting, starts
// the delete command when Step says so (recording it as running first),
// and forgets the backup's record and backoff when Step finalizes. The host
// then writes res.State and res.Message to its backup record, removes the
// finalizer if res.Finalize, and reconciles again at res.RequeueAt.
//
// If the presence check fails, Reconcile returns a valid result (stay
// Deleting, requeue) together with the check's error, for the host to log.
// Before it finalizes a backup whose deletion it did not see succeed, it
// collects the volume through the store's Collector, if the store has one
// (see Collector); a failed collection is returned the same way.
// An invalid ref is ErrInvalidRef and a closed Driver ErrClosed, with a
// zero result.
func (d *Driver) Reconcile(ctx context.Context, req Request) (StepResult, error) {
	started := d.clock.Now()
	if err := req.Ref.Validate(); err != nil {
		d.hooks.Observe(Event{Op: OpReconcile, Outcome: EventFailed, Ref: req.Ref, Duration: d.clock.Since(started), Err: err})
		return StepResult{}, err
	}
	presence, checkErr := PresenceUnknown, error(nil)
	if req.State == StateDeleting {
		exists, err := d.store.BackupExists(ctx, req.Ref)
		check := Event{Op: OpCheck, Outcome: EventOK, Ref: req.Ref, Duration: d.clock.Since(started)}
		switch {
		case err != nil:
			checkErr = fmt.Errorf("backupdelete: check %s in the backupstore: %w", req.Ref, err)
			check.Outcome, check.Err = EventFailed, checkErr
		case exists:
			presence = PresenceExists
		default:
			presence = PresenceAbsent
		}
		d.hooks.Observe(check)
	}

	if checkErr != nil {
		d.log.LogAttrs(ctx, slog.LevelWarn, "backupdelete: presence check failed", append(refAttrs(req.Ref), slog.Any("err", checkErr))...)
	}
	if presence == PresenceAbsent {
		if err := d.collect(ctx, req.Ref); err != nil {
			// Not finalized: the backup stays Deleting and is reconciled
			// again, so its record outlives its deletion's leftovers.
			presence, checkErr = PresenceUnknown, err
			d.log.LogAttrs(ctx, slog.LevelWarn, "backupdelete: collection failed", append(refAttrs(req.Ref), slog.Any("err", err))...)
		}
	}
	res, attempt, err := d.step(req, presence)
	if err != nil {
		d.hooks.Observe(Event{Op: OpReconcile, Outcome: EventFailed, Ref: req.Ref, Duration: d.clock.Since(started), Err: err})
		return StepResult{}, err
	}
	d.logStep(ctx, req, res, attempt)
	d.hooks.Observe(Event{Op: OpReconcile, Outcome: stepOutcome(req, res), Ref: req.Ref, State: res.State, Why: res.Why,
		Attempt: attempt, Duration: d.clock.Since(started)})
	return res, checkErr
}

// collect runs the store's Collector, if it has one, for a backup found
// gone whose deletion this Driver did not see succeed: no record (once per
// volume) or a failed command. A command still running is left to finish:
// Step waits for it.
func (d *Driver) collect(ctx context.Context, ref BackupRef) error {
	col, ok := d.store.(Collector)
	if !ok {
		return nil
	}
	vol := BackupRef{Target: ref.Target, Volume: ref.Volume}
	d.mu.Lock()
	var state RecordState
	if e := d.entries[ref]; e != nil && e.record != nil {
		state = e.record.State
	}
	need := state == RecordFailed || (state == 0 && !d.collected[vol])
	d.mu.Unlock()
	if !need {
		return nil
	}
	started := d.clock.Now()
	err := col.CollectVolume(ctx, ref)
	ev := Event{Op: OpCollect, Outcome: EventOK, Ref: ref, Duration: d.clock.Since(started)}
	if err != nil {
		err = fmt.Errorf("backupdelete: collect the blocks %s's interrupted deletion left in volume %s: %w", ref, ref.Volume, err)
		ev.Outcome, ev.Err = EventFailed, err
	} else {
		d.mu.Lock()
		d.collected[vol] = true
		d.mu.Unlock()
		d.log.LogAttrs(ctx, slog.LevelInfo, "backupdelete: collected an interrupted deletion's blocks", refAttrs(ref)...)
	}
	d.hooks.Observe(ev)
	return err
}

// step runs Step under d.mu and applies its result to the Driver's
// memory; it returns the backup's attempt count for the log.
func (d *Driver) step(req Request, presence Presence) (StepResult, int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return StepResult{}, 0, ErrClosed
	}
	e := d.entries[req.Ref]
	in := StepInput{
		Backup:         req.Ref.Name,
		State:          req.State,
		Message:        req.Message,
		Presence:       presence,
		Now:            d.clock.Now(),
		BackoffOptions: d.opts.Backoff,
		PollInterval:   d.opts.PollInterval,
	}
	if e != nil {
		in.Record, in.Backoff = e.record, e.backoff
	}
	res := Step(in)
	attempt := 0
	if e != nil {
		attempt = e.attempt
	}
	switch {
	case res.Finalize:
		delete(d.entries, req.Ref)
	case res.StartCommand:
		if e == nil {
			e = &entry{}
			d.entries[req.Ref] = e
		}
		d.gen++
		e.attempt++
		attempt = e.attempt
		e.gen, e.record, e.backoff = d.gen, &Record{State: RecordRunning}, res.Backoff
		d.startLocked(queued{req.Ref, e.gen, e.attempt})
	default:
		if e == nil && res.Backoff != (Backoff{}) {
			e = &entry{}
			d.entries[req.Ref] = e
		}
		if e != nil {
			e.backoff = res.Backoff
		}
	}
	return res, attempt, nil
}

// logStep reports what Reconcile decided; d.mu is not held.
func (d *Driver) logStep(ctx context.Context, req Request, res StepResult, attempt int) {
	attrs := append(refAttrs(req.Ref), slog.String("state", string(res.State)), slog.Int("attempt", attempt))
	switch {
	case res.StartCommand:
		d.log.LogAttrs(ctx, slog.LevelInfo, "backupdelete: deletion started", append(attrs, slog.Duration("backoff", res.Backoff.Delay))...)
	case res.Finalize:
		d.log.LogAttrs(ctx, slog.LevelInfo, "backupdelete: deletion finished", attrs...)
	case res.State == StateError && req.State != StateError:
		d.log.LogAttrs(ctx, slog.LevelWarn, "backupdelete: deletion failed", append(attrs,
			slog.String("reason", res.Why), slog.String("message", res.Message))...)
	case res.State == req.State && req.State != StateDeleting && !res.RequeueAt.IsZero():
		d.log.LogAttrs(ctx, slog.LevelDebug, "backupdelete: backing off", append(attrs,
			slog.Duration("retry_in", res.RequeueAt.Sub(d.clock.Now())))...)
	default:
		d.log.LogAttrs(ctx, slog.LevelDebug, "backupdelete: waiting", append(attrs, slog.String("reason", res.Why))...)
	}
}

// refAttrs are the attributes that name a backup in every log line.
func refAttrs(ref BackupRef) []slog.Attr {
	attrs := []slog.Attr{slog.String("backup", ref.Name), slog.String("volume", ref.Volume)}
	if ref.Target != "" {
		attrs = append(attrs, slog.String("target", ref.Target))
	}
	return attrs
}

// Record returns the in-progress record of a backup, if the Driver has one.
func (d *Driver) Record(ref BackupRef) (Record, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.entries[ref]; e != nil && e.record != nil {
		return *e.record, true
	}
	return Record{}, false
}

// Running returns how many commands are running or queued.
func (d *Driver) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, e := range d.entries {
		if e.record != nil && e.record.State == RecordRunning {
			n++
		}
	}
	return n
}

// Forget drops the record and backoff of a backup the host no longer
// deletes (its record vanished without being finalized). A command still
// running for it finishes, and its result is discarded.
func (d *Driver) Forget(ref BackupRef) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.entries, ref)
}

// Close cancels running commands (through their context), fails the queued
// ones with ErrClosed, and waits for every command goroutine to return.
// Reconcile fails with ErrClosed afterwards. Close is what a controller
// shutdown does; a crash is a Driver that is simply dropped.
func (d *Driver) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}

// startLocked runs the command in a worker, or queues it when
// MaxConcurrent workers are busy. d.mu is held.
func (d *Driver) startLocked(q queued) {
	if d.active >= d.opts.MaxConcurrent {
		d.queue = append(d.queue, q)
		return
	}
	d.active++
	d.wg.Add(1)
	go d.work(q)
}

// work runs commands until the queue is empty. Reusing the worker keeps
// 10k simultaneous deletions at MaxConcurrent goroutines rather than 10k.
func (d *Driver) work(q queued) {
	defer d.wg.Done()
	for {
		var err error
		started := d.clock.Now()
		if d.ctx.Err() != nil {
			err = ErrClosed
		} else {
			err = d.call(q.ref)
		}
		d.finish(q, err, d.clock.Since(started))

		d.mu.Lock()
		if len(d.queue) == 0 {
			d.active--
			d.queue = nil
			d.mu.Unlock()
			return
		}
		q = d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()
	}
}

// call runs one delete command and turns a panic into an error, so the
// record is failed rather than left running forever.
func (d *Driver) call(ref BackupRef) (err error) {
	ctx := d.ctx
	if d.opts.CommandTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(d.ctx)
		defer cancel(nil)
		t := d.clock.NewTimer(d.opts.CommandTimeout)
		defer t.Stop()
		go func() {
			select {
			case <-t.C():
				cancel(fmt.Errorf("%w after %v", ErrTimeout, d.opts.CommandTimeout))
			case <-ctx.Done():
			}
		}()
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrTimeout) && !errors.Is(err, ErrTimeout) {
			err = fmt.Errorf("%w: %v", cause, err)
		}
	}()
	return d.store.DeleteBackup(ctx, ref)
}

// finish records the command's result, unless the record was forgotten or
// belongs to a newer command.
func (d *Driver) finish(q queued, err error, took time.Duration) {
	d.mu.Lock()
	e := d.entries[q.ref]
	if e != nil && e.gen == q.gen && e.record != nil {
		if err != nil {
			e.record = &Record{State: RecordFailed, Err: firstLine(err.Error())}
		} else {
			e.record = &Record{State: RecordSucceeded}
		}
	}
	d.mu.Unlock()
	attrs := append(refAttrs(q.ref), slog.Int("attempt", q.attempt))
	if err != nil {
		d.log.LogAttrs(d.ctx, slog.LevelError, "backupdelete: delete command failed", append(attrs,
			slog.String("op", "delete"), slog.String("err", firstLine(err.Error())))...)
	} else {
		d.log.LogAttrs(d.ctx, slog.LevelInfo, "backupdelete: delete command succeeded", attrs...)
	}
	ev := Event{Op: OpDelete, Outcome: EventOK, Ref: q.ref, Attempt: q.attempt, Duration: took}
	if err != nil {
		ev.Outcome, ev.Err = EventFailed, err
	}
	d.hooks.Observe(ev)
	if d.opts.OnDone != nil {
		d.opts.OnDone(q.ref, err)
	}
}

// firstLine keeps a panic's stack out of the status message.
func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
