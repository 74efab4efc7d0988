package rebuild

import (
	"encoding/json"
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
//   - no requeue and no kept attempt reaches past its bound.
func FuzzDecide(f *testing.F) {
	f.Add("v2", "ignored", "detached", "degraded", 3, uint8(2), uint8(0), uint8(1), true, true, false, true, 0, 5, int64(0), int64(0), 0)
	f.Add("v2", "enabled", "attached", "degraded", 3, uint8(1), uint8(1), uint8(1), false, false, true, false, 900, 2, int64(600), int64(-60), 7)
	f.Add("v1", "disabled", "weird", "faulted", -1, uint8(9), uint8(9), uint8(9), true, false, true, true, 1000, 1<<30, int64(-1), int64(1)<<40, -3)
	f.Fuzz(func(t *testing.T, engine, setting, state, robustness string, desired int, healthy, rebuilding, failed uint8,
		reuse, schedule, present, global bool, otherPriority, failures int, sinceStart, retryIn int64, failedRebuilds int) {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		v := Volume{Name: "vol", OwnerNode: "node-1", DataEngine: DataEngine(engine), Setting: VolumeSetting(setting),
			State: AttachState(state), Robustness: Robustness(robustness), DesiredReplicas: desired,
			CanReuseFailedReplica: reuse, CanScheduleReplica: schedule}
		for i := 0; i < int(healthy%8); i++ {
			v.Replicas = append(v.Replicas, Replica{State: ReplicaHealthy})
		}
		for i := 0; i < int(rebuilding%8); i++ {
			v.Replicas = append(v.Replicas, Replica{State: ReplicaRebuilding})
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
			FailedRebuilds: failedRebuilds}

		var p Planner
		d := p.Decide(Observation{Volume: v, Tickets: tickets, Global: global, Record: rec, Now: now})

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
			if !Enabled(global, v.Setting) || v.DataEngine != DataEngineV2 || v.Deleting || v.Robustness == RobustnessFaulted || !v.Degraded() {
				t.Fatalf("%s for %+v (global %v)", d.Action, v, global)
			}
		}
		if d.RequeueAfter < 0 || d.RequeueAfter > time.Hour {
			// Nothing waits beyond the largest bound (MaxBackoff, 1h), even
			// with a record from the future.
			t.Fatalf("requeue %s", d.RequeueAfter)
		}
		if d.Action == ActionKeep && d.Record.LastProgressAt.Add(10*time.Minute).Before(now) {
			t.Fatalf("kept past the stall timeout: %+v", d.Record)
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
		SawAttached: true, BestHealthy: 2, WasRebuilding: true, FailedRebuilds: 1, LastFailedAt: now}
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
	obs := Observation{Volume: degraded(), Global: true, Now: now, Record: attempt(),
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
