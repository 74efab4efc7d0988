package rebuild_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/rebuildtest"
)

// The simulations follow seed 003's integration test: a degraded volume's
// whole life in a small cluster whose attachment controller attaches for
// the highest-priority ticket.

const simVol = "vol"

func newSim(t *testing.T, opts rebuild.Options) *rebuildtest.Sim {
	t.Helper()
	sim, err := rebuildtest.NewSim(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Cluster.CreateVolume(rebuildtest.VolumeSpec{Name: simVol, OwnerNode: "node-1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("timeline:\n%s", strings.Join(sim.Lines(), "\n"))
		}
	})
	return sim
}

// stepUntil steps until cond holds on the volume, at most max steps.
func stepUntil(t *testing.T, sim *rebuildtest.Sim, what string, max int, cond func(rebuildtest.VolumeState) bool) {
	t.Helper()
	ok, err := sim.RunUntil(context.Background(), max, func() bool { return cond(sim.Cluster.Inspect(simVol)) })
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("%s: not reached within %d steps; volume %+v", what, max, sim.Cluster.Inspect(simVol))
	}
}

func step(t *testing.T, sim *rebuildtest.Sim, n int) {
	t.Helper()
	if err := sim.Run(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ourTicket(s rebuildtest.VolumeState) (rebuild.Ticket, bool) {
	for _, tk := range s.Tickets {
		if tk.ID == rebuild.TicketID(simVol) {
			return tk, true
		}
	}
	return rebuild.Ticket{}, false
}

func hasOurTicket(s rebuildtest.VolumeState) bool { _, ok := ourTicket(s); return ok }

func reason(sim *rebuildtest.Sim) string { return sim.Cluster.Inspect(simVol).Status.Condition.Reason }

func TestSimLifecycle(t *testing.T) {
	sim := newSim(t, rebuild.Options{})
	c := sim.Cluster

	// Created healthy and detached: nothing to do.
	step(t, sim, 2)
	if s := c.Inspect(simVol); hasOurTicket(s) || s.Status.Required || s.Status.Condition.Reason != rebuild.ReasonHealthy {
		t.Fatalf("healthy new volume: %+v", s)
	}

	// A pod attaches it.
	must(t, c.Attach(simVol, "csi-pod", "node-1", rebuildtest.PriorityCSI))
	stepUntil(t, sim, "pod attachment", 5, func(s rebuildtest.VolumeState) bool {
		return s.State == rebuild.StateAttached && s.AttachedFor == "csi-pod"
	})

	// A replica is lost while the pod uses the volume: required, but wait.
	must(t, c.LoseReplica(simVol))
	step(t, sim, 4)
	if s := c.Inspect(simVol); hasOurTicket(s) || !s.Status.Required || s.Status.Condition.Reason != rebuild.ReasonWaitingForDetach || s.AttachedFor != "csi-pod" {
		t.Fatalf("degraded while in use: %+v", s)
	}

	// The pod goes: the volume detaches, then attaches in maintenance mode
	// for the rebuilding ticket on the owner node.
	must(t, c.Detach(simVol, "csi-pod"))
	stepUntil(t, sim, "maintenance attachment", 10, func(s rebuildtest.VolumeState) bool {
		return s.State == rebuild.StateAttached && s.AttachedFor == rebuild.TicketID(simVol)
	})
	s := c.Inspect(simVol)
	tk, _ := ourTicket(s)
	if !s.Maintenance || !tk.DisableFrontend || tk.NodeID != "node-1" || tk.Priority != rebuild.DefaultPriority || tk.Type != rebuild.AttacherType {
		t.Fatalf("maintenance attachment: %+v, ticket %+v", s, tk)
	}

	// It rebuilds, releases the ticket, and detaches again.
	stepUntil(t, sim, "rebuild and detach", 15, func(s rebuildtest.VolumeState) bool {
		return s.State == rebuild.StateDetached && !hasOurTicket(s)
	})
	s = c.Inspect(simVol)
	if s.Healthy != 3 || s.Status.Required || len(s.Tickets) != 0 {
		t.Fatalf("after the rebuild: %+v", s)
	}
	if !timelineHas(sim, rebuild.ReasonCompleted) || !timelineHas(sim, "OfflineRebuilding=True Rebuilding") {
		t.Errorf("timeline misses the rebuild")
	}
	step(t, sim, 2)
	if reason(sim) != rebuild.ReasonHealthy {
		t.Errorf("reason %q after the rebuild, want Healthy", reason(sim))
	}

	// Deletion of a healthy volume.
	must(t, c.DeleteVolume(simVol))
	stepUntil(t, sim, "removal", 5, func(s rebuildtest.VolumeState) bool { return !s.Exists })
	step(t, sim, 1)
	if rec := sim.Driver.Record(simVol); rec != (rebuild.Record{}) {
		t.Errorf("record kept after deletion: %+v", rec)
	}
}

func TestSimUserAttachInterruptsRebuild(t *testing.T) {
	sim := newSim(t, rebuild.Options{})
	c := sim.Cluster
	must(t, c.LoseReplica(simVol))
	stepUntil(t, sim, "rebuild start", 5, func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })

	must(t, c.Attach(simVol, "longhorn-ui", "node-2", rebuildtest.PriorityAPI))
	step(t, sim, 1)
	if s := c.Inspect(simVol); hasOurTicket(s) || s.Status.Condition.Reason != rebuild.ReasonInterrupted || !s.Status.Required {
		t.Fatalf("one step after the user attached: %+v", s)
	}
	stepUntil(t, sim, "user attachment", 5, func(s rebuildtest.VolumeState) bool {
		return s.State == rebuild.StateAttached && s.AttachedFor == "longhorn-ui"
	})
	// The user has the volume with its frontend; the rebuild was stopped
	// and is not restarted while the user holds it.
	for i := 0; i < 10; i++ {
		step(t, sim, 1)
		if s := c.Inspect(simVol); hasOurTicket(s) || s.Maintenance || s.Rebuilding > 0 || s.AttachedFor != "longhorn-ui" {
			t.Fatalf("while the user holds the volume: %+v", s)
		}
	}

	must(t, c.Detach(simVol, "longhorn-ui"))
	stepUntil(t, sim, "rebuild resumes and completes", 20, func(s rebuildtest.VolumeState) bool {
		return s.Healthy == 3 && s.State == rebuild.StateDetached && len(s.Tickets) == 0
	})
}

// TestSimEqualPriorityWaits: a backup ticket (800, like ours) does not
// interrupt the rebuild; the attachment controller keeps serving ours.
func TestSimEqualPriorityWaits(t *testing.T) {
	sim := newSim(t, rebuild.Options{})
	c := sim.Cluster
	must(t, c.LoseReplica(simVol))
	stepUntil(t, sim, "rebuild start", 5, func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })
	must(t, c.Attach(simVol, "backup-controller-b1", "node-1", rebuild.DefaultPriority))
	stepUntil(t, sim, "rebuild completes", 10, func(s rebuildtest.VolumeState) bool { return s.Healthy == 3 })
	if timelineHas(sim, rebuild.ReasonInterrupted) {
		t.Error("an equal-priority ticket interrupted the rebuild")
	}
}

