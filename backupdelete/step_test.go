package backupdelete

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestStepTransitions(t *testing.T) {
	running := &Record{State: RecordRunning}
	failed := &Record{State: RecordFailed, Err: "remove backups/backup_b.cfg: operation not permitted"}
	succeeded := &Record{State: RecordSucceeded}
	inBackoff := Backoff{LastStart: t0.Add(-3 * time.Second), Delay: 10 * time.Second}
	pastBackoff := Backoff{LastStart: t0.Add(-11 * time.Second), Delay: 10 * time.Second}

	cases := []struct {
		name     string
		in       StepInput
		state    State
		message  string
		start    bool
		finalize bool
		requeue  time.Duration
		delay    time.Duration // the backoff delay to keep
	}{
		{name: "Completed starts the command", in: StepInput{State: StateCompleted},
			state: StateDeleting, start: true, requeue: 2 * time.Second, delay: 10 * time.Second},
		{name: "InProgress starts the command too", in: StepInput{State: StateInProgress},
			state: StateDeleting, start: true, requeue: 2 * time.Second, delay: 10 * time.Second},
		{name: "Error in backoff waits with its message", in: StepInput{State: StateError, Message: "m", Record: failed, Backoff: inBackoff},
			state: StateError, message: "m", requeue: 7 * time.Second, delay: 10 * time.Second},
		{name: "Error after backoff retries, doubling", in: StepInput{State: StateError, Record: failed, Backoff: pastBackoff},
			state: StateDeleting, start: true, requeue: 2 * time.Second, delay: 20 * time.Second},
		{name: "not Deleting but our command runs: no second command", in: StepInput{State: StateCompleted, Record: running, Backoff: pastBackoff},
			state: StateDeleting, requeue: 2 * time.Second, delay: 10 * time.Second},
		{name: "Deleting, presence unknown: wait", in: StepInput{State: StateDeleting, Record: running, Backoff: inBackoff},
			state: StateDeleting, requeue: 2 * time.Second, delay: 10 * time.Second},
		{name: "Deleting, exists, running: wait", in: StepInput{State: StateDeleting, Record: running, Presence: PresenceExists, Backoff: inBackoff},
			state: StateDeleting, requeue: 2 * time.Second, delay: 10 * time.Second},
		{name: "Deleting, exists, failed: Error with the command's error", in: StepInput{State: StateDeleting, Record: failed, Presence: PresenceExists, Backoff: inBackoff},
			state: StateError, message: "Failed to delete the backup backup-b in the backupstore, err remove backups/backup_b.cfg: operation not permitted",
			requeue: 7 * time.Second, delay: 10 * time.Second},
		{name: "Deleting, exists, no record: controller restarted", in: StepInput{State: StateDeleting, Presence: PresenceExists},
			state: StateError, message: MessageNoDeletionRecord, requeue: 2 * time.Second},
		{name: "Deleting, exists, succeeded: still there is an error", in: StepInput{State: StateDeleting, Record: succeeded, Presence: PresenceExists, Backoff: pastBackoff},
			state: StateError, message: "Failed to delete the backup backup-b in the backupstore, err the delete command returned but the backup still exists",
			requeue: 2 * time.Second, delay: 10 * time.Second},
		{name: "Deleting, absent, succeeded: finalize", in: StepInput{State: StateDeleting, Record: succeeded, Presence: PresenceAbsent},
			state: StateDeleting, finalize: true},
		{name: "Deleting, absent, no record: finalize", in: StepInput{State: StateDeleting, Presence: PresenceAbsent},
			state: StateDeleting, finalize: true},
		{name: "Deleting, absent, failed (blocks left): finalize", in: StepInput{State: StateDeleting, Record: failed, Presence: PresenceAbsent},
			state: StateDeleting, finalize: true},
		{name: "Deleting, absent, still running: wait for the command", in: StepInput{State: StateDeleting, Record: running, Presence: PresenceAbsent, Backoff: inBackoff},
			state: StateDeleting, requeue: 2 * time.Second, delay: 10 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Backup, in.Now = "backup-b", t0
			got := Step(in)
			if got.State != c.state || got.Message != c.message || got.StartCommand != c.start || got.Finalize != c.finalize || !got.RequeueAt.Equal(wantAt(t0, c.requeue, c.finalize)) {
				t.Fatalf("Step = %+v\nwant state %q message %q start %v finalize %v requeue %v", got, c.state, c.message, c.start, c.finalize, c.requeue)
			}
			if !c.finalize && got.Backoff.Delay != c.delay {
				t.Fatalf("backoff delay = %v, want %v", got.Backoff.Delay, c.delay)
			}
			if got.StartCommand && !got.Backoff.LastStart.Equal(t0) {
				t.Fatalf("a started command must stamp the backoff: %+v", got.Backoff)
			}
			if got.StartCommand && got.State != StateDeleting {
				t.Fatal("a command starts only together with Deleting")
			}
			if in.State == StateDeleting && got.StartCommand {
				t.Fatal("the command is only started when the state is not Deleting")
			}
		})
	}
}

