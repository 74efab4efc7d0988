package backupdelete

import (
	"time"

	"github.com/caretaker-storage/caretaker/internal/backoff"
)

// RecordState is the state of an in-progress record: what this process
// knows about the delete command it started for a backup.
type RecordState int

// The record states. A backup with no record at all is different from all
// three: it means no command was started by this process (or the process
// restarted), which longhorn/longhorn#8746 turns into an Error and a retry.
const (
	RecordRunning   RecordState = iota + 1 // the command is running
	RecordFailed                           // the command returned an error or panicked
	RecordSucceeded                        // the command returned nil
)

// String returns "running", "failed" or "succeeded".
func (s RecordState) String() string {
	switch s {
	case RecordRunning:
		return "running"
	case RecordFailed:
		return "failed"
	case RecordSucceeded:
		return "succeeded"
	}
	return "none"
}

// Record is the in-progress record of one backup's delete command,
// longhorn/longhorn#8746's DeletingStatus.
type Record struct {
	State RecordState
	// Err is the command's error text when State is RecordFailed.
	Err string
}

// Presence is whether a backup is still in the backupstore.
type Presence int

// The presences. The zero value is PresenceUnknown: the check failed or was
// not made, and nothing is finalized on it.
const (
	PresenceUnknown Presence = iota
	PresenceExists           // still there (including a backup still being written)
	PresenceAbsent           // gone
)

// String returns "unknown", "exists" or "absent".
func (p Presence) String() string {
	switch p {
	case PresenceExists:
		return "exists"
	case PresenceAbsent:
		return "absent"
	}
	return "unknown"
}

// BackoffOptions is the per-backup backoff between delete commands. The
// zero value is longhorn/longhorn#8746's: 10 s initial, 1 min maximum.
type BackoffOptions struct {
	Initial time.Duration // the first delay; default 10 s
	Max     time.Duration // the delay doubles up to this; default 1 min
}

// Defaults of BackoffOptions and StepInput.PollInterval.
const (
	DefaultBackoffInitial = 10 * time.Second
	DefaultBackoffMax     = time.Minute
	DefaultPollInterval   = 2 * time.Second
)

// policy is c with its defaults filled in.
func (c BackoffOptions) policy() backoff.Policy {
	return backoff.Policy{Initial: c.Initial, Max: c.Max}.Or(backoff.Policy{Initial: DefaultBackoffInitial, Max: DefaultBackoffMax})
}

// Backoff is one backup's backoff state: when its last command started and
// the delay that must pass before the next one. The zero value means no
// command was started yet.
type Backoff struct {
	LastStart time.Time
	Delay     time.Duration
}

// Until returns how long from now the backoff still holds (0 if it has
// passed).
func (b Backoff) Until(now time.Time) time.Duration {
	if b.LastStart.IsZero() {
		return 0
	}
	return max(0, b.LastStart.Add(b.Delay).Sub(now))
}

// Next returns the backoff after a command starts at now: the initial delay
// the first time, then doubling up to the maximum. Like Kubernetes'
// flowcontrol.Backoff, which Longhorn uses, a backup left alone for twice
// the maximum starts again from the initial delay.
func (b Backoff) Next(now time.Time, c BackoffOptions) Backoff {
	return Backoff{LastStart: now, Delay: c.policy().Next(b.LastStart, b.Delay, now)}
}

// StepInput is what Step looks at for one backup whose deletion was
// requested (in Kubernetes: its deletion timestamp is set).
type StepInput struct {
	Backup string // the backup's name, for messages
	State  State  // its current state
	// Message is the backup's current error message; kept unchanged
	// while the backoff holds.
	Message string
	// Record is this process's in-progress record of the backup's delete
	// command; nil if there is none.
	Record *Record
	// Presence is whether the backup is in the backupstore. Step only
	// looks at it when State is Deleting, so a host may leave it Unknown
	// otherwise and save the call.
	Presence Presence
	Backoff  Backoff
	Now      time.Time

	BackoffOptions BackoffOptions
	// PollInterval is how soon to look again while a command runs;
	// default 2 s.
	PollInterval time.Duration
}

