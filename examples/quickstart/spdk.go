package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// maxSocketPath is the longest Unix socket path used as is: the kernel
// takes at most 107 bytes on Linux (sun_path is 108 with its NUL) and 103
// on macOS.
const maxSocketPath = 100

const (
	v2Node = "node-1"
	v2IM   = "instance-manager-v2-node-1"
)

// runSPDK starts a fake SPDK on a socket in dir, fills it with the runtime
// objects a node has after rejoining the cluster, and runs the v2 orphan
// loop: inventory, instance judgement, plan, records, deletion with the
// UUID and replica-record checks; then it removes the NVMe-oF leftovers
// no engine or replica holds any more (PurgeLeftoverExposures).
func runSPDK(ctx context.Context, w io.Writer, dir string) error {
	sock := filepath.Join(dir, "spdk.sock")
	if len(sock) > maxSocketPath {
		// A long $TMPDIR (macOS's is under /var/folders/) would leave no
		// room: the socket goes into a short directory of its own.
		short, err := os.MkdirTemp("/tmp", "caretaker-spdk-")
		if err != nil {
			return fmt.Errorf("the socket path %s is too long for a Unix socket, and no directory under /tmp could be made for it: %w", sock, err)
		}
		defer os.RemoveAll(short)
		sock = filepath.Join(short, "spdk.sock")
	}
	srv, err := spdktest.Start(sock, spdktest.Options{})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := buildV2Node(srv); err != nil {
		return err
	}
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		return err
	}
	defer client.Close()

	running := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: v2Node, InstanceManager: v2IM}
	stopped := instance.View{Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped, OwnerNodeID: v2Node}
	// The cluster's view of engines and replicas (Longhorn: the Engine and
	// Replica custom resources). MemLookup also counts its records
	// (spdk.RecordCounter), so an empty view would stop every purge.
	records := &instancetest.MemLookup{}
	records.Put(orphan.KindEngineInstance, "vol-live-e-0", running)
	records.Put(orphan.KindReplicaInstance, "vol-live-r-11111111", running)
	records.Put(orphan.KindReplicaInstance, "vol-image-r-22222222", running)
	records.Put(orphan.KindEngineInstance, "vol-moved-e-0", instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2", InstanceManager: "instance-manager-v2-node-2"})
	records.Put(orphan.KindEngineInstance, "vol-detached-e-0", stopped) // detached while node-1 was offline
	records.Put(orphan.KindReplicaInstance, "vol-detached-r-44444444", stopped)
	// A replica of another volume, running on node-2; an engine on
	// node-1 has attached it (an NVMe controller) and not yet built its
	// RAID bdev.
	records.Put(orphan.KindReplicaInstance, "vol-other-r-77777777", instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2", InstanceManager: "instance-manager-v2-node-2"})
	// vol-gone was deleted while node-1 was offline: no records, and
	// vol-redo's replica record was deleted too.

	orphans, err := spdk.NewOrphans(client, records, spdk.Options{NodeID: v2Node, InstanceManager: v2IM})
	if err != nil {
		return err
	}
	store := orphan.NewMemStore()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sweeper, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{Clock: clk})
	if err != nil {
		return err
	}
	policy, err := orphan.ParsePolicy("", "") // auto-deletion off: a user deletes the records
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "node-1 rejoined the cluster. Its SPDK still holds what it ran before:")
	snap, err := orphans.Scan(ctx)
	if err != nil {
		return err
	}
	for _, it := range snap.Items {
		v, err := orphans.Judge(ctx, it)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-16s %-24s uuid %s…  %-9s %s\n", it.Kind, it.Param(orphan.ParamInstanceName),
			it.Param(orphan.ParamInstanceUUID)[:8], v.Outcome, shortReason(afterColon(v.Reason)))
	}
	for _, s := range snap.Skipped {
		if !strings.HasPrefix(s.Reason, "nvmf: ") { // listed with the exposures
			fmt.Fprintf(w, "  skipped %s: %s\n", s.Name, s.Reason)
		}
	}
	if err := printExposures(ctx, w, client, orphans); err != nil {
		return err
	}
	fmt.Fprintln(w, "  (vol-detached is a detached volume: its replica record is stopped, and its head")
	fmt.Fprintln(w, "  lvol and snapshots are the volume's data. The proposal longhorn/longhorn#10933 would call")
	fmt.Fprintln(w, "  it an orphan; longhorn-manager's createOrphanForInstances never does (v1 only), and neither")
	fmt.Fprintln(w, "  does caretaker. Its engine's RAID bdev")
	fmt.Fprintln(w, "  holds no data and is an orphan.)")

	// The host knows node-1 is up and not being evicted; SPDK answering
	// only says the runtime was read completely.
	cyc := orphan.Cycle{Selector: orphan.Selector{NodeID: v2Node}, Policy: policy,
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: v2Node}: {Health: orphan.HealthReady}}}
	plan, _, err := sweeper.Reconcile(ctx, snap, cyc)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nPlan: %d orphan records to create, %d to purge (auto-deletion is off).\n", len(plan.Create), len(plan.Purge))
	recs, err := store.List(ctx, orphan.Selector{})
	if err != nil {
		return err
	}
	slices.SortFunc(recs, func(a, b orphan.Record) int {
		return strings.Compare(a.Param(orphan.ParamInstanceName), b.Param(orphan.ParamInstanceName))
	})
	for _, r := range recs {
		fmt.Fprintf(w, "  record %s…  %-16s %s\n", r.Name[:15], r.Kind, r.Param(orphan.ParamInstanceName))
	}

	fmt.Fprintln(w, "\nA user deletes every orphan record. Meanwhile vol-redo's head lvol is deleted and")
	fmt.Fprintln(w, "created again under the same name (a new UUID) right before its purge.")
	for _, r := range recs {
		if err := store.RequestDeletion(ctx, r.Name); err != nil {
			return err
		}
	}
	// The judge looks the head up by UUID twice (planning, then right
	// before the purge); it is recreated after the second look.
	var redo orphan.Record
	for _, r := range recs {
		if r.Param(orphan.ParamInstanceName) == "vol-redo-r-55555555" {
			redo = r
		}
	}
	looks := 0
	srv.Inject(spdktest.Fault{Method: "bdev_get_bdevs", Params: json.RawMessage(`{"name":"` + redo.Param(orphan.ParamInstanceUUID) + `"}`), Times: 2,
		Then: func() {
			if looks++; looks == 2 {
				_, _ = srv.RecreateLvol("disk-1", "vol-redo-r-55555555")
			}
		}})
	snap, err = orphans.Scan(ctx)
	if err != nil {
		return err
	}
	_, res, err := sweeper.Reconcile(ctx, snap, cyc)
	if err != nil {
		return err
	}
	byName := map[string]string{}
	for _, r := range recs {
		byName[r.Name] = r.Param(orphan.ParamInstanceName)
	}
	purged := make([]string, 0, len(res.Purged))
	for _, n := range res.Purged {
		purged = append(purged, byName[n])
	}
	slices.Sort(purged)
	fmt.Fprintf(w, "  purged:  %s\n", strings.Join(purged, ", "))
	for _, rf := range res.Refused {
		reason := "other"
		if strings.Contains(rf.Reason, "UUID does not match") {
			reason = "runtime UUID does not match the record (ErrUUIDMismatch): nothing deleted"
		}
		fmt.Fprintf(w, "  refused: %s: %s\n", byName[rf.Name], reason)
	}

	// What no purge removes: exposures and controllers whose engine or
	// replica this node no longer runs.
	fmt.Fprintln(w, "\nAfter the purges, the leftovers no engine or replica holds any more (PurgeLeftoverExposures):")
	left, err := orphans.PurgeLeftoverExposures(ctx)
	if err != nil {
		return err
	}
	for _, r := range left.Removed {
		fmt.Fprintf(w, "  removed %s: %s\n", r.Object, r.Reason)
	}
	for _, k := range left.Kept {
		fmt.Fprintf(w, "  kept    %s: %s\n", k.Object, k.Reason)
	}
	fmt.Fprintln(w, "  (Removed only when the NQN or the controller's name and subnqn are a Longhorn engine's or")
	fmt.Fprintln(w, "  replica's, no record of that name exists, no namespace exposes an existing bdev and no RAID")
	fmt.Fprintln(w, "  bdev uses the controller, each asked again right before the call that removes it.)")

	fmt.Fprintln(w, "\nLeft in SPDK:")
	for _, a := range srv.LvolAliases() {
		fmt.Fprintf(w, "  lvol %s\n", a)
	}
	for _, r := range srv.RaidNames() {
		fmt.Fprintf(w, "  raid %s\n", r)
	}
	for _, ss := range srv.Subsystems() {
		if ss.Subtype != spdkrpc.SubtypeDiscovery {
			fmt.Fprintf(w, "  subsystem %s\n", ss.NQN)
		}
	}
	for _, c := range srv.ControllerNames() {
		fmt.Fprintf(w, "  controller %s\n", c)
	}
	return nil
}

