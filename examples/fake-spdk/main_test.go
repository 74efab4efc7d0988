package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// serve starts the command with args and waits until it is ready; see
// clitest.Serve.
func serve(t *testing.T, args ...string) (string, *clitest.Buffer, func() int) {
	t.Helper()
	return clitest.Serve(t, runCommand, args...)
}

// TestRejoinScenario starts the default scenario, reads it with the real
// client, deletes an lvol through it, and stops on cancel, removing the
// socket.
func TestRejoinScenario(t *testing.T) {
	sock := filepath.Join(shortDir(t), "s.sock")
	got, out, stop := serve(t, "-socket", sock)
	if got != sock || !strings.Contains(out.String(), "socket: "+sock) || !strings.Contains(out.String(), "fake-spdk ready: 12 lvols in 1 lvstore, 4 RAID bdevs, 4 NVMe-oF subsystems, 3 NVMe controllers") {
		t.Fatalf("ready on %s, printed:\n%s", got, out.String())
	}
	ctx := context.Background()
	c, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	rt, err := spdk.ReadRuntime(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var engines, replicas []string
	for _, e := range rt.Engines {
		engines = append(engines, e.Name)
	}
	for _, r := range rt.Replicas {
		replicas = append(replicas, r.Name())
	}
	slices.Sort(engines)
	slices.Sort(replicas)
	if want := []string{"vol-detached-e-0", "vol-gone-e-0", "vol-live-e-0", "vol-moved-e-0"}; !slices.Equal(engines, want) {
		t.Errorf("RAID bdevs %v, want %v", engines, want)
	}
	if want := []string{"vol-detached-r-44444444", "vol-gone-r-33333333", "vol-image-r-22222222", "vol-live-r-11111111", "vol-redo-r-55555555"}; !slices.Equal(replicas, want) {
		t.Errorf("replica heads %v, want %v", replicas, want)
	}

	// The deleted volume's exposures and its engine's controller are
	// related to it by SPDK's own relations; the live remote's controller
	// by its Longhorn name.
	inv, _, err := spdk.ReadExposures(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, s := range inv.Subsystems {
		owners[s.NQN] = string(s.Owner.Kind) + " " + s.Owner.Name + " " + string(s.Owner.By)
	}
	for _, ctrl := range inv.Controllers {
		owners[ctrl.Name] = string(ctrl.Owner.Kind) + " " + ctrl.Owner.Name + " " + string(ctrl.Owner.By)
	}
	for k, want := range map[string]string{
		spdk.LonghornNQN("vol-gone-e-0"):        "engine-instance vol-gone-e-0 relation",
		spdk.LonghornNQN("vol-gone-r-33333333"): "replica-instance vol-gone-r-33333333 relation",
		spdk.LonghornNQN("vol-live-e-0"):        "engine-instance vol-live-e-0 relation",
		"vol-gone-r-66666666":                   "engine-instance vol-gone-e-0 relation",
		"vol-live-r-77777777":                   "replica-instance vol-live-r-77777777 name",
		spdk.LonghornNQN("vol-old-r-88888888"):  "replica-instance vol-old-r-88888888 name",
		"vol-old-r-99999999":                    "replica-instance vol-old-r-99999999 name",
	} {
		if owners[k] != want {
			t.Errorf("%s: owner %q, want %q", k, owners[k], want)
		}
	}
	if len(owners) != 7 {
		t.Errorf("exposures and controllers: %v", owners)
	}

	// The older volume's leftovers have no engine or replica here and no
	// record: they are removed; the live remote's controller has a record
	// and stays, and so does everything that goes with an engine's or a
	// replica's purge.
	records := &instancetest.MemLookup{}
	running := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-1", InstanceManager: "instance-manager-v2-node-1"}
	records.Put(orphan.KindEngineInstance, "vol-live-e-0", running)
	records.Put(orphan.KindReplicaInstance, "vol-live-r-11111111", running)
	records.Put(orphan.KindReplicaInstance, "vol-live-r-77777777", instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2"})
	orphans, err := spdk.NewOrphans(c, records, spdk.Options{NodeID: "node-1", InstanceManager: "instance-manager-v2-node-1"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := orphans.PurgeLeftoverExposures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var removed, kept []string
	for _, r := range rep.Removed {
		removed = append(removed, r.Object)
	}
	for _, k := range rep.Kept {
		kept = append(kept, k.Object)
	}
	slices.Sort(removed)
	if want := []string{"controller vol-old-r-99999999", "subsystem " + spdk.LonghornNQN("vol-old-r-88888888")}; !slices.Equal(removed, want) {
		t.Errorf("leftovers removed %v, want %v", removed, want)
	}
	if want := []string{"controller vol-live-r-77777777"}; !slices.Equal(kept, want) {
		t.Errorf("leftovers kept %v, want %v", kept, want)
	}
	inv, _, err = spdk.ReadExposures(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range inv.Subsystems {
		left = append(left, s.NQN)
	}
	for _, ctrl := range inv.Controllers {
		left = append(left, ctrl.Name)
	}
	if want := []string{spdk.LonghornNQN("vol-gone-e-0"), spdk.LonghornNQN("vol-gone-r-33333333"), spdk.LonghornNQN("vol-live-e-0"),
		"vol-gone-r-66666666", "vol-live-r-77777777"}; !slices.Equal(left, want) {
		t.Errorf("SPDK holds %v after the leftover pass, want %v", left, want)
	}

	// The snapshot trees are SPDK's: vol-gone's head sits under s2, under
	// s1, which also has the expired clone.
	lvols, err := spdkrpc.BdevLvolGetLvols(ctx, c, "disk-1")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]spdkrpc.Lvol{}
	for _, l := range lvols {
		byName[l.Name] = l
	}
	for name, snapshot := range map[string]bool{
		"vol-gone-r-33333333-snap-s1": true, "vol-gone-r-33333333-snap-s2": true, "bi-ubuntu-disk-1": true,
		"vol-gone-r-33333333": false, "vol-gone-r-33333333-expired-5e6f7a8b": false, "vol-redo-r-55555555": false,
	} {
		if l, ok := byName[name]; !ok || l.IsSnapshot != snapshot {
			t.Errorf("lvol %s: %+v, want snapshot=%v", name, l, snapshot)
		}
	}
	if l := byName["vol-gone-r-33333333-expired-5e6f7a8b"]; !l.IsClone {
		t.Errorf("the expired clone is not a clone: %+v", l)
	}

	if err := spdkrpc.BdevLvolDelete(ctx, c, "disk-1/vol-redo-r-55555555"); err != nil {
		t.Fatal(err)
	}
	if _, err := spdkrpc.BdevGetBdevs(ctx, c, "disk-1/vol-redo-r-55555555"); err == nil {
		t.Error("a deleted lvol is still served")
	}

	if code := stop(); code != 0 {
		t.Fatalf("exit %d after cancel", code)
	}
	if !strings.Contains(out.String(), "fake-spdk stopped") {
		t.Errorf("no stop line:\n%s", out.String())
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// TestSeedFile serves a seed file: a chain of snapshots with a second
// clone, and a RAID bdev over the head.
func TestSeedFile(t *testing.T) {
	dir := shortDir(t)
	seed := filepath.Join(dir, "seed.json")
	body := `{
  "lvstores": [{"name": "disk-2", "lvols": [
    {"name": "vol-r-1234abcd-snap-s1"},
    {"name": "vol-r-1234abcd-snap-s2", "parent": "vol-r-1234abcd-snap-s1"},
    {"name": "vol-r-1234abcd", "parent": "vol-r-1234abcd-snap-s2"},
    {"name": "vol-r-1234abcd-clone", "parent": "vol-r-1234abcd-snap-s1"}
  ]}],
  "raids": [{"name": "vol-e-0", "base": ["vol-r-1234abcd"]}]
}`
	if err := os.WriteFile(seed, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	sock, _, stop := serve(t, "-socket", filepath.Join(dir, "s.sock"), "-seed", seed)
	defer stop()
	ctx := context.Background()
	c, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	stores, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
	if err != nil || len(stores) != 1 || stores[0].Name != "disk-2" {
		t.Fatalf("lvstores %+v, %v", stores, err)
	}
	rt, err := spdk.ReadRuntime(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Replicas) != 2 || len(rt.Engines) != 1 || rt.Engines[0].Name != "vol-e-0" {
		t.Fatalf("runtime %+v", rt)
	}
	lvols, err := spdkrpc.BdevLvolGetLvols(ctx, c, "disk-2")
	if err != nil {
		t.Fatal(err)
	}
	snaps := 0
	for _, l := range lvols {
		if l.IsSnapshot {
			snaps++
		}
	}
	if len(lvols) != 4 || snaps != 2 {
		t.Fatalf("%d lvols, %d snapshots: %+v", len(lvols), snaps, lvols)
	}
	// s1 has two clones: deleting it is refused, as SPDK refuses it.
	if err := spdkrpc.BdevLvolDelete(ctx, c, "disk-2/vol-r-1234abcd-snap-s1"); err == nil {
		t.Error("deleting a snapshot with two clones succeeded")
	}
}
