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

// The leftover scene: what an interrupted purge or an instance-manager
// restart leaves (longhorn/longhorn#13114). No engine or replica of these
// names runs on the node.
const (
	leftReplica  = "left-r-11111111"  // no record: an empty subsystem of its name is left
	leftRemote   = "left-r-33333333"  // no record: a controller to it is left, no RAID bdev on it
	leftEngine   = "left-e-2"         // no record: an empty subsystem of its name is left
	keptLive     = "kept-r-22222222"  // running replica record, its head lvol here
	keptRecorded = "kept-r-44444444"  // record exists (on another node): its leftovers are kept
	claimsLive   = "claim-r-55555555" // no record, but its subsystem exposes keptLive's lvol
	foreignNQN   = "nqn.2016-06.io.spdk:cnode1"
	foreignCtrl  = "odd-r-66666666" // no record, but its subnqn is foreignNQN
)

type leftoverScene struct {
	srv     *spdktest.Server
	records *instancetest.MemLookup
}

func newLeftoverScene(t *testing.T) *leftoverScene {
	t.Helper()
	x := &leftoverScene{srv: fixture.Start(t), records: &instancetest.MemLookup{}}
	srv := x.srv
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	live := fixture.Must(srv.AddLvol("disk-1", keptLive))(t)
	sub := func(nqn, bdev string) {
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
	sub(spdk.LonghornNQN(leftReplica), "")
	sub(spdk.LonghornNQN(leftEngine), "")
	sub(spdk.LonghornNQN(keptRecorded), "")
	sub(spdk.LonghornNQN(claimsLive), live)
	sub(foreignNQN, "")
	sub(spdk.LonghornNQN("volume-left"), "")
	fixture.Must(srv.AttachController(leftRemote, remoteTrid(leftRemote)))(t)
	fixture.Must(srv.AttachController(keptRecorded, remoteTrid(keptRecorded)))(t)
	// Named like a gone replica, but connected to another subsystem than
	// that replica's: not attached the way Longhorn attaches.
	odd := remoteTrid(foreignCtrl)
	odd.Subnqn = foreignNQN
	fixture.Must(srv.AttachController(foreignCtrl, odd))(t)
	running := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: nodeID, InstanceManager: imName}
	x.records.Put(orphan.KindReplicaInstance, keptLive, running)
	x.records.Put(orphan.KindReplicaInstance, keptRecorded, instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2", InstanceManager: "im-2"})
	x.records.Put(orphan.KindEngineInstance, "kept-e-0", instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2", InstanceManager: "im-2"})
	srv.ResetCalls()
	return x
}

func remoteTrid(name string) spdkrpc.NvmeTransportID {
	return spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.2", Trsvcid: "20001", Subnqn: spdk.LonghornNQN(name)}
}

func (x *leftoverScene) run(t *testing.T, records instance.Lookup) (spdk.LeftoverReport, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return newOrphans(t, fixture.Client(t, x.srv, spdkrpc.ClientOptions{}), records).PurgeLeftoverExposures(ctx)
}

func (x *leftoverScene) nqns() []string {
	var out []string
	for _, s := range x.srv.Subsystems() {
		if s.Subtype != spdkrpc.SubtypeDiscovery {
			out = append(out, s.NQN)
		}
	}
	slices.Sort(out)
	return out
}

// allNQNs is every subsystem of the scene, sorted.
func allNQNs() []string {
	out := []string{spdk.LonghornNQN(leftReplica), spdk.LonghornNQN(leftEngine), spdk.LonghornNQN(keptRecorded),
		spdk.LonghornNQN(claimsLive), foreignNQN, spdk.LonghornNQN("volume-left")}
	slices.Sort(out)
	return out
}

func without(all []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(drop, s) })
}

func objects(os []spdk.LeftoverObject) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Object
	}
	slices.Sort(out)
	return out
}

