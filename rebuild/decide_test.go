package rebuild

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// degraded returns a detached v2 volume with 2 of 3 replicas healthy and a
// failed one that can be reused.
func degraded() Volume {
	return Volume{
		Name: "vol", OwnerNode: "node-1", DataEngine: DataEngineV2, Setting: VolumeSettingIgnored,
		State: StateDetached, Robustness: RobustnessDegraded, DesiredReplicas: 3,
		Replicas: []Replica{
			{Name: "r1", State: ReplicaHealthy}, {Name: "r2", State: ReplicaHealthy},
			{Name: "r3", State: ReplicaFailed, LastFailedAt: t0.Add(-time.Hour)},
		},
		CanReuseFailedReplica: true, CanScheduleReplica: true,
	}
}

func ours() Ticket {
	return Ticket{ID: "volume-rebuilding-controller-vol", Type: AttacherType, NodeID: "node-1", Priority: 800, DisableFrontend: true}
}

func csi() Ticket {
	return Ticket{ID: "csi-pod", Type: "csi-attacher", NodeID: "node-2", Priority: 900}
}
func back() Ticket {
	return Ticket{ID: "backup-x", Type: "backup-controller", NodeID: "node-1", Priority: 800}
}

// attempt is the record of a ticket created at t0 for degraded().
func attempt() Record {
	return Record{AttemptStartedAt: t0, LastProgressAt: t0, BestHealthy: 2, LastFailedAt: t0.Add(-time.Hour)}
}

