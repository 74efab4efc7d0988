package rebuild

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"
)

// FuzzDecide builds arbitrary observations, including nonsense (unknown
// states, negative counts, records from the future), and checks the safety
// rules that must hold for any input:
//   - Decide does not panic;
//   - a created ticket is the rebuilding ticket, below workload priority,
//     with the frontend disabled, on the owner node;
//   - nothing is created or kept while a higher-priority ticket exists,
//     while rebuilding is disabled, or while the volume is deleting,
//     faulted or not degraded;
//   - a ticket is only created for a detached volume;
//   - delete and keep are only returned when the ticket exists;
//   - no requeue and no kept attempt reaches past its bound;
//   - the stall clock does not move without observable progress: a replica
//     staying "rebuilding" at or below the recorded best progress, with no
//     new healthy high and no new failure, leaves LastProgressAt alone.
func FuzzDecide(f *testing.F) {
	f.Add("v2", "ignored", "detached", "degraded", 3, uint8(2), uint8(0), uint8(1), true, true, false, true, 0, 5, int64(0), int64(0), 0, int64(0), int64(0), false)
	f.Add("v2", "enabled", "attached", "degraded", 3, uint8(1), uint8(1), uint8(1), false, false, true, false, 900, 2, int64(600), int64(-60), 7, int64(40), int64(40), true)
	f.Add("v2", "ignored", "attached", "degraded", 3, uint8(1), uint8(1), uint8(1), false, false, true, true, 0, 0, int64(300), int64(0), 0, int64(40), int64(40), true)
	f.Add("v2", "ignored", "attached", "degraded", 3, uint8(2), uint8(2), uint8(0), true, true, true, true, 0, 0, int64(300), int64(0), 0, int64(1)<<62, int64(-5), true)
	f.Add("v1", "disabled", "weird", "faulted", -1, uint8(9), uint8(9), uint8(9), true, false, true, true, 1000, 1<<30, int64(-1), int64(1)<<40, -3, int64(-7), int64(1)<<62, false)
	f.Fuzz(func(t *testing.T, engine, setting, state, robustness string, desired int, healthy, rebuilding, failed uint8,
		reuse, schedule, present, global bool, otherPriority, failures int, sinceStart, retryIn int64, failedRebuilds int,
		progress, bestProgress int64, sawAttached bool) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		v := Volume{Name: "vol", OwnerNode: "node-1", DataEngine: DataEngine(engine), Setting: VolumeSetting(setting),
			State: AttachState(state), Robustness: Robustness(robustness), DesiredReplicas: desired,
			CanReuseFailedReplica: reuse, CanScheduleReplica: schedule}
		for i := 0; i < int(healthy%8); i++ {
			v.Replicas = append(v.Replicas, Replica{State: ReplicaHealthy})
		}
		for i := 0; i < int(rebuilding%8); i++ {
			v.Replicas = append(v.Replicas, Replica{State: ReplicaRebuilding, RebuildProgress: progress})
		}
		for i := 0; i < int(failed%8); i++ {
			v.Replicas = append(v.Replicas, Replica{State: ReplicaFailed, LastFailedAt: now.Add(-time.Duration(i) * time.Minute)})
		}
		var tickets []Ticket
		if otherPriority != 0 {
			tickets = append(tickets, Ticket{ID: "other", Priority: otherPriority})
		}
		if present {
			tickets = append(tickets, Ticket{ID: TicketID("vol"), Priority: DefaultPriority, NodeID: "node-0", DisableFrontend: true})
		}
		rec := Record{Failures: failures, RetryAt: now.Add(time.Duration(retryIn) * time.Second),
			AttemptStartedAt: now.Add(-time.Duration(sinceStart) * time.Second), LastProgressAt: now.Add(-time.Duration(sinceStart) * time.Second),
			FailedRebuilds: failedRebuilds, BestProgress: bestProgress, SawAttached: sawAttached,
			BestHealthy: int(healthy % 8), LastFailedAt: now}

		var p Planner
		d := p.Decide(Input{Volume: v, Tickets: tickets, Global: global, Record: rec, Now: now})

		if d.Action == ActionCreate {
			tk := d.Ticket
			if tk.ID != TicketID("vol") || tk.Priority >= DefaultWorkloadPriority || !tk.DisableFrontend || tk.NodeID != "node-1" || tk.Type != AttacherType {
				t.Fatalf("created ticket %+v", tk)
			}
			if !present && v.State != StateDetached {
				t.Fatalf("created a ticket for a %q volume", v.State)
			}
		}
		if (d.Action == ActionDelete || d.Action == ActionKeep) && !present {
			t.Fatalf("%s without a ticket", d.Action)
		}
		if d.Action == ActionWait && present {
			t.Fatalf("wait while the ticket exists: it must be kept or deleted")
		}
		if d.Action == ActionCreate || d.Action == ActionKeep {
			if otherPriority > DefaultPriority {
				t.Fatalf("%s next to a ticket of priority %d", d.Action, otherPriority)
			}
			if !Enabled(global, v.Setting) || v.DataEngine != DataEngineV2 || v.Deleting || v.Robustness == RobustnessFaulted || !v.Degraded() || v.HealthyReplicas() == 0 {
				t.Fatalf("%s for %+v (global %v)", d.Action, v, global)
			}
		}
		if after := d.RequeueAt.Sub(now); !d.RequeueAt.IsZero() && (after < 0 || after > time.Hour) {
			// Nothing waits beyond the largest bound (MaxBackoff, 1h), even
			// with a record from the future, and nothing asks for the past.
			t.Fatalf("requeue %s after now", after)
		}
		if d.Action == ActionKeep && d.Record.LastProgressAt.Add(10*time.Minute).Before(now) {
			t.Fatalf("kept past the stall timeout: %+v", d.Record)
		}
		if d.Action == ActionKeep && sinceStart > 0 && sawAttached && v.RebuildProgress() <= max(bestProgress, 0) &&
			!d.Record.LastProgressAt.Equal(rec.LastProgressAt) {
			// Nothing observable moved (healthy is at its recorded best, no
			// failure is newer than the recorded one, the attachment was
			// seen before): being "rebuilding" must not restart the clock.
			t.Fatalf("stall clock moved from %s to %s without progress (progress %d, best %d)",
				rec.LastProgressAt, d.Record.LastProgressAt, v.RebuildProgress(), bestProgress)
		}
		if d.Condition.Type != ConditionType || d.Condition.Reason == "" {
			t.Fatalf("condition %+v", d.Condition)
		}
	})
}