// TestPurgeLeftoverExposuresRemovesOnlyProvenLeftovers: the empty
// subsystems of a gone replica and a gone engine go, then the dangling
// controller of a gone remote replica is detached by its full transport
// ID; a subsystem over a live lvol, a foreign NQN, the volume-stable NQN,
// and a recorded replica's subsystem and controller stay.
func TestPurgeLeftoverExposuresRemovesOnlyProvenLeftovers(t *testing.T) {
	x := newLeftoverScene(t)
	rep, err := x.run(t, x.records)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.nqns(), without(allNQNs(), spdk.LonghornNQN(leftReplica), spdk.LonghornNQN(leftEngine)); !slices.Equal(got, want) {
		t.Errorf("subsystems left %v, want %v", got, want)
	}
	if got := sorted(x.srv.ControllerNames()); !slices.Equal(got, []string{keptRecorded, foreignCtrl}) {
		t.Errorf("controllers left %v, want only %s and %s", got, keptRecorded, foreignCtrl)
	}
	wantRemoved := []string{"controller " + leftRemote, "subsystem " + spdk.LonghornNQN(leftEngine), "subsystem " + spdk.LonghornNQN(leftReplica)}
	if got := objects(rep.Removed); !slices.Equal(got, wantRemoved) {
		t.Errorf("report removed %v, want %v", got, wantRemoved)
	}
	kept := map[string]string{}
	for _, k := range rep.Kept {
		kept[k.Object] = k.Reason
	}
	for obj, why := range map[string]string{
		"subsystem " + foreignNQN:                      "not a Longhorn NQN",
		"subsystem " + spdk.LonghornNQN(claimsLive):    "which exists",
		"subsystem " + spdk.LonghornNQN(keptRecorded):  "record " + keptRecorded + " exists",
		"subsystem " + spdk.LonghornNQN("volume-left"): "volume-stable",
		"controller " + keptRecorded:                   "record " + keptRecorded + " exists",
	} {
		if !strings.Contains(kept[obj], why) {
			t.Errorf("kept %s: reason %q, want it to say %q", obj, kept[obj], why)
		}
	}
	// Subsystems before controllers; the controller by its full
	// transport ID.
	var order []string
	for _, c := range x.srv.Calls() {
		switch c.Method {
		case "nvmf_delete_subsystem", "bdev_nvme_detach_controller", "nvmf_subsystem_remove_ns":
			order = append(order, c.Method)
			if c.Method == "bdev_nvme_detach_controller" {
				var p map[string]string
				_ = json.Unmarshal(c.Params, &p)
				want := map[string]string{"name": leftRemote, "trtype": "TCP", "adrfam": "IPv4", "traddr": "10.0.0.2", "trsvcid": "20001", "subnqn": spdk.LonghornNQN(leftRemote)}
				for k, v := range want {
					if p[k] != v {
						t.Errorf("detach param %s = %q, want %q", k, p[k], v)
					}
				}
			}
		}
	}
	if want := []string{"nvmf_delete_subsystem", "nvmf_delete_subsystem", "bdev_nvme_detach_controller"}; !slices.Equal(order, want) {
		t.Errorf("destructive calls %v, want %v", order, want)
	}
}

// TestPurgeLeftoverExposuresKeepsWhatHasARecord: with records for the
// gone replica, engine and remote, nothing is removed.
func TestPurgeLeftoverExposuresKeepsWhatHasARecord(t *testing.T) {
	x := newLeftoverScene(t)
	v := instance.View{Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped, OwnerNodeID: "node-2"}
	x.records.Put(orphan.KindReplicaInstance, leftReplica, v)
	x.records.Put(orphan.KindReplicaInstance, leftRemote, v)
	x.records.Put(orphan.KindEngineInstance, leftEngine, v)
	rep, err := x.run(t, x.records)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 {
		t.Errorf("removed %v", objects(rep.Removed))
	}
	if got := x.nqns(); !slices.Equal(got, allNQNs()) {
		t.Errorf("subsystems %v, want all of %v", got, allNQNs())
	}
	if got := sorted(x.srv.ControllerNames()); !slices.Equal(got, []string{keptRecorded, leftRemote, foreignCtrl}) {
		t.Errorf("controllers %v, want both", got)
	}
}

// TestPurgeLeftoverExposuresKeepsWhatGainsARecord: a record that appears
// between the judgement and the removal keeps the object.
func TestPurgeLeftoverExposuresKeepsWhatGainsARecord(t *testing.T) {
	x := newLeftoverScene(t)
	v := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateStarting, OwnerNodeID: "node-2"}
	// The re-read of each object right before its removal is when the
	// record appears.
	x.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Params: json.RawMessage(`{"nqn":"` + spdk.LonghornNQN(leftReplica) + `"}`),
		Then: func() { x.records.Put(orphan.KindReplicaInstance, leftReplica, v) }})
	x.srv.Inject(spdktest.Fault{Method: "bdev_nvme_get_controllers", Params: json.RawMessage(`{"name":"` + leftRemote + `"}`),
		Then: func() { x.records.Put(orphan.KindReplicaInstance, leftRemote, v) }})
	rep, err := x.run(t, x.records)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.nqns(), without(allNQNs(), spdk.LonghornNQN(leftEngine)); !slices.Equal(got, want) {
		t.Errorf("subsystems %v, want %v", got, want)
	}
	if got := sorted(x.srv.ControllerNames()); !slices.Equal(got, []string{keptRecorded, leftRemote, foreignCtrl}) {
		t.Errorf("controllers %v, want both", got)
	}
	if got, want := objects(rep.Removed), []string{"subsystem " + spdk.LonghornNQN(leftEngine)}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, k := range rep.Kept {
		if (k.Object == "controller "+leftRemote || k.Object == "subsystem "+spdk.LonghornNQN(leftReplica)) && !strings.Contains(k.Reason, "exists") {
			t.Errorf("kept %s for %q, want the record", k.Object, k.Reason)
		}
	}
}