func TestDecide(t *testing.T) {
	type want struct {
		action   Action
		reason   string
		status   metav1.ConditionStatus
		required bool
		requeue  time.Duration // checked when non-zero
	}
	tests := []struct {
		name  string
		edit  func(*Input)
		want  want
		check func(t *testing.T, d Decision)
	}{
		// 1. Enablement and engines.
		{"v1 volume is not covered by default", func(o *Input) {
			o.Volume.DataEngine = DataEngineV1
			o.Tickets = []Ticket{ours()}
			o.Record = Record{Failures: 2}
		}, want{ActionDelete, ReasonDisabled, metav1.ConditionFalse, false, 0}, recordIs(Record{})},
		{"empty data engine is not covered", func(o *Input) { o.Volume.DataEngine = "" },
			want{ActionWait, ReasonDisabled, metav1.ConditionFalse, false, 0}, nil},
		{"global off, volume ignored", func(o *Input) { o.Global = false },
			want{ActionWait, ReasonDisabled, metav1.ConditionFalse, false, 0}, nil},
		{"global off, volume enabled", func(o *Input) { o.Global, o.Volume.Setting = false, VolumeSettingEnabled },
			want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 0}, nil},
		{"global on, volume disabled, ticket present", func(o *Input) {
			o.Volume.Setting = VolumeSettingDisabled
			o.Tickets = []Ticket{ours()}
		}, want{ActionDelete, ReasonDisabled, metav1.ConditionFalse, false, 0}, nil},
		{"unknown volume setting counts as disabled", func(o *Input) { o.Volume.Setting = "sometimes" },
			want{ActionWait, ReasonDisabled, metav1.ConditionFalse, false, 0}, nil},

		// 2. Deleting and faulted volumes.
		{"deleting with ticket", func(o *Input) {
			o.Volume.Deleting = true
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
		}, want{ActionDelete, ReasonVolumeDeleting, metav1.ConditionFalse, false, 0}, recordIs(Record{})},
		{"faulted with ticket keeps backoff", func(o *Input) {
			o.Volume.Robustness = RobustnessFaulted
			o.Tickets = []Ticket{ours()}
			o.Record = Record{Failures: 1, RetryAt: t0.Add(time.Minute), LastFailure: "x", AttemptStartedAt: t0}
		}, want{ActionDelete, ReasonVolumeFaulted, metav1.ConditionFalse, false, time.Minute},
			recordIs(Record{Failures: 1, RetryAt: t0.Add(time.Minute), LastFailure: "x"})},

		{"no healthy replica, robustness unknown: treated as faulted", func(o *Input) {
			o.Volume.Robustness = RobustnessUnknown
			o.Volume.Replicas = []Replica{{Name: "r1", State: ReplicaFailed}, {Name: "r2", State: ReplicaFailed}}
			o.Tickets = []Ticket{ours()}
		}, want{ActionDelete, ReasonVolumeFaulted, metav1.ConditionFalse, false, 0}, nil},

		// 3. Healthy volumes.
		{"healthy, no ticket", func(o *Input) { o.Volume.Replicas[2].State = ReplicaHealthy },
			want{ActionWait, ReasonHealthy, metav1.ConditionFalse, false, 0}, nil},
		{"rebuilt: ticket released, record forgotten", func(o *Input) {
			o.Volume.Replicas[2].State = ReplicaHealthy
			o.Volume.State = StateAttached
			o.Tickets = []Ticket{ours()}
			o.Record = Record{Failures: 3, AttemptStartedAt: t0}
		}, want{ActionDelete, ReasonCompleted, metav1.ConditionFalse, false, 0}, recordIs(Record{})},
		{"more healthy than desired is healthy", func(o *Input) {
			o.Volume.Replicas = append(o.Volume.Replicas, Replica{Name: "r4", State: ReplicaHealthy}, Replica{Name: "r5", State: ReplicaHealthy})
		}, want{ActionWait, ReasonHealthy, metav1.ConditionFalse, false, 0}, nil},
		{"no desired replicas is never degraded", func(o *Input) { o.Volume.DesiredReplicas = 0 },
			want{ActionWait, ReasonHealthy, metav1.ConditionFalse, false, 0}, nil},

		// 4. Higher-priority tickets.
		{"workload ticket interrupts the rebuild", func(o *Input) {
			o.Volume.State = StateAttached
			o.Tickets = []Ticket{ours(), csi()}
			o.Record = attempt()
		}, want{ActionDelete, ReasonInterrupted, metav1.ConditionFalse, true, 0}, func(t *testing.T, d Decision) {
			if d.Ticket.ID != ours().ID {
				t.Errorf("deletes %q, want the rebuilding ticket", d.Ticket.ID)
			}
			if !d.Record.AttemptStartedAt.IsZero() {
				t.Errorf("attempt not ended: %+v", d.Record)
			}
		}},
		{"workload ticket without ours: wait", func(o *Input) { o.Tickets = []Ticket{csi()} },
			want{ActionWait, ReasonWaitingForDetach, metav1.ConditionFalse, true, 0}, nil},
		{"equal priority ticket does not interrupt", func(o *Input) {
			o.Tickets = []Ticket{back(), ours()}
			o.Record = attempt()
		}, want{ActionKeep, ReasonAttaching, metav1.ConditionTrue, true, 0}, nil},
		{"lower priority ticket does not interrupt", func(o *Input) {
			o.Tickets = []Ticket{{ID: "low", Priority: 100}}
		}, want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 0}, nil},

		// 5. Degraded, no ticket.
		{"detached, degraded: create", nil, want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 10 * time.Minute},
			func(t *testing.T, d Decision) {
				if d.Ticket != ours() {
					t.Errorf("ticket %+v, want %+v", d.Ticket, ours())
				}
				if d.Record != attempt() {
					t.Errorf("record %+v, want %+v", d.Record, attempt())
				}
			}},
		{"only reuse possible: create", func(o *Input) { o.Volume.CanScheduleReplica = false },
			want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 0}, nil},
		{"only a new replica possible: create", func(o *Input) { o.Volume.CanReuseFailedReplica = false },
			want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 0}, nil},
		{"nothing schedulable: do not attach", func(o *Input) {
			o.Volume.CanReuseFailedReplica, o.Volume.CanScheduleReplica = false, false
		}, want{ActionWait, ReasonCannotProgress, metav1.ConditionFalse, true, time.Minute}, recordIs(Record{})},
		{"attached for someone else: wait", func(o *Input) { o.Volume.State = StateAttached },
			want{ActionWait, ReasonWaitingForDetach, metav1.ConditionFalse, true, 0}, nil},
		{"detaching: wait", func(o *Input) { o.Volume.State = StateDetaching },
			want{ActionWait, ReasonWaitingForDetach, metav1.ConditionFalse, true, 0}, nil},
		{"backing off", func(o *Input) {
			o.Record = Record{Failures: 2, RetryAt: t0.Add(90 * time.Second), LastFailure: "no progress"}
		}, want{ActionWait, ReasonBackingOff, metav1.ConditionFalse, true, 90 * time.Second}, func(t *testing.T, d Decision) {
			if !strings.Contains(d.Condition.Message, "2026-03-01T12:01:30Z") || !strings.Contains(d.Condition.Message, "no progress") {
				t.Errorf("message %q should name the retry time and the cause", d.Condition.Message)
			}
		}},
		{"backoff over: create, failures kept", func(o *Input) {
			o.Record = Record{Failures: 2, RetryAt: t0, LastFailure: "no progress"}
		}, want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 0}, func(t *testing.T, d Decision) {
			if d.Record.Failures != 2 || d.Record.AttemptStartedAt != t0 {
				t.Errorf("record %+v", d.Record)
			}
		}},

		{"backoff from the future is clamped to MaxBackoff", func(o *Input) {
			o.Record = Record{Failures: -5, RetryAt: t0.Add(48 * time.Hour)}
		}, want{ActionWait, ReasonBackingOff, metav1.ConditionFalse, true, time.Hour}, func(t *testing.T, d Decision) {
			if d.Record.RetryAt != t0.Add(time.Hour) || d.Record.Failures != maxFailures {
				t.Errorf("record %+v", d.Record)
			}
		}},

		// 6. Degraded, ticket present.
		{"progress from the future is clamped to now", func(o *Input) {
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.AttemptStartedAt, o.Record.LastProgressAt = t0.Add(24*time.Hour), t0.Add(24*time.Hour)
		}, want{ActionKeep, ReasonAttaching, metav1.ConditionTrue, true, 10 * time.Minute}, nil},
		{"ticket waiting for attachment: keep", func(o *Input) {
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Now = t0.Add(4 * time.Minute)
		}, want{ActionKeep, ReasonAttaching, metav1.ConditionTrue, true, 6 * time.Minute}, nil},
		{"attached, rebuilding: keep and note progress", func(o *Input) {
			o.Volume.State = StateAttached
			o.Volume.Replicas[2].State = ReplicaRebuilding
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Now = t0.Add(9 * time.Minute)
		}, want{ActionKeep, ReasonRebuilding, metav1.ConditionTrue, true, 10 * time.Minute}, func(t *testing.T, d Decision) {
			if !d.Record.SawAttached || !d.Record.WasRebuilding || d.Record.LastProgressAt != t0.Add(9*time.Minute) {
				t.Errorf("record %+v", d.Record)
			}
		}},
		{"ticket without record is adopted", func(o *Input) {
			o.Tickets = []Ticket{ours()}
		}, want{ActionKeep, ReasonAttaching, metav1.ConditionTrue, true, 10 * time.Minute}, func(t *testing.T, d Decision) {
			if d.Record.AttemptStartedAt != t0 {
				t.Errorf("record %+v: attempt should start now", d.Record)
			}
		}},
		{"owner moved before attach: re-create on the new node", func(o *Input) {
			o.Volume.OwnerNode = "node-9"
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
		}, want{ActionCreate, ReasonAttaching, metav1.ConditionTrue, true, 0}, func(t *testing.T, d Decision) {
			if d.Ticket.NodeID != "node-9" {
				t.Errorf("ticket node %q, want node-9", d.Ticket.NodeID)
			}
		}},
		{"one more healthy replica is progress", func(o *Input) {
			o.Volume.DesiredReplicas = 4
			o.Volume.Replicas[2].State = ReplicaHealthy
			o.Volume.State = StateAttached
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.SawAttached = true
			o.Now = t0.Add(5 * time.Minute)
		}, want{ActionKeep, ReasonRebuilding, metav1.ConditionTrue, true, 10 * time.Minute}, func(t *testing.T, d Decision) {
			if d.Record.BestHealthy != 3 {
				t.Errorf("record %+v", d.Record)
			}
		}},
		{"a replica failed while attached counts as a failed rebuild", func(o *Input) {
			o.Volume.State = StateAttached
			o.Volume.Replicas[2].LastFailedAt = t0.Add(time.Minute)
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.SawAttached, o.Record.WasRebuilding = true, true
			o.Now = t0.Add(2 * time.Minute)
		}, want{ActionKeep, ReasonRebuilding, metav1.ConditionTrue, true, 0}, func(t *testing.T, d Decision) {
			if d.Record.FailedRebuilds != 1 || d.Record.LastFailedAt != t0.Add(time.Minute) {
				t.Errorf("record %+v: want one failed rebuild", d.Record)
			}
		}},
		{"a failure before the attachment does not count", func(o *Input) {
			o.Volume.Replicas[2].LastFailedAt = t0.Add(time.Minute)
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Now = t0.Add(2 * time.Minute)
		}, want{ActionKeep, ReasonAttaching, metav1.ConditionTrue, true, 0}, func(t *testing.T, d Decision) {
			if d.Record.FailedRebuilds != 0 || d.Record.LastFailedAt != t0.Add(time.Minute) {
				t.Errorf("record %+v", d.Record)
			}
		}},
		{"without failure times, a rebuild that ends short is a failure", func(o *Input) {
			o.Volume.Replicas[2].LastFailedAt = time.Time{}
			o.Volume.State = StateAttached
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.LastFailedAt = time.Time{}
			o.Record.SawAttached, o.Record.WasRebuilding, o.Record.FailedRebuilds = true, true, 1
		}, want{ActionKeep, ReasonRebuilding, metav1.ConditionTrue, true, 0}, func(t *testing.T, d Decision) {
			if d.Record.FailedRebuilds != 2 {
				t.Errorf("record %+v: want two failed rebuilds", d.Record)
			}
		}},
		{"third failed rebuild: give up", func(o *Input) {
			o.Volume.State = StateAttached
			o.Volume.Replicas[2].LastFailedAt = t0.Add(time.Minute)
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.SawAttached, o.Record.FailedRebuilds = true, 2
			o.Now = t0.Add(2 * time.Minute)
		}, want{ActionDelete, ReasonCannotProgress, metav1.ConditionFalse, true, time.Minute}, func(t *testing.T, d Decision) {
			want := Record{Failures: 1, RetryAt: t0.Add(3 * time.Minute), LastFailure: "rebuilding failed 3 times"}
			if d.Record != want {
				t.Errorf("record %+v, want %+v", d.Record, want)
			}
		}},
		{"attached, nothing schedulable: give up at once", func(o *Input) {
			o.Volume.State = StateAttached
			o.Volume.CanReuseFailedReplica, o.Volume.CanScheduleReplica = false, false
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
		}, want{ActionDelete, ReasonCannotProgress, metav1.ConditionFalse, true, time.Minute}, nil},
		{"detached with ticket, nothing schedulable: give up before attaching", func(o *Input) {
			o.Volume.CanReuseFailedReplica, o.Volume.CanScheduleReplica = false, false
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
		}, want{ActionDelete, ReasonCannotProgress, metav1.ConditionFalse, true, 0}, nil},
		{"rebuilding while nothing else is schedulable: keep", func(o *Input) {
			o.Volume.State = StateAttached
			o.Volume.Replicas[2].State = ReplicaRebuilding
			o.Volume.CanReuseFailedReplica, o.Volume.CanScheduleReplica = false, false
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
		}, want{ActionKeep, ReasonRebuilding, metav1.ConditionTrue, true, 0}, nil},
		{"never attached within the stall timeout: give up", func(o *Input) {
			o.Volume.State = StateAttaching
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.Failures = 3
			o.Now = t0.Add(10 * time.Minute)
		}, want{ActionDelete, ReasonCannotProgress, metav1.ConditionFalse, true, 8 * time.Minute}, func(t *testing.T, d Decision) {
			if d.Record.Failures != 4 || !strings.Contains(d.Record.LastFailure, "no progress for 10m0s") {
				t.Errorf("record %+v", d.Record)
			}
		}},
		{"attached, idle past the stall timeout: give up", func(o *Input) {
			o.Volume.State = StateAttached
			o.Tickets = []Ticket{ours()}
			o.Record = attempt()
			o.Record.SawAttached = true
			o.Record.LastProgressAt = t0.Add(time.Minute)
			o.Now = t0.Add(11 * time.Minute)
		}, want{ActionDelete, ReasonCannotProgress, metav1.ConditionFalse, true, 0}, nil},
	}
	var p Planner
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := Input{Volume: degraded(), Global: true, Now: t0}
			if tt.edit != nil {
				tt.edit(&obs)
			}
			d := p.Decide(obs)
			if d.Action != tt.want.action || d.Condition.Reason != tt.want.reason || d.Condition.Status != tt.want.status || d.Required != tt.want.required {
				t.Fatalf("got %s %s=%s required=%v (%s); want %s %s=%s required=%v",
					d.Action, d.Condition.Reason, d.Condition.Status, d.Required, d.Condition.Message,
					tt.want.action, tt.want.reason, tt.want.status, tt.want.required)
			}
			if tt.want.requeue != 0 && d.RequeueAt.Sub(obs.Now) != tt.want.requeue {
				t.Errorf("RequeueAt %s after Now, want %s", d.RequeueAt.Sub(obs.Now), tt.want.requeue)
			}
			if d.Condition.Type != ConditionType || d.Condition.Message == "" || !d.Condition.LastTransitionTime.Time.Equal(obs.Now) {
				t.Errorf("condition %+v", d.Condition)
			}
			if d.Ticket.ID != TicketID("vol") {
				t.Errorf("decision names ticket %q, want the rebuilding ticket", d.Ticket.ID)
			}
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}