// TestRecordJSON: hosts may keep the record in a status field; it must
// survive a round trip and take no room when empty.
func TestRecordJSON(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := Record{Failures: 2, RetryAt: now, LastFailure: "no progress for 10m0s", AttemptStartedAt: now, LastProgressAt: now,
		SawAttached: true, BestHealthy: 2, BestProgress: 66, WasRebuilding: true, FailedRebuilds: 1, LastFailedAt: now}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != rec {
		t.Fatalf("round trip: %+v != %+v", back, rec)
	}
	if b, _ := json.Marshal(Record{}); string(b) != "{}" {
		t.Fatalf("empty record encodes as %s", b)
	}
}

// BenchmarkDecide measures one decision for a degraded volume with a ticket.
func BenchmarkDecide(b *testing.B) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	obs := Input{Volume: degraded(), Global: true, Now: now, Record: attempt(),
		Tickets: []Ticket{ours(), back(), {ID: "snap", Priority: 800}}}
	obs.Volume.State = StateAttached
	obs.Volume.Replicas[2].State = ReplicaRebuilding
	var p Planner
	b.ReportAllocs()
	for b.Loop() {
		if d := p.Decide(obs); d.Action != ActionKeep {
			b.Fatal(d.Action)
		}
	}
}

// referenceAction is a naive restatement of Decide's rules, written from the
// package documentation rather than the code: which actions are allowed
// for an observation. For a present ticket on a degraded volume it allows
// keep, give up (delete), and re-create on a moved owner, since choosing
// among them needs the record.
func referenceAction(obs Input) []Action {
	v := obs.Volume
	var present bool
	higher := false
	for _, t := range obs.Tickets {
		if t.ID == "volume-rebuilding-controller-"+v.Name {
			present = true
		} else if t.Priority > 800 {
			higher = true
		}
	}
	healthy := 0
	for _, r := range v.Replicas {
		if r.State == "healthy" {
			healthy++
		}
	}
	enabled := v.Setting == "enabled" || obs.Global && (v.Setting == "ignored" || v.Setting == "")
	off := v.DataEngine != "v2" || !enabled || v.Deleting || v.Robustness == "faulted" || healthy == 0 ||
		v.DesiredReplicas <= 0 || healthy >= v.DesiredReplicas || higher
	switch {
	case off && present:
		return []Action{ActionDelete}
	case off:
		return []Action{ActionWait}
	case present:
		return []Action{ActionKeep, ActionDelete, ActionCreate}
	case obs.Now.Before(obs.Record.RetryAt) || v.State != "detached" || !v.CanReuseFailedReplica && !v.CanScheduleReplica:
		return []Action{ActionWait}
	}
	return []Action{ActionCreate}
}

