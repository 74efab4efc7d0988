package spdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// The exposure scene: what a node holds after an outage, as Longhorn
// builds it (longhorn-spdk-engine Engine.Create, Replica.Create,
// connectNVMfBdev).
const (
	goneEngine  = "gone-e-0"        // no record: an orphan
	goneReplica = "gone-r-11111111" // no record: an orphan, with a snapshot
	liveReplica = "live-r-22222222" // running record
	goneRemote  = "gone-r-33333333" // the gone engine's remote replica, on another node
	liveRemote  = "live-r-44444444" // a live remote replica; its controller is attached, no RAID yet
)

type exposureScene struct {
	srv     *spdktest.Server
	uuids   map[string]string
	records *instancetest.MemLookup
}

func newExposureScene(t *testing.T) *exposureScene {
	t.Helper()
	x := &exposureScene{srv: fixture.Start(t), uuids: map[string]string{}, records: &instancetest.MemLookup{}}
	srv := x.srv
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	x.uuids[goneReplica] = fixture.Must(srv.AddLvol("disk-1", goneReplica))(t)
	x.uuids[goneReplica+"-snap-s1"] = fixture.Must(srv.Snapshot("disk-1", goneReplica, goneReplica+"-snap-s1"))(t)
	x.uuids[liveReplica] = fixture.Must(srv.AddLvol("disk-1", liveReplica))(t)
	remote := func(name, port string) spdkrpc.NvmeTransportID {
		return spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.2", Trsvcid: port, Subnqn: spdk.LonghornNQN(name)}
	}
	bdev := fixture.Must(srv.AttachController(goneRemote, remote(goneRemote, "20001")))(t)
	x.uuids[goneEngine] = fixture.Must(srv.AddRaid(goneEngine, bdev))(t)
	fixture.Must(srv.AttachController(liveRemote, remote(liveRemote, "20011")))(t)
	expose := func(nqn, bdev string) {
		t.Helper()
		if err := srv.AddSubsystem(nqn, spdktest.SubsystemOptions{AllowAnyHost: true}); err != nil {
			t.Fatal(err)
		}
		if bdev != "" {
			fixture.Must(srv.AddNamespace(nqn, bdev))(t)
		}
		if err := srv.AddListener(nqn, spdkrpc.NvmfListenAddress{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.1", Trsvcid: "20001"}); err != nil {
			t.Fatal(err)
		}
	}
	expose(spdk.LonghornNQN(goneEngine), goneEngine)
	expose(spdk.LonghornNQN(goneReplica), x.uuids[goneReplica])
	expose(spdk.LonghornNQN(liveReplica), x.uuids[liveReplica])
	x.records.Put(orphan.KindReplicaInstance, liveReplica, instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: nodeID, InstanceManager: imName})
	x.records.Put(orphan.KindReplicaInstance, liveRemote, instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2", InstanceManager: "im-2"})
	srv.ResetCalls()
	return x
}

func (x *exposureScene) orphans(t *testing.T) *spdk.Orphans {
	return newOrphans(t, fixture.Client(t, x.srv, spdkrpc.ClientOptions{}), x.records)
}

func (x *exposureScene) nqns() []string {
	var out []string
	for _, s := range x.srv.Subsystems() {
		if s.Subtype != spdkrpc.SubtypeDiscovery {
			out = append(out, s.NQN)
		}
	}
	slices.Sort(out)
	return out
}

func (x *exposureScene) purge(t *testing.T, kind orphan.Kind, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return x.orphans(t).Delete(ctx, record(t, kind, name, x.uuids[name]))
}

// methodsCalled lists the destructive calls in order, with their first
// param.
func methodsCalled(srv *spdktest.Server) []string {
	var out []string
	for _, c := range srv.Calls() {
		switch c.Method {
		case "nvmf_subsystem_remove_ns", "nvmf_delete_subsystem", "bdev_raid_delete", "bdev_nvme_detach_controller", "bdev_lvol_delete":
			var p struct{ NQN, Name string }
			_ = json.Unmarshal(c.Params, &p)
			out = append(out, c.Method+" "+p.NQN+p.Name)
		}
	}
	return out
}

func TestEnginePurgeStopsExposingThenDeletesThenDetaches(t *testing.T) {
	x := newExposureScene(t)
	if err := x.purge(t, orphan.KindEngineInstance, goneEngine); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"nvmf_subsystem_remove_ns " + spdk.LonghornNQN(goneEngine),
		"nvmf_delete_subsystem " + spdk.LonghornNQN(goneEngine),
		"bdev_raid_delete " + goneEngine,
		"bdev_nvme_detach_controller " + goneRemote,
	}
	if got := methodsCalled(x.srv); !slices.Equal(got, want) {
		t.Fatalf("calls:\n got %q\nwant %q", got, want)
	}
	if got := x.srv.ControllerNames(); !slices.Equal(got, []string{liveRemote}) {
		t.Errorf("controllers left %v, want only the live remote's", got)
	}
	if got, want := x.nqns(), []string{spdk.LonghornNQN(goneReplica), spdk.LonghornNQN(liveReplica)}; !slices.Equal(got, want) {
		t.Errorf("subsystems left %v, want %v", got, want)
	}
}

