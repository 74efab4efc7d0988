package backupdelete

import (
	"math/rand"
	"testing"
	"time"
)

// naiveStep transcribes Longhorn's handleBackupDeletionInBackupStore
// (longhorn-manager controller/backup_controller.go) branch by branch, with
// this package's two documented refinements marked. It is the reference
// the property test holds Step to.
func naiveStep(in StepInput) (state State, msg string, start, finalize bool) {
	inFlight := in.Record != nil && in.Record.State == RecordRunning
	if in.State != StateDeleting {
		if inFlight { // refinement 1: no second command
			return StateDeleting, "", false, false
		}
		if !in.Backoff.LastStart.IsZero() && in.Now.Before(in.Backoff.LastStart.Add(in.Backoff.Delay)) {
			return in.State, in.Message, false, false // IsInBackOffSinceUpdate
		}
		return StateDeleting, "", true, false // start, then status Deleting
	}
	if in.Presence == PresenceUnknown {
		return StateDeleting, "", false, false // BackupGet failed: requeue
	}
	if in.Presence == PresenceExists {
		if in.Record == nil {
			return StateError, MessageNoDeletionRecord, false, false
		}
		if in.Record.State == RecordRunning {
			return StateDeleting, "", false, false
		}
		errText := in.Record.Err
		if in.Record.State == RecordSucceeded {
			errText = "the delete command returned but the backup still exists"
		}
		return StateError, FailedToDeleteMessage(in.Backup, errText), false, false
	}
	if inFlight { // refinement 2: finalize only after the command returned
		return StateDeleting, "", false, false
	}
	return StateDeleting, "", false, true
}

func randomInput(r *rand.Rand) StepInput {
	states := []State{StateNew, StatePending, StateInProgress, StateCompleted, StateError, StateUnknown, StateDeleting}
	in := StepInput{
		Backup:   "backup-x",
		State:    states[r.Intn(len(states))],
		Presence: Presence(r.Intn(3)),
		Now:      t0.Add(time.Duration(r.Intn(600)) * time.Second),
	}
	if r.Intn(3) > 0 {
		in.Message = []string{"", "old message", MessageNoDeletionRecord}[r.Intn(3)]
	}
	if k := r.Intn(4); k > 0 {
		in.Record = &Record{State: RecordState(k), Err: "boom"}
	}
	if r.Intn(2) == 0 {
		in.Backoff = Backoff{LastStart: t0.Add(time.Duration(r.Intn(600)) * time.Second), Delay: time.Duration(1+r.Intn(60)) * time.Second}
	}
	return in
}

// TestStepMatchesNaiveReference compares Step with the reference on random
// inputs (seeded, so a failure reproduces).
func TestStepMatchesNaiveReference(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := range 200000 {
		in := randomInput(r)
		got := Step(in)
		state, msg, start, finalize := naiveStep(in)
		if got.State != state || got.Message != msg || got.StartCommand != start || got.Finalize != finalize {
			t.Fatalf("case %d: Step(%+v) = %+v\nreference: %q %q start=%v finalize=%v", i, in, got, state, msg, start, finalize)
		}
		if !got.Finalize && !got.RequeueAt.After(in.Now) {
			t.Fatalf("case %d: no requeue without finalize: %+v", i, got)
		}
		if got.StartCommand && (got.Backoff.LastStart != in.Now || got.Backoff.Delay < DefaultBackoffInitial) {
			t.Fatalf("case %d: a start must stamp the backoff: %+v", i, got.Backoff)
		}
	}
}

// TestStepSimulation plays random reconciles, command results and
// controller crashes against Step and checks the invariants: one command
// at a time, never a start from Deleting, commands spaced by the backoff
// within one controller's life, finalize only when gone and idle, and once
// the store works again the backup is always finalized.
func TestStepSimulation(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for run := range 2000 {
		now := t0
		state, msg := StateCompleted, ""
		var rec *Record
		var b Backoff
		exists, inFlight, healed := true, false, false
		var lastStart time.Time
		finalized := false
		for i := 0; i < 400 && !finalized; i++ {
			if i == 200 {
				healed = true
			}
			switch op := r.Intn(10); {
			case op < 5: // reconcile
				presence := PresenceUnknown
				if state == StateDeleting {
					presence = PresenceAbsent
					if exists {
						presence = PresenceExists
					}
					if !healed && r.Intn(5) == 0 {
						presence = PresenceUnknown
					}
				}
				res := Step(StepInput{Backup: "b", State: state, Message: msg, Record: rec, Presence: presence, Backoff: b, Now: now})
				if res.StartCommand {
					if state == StateDeleting || inFlight {
						t.Fatalf("run %d: start from %q with a command in flight=%v", run, state, inFlight)
					}
					if !lastStart.IsZero() && now.Sub(lastStart) < DefaultBackoffInitial {
						t.Fatalf("run %d: commands %v apart", run, now.Sub(lastStart))
					}
					inFlight, lastStart = true, now
					rec = &Record{State: RecordRunning}
				}
				if res.Finalize {
					if exists || inFlight {
						t.Fatalf("run %d: finalized with exists=%v inFlight=%v", run, exists, inFlight)
					}
					finalized = true
				}
				if res.State == StateError && res.Message == "" || res.State == StateDeleting && res.Message != "" {
					t.Fatalf("run %d: state %q with message %q", run, res.State, res.Message)
				}
				state, msg, b = res.State, res.Message, res.Backoff
			case op < 8: // the command returns
				if inFlight {
					inFlight = false
					if healed || r.Intn(2) == 0 {
						exists = false
						rec = &Record{State: RecordSucceeded}
					} else {
						rec = &Record{State: RecordFailed, Err: "EPERM"}
					}
				}
			case op < 9: // time passes
				now = now.Add(time.Duration(1+r.Intn(30)) * time.Second)
			default: // the controller crashes: records and backoff are lost
				if !healed {
					rec, b, inFlight, lastStart = nil, Backoff{}, false, time.Time{}
				}
			}
		}
		for i := 0; i < 1000 && !finalized; i++ { // healed: drive to the end
			presence := PresenceUnknown
			if state == StateDeleting {
				presence = PresenceAbsent
				if exists {
					presence = PresenceExists
				}
			}
			res := Step(StepInput{Backup: "b", State: state, Message: msg, Record: rec, Presence: presence, Backoff: b, Now: now})
			if res.StartCommand {
				inFlight = true
			}
			if inFlight {
				inFlight, exists, rec = false, false, &Record{State: RecordSucceeded}
			}
			finalized = res.Finalize
			state, msg, b = res.State, res.Message, res.Backoff
			now = res.RequeueAt
		}
		if !finalized {
			t.Fatalf("run %d: never finalized once the store worked", run)
		}
	}
}