func TestSimDeleteMidRebuild(t *testing.T) {
	sim := newSim(t, rebuild.Options{})
	c := sim.Cluster
	must(t, c.LoseReplica(simVol))
	stepUntil(t, sim, "rebuild start", 5, func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })

	must(t, c.DeleteVolume(simVol))
	step(t, sim, 1)
	s := c.Inspect(simVol)
	if s.Exists && (hasOurTicket(s) || s.Status.Condition.Reason != rebuild.ReasonVolumeDeleting) {
		t.Fatalf("one step after deletion: %+v", s)
	}
	stepUntil(t, sim, "removal", 5, func(s rebuildtest.VolumeState) bool { return !s.Exists })
	step(t, sim, 1)
	if rec := sim.Driver.Record(simVol); rec != (rebuild.Record{}) {
		t.Errorf("record kept after deletion: %+v", rec)
	}
	if tickets, _ := c.Tickets(context.Background(), simVol); len(tickets) != 0 {
		t.Errorf("tickets left: %+v", tickets)
	}
	if !timelineHas(sim, "driver: volume gone") {
		t.Error("the driver never saw the volume gone")
	}
}

// TestSimNeverStuck is the failure Longhorn users hit: rebuilding cannot
// progress, and the ticket must not keep the volume attached.
func TestSimNeverStuck(t *testing.T) {
	sim := newSim(t, rebuild.Options{})
	c := sim.Cluster

	t.Run("rebuilds keep failing", func(t *testing.T) {
		must(t, c.SetFailRebuilds(simVol, true))
		must(t, c.LoseReplica(simVol))
		stepUntil(t, sim, "give up", 30, func(rebuildtest.VolumeState) bool { return reason(sim) == rebuild.ReasonCannotProgress })
		stepUntil(t, sim, "detach", 3, func(s rebuildtest.VolumeState) bool { return s.State == rebuild.StateDetached })
		if rec := sim.Driver.Record(simVol); rec.Failures != 1 || rec.LastFailure != "rebuilding failed 3 times" {
			t.Fatalf("record %+v", rec)
		}
		// Each later attempt waits longer: 1m, 2m, 4m between give-up and retry.
		var gaps []time.Duration
		for i := 0; i < 3; i++ {
			gaveUp := sim.Elapsed()
			stepUntil(t, sim, "retry", 40, hasOurTicket)
			gaps = append(gaps, sim.Elapsed()-gaveUp)
			stepUntil(t, sim, "give up again", 40, func(s rebuildtest.VolumeState) bool { return !hasOurTicket(s) })
		}
		for i := 1; i < len(gaps); i++ {
			if gaps[i] <= gaps[i-1] {
				t.Fatalf("backoff does not grow: %v", gaps)
			}
		}
	})

	t.Run("nothing can be scheduled", func(t *testing.T) {
		must(t, c.SetFailRebuilds(simVol, false))
		must(t, c.SetSchedulable(simVol, false))
		stepUntil(t, sim, "released", 40, func(s rebuildtest.VolumeState) bool {
			return !hasOurTicket(s) && s.State == rebuild.StateDetached
		})
		for i := 0; i < 200; i++ { // 100 minutes: past any backoff
			step(t, sim, 1)
			if s := c.Inspect(simVol); hasOurTicket(s) || s.State != rebuild.StateDetached {
				t.Fatalf("attached although nothing can be scheduled: %+v", s)
			}
		}
		must(t, c.SetSchedulable(simVol, true))
		stepUntil(t, sim, "rebuild", 10, func(s rebuildtest.VolumeState) bool {
			return s.Healthy == 3 && s.State == rebuild.StateDetached && len(s.Tickets) == 0
		})
	})

	t.Run("a rebuild hangs", func(t *testing.T) {
		// The replica stays "rebuilding" and its progress never moves: the
		// ticket goes within the stall timeout of the attachment, the volume
		// detaches, and the next attempt waits for the backoff.
		must(t, c.SetSchedulable(simVol, true))
		must(t, c.SetHangRebuilds(simVol, true))
		must(t, c.LoseReplica(simVol))
		stepUntil(t, sim, "hung rebuild", 10, func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })
		hungAt := sim.Elapsed()
		stepUntil(t, sim, "released", 40, func(s rebuildtest.VolumeState) bool {
			return !hasOurTicket(s) && s.State == rebuild.StateDetached
		})
		if held := sim.Elapsed() - hungAt; held > 10*time.Minute+2*sim.Tick {
			t.Fatalf("hung rebuild held the volume for %s", held)
		}
		if rec := sim.Driver.Record(simVol); !strings.HasPrefix(rec.LastFailure, "no progress for") || rec.RetryAt.IsZero() {
			t.Fatalf("record %+v: want a stall give-up with a backoff", rec)
		}
		must(t, c.SetHangRebuilds(simVol, false))
		stepUntil(t, sim, "rebuilt after the hang", 200, func(s rebuildtest.VolumeState) bool {
			return s.Healthy == 3 && s.State == rebuild.StateDetached && len(s.Tickets) == 0
		})
	})

	t.Run("scheduling breaks while attached", func(t *testing.T) {
		must(t, c.LoseReplica(simVol))
		stepUntil(t, sim, "attach", 5, func(s rebuildtest.VolumeState) bool { return s.State == rebuild.StateAttaching })
		must(t, c.SetSchedulable(simVol, false))
		stepUntil(t, sim, "released", 5, func(s rebuildtest.VolumeState) bool {
			return !hasOurTicket(s) && s.State == rebuild.StateDetached
		})
	})
}