func TestReplicaPurgeStopsExposingBeforeDeletingLvols(t *testing.T) {
	x := newExposureScene(t)
	if err := x.purge(t, orphan.KindReplicaInstance, goneReplica); err != nil {
		t.Fatal(err)
	}
	got := methodsCalled(x.srv)
	want := []string{
		"nvmf_subsystem_remove_ns " + spdk.LonghornNQN(goneReplica),
		"nvmf_delete_subsystem " + spdk.LonghornNQN(goneReplica),
		"bdev_lvol_delete " + x.uuids[goneReplica+"-snap-s1"],
		"bdev_lvol_delete " + x.uuids[goneReplica],
	}
	if !slices.Equal(got, want) {
		t.Fatalf("calls:\n got %q\nwant %q", got, want)
	}
	if got, want := x.nqns(), []string{spdk.LonghornNQN(goneEngine), spdk.LonghornNQN(liveReplica)}; !slices.Equal(got, want) {
		t.Errorf("subsystems left %v, want %v", got, want)
	}
}

// TestScanReportsExposuresItCannotRemove: a controller whose remote
// replica's record exists is owned, a foreign subsystem is not
// attributed, an empty subsystem named after a replica with no record is
// an orphan, and all are reported, not listed as items.
func TestScanReportsExposuresItCannotRemove(t *testing.T) {
	x := newExposureScene(t)
	if err := x.srv.AddSubsystem("nqn.2016-06.io.spdk:cnode1", spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := x.srv.AddSubsystem(spdk.LonghornNQN("old-r-55555555"), spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	snap, err := x.orphans(t).Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range snap.Skipped {
		got[s.Name] = s.Reason
	}
	for name, want := range map[string]string{
		"controller " + liveRemote:                        "nvmf: owned: replica record " + liveRemote + " exists",
		"subsystem nqn.2016-06.io.spdk:cnode1":            "nvmf: undecided: cannot attribute",
		"subsystem " + spdk.LonghornNQN("old-r-55555555"): "nvmf: orphan: no replica record old-r-55555555",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("skipped %s: %q, want %q...", name, got[name], want)
		}
	}
	// What goes with an engine or replica is not reported on its own.
	for _, name := range []string{"subsystem " + spdk.LonghornNQN(goneEngine), "subsystem " + spdk.LonghornNQN(liveReplica), "controller " + goneRemote} {
		if r, ok := got[name]; ok {
			t.Errorf("%s reported: %s", name, r)
		}
	}
	if len(snap.Items) != 3 {
		t.Errorf("%d items, want the engine and two replicas", len(snap.Items))
	}
}

// TestPurgeRefusesSubsystemNamedLikeAnotherVolume: the gone engine's RAID
// bdev is exposed under another volume's engine NQN. caretaker cannot
// tell whose it is, so nothing is removed.
func TestPurgeRefusesSubsystemNamedLikeAnotherVolume(t *testing.T) {
	x := newExposureScene(t)
	other := spdk.LonghornNQN("other-e-0")
	// A namespace claims its bdev: move the RAID bdev's to the other NQN.
	if err := spdkrpc.NvmfDeleteSubsystem(context.Background(), fixture.Client(t, x.srv, spdkrpc.ClientOptions{}), spdk.LonghornNQN(goneEngine)); err != nil {
		t.Fatal(err)
	}
	if err := x.srv.AddSubsystem(other, spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Must(x.srv.AddNamespace(other, goneEngine))(t)
	x.srv.ResetCalls()
	err := x.purge(t, orphan.KindEngineInstance, goneEngine)
	if !errors.Is(err, spdk.ErrExposureChanged) || !errors.Is(err, orphan.ErrPreconditionFailed) {
		t.Fatalf("err = %v, want ErrExposureChanged", err)
	}
	if got := methodsCalled(x.srv); len(got) != 0 {
		t.Fatalf("removed %q", got)
	}
	if !slices.Contains(x.nqns(), other) || !slices.Contains(x.srv.RaidNames(), goneEngine) {
		t.Fatal("something was removed")
	}
}

// TestPurgeLeavesNamespaceOfLiveReplica: a subsystem named after the
// gone replica exposes the live replica's head. The gone replica's purge
// deletes its own lvols and leaves that subsystem and the live head.
func TestPurgeLeavesNamespaceOfLiveReplica(t *testing.T) {
	x := newExposureScene(t)
	// Rebuild the gone replica's subsystem so it exposes the live head.
	c := fixture.Client(t, x.srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, c, spdk.LonghornNQN(goneReplica)); err != nil {
		t.Fatal(err)
	}
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, c, spdk.LonghornNQN(liveReplica)); err != nil {
		t.Fatal(err)
	}
	if err := x.srv.AddSubsystem(spdk.LonghornNQN(goneReplica), spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Must(x.srv.AddNamespace(spdk.LonghornNQN(goneReplica), x.uuids[liveReplica]))(t)
	x.srv.ResetCalls()

	if err := x.purge(t, orphan.KindReplicaInstance, goneReplica); err != nil {
		t.Fatal(err)
	}
	for _, call := range methodsCalled(x.srv) {
		if !strings.HasPrefix(call, "bdev_lvol_delete ") {
			t.Errorf("unexpected %s", call)
		}
	}
	subs := x.srv.Subsystems()
	i := slices.IndexFunc(subs, func(s spdkrpc.NvmfSubsystem) bool { return s.NQN == spdk.LonghornNQN(goneReplica) })
	if i < 0 || len(subs[i].Namespaces) != 1 || subs[i].Namespaces[0].Bdev() != x.uuids[liveReplica] {
		t.Fatalf("the live replica's namespace was touched: %+v", subs)
	}
	if !slices.Contains(x.srv.LvolAliases(), "disk-1/"+liveReplica) {
		t.Fatal("live replica deleted")
	}
	// And Scan says it cannot attribute it, rather than calling it the
	// gone replica's.
	snap, err := x.orphans(t).Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(snap.Skipped, func(s orphan.Skipped) bool {
		return s.Name == "subsystem "+spdk.LonghornNQN(goneReplica) && strings.Contains(s.Reason, "undecided")
	}) {
		t.Errorf("not reported: %+v", snap.Skipped)
	}
}

// TestEnginePurgeKeepsControllerOfLiveRemoteNotItsOwn: the live remote's
// controller (no RAID bdev on it yet: an engine being created attaches
// before it builds its RAID bdev) survives the gone engine's purge.
func TestEnginePurgeKeepsControllerOfLiveRemoteNotItsOwn(t *testing.T) {
	x := newExposureScene(t)
	if err := x.purge(t, orphan.KindEngineInstance, goneEngine); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(x.srv.ControllerNames(), liveRemote) {
		t.Fatal("the live remote's controller was detached")
	}
	// Purging the replicas does not touch it either.
	if err := x.purge(t, orphan.KindReplicaInstance, goneReplica); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(x.srv.ControllerNames(), liveRemote) {
		t.Fatal("the live remote's controller was detached")
	}
}

// TestPurgeRefusesOnUnreadableExposures: a null listing, an element
// without an NQN, a namespace without a bdev, a controller without a
// path: the purge fails before deleting anything, and returns.
func TestPurgeRefusesOnUnreadableExposures(t *testing.T) {
	for _, f := range []spdktest.Fault{
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace},
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`[null]`)},
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`[{"nqn":"` + spdk.LonghornNQN(goneEngine) + `","subtype":"NVMe","namespaces":[{"nsid":1}]}]`)},
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`{"nqn":"x"}`)},
		{Method: "bdev_nvme_get_controllers", Action: spdktest.Replace, Result: json.RawMessage(`[{"name":"` + goneRemote + `"}]`)},
		{Method: "bdev_nvme_get_controllers", Action: spdktest.Replace},
	} {
		x := newExposureScene(t)
		x.srv.Inject(f)
		err := x.purge(t, orphan.KindEngineInstance, goneEngine)
		if !errors.Is(err, spdk.ErrUnexpectedResult) {
			t.Errorf("%s %s: err = %v, want ErrUnexpectedResult", f.Method, f.Result, err)
		}
		if got := methodsCalled(x.srv); len(got) != 0 {
			t.Errorf("%s %s: removed %q", f.Method, f.Result, got)
		}
		// Scan still lists the items, and says the exposures could not
		// be read.
		x.srv.Inject(f)
		snap, err := x.orphans(t).Scan(context.Background())
		if err != nil || len(snap.Items) != 3 || !slices.ContainsFunc(snap.Skipped, func(s orphan.Skipped) bool { return s.Name == "nvmf" }) {
			t.Errorf("%s %s: scan = %d items, %+v, %v", f.Method, f.Result, len(snap.Items), snap.Skipped, err)
		}
	}
}

