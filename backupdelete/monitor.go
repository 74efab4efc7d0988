package backupdelete

import (
	"context"
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/internal/backoff"
	"github.com/caretaker-storage/caretaker/internal/clocks"
	"k8s.io/utils/clock"
)

// MonitorOptions configure the backup progress monitor (ProgressMonitor,
// ProgressTracker): its timing, after longhorn/longhorn#3898. The zero
// value is the defaults.
type MonitorOptions struct {
	// InitialInterval is the first retry delay while the status is not
	// readable; it doubles up to MaxInterval. Default 2 s.
	InitialInterval time.Duration
	// MaxInterval caps the retry delay. Default 10 min.
	MaxInterval time.Duration
	// SteadyInterval is the poll period once the status is readable.
	// Default 2 s.
	SteadyInterval time.Duration
	// MaxRetryPeriod is how long the status may stay unreadable, counted
	// from the start or from the last readable status, before the backup
	// is marked Error. Default 24 h.
	MaxRetryPeriod time.Duration
}

// Defaults of MonitorOptions.
const (
	DefaultMonitorInitial  = 2 * time.Second
	DefaultMonitorMax      = 10 * time.Minute
	DefaultMonitorSteady   = 2 * time.Second
	DefaultMaxRetryPeriod  = 24 * time.Hour
	messageStatusUnreadble = "Failed to get the status of backup %s for %s, err %s"
)

func (c MonitorOptions) withDefaults() MonitorOptions {
	if c.InitialInterval <= 0 {
		c.InitialInterval = DefaultMonitorInitial
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = DefaultMonitorMax
	}
	if c.SteadyInterval <= 0 {
		c.SteadyInterval = DefaultMonitorSteady
	}
	if c.MaxRetryPeriod <= 0 {
		c.MaxRetryPeriod = DefaultMaxRetryPeriod
	}
	return c
}

// ProgressTracker is the progress monitor's pure core for one backup: fed
// each poll's result and the time, it says when to poll next and when to
// give up. It is not safe for concurrent use; one goroutine (or one
// reconciler) owns it.
type ProgressTracker struct {
	opts     MonitorOptions
	name     string
	since    time.Time // start, or the last readable status
	failures int       // unreadable polls since then
	last     Progress
}

// PollDecision is what a ProgressTracker wants after one poll.
type PollDecision struct {
	// Progress is the latest readable progress; after a give-up, its State
	// is Error and Error explains why.
	Progress Progress
	// Done: stop polling (Completed, Error, or gave up).
	Done bool
	// GaveUp: the status stayed unreadable for MaxRetryPeriod.
	GaveUp bool
	// RequeueAt is when to poll next (zero when Done).
	RequeueAt time.Time
}

// NewProgressTracker starts tracking the named backup at now. It cannot
// fail: a zero or negative duration in opts takes its default, and a
// MaxInterval below InitialInterval is raised to it.
func NewProgressTracker(backup string, opts MonitorOptions, now time.Time) *ProgressTracker {
	return &ProgressTracker{opts: opts.withDefaults(), name: backup, since: now, last: Progress{State: StateInProgress}}
}

// Observe takes one poll's result: the progress, or the error that made it
// unreadable.
//
// Readable: the retry delay resets and polling goes steady (every
// SteadyInterval) until the state is Completed or Error. Unreadable: the
// delay starts at InitialInterval and doubles up to MaxInterval; when
// MaxRetryPeriod has passed since the start or the last readable status,
// the backup is given up as Error with a message naming the last error.
func (t *ProgressTracker) Observe(now time.Time, p Progress, err error) PollDecision {
	if err == nil {
		t.since, t.failures, t.last = now, 0, p
		if p.State == StateCompleted || p.State == StateError {
			return PollDecision{Progress: p, Done: true}
		}
		return PollDecision{Progress: p, RequeueAt: now.Add(t.opts.SteadyInterval)}
	}
	if elapsed := now.Sub(t.since); elapsed >= t.opts.MaxRetryPeriod {
		failed := t.last
		failed.State = StateError
		failed.Error = fmt.Sprintf(messageStatusUnreadble, t.name, t.opts.MaxRetryPeriod, err)
		return PollDecision{Progress: failed, Done: true, GaveUp: true}
	}
	t.failures++
	delay := backoff.Policy{Initial: t.opts.InitialInterval, Max: t.opts.MaxInterval}.Delay(t.failures)
	// Never sleep past the give-up moment: the verdict should come on time.
	return PollDecision{Progress: t.last, RequeueAt: now.Add(min(delay, t.since.Add(t.opts.MaxRetryPeriod).Sub(now)))}
}

// ProgressMonitor polls a StatusSource for backups being created, on an
// injected clock, using a ProgressTracker per backup.
type ProgressMonitor struct {
	Source  StatusSource
	Options MonitorOptions
	// Clock provides timers; default the real clock. Tests pass a
	// FakeClock and step it.
	Clock clock.Clock
	// OnUpdate, if set, is called after every poll with the decision (from
	// the goroutine running Run).
	OnUpdate func(ref BackupRef, d PollDecision)
}

// Run polls the backup until it is Completed or Error, or the monitor gives
// up, and returns the final progress (State Error with an explanation on a
// give-up). It returns ctx.Err() if ctx ends first. Run blocks: the host
// runs one goroutine per backup being created, and cancels ctx to stop.
func (m *ProgressMonitor) Run(ctx context.Context, ref BackupRef) (Progress, error) {
	c := clocks.Or(m.Clock)
	t := NewProgressTracker(ref.Name, m.Options, c.Now())
	for {
		p, err := m.Source.BackupStatus(ctx, ref)
		if ctx.Err() != nil {
			return t.last, ctx.Err()
		}
		now := c.Now()
		d := t.Observe(now, p, err)
		if m.OnUpdate != nil {
			m.OnUpdate(ref, d)
		}
		if d.Done {
			return d.Progress, nil
		}
		timer := c.NewTimer(d.RequeueAt.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return t.last, ctx.Err()
		case <-timer.C():
		}
	}
}
