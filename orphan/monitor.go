package orphan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/clocks"
)

// DefaultPeriod is how often a Monitor scans when MonitorOptions.Period is
// zero: Longhorn's 30 seconds.
const DefaultPeriod = 30 * time.Second

// ErrMonitorStarted is returned by Start on a monitor that runs already.
var ErrMonitorStarted = errors.New("orphan: monitor already started")

// MonitorOptions configure a Monitor. The zero value is usable.
type MonitorOptions struct {
	// Period is the time from the end of one scan to the start of the
	// next. Zero means DefaultPeriod.
	Period time.Duration
	// Clock drives the period. Nil means the real clock; tests pass a
	// k8s.io/utils/clock/testing fake and step it.
	Clock clock.Clock
	// OnScan, if set, is called after every scan with its observation,
	// from the monitor's goroutine. It must not block for long.
	OnScan func(Observation)
	// OnChange, if set, is called after a scan whose snapshot or error
	// differs from the previous one (and after the first scan), from the
	// monitor's goroutine. Hosts use it to enqueue their reconcile.
	OnChange func(Observation)
	// Logger, if set, receives a Debug record "orphan: scan finished" after
	// every scan (seq, took, items, scopes, skipped, and err when it
	// failed) and a Warn record "orphan: scan failed" (seq, took, err)
	// when the scan failed. Nil means no logging at all.
	Logger *slog.Logger
	// Hooks, if set, observe an Event with OpScan after every scan (ok or
	// failed, with its duration by Clock), before OnScan and OnChange.
	// Nil means none. See Hooks for when and how they are called.
	Hooks Hooks
}

// Observation is the outcome of one scan.
type Observation struct {
	Snapshot Snapshot
	// Err is the scan's error; Snapshot is empty when it is set.
	Err error
	// StartedAt is when the scan started, by the monitor's clock: what
	// happened after it (a purge) may be missing from the snapshot. Pass it
	// as Cycle.ObservedAt.
	StartedAt time.Time
	// At is when the scan finished, by the monitor's clock.
	At time.Time
	// Seq counts scans from 1.
	Seq uint64
}

// Monitor runs an Inventory periodically in its own goroutine, so that a
// slow disk never blocks the host's reconcile: the host reads the latest
// observation with Latest, which never waits for a scan.
//
// Create it with NewMonitor, then either Start it and Stop it, or call Run
// from a goroutine of your own. Latest, Rescan and Stop are safe for
// concurrent use.
type Monitor struct {
	inv    Inventory
	opts   MonitorOptions
	rescan chan struct{}

	mu      sync.Mutex
	latest  Observation
	cancel  context.CancelFunc
	stopped chan struct{}
}

// NewMonitor returns a monitor of inv; it does not scan until started.
// It returns an error naming the option that is invalid, wrapping
// ErrIncomplete: a nil inv.
func NewMonitor(inv Inventory, opts MonitorOptions) (*Monitor, error) {
	if inv == nil {
		return nil, fmt.Errorf("%w: NewMonitor needs an Inventory", ErrIncomplete)
	}
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	opts.Clock = clocks.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Hooks = noHooks(opts.Hooks)
	return &Monitor{inv: inv, opts: opts, rescan: make(chan struct{}, 1)}, nil
}

// Start runs the monitor in a new goroutine until Stop is called or ctx is
// done. It scans at once, then every period.
func (m *Monitor) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		return ErrMonitorStarted
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.stopped = make(chan struct{})
	go func() {
		defer close(m.stopped)
		m.Run(ctx)
	}()
	return nil
}

// Stop ends a started monitor and waits until its goroutine has returned,
// cancelling the context of a scan in progress. It is a no-op on a monitor
// that was never started, and safe to call more than once.
func (m *Monitor) Stop() {
	m.mu.Lock()
	cancel, stopped := m.cancel, m.stopped
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-stopped
}

// Run scans at once and then every period until ctx is done. It blocks; use
// it instead of Start when the host manages its own goroutines.
func (m *Monitor) Run(ctx context.Context) {
	m.scan(ctx)
	timer := m.opts.Clock.NewTimer(m.opts.Period)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-m.rescan:
			if !timer.Stop() {
				// The timer fired meanwhile; drain it so Reset starts clean.
				select {
				case <-timer.C():
				default:
				}
			}
		}
		m.scan(ctx)
		timer.Reset(m.opts.Period)
	}
}

// Latest returns the newest observation, and false before the first scan
// has finished. It never blocks on a scan.
func (m *Monitor) Latest() (Observation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latest, m.latest.Seq > 0
}

// Rescan asks for a scan as soon as the current one, if any, is over.
// Requests made while one is pending are merged. It never blocks.
func (m *Monitor) Rescan() {
	select {
	case m.rescan <- struct{}{}:
	default:
	}
}

func (m *Monitor) scan(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	started := m.opts.Clock.Now()
	snap, err := m.inv.Scan(ctx)
	if ctx.Err() != nil {
		return // stopped mid-scan: a cancelled scan says nothing about the disks
	}
	if err != nil {
		snap = Snapshot{}
	}
	m.mu.Lock()
	prev := m.latest
	obs := Observation{Snapshot: snap, Err: err, StartedAt: started, At: m.opts.Clock.Now(), Seq: prev.Seq + 1}
	m.latest = obs
	m.mu.Unlock()

	m.log(ctx, obs)
	m.opts.Hooks.Observe(scanEvent(obs))

	if m.opts.OnScan != nil {
		m.opts.OnScan(obs)
	}
	if m.opts.OnChange != nil && (prev.Seq == 0 || !sameObservation(prev, obs)) {
		m.opts.OnChange(obs)
	}
}

// log reports a finished scan; it runs without m.mu held.
func (m *Monitor) log(ctx context.Context, obs Observation) {
	took := obs.At.Sub(obs.StartedAt)
	if obs.Err != nil {
		m.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "orphan: scan finished",
			slog.Uint64("seq", obs.Seq), slog.Duration("took", took), slog.Int("items", 0), slog.Any("err", obs.Err))
		m.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "orphan: scan failed",
			slog.Uint64("seq", obs.Seq), slog.Duration("took", took), slog.Any("err", obs.Err))
		return
	}
	m.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "orphan: scan finished",
		slog.Uint64("seq", obs.Seq), slog.Duration("took", took), slog.Int("items", len(obs.Snapshot.Items)),
		slog.Int("scopes", len(obs.Snapshot.Scopes)), slog.Int("skipped", len(obs.Snapshot.Skipped)))
}

// scanEvent is what the hooks see of a finished scan.
func scanEvent(obs Observation) Event {
	e := Event{Op: OpScan, Outcome: EventOK, Duration: obs.At.Sub(obs.StartedAt)}
	if obs.Err != nil {
		e.Outcome, e.Err = EventFailed, obs.Err
	}
	return e
}

func sameObservation(a, b Observation) bool {
	if (a.Err == nil) != (b.Err == nil) || (a.Err != nil && a.Err.Error() != b.Err.Error()) {
		return false
	}
	return reflect.DeepEqual(a.Snapshot, b.Snapshot)
}
