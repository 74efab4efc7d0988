package rebuild

import (
	"math"
	"testing"
	"time"
)

// TestDecideHungRebuildReleases: a replica that stays "rebuilding" while
// nothing the host can observe moves must not keep the ticket. Decide is
// called every 30 s on a stepped clock with its own record fed back.
func TestDecideHungRebuildReleases(t *testing.T) {
	var p Planner
	obs := Input{Volume: degraded(), Global: true, Now: t0}
	dec := p.Decide(obs)
	if dec.Action != ActionCreate {
		t.Fatalf("first decision %s, want create", dec.Action)
	}
	obs.Tickets, obs.Record = []Ticket{dec.Ticket}, dec.Record
	obs.Volume.State = StateAttached
	obs.Volume.Replicas[2].State = ReplicaRebuilding
	attachedAt := t0.Add(30 * time.Second)
	for now := attachedAt; ; now = now.Add(30 * time.Second) {
		obs.Now = now
		dec = p.Decide(obs)
		obs.Record = dec.Record
		if dec.Action == ActionDelete {
			if held := now.Sub(attachedAt); held != 10*time.Minute {
				t.Fatalf("released after %s without progress, want exactly the stall timeout (10m)", held)
			}
			if dec.Condition.Reason != ReasonCannotProgress || dec.Record.RetryAt != now.Add(time.Minute) {
				t.Fatalf("release %s %q, record %+v: want CannotProgress and a 1m backoff", dec.Condition.Reason, dec.Condition.Message, dec.Record)
			}
			return
		}
		if now.Sub(attachedAt) > time.Hour {
			t.Fatalf("ticket still %s after %s of a rebuild that never moves", dec.Action, now.Sub(attachedAt))
		}
	}
}

// stallRun drives Decide on a ticket that is already attached, every 30 s,
// letting edit change the view before each decision, and returns how long
// after the attachment the ticket was released (or -1 if it was still held
// after limit).
func stallRun(t *testing.T, limit time.Duration, edit func(step int, v *Volume)) time.Duration {
	t.Helper()
	var p Planner
	obs := Input{Volume: degraded(), Global: true, Now: t0}
	dec := p.Decide(obs)
	obs.Tickets, obs.Record = []Ticket{dec.Ticket}, dec.Record
	attachedAt := t0.Add(30 * time.Second)
	for step := 0; ; step++ {
		obs.Now = attachedAt.Add(time.Duration(step) * 30 * time.Second)
		obs.Volume = degraded()
		obs.Volume.State = StateAttached
		obs.Volume.Replicas[2].State = ReplicaRebuilding
		edit(step, &obs.Volume)
		dec = p.Decide(obs)
		obs.Record = dec.Record
		switch dec.Action {
		case ActionDelete:
			if dec.Condition.Reason != ReasonCannotProgress {
				t.Fatalf("released with %s: %s", dec.Condition.Reason, dec.Condition.Message)
			}
			return obs.Now.Sub(attachedAt)
		case ActionKeep:
		default:
			t.Fatalf("step %d: %s, want keep or delete", step, dec.Action)
		}
		if obs.Now.Sub(attachedAt) >= limit {
			return -1
		}
	}
}

func TestDecideStallBound(t *testing.T) {
	const stall = 10 * time.Minute
	tests := []struct {
		name string
		edit func(step int, v *Volume)
		want time.Duration // -1: still held at the limit (2h)
	}{
		{"progress grows every step: kept", func(step int, v *Volume) {
			v.Replicas[2].RebuildProgress = int64(step)
		}, -1},
		{"progress stops at 40%: released 10m after the last rise", func(step int, v *Volume) {
			v.Replicas[2].RebuildProgress = int64(min(step, 40))
		}, 40*30*time.Second + stall},
		{"progress flaps between 0 and 40: only the first 40 counts", func(step int, v *Volume) {
			v.Replicas[2].RebuildProgress = int64(40 * (step % 2))
		}, 30*time.Second + stall},
		{"progress stuck at 100 while still rebuilding: released", func(step int, v *Volume) {
			v.Replicas[2].RebuildProgress = 100
		}, stall},
		{"progress on a replica that is not rebuilding is not progress", func(step int, v *Volume) {
			v.Replicas[2].State = ReplicaFailed
			v.Replicas[2].LastFailedAt = t0.Add(-time.Hour)
			v.Replicas[1].RebuildProgress = int64(step)
		}, stall},
		{"negative progress counts as zero", func(step int, v *Volume) {
			v.Replicas[2].RebuildProgress = -int64(step)
		}, stall},
		{"overflowing progress saturates: no rise after the cap", func(step int, v *Volume) {
			v.Replicas = append(v.Replicas, Replica{Name: "r4", State: ReplicaRebuilding, RebuildProgress: math.MaxInt64})
			v.Replicas[2].RebuildProgress = int64(step)
		}, stall},
		{"healthy count flaps below its best: not progress", func(step int, v *Volume) {
			if step%2 == 1 {
				v.Replicas[1].State = ReplicaFailed
			}
		}, stall},
		{"attachment flaps: only the first attachment counts", func(step int, v *Volume) {
			if step%2 == 1 {
				v.State = StateAttaching
			}
		}, stall},
		{"rebuilding flaps without failure times: failures bound it", func(step int, v *Volume) {
			v.Replicas[2].LastFailedAt = time.Time{}
			if step%2 == 1 {
				v.Replicas[2].State = ReplicaFailed
			}
		}, 5 * 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stallRun(t, 2*time.Hour, tt.edit); got != tt.want {
				t.Fatalf("released after %s, want %s", got, tt.want)
			}
		})
	}
}

