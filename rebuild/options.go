package rebuild

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/backoff"
)

// Options tune the decision. The zero value is the documented default for
// every field.
type Options struct {
	// DataEngines are the engines offline rebuilding applies to.
	// Default: only DataEngineV2, as in longhorn/longhorn#6071 (v1 rebuilds online).
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
	// Defaults: 1 minute, growing to 1 hour. Values above about 146 years
	// (2^62 ns) count as that.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration

	// Clock is the Driver's clock; nil means the real clock. Only the
	// Driver reads it: the Planner has no clock, its Input carries Now.
	Clock clock.Clock

	// Logger, if set, receives the Driver's decisions, each with "volume",
	// "action" (create, keep, wait, delete) and "reason" (the condition's
	// reason): Info "rebuild: attaching" (ticket, node, message), "rebuild:
	// interrupted" and "rebuild: released" (message), and "rebuild: volume
	// gone"; Warn "rebuild: gave up" (message, failures, retry_at) and
	// "rebuild: invalid setting" (err); Error "rebuild: apply failed" (op:
	// put-ticket, delete-ticket or update-status; err); Debug "rebuild:
	// decided" for the decisions that change nothing. Nil means no
	// logging at all. Only the Driver logs: the Planner has no logger.
	Logger *slog.Logger

	// Hooks, if set, observe an Event after each Reconcile of the Driver:
	// the decision's action and reason, the outcome and the duration by
	// Clock. Nil means none. See Hooks for when and how they are called.
	// Only the Driver calls them: the Planner has no hooks.
	Hooks Hooks
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
		return invalid("negative value: priority %d, workload priority %d, stall timeout %s, max failed rebuilds %d, backoff %s to %s",
			o.Priority, o.WorkloadPriority, o.StallTimeout, o.MaxFailedRebuilds, o.InitialBackoff, o.MaxBackoff)
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

// backoff is the policy of InitialBackoff and MaxBackoff (with defaults).
// Both are capped at maxBackoff, so that Now plus a delay is still a time
// a host can compare and store.
func (o Options) backoff() backoff.Policy {
	return backoff.Policy{Initial: min(o.InitialBackoff, maxBackoff), Max: min(o.MaxBackoff, maxBackoff)}
}

// maxBackoff is the longest backoff, about 146 years: any longer
// MaxBackoff means the same.
const maxBackoff = time.Duration(1) << 62