// printExposures lists the NVMe-oF subsystems and NVMe controllers with
// the engine or replica each belongs to and its verdict.
func printExposures(ctx context.Context, w io.Writer, c spdkrpc.Caller, orphans *spdk.Orphans) error {
	inv, rt, err := spdk.ReadExposures(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "  NVMe-oF exposures and attached controllers (Longhorn names them nqn.2023-01.io.longhorn.spdk:<name>):")
	findings := orphans.JudgeExposures(ctx, inv, rt)
	names := make([]string, 0, len(findings))
	for _, s := range inv.Subsystems {
		names = append(names, "subsystem …:"+strings.TrimPrefix(s.NQN, spdk.LonghornNQNPrefix))
	}
	for _, ctrl := range inv.Controllers {
		names = append(names, "controller "+ctrl.Name)
	}
	for i, f := range findings {
		owner := strings.TrimSuffix(string(f.Owner.Kind), "-instance")
		what := "kept with its " + owner
		switch {
		case !f.WithOwner && f.Verdict.Outcome == orphan.OutcomeOrphan:
			what = "leftover: no record, no " + owner + " here"
		case !f.WithOwner:
			what = "reported, kept: " + f.Verdict.Reason
		case f.Verdict.Outcome == orphan.OutcomeOrphan:
			what = "removed by its " + owner + "'s purge"
		}
		fmt.Fprintf(w, "    %-31s %-16s %-24s %-9s %s\n", names[i], f.Owner.Kind, f.Owner.Name, f.Verdict.Outcome, what)
	}
	fmt.Fprintln(w, "  (A purge stops exposing first, namespace then subsystem, then deletes the RAID bdev or the")
	fmt.Fprintln(w, "  lvols, then detaches the controllers the RAID bdev was built on: longhorn-spdk-engine's")
	fmt.Fprintln(w, "  Engine.Delete order. Each step re-reads what it removes and asks the records again.)")
	return nil
}