// TestPurgeStopsWhenSubsystemChanges: between the purge's listing and its
// removal, the engine's subsystem gains a namespace (Longhorn re-exposing,
// or someone else): nothing more is removed.
func TestPurgeStopsWhenSubsystemChanges(t *testing.T) {
	x := newExposureScene(t)
	nqn := spdk.LonghornNQN(goneEngine)
	x.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Params: json.RawMessage(`{"nqn":"` + nqn + `"}`), Then: func() {
		if _, err := x.srv.AddLvol("disk-1", "other-r-66666666"); err != nil {
			t.Error(err)
		}
		if _, err := x.srv.AddNamespace(nqn, "disk-1/other-r-66666666"); err != nil {
			t.Error(err)
		}
	}})
	err := x.purge(t, orphan.KindEngineInstance, goneEngine)
	if !errors.Is(err, spdk.ErrExposureChanged) {
		t.Fatalf("err = %v, want ErrExposureChanged", err)
	}
	if got := methodsCalled(x.srv); len(got) != 0 {
		t.Fatalf("removed %q", got)
	}
	if !slices.Contains(x.srv.RaidNames(), goneEngine) || !slices.Contains(x.nqns(), nqn) || !slices.Contains(x.srv.ControllerNames(), goneRemote) {
		t.Fatal("something was removed")
	}
}