// TestSimSettingChange: rebuilding that was disabled starts as soon as it
// is enabled (Longhorn once missed that), and stops when disabled again.
func TestSimSettingChange(t *testing.T) {
	sim := newSim(t, rebuild.Options{})
	c := sim.Cluster
	c.SetGlobalSetting("disabled")
	must(t, c.LoseReplica(simVol))
	step(t, sim, 5)
	if s := c.Inspect(simVol); hasOurTicket(s) || s.Status.Condition.Reason != rebuild.ReasonDisabled {
		t.Fatalf("disabled: %+v", s)
	}
	must(t, c.SetVolumeSetting(simVol, rebuild.VolumeSettingEnabled)) // the volume's own setting wins
	stepUntil(t, sim, "rebuild start", 3, func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })
	must(t, c.SetVolumeSetting(simVol, rebuild.VolumeSettingIgnored)) // back to the global "disabled"
	step(t, sim, 1)
	if s := c.Inspect(simVol); hasOurTicket(s) {
		t.Fatalf("ticket kept after disabling: %+v", s)
	}
	c.SetGlobalSetting("true")
	stepUntil(t, sim, "rebuild after enabling", 15, func(s rebuildtest.VolumeState) bool {
		return s.Healthy == 3 && s.State == rebuild.StateDetached && len(s.Tickets) == 0
	})
}

func timelineHas(sim *rebuildtest.Sim, text string) bool {
	for _, l := range sim.Lines() {
		if strings.Contains(l, text) {
			return true
		}
	}
	return false
}