// TestDecideFailedRebuildRestartsProgress: after a counted failed rebuild,
// the next rebuild's progress from zero is progress again (failures are
// bounded by MaxFailedRebuilds), and a replica that became healthy resets
// the mark for the next replica's rebuild.
func TestDecideFailedRebuildRestartsProgress(t *testing.T) {
	base := attempt()
	base.SawAttached, base.WasRebuilding, base.BestProgress = true, true, 80
	tests := []struct {
		name         string
		edit         func(v *Volume)
		wantProgress bool
		wantBest     int64
	}{
		{"same rebuild falls back: no progress", func(v *Volume) { v.Replicas[2].RebuildProgress = 10 }, false, 80},
		{"same rebuild rises past the mark", func(v *Volume) { v.Replicas[2].RebuildProgress = 81 }, true, 81},
		{"failed and restarted: new baseline", func(v *Volume) {
			v.Replicas[2].RebuildProgress = 0
			v.Replicas[2].LastFailedAt = t0.Add(time.Minute)
		}, false, 0},
		{"another replica healthy: new baseline and progress", func(v *Volume) {
			v.DesiredReplicas = 4
			v.Replicas[2].State = ReplicaHealthy
			v.Replicas = append(v.Replicas, Replica{Name: "r4", State: ReplicaRebuilding, RebuildProgress: 5})
		}, true, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := Input{Volume: degraded(), Global: true, Now: t0.Add(5 * time.Minute), Record: base, Tickets: []Ticket{ours()}}
			obs.Volume.State = StateAttached
			obs.Volume.Replicas[2].State = ReplicaRebuilding
			tt.edit(&obs.Volume)
			d := (Planner{}).Decide(obs)
			if d.Action != ActionKeep {
				t.Fatalf("%s (%s), want keep", d.Action, d.Condition.Message)
			}
			if got := d.Record.LastProgressAt.Equal(obs.Now); got != tt.wantProgress || d.Record.BestProgress != tt.wantBest {
				t.Fatalf("record %+v: want progress=%v best=%d", d.Record, tt.wantProgress, tt.wantBest)
			}
		})
	}
}

// TestDecideProgressBeforeAttemptIsNotProgress: a rebuild status left over
// from before the ticket (or an adopted ticket) is the baseline, not a rise.
func TestDecideProgressBeforeAttemptIsNotProgress(t *testing.T) {
	v := degraded()
	v.State = StateAttached
	v.Replicas[2].State = ReplicaRebuilding
	v.Replicas[2].RebuildProgress = 70
	var p Planner
	// An adopted ticket (no record): the attempt starts now with 70 as its mark.
	d := p.Decide(Input{Volume: v, Global: true, Now: t0, Tickets: []Ticket{ours()}})
	if d.Record.BestProgress != 70 {
		t.Fatalf("adopted attempt record %+v: want BestProgress 70", d.Record)
	}
	d = p.Decide(Input{Volume: v, Global: true, Now: t0.Add(10 * time.Minute), Tickets: []Ticket{ours()}, Record: d.Record})
	if d.Action != ActionDelete {
		t.Fatalf("stale 70%% kept the ticket: %s %s", d.Action, d.Condition.Message)
	}
}

func TestVolumeRebuildProgress(t *testing.T) {
	tests := []struct {
		replicas []Replica
		want     int64
	}{
		{nil, 0},
		{[]Replica{{State: ReplicaRebuilding, RebuildProgress: 30}, {State: ReplicaRebuilding, RebuildProgress: 12}}, 42},
		{[]Replica{{State: ReplicaHealthy, RebuildProgress: 100}, {State: ReplicaFailed, RebuildProgress: 50}}, 0},
		{[]Replica{{State: ReplicaRebuilding, RebuildProgress: -90}, {State: ReplicaRebuilding, RebuildProgress: 5}}, 5},
		{[]Replica{{State: ReplicaRebuilding, RebuildProgress: math.MaxInt64}, {State: ReplicaRebuilding, RebuildProgress: 1}}, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := (Volume{Replicas: tt.replicas}).RebuildProgress(); got != tt.want {
			t.Errorf("%+v: RebuildProgress() = %d, want %d", tt.replicas, got, tt.want)
		}
	}
}