// StepResult is Step's decision, as data. The host (or the Driver) applies
// it: start the command if asked, set the state and message, remove the
// finalizer if asked, and reconcile again at RequeueAt.
type StepResult struct {
	State   State  // the backup's next state
	Message string // the error message to show with it ("" clears it)
	// StartCommand: start the delete command now, and record it as
	// running before anything else can look at the record.
	StartCommand bool
	// Finalize: the backup is gone from the backupstore and no command
	// of ours is running; forget the record and backoff and remove the
	// finalizer.
	Finalize bool
	// Backoff is the backup's backoff to keep (updated when a command
	// starts).
	Backoff Backoff
	// RequeueAt is when to call Step again (Now plus the poll interval
	// or the backoff left); zero with Finalize.
	RequeueAt time.Time
	// Why says in a few words which transition was taken, for logs and
	// tests.
	Why string
}

// Step is longhorn/longhorn#8746's deletion state machine for one backup, as a pure
// function: no I/O, no clock, no goroutines.
//
// Transitions (state, record, presence → result):
//
//	not Deleting, record running               → Deleting, wait (a command is already running)
//	not Deleting, in backoff                   → unchanged, requeue when the backoff ends
//	not Deleting                               → Deleting, start the command, next backoff
//	Deleting, presence unknown                 → Deleting, requeue (could not check)
//	Deleting, absent, record running           → Deleting, wait for the command to return
//	Deleting, absent, otherwise                → finalize
//	Deleting, exists, no record                → Error, MessageNoDeletionRecord (controller restarted)
//	Deleting, exists, record running           → Deleting, wait
//	Deleting, exists, record failed            → Error, "Failed to delete the backup ..."
//	Deleting, exists, record succeeded         → Error, "Failed to delete ..." (the command lied)
//
// An Error goes back to Deleting by the "not Deleting" rows once the
// backoff has passed, so the command is only started when the state is not
// Deleting, as the proposal requires. Two rows refine Longhorn's controller: it
// starts a second command when it sees a non-Deleting state while its own
// command still runs (a lost status update), and it finalizes as soon as
// the cfg is gone even though the command is still collecting blocks under
// its deletion lock, which then fails the very creation the proposal wants to
// let through. Here neither happens.
func Step(in StepInput) StepResult {
	poll := in.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	running := in.Record != nil && in.Record.State == RecordRunning

	if in.State != StateDeleting {
		if running {
			return StepResult{State: StateDeleting, Backoff: in.Backoff, RequeueAt: in.Now.Add(poll), Why: "command already running"}
		}
		if wait := in.Backoff.Until(in.Now); wait > 0 {
			return StepResult{State: in.State, Message: in.Message, Backoff: in.Backoff, RequeueAt: in.Now.Add(wait), Why: "in backoff"}
		}
		return StepResult{
			State:        StateDeleting,
			StartCommand: true,
			Backoff:      in.Backoff.Next(in.Now, in.BackoffOptions),
			RequeueAt:    in.Now.Add(poll),
			Why:          "start command",
		}
	}

	switch in.Presence {
	case PresenceAbsent:
		if running {
			return StepResult{State: StateDeleting, Backoff: in.Backoff, RequeueAt: in.Now.Add(poll), Why: "gone, command still running"}
		}
		return StepResult{State: StateDeleting, Finalize: true, Why: "gone from backupstore"}
	case PresenceExists:
		retry := max(in.Backoff.Until(in.Now), poll)
		switch {
		case in.Record == nil:
			return StepResult{State: StateError, Message: MessageNoDeletionRecord, Backoff: in.Backoff, RequeueAt: in.Now.Add(retry), Why: "no record"}
		case running:
			return StepResult{State: StateDeleting, Backoff: in.Backoff, RequeueAt: in.Now.Add(poll), Why: "command running"}
		case in.Record.State == RecordFailed:
			return StepResult{State: StateError, Message: FailedToDeleteMessage(in.Backup, in.Record.Err), Backoff: in.Backoff, RequeueAt: in.Now.Add(retry), Why: "command failed"}
		default:
			return StepResult{State: StateError, Message: FailedToDeleteMessage(in.Backup, "the delete command returned but the backup still exists"), Backoff: in.Backoff, RequeueAt: in.Now.Add(retry), Why: "still exists after command"}
		}
	default:
		return StepResult{State: StateDeleting, Backoff: in.Backoff, RequeueAt: in.Now.Add(poll), Why: "presence unknown"}
	}
}
