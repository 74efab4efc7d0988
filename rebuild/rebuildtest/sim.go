package rebuildtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/rebuild"
)

// Sim runs a rebuild.Driver against a Cluster on a fake clock and writes
// down what happens. Each Step reconciles every volume (as a host's resync
// would), steps the cluster's controllers once, and advances the clock by
// Tick. Nothing sleeps; a run is deterministic.
type Sim struct {
	Cluster *Cluster
	Driver  *rebuild.Driver
	Clock   *testingclock.FakeClock
	Tick    time.Duration // clock advance per Step; NewSim sets 30s

	// Timeline is every event, ticket change, condition change and volume
	// transition so far, in order.
	Timeline []Entry
	// Decisions holds the last decision per volume.
	Decisions map[string]rebuild.Decision
	// AfterReconcile, if set, is called in every Step after all volumes were
	// reconciled and before the controllers move: the moment the driver's
	// decisions are applied and nothing else has changed yet.
	AfterReconcile func()

	start      time.Time
	last       map[string]VolumeState
	settingErr string // last setting error written
}

// Entry is one line of the timeline.
type Entry struct {
	At     time.Duration // since the simulation started
	Volume string
	Text   string
}

// String formats the entry as one timeline line.
func (e Entry) String() string {
	return fmt.Sprintf("%8s  %-6s %s", "+"+e.At.String(), e.Volume, e.Text)
}

// SimStart is the fake clock's starting time.
var SimStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewSim returns a simulation over an empty NewCluster with a Driver using
// opts, both on the Sim's fake clock (opts.Clock is replaced by it). The
// error wraps rebuild.ErrInvalidOptions.
func NewSim(opts rebuild.Options) (*Sim, error) {
	clk := testingclock.NewFakeClock(SimStart)
	c := NewCluster(ClusterOptions{Clock: clk})
	opts.Clock = clk
	d, err := rebuild.NewDriver(c, c, opts)
	if err != nil {
		return nil, err
	}
	return &Sim{Cluster: c, Driver: d, Clock: clk, Tick: 30 * time.Second, start: SimStart,
		Decisions: map[string]rebuild.Decision{}, last: map[string]VolumeState{}}, nil
}

// Elapsed is the simulated time since the start.
func (s *Sim) Elapsed() time.Duration { return s.Clock.Since(s.start) }

// Event writes a line for something done from outside (a user, a failure).
func (s *Sim) Event(volume, format string, args ...any) {
	s.add(volume, "EVENT "+fmt.Sprintf(format, args...))
}

// Step reconciles every volume, steps the cluster and advances the clock.
// A *rebuild.SettingError is written to the timeline and not returned;
// other errors stop the step.
func (s *Sim) Step(ctx context.Context) error {
	names := s.Cluster.Names()
	for n := range s.last { // volumes that vanished still need their reconcile
		if !contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		prev, seen := s.Decisions[n]
		dec, err := s.Driver.Reconcile(ctx, n)
		var serr *rebuild.SettingError
		switch {
		case errors.As(err, &serr):
			if serr.Error() != s.settingErr { // once, not every step
				s.settingErr = serr.Error()
				s.add(n, "setting error: "+serr.Error())
			}
		case err != nil:
			return err
		default:
			s.settingErr = ""
		}
		s.Decisions[n] = dec
		s.noteDecision(n, prev, seen, dec)
		if st, ok := s.last[n]; ok && !st.Exists {
			// The driver has now seen the volume gone: stop following it.
			delete(s.last, n)
			delete(s.Decisions, n)
			s.add(n, "driver: volume gone, ticket deleted, record forgotten")
		}
	}
	if s.AfterReconcile != nil {
		s.AfterReconcile()
	}
	s.Cluster.Step()
	for _, n := range names {
		s.noteVolume(n, s.Cluster.Inspect(n))
	}
	s.Clock.Step(s.Tick)
	return nil
}

// Run makes n Steps.
func (s *Sim) Run(ctx context.Context, n int) error {
	for i := 0; i < n; i++ {
		if err := s.Step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// RunUntil steps until done returns true (checked before each step) or max
// steps were made; it reports whether done became true.
func (s *Sim) RunUntil(ctx context.Context, max int, done func() bool) (bool, error) {
	for i := 0; i < max; i++ {
		if done() {
			return true, nil
		}
		if err := s.Step(ctx); err != nil {
			return false, err
		}
	}
	return done(), nil
}

// Lines returns the timeline as text lines.
func (s *Sim) Lines() []string {
	out := make([]string, len(s.Timeline))
	for i, e := range s.Timeline {
		out[i] = e.String()
	}
	return out
}

func (s *Sim) noteDecision(name string, prev rebuild.Decision, seen bool, dec rebuild.Decision) {
	switch dec.Action {
	case rebuild.ActionCreate:
		t := dec.Ticket
		s.add(name, fmt.Sprintf("ticket + %s (priority %d, frontend disabled %t, node %s)", t.ID, t.Priority, t.DisableFrontend, t.NodeID))
	case rebuild.ActionDelete:
		if dec.Condition.Reason != "" { // empty for a volume that is gone
			s.add(name, "ticket - "+dec.Ticket.ID)
		}
	}
	c := dec.Condition
	if c.Reason != "" && (!seen || c.Reason != prev.Condition.Reason || c.Status != prev.Condition.Status) {
		s.add(name, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
}

func (s *Sim) noteVolume(name string, now VolumeState) {
	before, seen := s.last[name]
	if !now.Exists {
		if seen && before.Exists {
			s.add(name, "volume removed")
		}
		s.last[name] = now
		return
	}
	s.last[name] = now
	if !seen || before.State != now.State {
		text := "volume " + string(now.State)
		if now.AttachedFor != "" && now.State != rebuild.StateDetached {
			mode := "frontend enabled"
			if now.Maintenance {
				mode = "maintenance mode"
			}
			text += fmt.Sprintf(" for %s (%s)", now.AttachedFor, mode)
		}
		s.add(name, text)
	}
	if !seen || before.Healthy != now.Healthy || before.Rebuilding != now.Rebuilding {
		s.add(name, fmt.Sprintf("replicas %d/%d healthy, %d rebuilding", now.Healthy, now.Desired, now.Rebuilding))
	}
}

func (s *Sim) add(volume, text string) {
	s.Timeline = append(s.Timeline, Entry{At: s.Elapsed(), Volume: volume, Text: strings.TrimSpace(text)})
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}
