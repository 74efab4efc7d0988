package diskscan_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/diskscan/mocks"
	"github.com/caretaker-storage/caretaker/orphan"
)

// The whole loop through the orphan package: the Monitor scans, the
// Sweeper judges, plans and stores; a user requests deletion of one
// record; the next sweep purges it; a directory that vanishes drops its
// record; the disk turning into another filesystem forgets records and
// keeps data.
func TestEndToEndThroughOrphan(t *testing.T) {
	h := &adapterHarness{}
	o := h.Adapter(t).(*diskscan.Orphans)
	d := h.disk
	for _, n := range []string{"pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-own-r-000000ff"} {
		if err := diskscantest.MakeReplica(d.Path, n, diskscantest.Replica{}); err != nil {
			t.Fatal(err)
		}
	}
	h.exp.Add(diskscan.ReplicaRef{DiskID: d.UUID, DataDirectoryName: "pvc-own-r-000000ff"})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	changes := make(chan orphan.Observation, 8)
	mon, err := orphan.NewMonitor(o, orphan.MonitorOptions{Clock: clk, OnChange: func(obs orphan.Observation) { changes <- obs }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := mon.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer mon.Stop()
	store := orphan.NewMemStore()
	sw, err := orphan.NewSweeper(store, o, orphan.SweeperOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// The host says the node is Ready: a disk is Ready only under a Ready node.
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: d.NodeID},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: d.NodeID}: {Health: orphan.HealthReady}}}
	next := func() orphan.Snapshot {
		t.Helper()
		select {
		case obs := <-changes:
			if obs.Err != nil {
				t.Fatal(obs.Err)
			}
			cycle.ObservedAt = obs.StartedAt
			return obs.Snapshot
		case <-time.After(10 * time.Second): // a hang guard, not timing logic
			t.Fatal("no observation")
		}
		return orphan.Snapshot{}
	}

	snap := next()
	if _, res, err := sw.Reconcile(ctx, snap, cycle); err != nil || len(res.Created) != 2 {
		t.Fatalf("first sweep: %+v, %v", res, err)
	}
	recs, _ := store.List(ctx, orphan.Selector{})
	var aName string
	for _, r := range recs {
		if r.Param(orphan.ParamDataName) == "pvc-a-r-0000000a" {
			aName = r.Name
		}
	}
	if err := store.RequestDeletion(ctx, aName); err != nil {
		t.Fatal(err)
	}
	if _, res, err := sw.Reconcile(ctx, snap, cycle); err != nil || len(res.Purged) != 1 || res.Purged[0] != aName {
		t.Fatalf("purge sweep: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, diskscan.ReplicasDir, "pvc-a-r-0000000a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("purged directory: %v", err)
	}
	// The snapshot predates the purge. Even without Cycle.ObservedAt (a
	// host that forgot it, or a purge by another process), the Judge sees
	// the directory is gone and no record comes back for it.
	stale := cycle
	stale.ObservedAt = time.Time{}
	if _, res, err := sw.Reconcile(ctx, snap, stale); err != nil || len(res.Created) != 0 || store.Len() != 1 {
		t.Fatalf("stale snapshot after the purge: %+v, %v, %d records", res, err, store.Len())
	}

	// b vanishes: the next scan no longer lists it and its record goes.
	if err := os.RemoveAll(filepath.Join(d.Path, diskscan.ReplicasDir, "pvc-b-r-0000000b")); err != nil {
		t.Fatal(err)
	}
	if err := diskscantest.MakeReplica(d.Path, "pvc-c-r-0000000c", diskscantest.Replica{}); err != nil {
		t.Fatal(err)
	}
	mon.Rescan()
	snap = next()
	if _, res, err := sw.Reconcile(ctx, snap, cycle); err != nil || len(res.Forgotten) != 1 || len(res.Created) != 1 {
		t.Fatalf("after b vanished: %+v, %v", res, err)
	}

	// The host evicts the disk: records forgotten, data kept; they come
	// back once the eviction is over.
	evicted := cycle
	evicted.Scopes = map[orphan.Scope]orphan.ScopeStatus{d.Scope(): {Health: orphan.HealthDiskEvicted}}
	if _, res, err := sw.Reconcile(ctx, snap, evicted); err != nil || len(res.Forgotten) != 1 || store.Len() != 0 {
		t.Fatalf("evicted: %+v, %v, %d records", res, err, store.Len())
	}
	if _, err := os.Stat(filepath.Join(d.Path, diskscan.ReplicasDir, "pvc-c-r-0000000c", diskscan.MetaFile)); err != nil {
		t.Fatalf("eviction touched data: %v", err)
	}
	if _, res, err := sw.Reconcile(ctx, snap, cycle); err != nil || len(res.Created) != 1 {
		t.Fatalf("after the eviction: %+v, %v", res, err)
	}

	// The disk's UUID changes: its records are forgotten, data kept.
	if err := diskscantest.WriteConfig(d.Path, d.Name, "someone-else"); err != nil {
		t.Fatal(err)
	}
	mon.Rescan()
	snap = next()
	if st := snap.Scopes[d.Scope()]; st.Health != orphan.HealthDiskChanged || !strings.Contains(st.Message, "someone-else") {
		t.Fatalf("scope %+v", st)
	}
	if _, res, err := sw.Reconcile(ctx, snap, cycle); err != nil || len(res.Forgotten) != 1 || store.Len() != 0 {
		t.Fatalf("after the disk changed: %+v, %v, %d records", res, err, store.Len())
	}
	if _, err := os.Stat(filepath.Join(d.Path, diskscan.ReplicasDir, "pvc-c-r-0000000c", diskscan.MetaFile)); err != nil {
		t.Fatalf("forgotten data was touched: %v", err)
	}
}

// The generated mock stands in for a host's expected source.
func TestJudgeWithMockedSource(t *testing.T) {
	ctrl := gomock.NewController(t)
	src := mocks.NewMockExpectedSource(ctrl)
	d := diskscan.Disk{NodeID: "n", Name: "d", Path: "/var/lib/longhorn", UUID: "u"}
	src.EXPECT().Expected(gomock.Any(), d).Return(nil, errors.New("informer not synced"))
	src.EXPECT().Expected(gomock.Any(), d).Return(diskscan.NameSet{"pvc-1-r-12345678": {}}, nil)
	j, err := diskscan.NewOrphans(src, diskscan.Options{Disks: []diskscan.Disk{d}})
	if err != nil {
		t.Fatal(err)
	}
	it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: "n", DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
		orphan.ParamDataName: "pvc-1-r-12345678", orphan.ParamDiskName: "d", orphan.ParamDiskUUID: "u", orphan.ParamDiskPath: "/var/lib/longhorn"}}
	for _, want := range []orphan.Outcome{orphan.OutcomeUndecided, orphan.OutcomeOwned} {
		v, err := j.Judge(context.Background(), it)
		if err != nil || v.Outcome != want {
			t.Fatalf("%+v %v, want %v", v, err, want)
		}
	}
}
