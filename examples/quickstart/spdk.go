package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

const (
	v2Node = "node-1"
	v2IM   = "instance-manager-v2-node-1"
)

// runSPDK starts a fake SPDK on a socket in dir, fills it with the runtime
// objects a node has after rejoining the cluster, and runs the v2 orphan
// loop: inventory, instance judgement, plan, records, deletion with the
// UUID and replica-record checks.
func runSPDK(ctx context.Context, w io.Writer, dir string) error {
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := buildV2Node(srv); err != nil {
		return err
	}
	client := spdk.NewClient(spdk.ClientOptions{SocketPath: srv.SocketPath()})
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
		fmt.Fprintf(w, "  skipped %s: %s\n", s.Name, s.Reason)
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
	plan, _, err := sweeper.Run(ctx, snap, cyc)
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
	_, res, err := sweeper.Run(ctx, snap, cyc)
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
	fmt.Fprintln(w, "\nLeft in SPDK:")
	for _, a := range srv.LvolAliases() {
		fmt.Fprintf(w, "  lvol %s\n", a)
	}
	for _, r := range srv.RaidNames() {
		fmt.Fprintf(w, "  raid %s\n", r)
	}
	return nil
}

// buildV2Node creates the runtime objects: a live volume, a live replica
// on a backing image, the engine of a volume that moved to node-2, a
// detached volume (its engine's RAID bdev left behind, its replica with a
// snapshot), a volume deleted while the node was offline (engine plus a
// replica with snapshots and an expired clone), and a replica whose record
// was deleted and is about to be recreated.
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
		func() (string, error) { return srv.AddRaid("vol-gone-e-0", "remote-replica-n3") },
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
	}
	for _, step := range steps {
		if _, err := step(); err != nil {
			return err
		}
	}
	return nil
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