// TestDecideMatchesReference compares Decide with referenceAction on
// random observations (seeded, so a failure reproduces).
func TestDecideMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pick := func(xs ...string) string { return xs[rng.Intn(len(xs))] }
	var p Planner
	for i := 0; i < 20000; i++ {
		v := Volume{Name: "vol", OwnerNode: pick("node-1", "node-2"), DataEngine: DataEngine(pick("v1", "v2", "v2", "")),
			Setting: VolumeSetting(pick("", "ignored", "enabled", "disabled", "junk")), State: AttachState(pick("detached", "attaching", "attached", "detaching")),
			Robustness: Robustness(pick("healthy", "degraded", "faulted", "unknown")), Deleting: rng.Intn(8) == 0,
			DesiredReplicas: rng.Intn(5) - 1, CanReuseFailedReplica: rng.Intn(2) == 0, CanScheduleReplica: rng.Intn(2) == 0}
		for n := rng.Intn(5); n > 0; n-- {
			v.Replicas = append(v.Replicas, Replica{State: ReplicaState(pick("healthy", "healthy", "rebuilding", "failed")),
				LastFailedAt: now.Add(-time.Duration(rng.Intn(30)) * time.Minute)})
		}
		var tickets []Ticket
		for n := rng.Intn(3); n > 0; n-- {
			tickets = append(tickets, Ticket{ID: pick("csi-a", "api-b", "backup-c"), Priority: []int{100, 800, 900, 1000}[rng.Intn(4)]})
		}
		if rng.Intn(2) == 0 {
			tickets = append(tickets, Ticket{ID: TicketID("vol"), Priority: 800, NodeID: pick("node-1", "node-2"), DisableFrontend: true})
		}
		rec := Record{}
		if rng.Intn(2) == 0 {
			rec = Record{Failures: rng.Intn(4), RetryAt: now.Add(time.Duration(rng.Intn(7)-3) * time.Minute),
				AttemptStartedAt: now.Add(-time.Duration(rng.Intn(20)) * time.Minute), SawAttached: rng.Intn(2) == 0,
				WasRebuilding: rng.Intn(2) == 0, BestHealthy: rng.Intn(4), FailedRebuilds: rng.Intn(4)}
			rec.LastProgressAt = rec.AttemptStartedAt.Add(time.Duration(rng.Intn(10)) * time.Minute)
		}
		obs := Input{Volume: v, Tickets: tickets, Global: rng.Intn(2) == 0, Record: rec, Now: now}
		got := p.Decide(obs)
		allowed := referenceAction(obs)
		ok := false
		for _, a := range allowed {
			ok = ok || a == got.Action
		}
		if !ok {
			t.Fatalf("case %d: Decide = %s (%s: %s), reference allows %v\nobservation %+v", i, got.Action, got.Condition.Reason, got.Condition.Message, allowed, obs)
		}
	}
}
