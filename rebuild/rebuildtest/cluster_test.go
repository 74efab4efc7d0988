package rebuildtest

import (
	"context"
	"errors"
	"testing"

	"github.com/caretaker-storage/caretaker/rebuild"
)

// TestClusterContracts checks the fake keeps the host interface contracts
// that the driver relies on.
func TestClusterContracts(t *testing.T) {
	ctx := context.Background()
	c := NewCluster(ClusterOptions{})
	if _, err := c.Volume(ctx, "nope"); !errors.Is(err, rebuild.ErrNotFound) {
		t.Errorf("Volume of a missing volume: %v", err)
	}
	if err := c.DeleteTicket(ctx, "nope", "x"); err != nil {
		t.Errorf("DeleteTicket of a missing volume: %v", err)
	}
	if err := c.PutTicket(ctx, "nope", rebuild.Ticket{ID: "x"}); !errors.Is(err, rebuild.ErrNotFound) {
		t.Errorf("PutTicket on a missing volume: %v", err)
	}
	if ts, err := c.Tickets(ctx, "nope"); err != nil || len(ts) != 0 {
		t.Errorf("Tickets of a missing volume: %v, %v", ts, err)
	}
	if err := c.UpdateStatus(ctx, "nope", rebuild.Status{}); !errors.Is(err, rebuild.ErrNotFound) {
		t.Errorf("UpdateStatus of a missing volume: %v", err)
	}
	if err := c.CreateVolume(VolumeSpec{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateVolume(VolumeSpec{Name: "v"}); err == nil {
		t.Error("second CreateVolume of the same name succeeded")
	}
	v, err := c.Volume(ctx, "v")
	if err != nil || v.DataEngine != rebuild.DataEngineV2 || v.DesiredReplicas != 3 || v.HealthyReplicas() != 3 || v.Robustness != rebuild.RobustnessHealthy {
		t.Fatalf("new volume view %+v, %v", v, err)
	}
	if err := c.DeleteTicket(ctx, "v", "not-there"); err != nil {
		t.Errorf("DeleteTicket of a missing ticket: %v", err)
	}
}

// TestClusterAttachment: highest priority wins, equals keep the served
// ticket, and switching goes through a detach.
func TestClusterAttachment(t *testing.T) {
	ctx := context.Background()
	c := NewCluster(ClusterOptions{})
	if err := c.CreateVolume(VolumeSpec{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.PutTicket(ctx, "v", rebuild.Ticket{ID: "z-maint", Priority: 800, DisableFrontend: true}))
	c.Step()
	c.Step()
	if s := c.Inspect("v"); s.State != rebuild.StateAttached || s.AttachedFor != "z-maint" || !s.Maintenance {
		t.Fatalf("after attaching: %+v", s)
	}
	must(c.Attach("v", "a-backup", "node-1", 800)) // equal priority, smaller ID
	c.Step()
	if s := c.Inspect("v"); s.AttachedFor != "z-maint" || s.State != rebuild.StateAttached {
		t.Fatalf("equal priority took the volume: %+v", s)
	}
	must(c.Attach("v", "pod", "node-2", PriorityCSI))
	wantStates := []rebuild.AttachState{rebuild.StateDetaching, rebuild.StateDetached, rebuild.StateAttaching, rebuild.StateAttached}
	for _, want := range wantStates {
		c.Step()
		if s := c.Inspect("v"); s.State != want {
			t.Fatalf("state %s, want %s (%+v)", s.State, want, s)
		}
	}
	if s := c.Inspect("v"); s.AttachedFor != "pod" || s.Maintenance {
		t.Fatalf("after switching: %+v", s)
	}
}

// TestClusterRebuild: rebuilding happens only in maintenance mode unless
// OnlineRebuild is set, takes RebuildSteps, and a detach stops it.
func TestClusterRebuild(t *testing.T) {
	ctx := context.Background()
	c := NewCluster(ClusterOptions{})
	c.RebuildSteps = 2
	if err := c.CreateVolume(VolumeSpec{Name: "v", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	_ = c.LoseReplica("v")
	_ = c.Attach("v", "pod", "n", PriorityCSI)
	for i := 0; i < 4; i++ {
		c.Step()
	}
	if s := c.Inspect("v"); s.Rebuilding != 0 || s.Healthy != 1 {
		t.Fatalf("rebuilt online without OnlineRebuild: %+v", s)
	}
	c.OnlineRebuild = true
	c.Step()
	if s := c.Inspect("v"); s.Rebuilding != 1 {
		t.Fatalf("no online rebuild: %+v", s)
	}
	_ = c.Detach("v", "pod")
	c.Step()
	if s := c.Inspect("v"); s.Rebuilding != 0 || s.State != rebuild.StateDetaching {
		t.Fatalf("detach did not stop the rebuild: %+v", s)
	}
	v, _ := c.Volume(ctx, "v")
	if !v.CanReuseFailedReplica {
		t.Errorf("interrupted replica not reusable: %+v", v)
	}
	_ = c.SetSchedulable("v", false)
	if v, _ := c.Volume(ctx, "v"); v.CanReuseFailedReplica || v.CanScheduleReplica {
		t.Errorf("unschedulable volume still offers replicas: %+v", v)
	}
}

// TestClusterRebuildProgress: the view reports each rebuilding replica's
// progress as a percentage, and a hung rebuild keeps it where it was.
func TestClusterRebuildProgress(t *testing.T) {
	ctx := context.Background()
	c := NewCluster(ClusterOptions{})
	c.RebuildSteps = 4
	if err := c.CreateVolume(VolumeSpec{Name: "v", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	_ = c.LoseReplica("v")
	_ = c.PutTicket(ctx, "v", RebuildingTicket("v", "n"))
	progress := func() int64 {
		v, err := c.Volume(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		return v.RebuildProgress()
	}
	for i := 0; i < 3; i++ { // attaching, attached and rebuild started, one step copied
		c.Step()
	}
	if got := progress(); got != 25 || c.Inspect("v").Progress != 25 {
		t.Fatalf("progress %d (inspect %d), want 25", got, c.Inspect("v").Progress)
	}
	_ = c.SetHangRebuilds("v", true)
	for i := 0; i < 5; i++ {
		c.Step()
	}
	if s := c.Inspect("v"); progress() != 25 || s.Rebuilding != 1 {
		t.Fatalf("hung rebuild moved: progress %d, %+v", progress(), s)
	}
	_ = c.SetHangRebuilds("v", false)
	c.Step()
	if got := progress(); got != 50 {
		t.Fatalf("resumed rebuild at %d, want 50", got)
	}
}