// TestPurgeStopsWhenRecordAppearsMidway: the replica record appears after
// its subsystem is gone: its lvols stay.
func TestPurgeStopsWhenRecordAppearsMidway(t *testing.T) {
	x := newExposureScene(t)
	x.srv.Inject(spdktest.Fault{Method: "nvmf_delete_subsystem", Then: func() {
		x.records.Put(orphan.KindReplicaInstance, goneReplica, instance.View{Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped})
	}})
	err := x.purge(t, orphan.KindReplicaInstance, goneReplica)
	if !errors.Is(err, spdk.ErrReplicaRecordExists) {
		t.Fatalf("err = %v, want ErrReplicaRecordExists", err)
	}
	if x.srv.CallCount("bdev_lvol_delete") != 0 {
		t.Fatal("lvols deleted after the record appeared")
	}
}

// TestPurgeDoesNotHang: a target that never answers the NVMe-oF listing
// ends the purge with the context.
func TestPurgeDoesNotHang(t *testing.T) {
	x := newExposureScene(t)
	x.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := x.orphans(t).Delete(ctx, record(t, orphan.KindEngineInstance, goneEngine, x.uuids[goneEngine]))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if got := methodsCalled(x.srv); len(got) != 0 {
		t.Fatalf("removed %q", got)
	}
}

// TestEnginePurgeLeavesControllerAnotherEngineUses: the gone engine's
// remote is also a base of another RAID bdev; it is that one's too, and
// stays. And a controller some engine builds a RAID bdev on between the
// purge's listing and its detach is left: it is that engine's now.
func TestEnginePurgeLeavesControllerAnotherEngineUses(t *testing.T) {
	x := newExposureScene(t)
	fixture.Must(x.srv.AddRaid("other-e-0", spdkrpc.NvmeBdevName(goneRemote, 1)))(t)
	x.srv.ResetCalls()
	if err := x.purge(t, orphan.KindEngineInstance, goneEngine); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(x.srv.ControllerNames(), goneRemote) || x.srv.CallCount("bdev_nvme_detach_controller") != 0 {
		t.Fatal("a controller another RAID bdev uses was detached")
	}

	x = newExposureScene(t)
	x.srv.Inject(spdktest.Fault{Method: "bdev_raid_delete", Then: func() {
		if _, err := x.srv.AddRaid("gone-e-1", spdkrpc.NvmeBdevName(goneRemote, 1)); err != nil {
			t.Error(err)
		}
	}})
	if err := x.purge(t, orphan.KindEngineInstance, goneEngine); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(x.srv.ControllerNames(), goneRemote) || x.srv.CallCount("bdev_nvme_detach_controller") != 0 {
		t.Fatal("a controller a new RAID bdev was built on was detached")
	}
}