// TestPurgeLeftoverExposuresEmptyView: a records view with no record at
// all beside leftovers removes nothing; a view that cannot count is
// refused with ErrNoRecordCount before any call.
func TestPurgeLeftoverExposuresEmptyView(t *testing.T) {
	x := newLeftoverScene(t)
	rep, err := x.run(t, &instancetest.MemLookup{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 || !slices.Equal(x.nqns(), allNQNs()) || len(x.srv.ControllerNames()) != 3 {
		t.Fatalf("an empty view removed %v; subsystems %v controllers %v", objects(rep.Removed), x.nqns(), x.srv.ControllerNames())
	}
	found := false
	for _, k := range rep.Kept {
		found = found || k.Object == "subsystem "+spdk.LonghornNQN(leftReplica) && strings.Contains(k.Reason, "no replica-instance record at all")
	}
	if !found {
		t.Errorf("kept %+v: want the empty view named as the reason", rep.Kept)
	}

	x.srv.ResetCalls()
	_, err = x.run(t, struct{ instance.Lookup }{x.records})
	if !errors.Is(err, spdk.ErrNoRecordCount) || !errors.Is(err, orphan.ErrPreconditionFailed) {
		t.Fatalf("err = %v, want ErrNoRecordCount", err)
	}
	if n := len(x.srv.Calls()); n != 0 {
		t.Errorf("%d calls made without a record count", n)
	}
}

// TestPurgeLeftoverExposuresBadReplies: a listing with null or missing
// fields stops the pass with ErrUnexpectedResult before anything is
// removed.
func TestPurgeLeftoverExposuresBadReplies(t *testing.T) {
	for _, f := range []spdktest.Fault{
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`null`)},
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`[{"nqn":"` + spdk.LonghornNQN(leftReplica) + `","subtype":"NVMe"}]`)},
		{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`[null]`)},
		{Method: "bdev_nvme_get_controllers", Action: spdktest.Replace, Result: json.RawMessage(`null`)},
		{Method: "bdev_nvme_get_controllers", Action: spdktest.Replace, Result: json.RawMessage(`[{"name":"` + leftRemote + `"}]`)},
		{Method: "bdev_get_bdevs", Action: spdktest.Replace, Result: json.RawMessage(`[{"name":null}]`)},
		// The re-read right before a removal.
		{Method: "nvmf_get_subsystems", Params: json.RawMessage(`{"nqn":"` + spdk.LonghornNQN(leftEngine) + `"}`), Action: spdktest.Replace, Result: json.RawMessage(`[{"nqn":"` + spdk.LonghornNQN(leftEngine) + `"}]`)},
	} {
		t.Run(f.Method+string(f.Result), func(t *testing.T) {
			x := newLeftoverScene(t)
			x.srv.Inject(f)
			rep, err := x.run(t, x.records)
			if !errors.Is(err, spdk.ErrUnexpectedResult) {
				t.Fatalf("err = %v, want ErrUnexpectedResult", err)
			}
			if f.Params == nil && len(rep.Removed) != 0 {
				t.Errorf("removed %v after an unreadable listing", objects(rep.Removed))
			}
			if got := x.nqns(); !slices.Contains(got, spdk.LonghornNQN(leftEngine)) {
				t.Errorf("subsystem %s removed after an unreadable reply; left %v", leftEngine, got)
			}
			if got := x.srv.ControllerNames(); !slices.Contains(got, leftRemote) {
				t.Errorf("controller %s detached after an unreadable reply", leftRemote)
			}
		})
	}
}

// TestPurgeLeftoverExposuresHonoursContext: a target that stops answering
// does not hold the pass past its context, and nothing is removed.
func TestPurgeLeftoverExposuresHonoursContext(t *testing.T) {
	x := newLeftoverScene(t)
	x.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Delay: 5 * time.Second, Times: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := newOrphans(t, fixture.Client(t, x.srv, spdkrpc.ClientOptions{}), x.records).PurgeLeftoverExposures(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
	x.srv.ClearFaults()
	if got := x.nqns(); !slices.Equal(got, allNQNs()) {
		t.Errorf("subsystems %v after a cancelled pass", got)
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// TestPurgeLeftoverExposuresKeepsAControllerARaidNowUses: an engine that
// builds its RAID bdev on the controller between the judgement and the
// detach makes the controller that engine's: it stays.
func TestPurgeLeftoverExposuresKeepsAControllerARaidNowUses(t *testing.T) {
	x := newLeftoverScene(t)
	x.srv.Inject(spdktest.Fault{Method: "bdev_nvme_get_controllers", Params: json.RawMessage(`{"name":"` + leftRemote + `"}`),
		Then: func() { _, _ = x.srv.AddRaid("new-e-0", spdkrpc.NvmeBdevName(leftRemote, 1)) }})
	rep, err := x.run(t, x.records)
	if err != nil {
		t.Fatal(err)
	}
	if got := sorted(x.srv.ControllerNames()); !slices.Contains(got, leftRemote) {
		t.Fatalf("controllers %v: %s was detached from under a RAID bdev", got, leftRemote)
	}
	if got := x.srv.RaidNames(); !slices.Equal(got, []string{"new-e-0"}) {
		t.Errorf("RAID bdevs %v", got)
	}
	found := false
	for _, k := range rep.Kept {
		found = found || k.Object == "controller "+leftRemote && strings.Contains(k.Reason, "RAID bdev new-e-0")
	}
	if !found {
		t.Errorf("kept %+v: want %s kept for the RAID bdev", rep.Kept, leftRemote)
	}
}