// TestStepSeedSequences walks the seed's three diagrams through Step.
func TestStepSeedSequences(t *testing.T) {
	type obs struct {
		record   *Record
		presence Presence
		advance  time.Duration
	}
	run := func(t *testing.T, start State, steps []obs) []State {
		now, state, msg, b := t0, start, "", Backoff{}
		seen := []State{state}
		for _, o := range steps {
			now = now.Add(o.advance)
			r := Step(StepInput{Backup: "backup-b", State: state, Message: msg, Record: o.record, Presence: o.presence, Backoff: b, Now: now})
			if r.Finalize {
				return append(seen, "finalized")
			}
			if r.State != state {
				seen = append(seen, r.State)
			}
			state, msg, b = r.State, r.Message, r.Backoff
		}
		return seen
	}
	running, failed, done := &Record{State: RecordRunning}, &Record{State: RecordFailed, Err: "EPERM"}, &Record{State: RecordSucceeded}
	check := func(t *testing.T, got []State, want ...State) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("states %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("states %v, want %v", got, want)
			}
		}
	}
	t.Run("normal", func(t *testing.T) {
		check(t, run(t, StateCompleted, []obs{
			{},
			{record: running, presence: PresenceExists, advance: 2 * time.Second},
			{record: done, presence: PresenceAbsent, advance: 2 * time.Second},
		}), StateCompleted, StateDeleting, "finalized")
	})
	t.Run("command failure", func(t *testing.T) {
		check(t, run(t, StateCompleted, []obs{
			{},
			{record: failed, presence: PresenceExists, advance: 2 * time.Second},
			{record: failed, advance: 2 * time.Second},  // still in backoff: stays Error
			{record: failed, advance: 10 * time.Second}, // backoff over: retry
			{record: done, presence: PresenceAbsent, advance: 2 * time.Second},
		}), StateCompleted, StateDeleting, StateError, StateDeleting, "finalized")
	})
	t.Run("controller crash", func(t *testing.T) {
		check(t, run(t, StateDeleting, []obs{
			{presence: PresenceExists},
			{advance: 2 * time.Second},
			{record: done, presence: PresenceAbsent, advance: 2 * time.Second},
		}), StateDeleting, StateError, StateDeleting, "finalized")
	})
}

func TestBackoffNext(t *testing.T) {
	c := BackoffOptions{}
	var b Backoff
	var delays []time.Duration
	now := t0
	for range 6 {
		b = b.Next(now, c)
		delays = append(delays, b.Delay)
		now = now.Add(b.Delay)
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute, time.Minute}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	// Left alone for twice the maximum, it starts over.
	if got := b.Next(now.Add(2*time.Minute), c).Delay; got != 10*time.Second {
		t.Fatalf("after a long quiet, delay %v, want 10s", got)
	}
	// Longhorn's later 1 min .. 24 h is an option.
	lh := BackoffOptions{Initial: time.Minute, Max: 24 * time.Hour}
	if got := (Backoff{}).Next(t0, lh).Delay; got != time.Minute {
		t.Fatalf("custom initial %v", got)
	}
	if got := (Backoff{}).Until(t0); got != 0 {
		t.Fatalf("zero backoff holds for %v", got)
	}
}

// wantAt is the RequeueAt of a step at now that requeues after d: zero
// when it finalizes.
func wantAt(now time.Time, d time.Duration, finalize bool) time.Time {
	if finalize {
		return time.Time{}
	}
	return now.Add(d)
}