// TestEnginePurgeStopsWhenControllerMoves: between the listing and the
// detach the controller is re-attached elsewhere (same name, another
// address): nothing is detached.
func TestEnginePurgeStopsWhenControllerMoves(t *testing.T) {
	x := newExposureScene(t)
	x.srv.Inject(spdktest.Fault{Method: "bdev_raid_delete", Then: func() {
		c := fixture.Client(t, x.srv, spdkrpc.ClientOptions{})
		if err := spdkrpc.BdevNvmeDetachController(context.Background(), c, goneRemote, spdkrpc.NvmeTransportID{}); err != nil {
			t.Error(err)
		}
		if _, err := x.srv.AttachController(goneRemote, spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.9", Trsvcid: "20001", Subnqn: spdk.LonghornNQN(goneRemote)}); err != nil {
			t.Error(err)
		}
	}})
	err := x.purge(t, orphan.KindEngineInstance, goneEngine)
	if !errors.Is(err, spdk.ErrExposureChanged) {
		t.Fatalf("err = %v, want ErrExposureChanged", err)
	}
	if !slices.Contains(x.srv.ControllerNames(), goneRemote) {
		t.Fatal("the re-attached controller was detached")
	}
}

// TestEnginePurgeRemovesItsEmptySubsystemNotTheVolumes: an empty
// subsystem under the engine's own NQN (its RAID bdev hot-removed from
// it) goes with the engine; an empty one under the volume's stable NQN,
// which the volume's other engines share, stays.
func TestEnginePurgeRemovesItsEmptySubsystemNotTheVolumes(t *testing.T) {
	x := newExposureScene(t)
	c := fixture.Client(t, x.srv, spdkrpc.ClientOptions{})
	if err := spdkrpc.NvmfSubsystemRemoveNs(context.Background(), c, spdk.LonghornNQN(goneEngine), 1); err != nil {
		t.Fatal(err)
	}
	if err := x.srv.AddSubsystem(spdk.LonghornNQN("volume-gone"), spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	x.srv.ResetCalls()
	if err := x.purge(t, orphan.KindEngineInstance, goneEngine); err != nil {
		t.Fatal(err)
	}
	if got, want := x.nqns(), []string{spdk.LonghornNQN(goneReplica), spdk.LonghornNQN(liveReplica), spdk.LonghornNQN("volume-gone")}; !slices.Equal(got, want) {
		t.Fatalf("subsystems left %v, want %v", got, want)
	}
}

// TestReplicaPurgeRefusesExposureUnderLiveReplicasName: the gone
// replica's head is exposed under the live replica's NQN. Whoever
// connects there expects the live replica: the purge removes nothing.
func TestReplicaPurgeRefusesExposureUnderLiveReplicasName(t *testing.T) {
	x := newExposureScene(t)
	c := fixture.Client(t, x.srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	for _, nqn := range []string{spdk.LonghornNQN(goneReplica), spdk.LonghornNQN(liveReplica)} {
		if err := spdkrpc.NvmfDeleteSubsystem(ctx, c, nqn); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.srv.AddSubsystem(spdk.LonghornNQN(liveReplica), spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Must(x.srv.AddNamespace(spdk.LonghornNQN(liveReplica), x.uuids[goneReplica]))(t)
	x.srv.ResetCalls()
	err := x.purge(t, orphan.KindReplicaInstance, goneReplica)
	if !errors.Is(err, spdk.ErrExposureChanged) {
		t.Fatalf("err = %v, want ErrExposureChanged", err)
	}
	if got := methodsCalled(x.srv); len(got) != 0 {
		t.Fatalf("removed %q", got)
	}
	if !slices.Contains(x.srv.LvolAliases(), "disk-1/"+goneReplica) || !slices.Contains(x.nqns(), spdk.LonghornNQN(liveReplica)) {
		t.Fatal("something was removed")
	}
}