func recordIs(want Record) func(*testing.T, Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Record != want {
			t.Errorf("record %+v, want %+v", d.Record, want)
		}
	}
}

// TestDecideBackoffGrows gives up repeatedly and checks the waits double up
// to the cap.
func TestDecideBackoffGrows(t *testing.T) {
	p, err := NewPlanner(Options{InitialBackoff: time.Minute, MaxBackoff: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	now := t0
	var waits []time.Duration
	for i := 0; i < 5; i++ {
		obs := Input{Volume: degraded(), Global: true, Now: now, Record: rec, Tickets: []Ticket{ours()}}
		obs.Volume.State = StateAttached
		obs.Volume.CanReuseFailedReplica, obs.Volume.CanScheduleReplica = false, false
		d := p.Decide(obs)
		if d.Action != ActionDelete {
			t.Fatalf("attempt %d: %s, want delete", i, d.Action)
		}
		waits = append(waits, d.Record.RetryAt.Sub(now))
		rec, now = d.Record, d.Record.RetryAt
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

func TestBackoffExtremes(t *testing.T) {
	tests := []struct {
		failures     int
		initial, max time.Duration
		want         time.Duration
	}{
		{1, time.Minute, time.Hour, time.Minute},
		{7, time.Minute, time.Hour, time.Hour},
		{1 << 40, time.Minute, time.Hour, time.Hour},                                   // must not loop 2^40 times
		{64, time.Duration(1) << 62, time.Duration(1<<63 - 1), time.Duration(1) << 62}, // capped where doubling cannot overflow
		{64, time.Duration(1) << 61, time.Duration(1<<63 - 1), time.Duration(1) << 62},
		{3, time.Duration(1)<<62 - 1, time.Duration(1<<63 - 1), time.Duration(1) << 62},
		{0, time.Minute, time.Hour, 0}, // no failure yet: no wait (giveUp counts the failure first)
	}
	for _, tt := range tests {
		o := Options{InitialBackoff: tt.initial, MaxBackoff: tt.max}.withDefaults()
		if got := o.backoff().Delay(tt.failures); got != tt.want {
			t.Errorf("backoff after %d failures (%s up to %s) = %s, want %s", tt.failures, tt.initial, tt.max, got, tt.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"both engines", Options{DataEngines: []DataEngine{DataEngineV1, DataEngineV2}}, true},
		{"unknown engine", Options{DataEngines: []DataEngine{"v3"}}, false},
		{"priority at workload level", Options{Priority: 900}, false},
		{"priority above a custom workload level", Options{Priority: 500, WorkloadPriority: 400}, false},
		{"custom levels", Options{Priority: 300, WorkloadPriority: 400}, true},
		{"negative stall", Options{StallTimeout: -1}, false},
		{"negative failures", Options{MaxFailedRebuilds: -1}, false},
		{"initial above max", Options{InitialBackoff: 2 * time.Hour}, false},
		{"initial above explicit max", Options{InitialBackoff: time.Minute, MaxBackoff: time.Second}, false},
	}
	for _, tt := range tests {
		err := tt.o.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v does not wrap ErrInvalidOptions", tt.name, err)
		}
		if _, err := NewPlanner(tt.o); (err == nil) != tt.ok {
			t.Errorf("%s: NewPlanner error %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestOptionsCoverV1(t *testing.T) {
	p, err := NewPlanner(Options{DataEngines: []DataEngine{DataEngineV1, DataEngineV2}})
	if err != nil {
		t.Fatal(err)
	}
	v := degraded()
	v.DataEngine = DataEngineV1
	if d := p.Decide(Input{Volume: v, Global: true, Now: t0}); d.Action != ActionCreate {
		t.Fatalf("v1 volume with v1 covered: %s %s", d.Action, d.Condition.Message)
	}
}

func TestTicketID(t *testing.T) {
	if got := TicketID("pvc-1"); got != "volume-rebuilding-controller-pvc-1" {
		t.Errorf("TicketID = %q", got)
	}
	long := strings.Repeat("x", 300)
	if got := TicketID(long); len(got) != 253 || !strings.HasPrefix(got, "volume-rebuilding-controller-xxx") {
		t.Errorf("TicketID(300 x) has length %d", len(got))
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{ActionWait: "wait", ActionCreate: "create", ActionKeep: "keep", ActionDelete: "delete", Action(9): "Action(9)"} {
		if a.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(a), a.String(), want)
		}
	}
}