// buildV2Node creates the runtime objects: a live volume, a live replica
// on a backing image, the engine of a volume that moved to node-2, a
// detached volume (its engine's RAID bdev left behind, its replica with a
// snapshot), a volume deleted while the node was offline (engine on a
// controller to its remote replica, plus a replica with snapshots and an
// expired clone, both still exposed over NVMe-oF), a replica whose record
// was deleted and is about to be recreated, a controller to a live
// replica on node-2, and an older volume's leftovers: an empty subsystem
// of its local replica and a controller to its remote one.
func buildV2Node(srv *spdktest.Server) error {
	steps := []func() (string, error){
		func() (string, error) { return srv.AddLvstore("disk-1") },
		func() (string, error) { return srv.AddLvol("disk-1", "vol-live-r-11111111") },
		func() (string, error) {
			return srv.Snapshot("disk-1", "vol-live-r-11111111", "vol-live-r-11111111-snap-hourly")
		},
		func() (string, error) { return srv.AddRaid("vol-live-e-0", "vol-live-r-11111111") },
		func() (string, error) { return srv.AddLvol("disk-1", "bi-ubuntu-disk-1-temp-head") },
		func() (string, error) {
			return srv.Snapshot("disk-1", "bi-ubuntu-disk-1-temp-head", "bi-ubuntu-disk-1")
		},
		func() (string, error) { return srv.Clone("disk-1", "bi-ubuntu-disk-1", "vol-image-r-22222222") },
		func() (string, error) { return srv.AddRaid("vol-moved-e-0", "remote-replica-n1") },
		func() (string, error) { return srv.AddLvol("disk-1", "vol-detached-r-44444444") },
		func() (string, error) {
			return srv.Snapshot("disk-1", "vol-detached-r-44444444", "vol-detached-r-44444444-snap-daily")
		},
		func() (string, error) { return srv.AddRaid("vol-detached-e-0", "remote-replica-n2") },
		// vol-gone's engine reached its other replica, on node-2, through
		// an NVMe controller named after it (longhorn-spdk-engine
		// connectNVMfBdev), and built its RAID bdev on that bdev.
		func() (string, error) {
			return srv.AttachController("vol-gone-r-66666666", remoteReplica("vol-gone-r-66666666", "20001"))
		},
		func() (string, error) { return srv.AddRaid("vol-gone-e-0", "vol-gone-r-66666666n1") },
		func() (string, error) {
			return srv.AttachController("vol-other-r-77777777", remoteReplica("vol-other-r-77777777", "20011"))
		},
		func() (string, error) { return srv.AddLvol("disk-1", "vol-gone-r-33333333") },
		func() (string, error) {
			return srv.Snapshot("disk-1", "vol-gone-r-33333333", "vol-gone-r-33333333-snap-s1")
		},
		func() (string, error) {
			return srv.Snapshot("disk-1", "vol-gone-r-33333333", "vol-gone-r-33333333-snap-s2")
		},
		func() (string, error) {
			return srv.Clone("disk-1", "vol-gone-r-33333333-snap-s1", "vol-gone-r-33333333-expired-5e6f7a8b")
		},
		func() (string, error) { return srv.AddLvol("disk-1", "vol-redo-r-55555555") },
		// An interrupted purge of vol-old (longhorn/longhorn#13114): the
		// subsystem of its local replica, whose lvols are gone, stayed
		// behind empty, and so did the controller its engine had attached
		// to its remote replica on node-3, after the RAID bdev went.
		func() (string, error) { return "", expose(srv, "vol-old-r-88888888", "", "20021") },
		func() (string, error) {
			return srv.AttachController("vol-old-r-99999999", spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.3", Trsvcid: "20001", Subnqn: spdk.LonghornNQN("vol-old-r-99999999")})
		},
		// What Longhorn exposes: the engines' RAID bdevs and a replica's
		// head (go-spdk-helper StartExposeBdev); vol-gone's are leftovers.
		func() (string, error) { return "", expose(srv, "vol-live-e-0", "vol-live-e-0", "20001") },
		func() (string, error) { return "", expose(srv, "vol-gone-e-0", "vol-gone-e-0", "20002") },
		func() (string, error) {
			return "", expose(srv, "vol-gone-r-33333333", "disk-1/vol-gone-r-33333333", "20012")
		},
	}
	for _, step := range steps {
		if _, err := step(); err != nil {
			return err
		}
	}
	return nil
}

// remoteReplica is where a replica on node-2 is exposed.
func remoteReplica(name, port string) spdkrpc.NvmeTransportID {
	return spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.2", Trsvcid: port, Subnqn: spdk.LonghornNQN(name)}
}

// expose exposes bdev (none if "") under Longhorn's NQN for name, on a
// TCP listener.
func expose(srv *spdktest.Server, name, bdev, port string) error {
	nqn := spdk.LonghornNQN(name)
	if err := srv.AddSubsystem(nqn, spdktest.SubsystemOptions{AllowAnyHost: true}); err != nil {
		return err
	}
	if bdev != "" {
		if _, err := srv.AddNamespace(nqn, bdev); err != nil {
			return err
		}
	}
	return srv.AddListener(nqn, spdkrpc.NvmfListenAddress{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.1", Trsvcid: port})
}

// shortReason cuts a verdict reason at its first ';'.
func shortReason(s string) string {
	before, _, _ := strings.Cut(s, ";")
	return before
}

// afterColon drops the "<kind> <name>: " prefix of a verdict reason.
func afterColon(s string) string {
	if _, after, ok := strings.Cut(s, ": "); ok {
		return after
	}
	return s
}
