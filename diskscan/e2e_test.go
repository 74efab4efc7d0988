package diskscan_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/diskscan/mocks"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// deleterHarness runs orphantest's Deleter conformance suite on real disks.
type deleterHarness struct {
	disk  diskscan.Disk
	disks *diskscan.DiskSet
	exp   *diskscan.StaticExpected
	n     atomic.Int64
}

func newHarness(t *testing.T) *deleterHarness {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	if err := diskscantest.NewDisk(p, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	fsid, err := diskscan.FSID(p)
	if err != nil {
		t.Fatal(err)
	}
	d := diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: p, UUID: "uuid-1", FSID: fsid}
	set, err := diskscan.NewDiskSet(d)
	if err != nil {
		t.Fatal(err)
	}
	// A live replica expected on the disk: the Deleter refuses to purge
	// on a disk whose expected set is empty (ErrNoneExpected).
	live := diskscan.ReplicaRef{NodeID: d.NodeID, DiskID: d.UUID, DiskPath: d.Path, DataDirectoryName: "pvc-live-r-0000000f"}
	if err := diskscantest.MakeReplica(p, live.DataDirectoryName, diskscantest.Replica{}); err != nil {
		t.Fatal(err)
	}
	return &deleterHarness{disk: d, disks: set, exp: diskscan.NewStaticExpected(live)}
}

func (h *deleterHarness) Deleter(*testing.T) orphan.Deleter {
	return diskscan.NewDeleter(h.disks, h.exp, diskscan.Options{})
}

func (h *deleterHarness) MakeOrphan(t *testing.T) orphan.Record {
	n := h.n.Add(1)
	name := fmt.Sprintf("pvc-%d-r-%08x", n, n)
	if err := diskscantest.MakeReplica(h.disk.Path, name, diskscantest.Replica{Written: 4096}); err != nil {
		t.Fatal(err)
	}
	r, err := orphan.NewRecord(orphan.Item{
		Kind: orphan.KindReplicaData, NodeID: h.disk.NodeID, DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{
			orphan.ParamDataName: name, orphan.ParamDiskName: h.disk.Name, orphan.ParamDiskUUID: h.disk.UUID,
			orphan.ParamDiskPath: h.disk.Path, orphan.ParamDiskType: diskscan.DiskType,
		},
	}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *deleterHarness) Claim(_ *testing.T, r orphan.Record) {
	h.exp.Add(diskscan.ReplicaRef{DiskID: r.Param(orphan.ParamDiskUUID), DataDirectoryName: r.Param(orphan.ParamDataName)})
}

func (h *deleterHarness) Exists(t *testing.T, r orphan.Record) bool {
	_, err := os.Lstat(filepath.Join(h.disk.Path, diskscan.ReplicasDir, r.Param(orphan.ParamDataName)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestDeleterConformance(t *testing.T) {
	orphantest.RunDeleterTests(t, newHarness(t))
}

// The whole loop through the orphan package: the Monitor scans, the
// Sweeper judges, plans and stores; a user requests deletion of one
// record; the next sweep purges it; a directory that vanishes drops its
// record; the disk turning into another filesystem forgets records and
// keeps data.
func TestEndToEndThroughOrphan(t *testing.T) {
	h := newHarness(t)
	d := h.disk
	for _, n := range []string{"pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-own-r-000000ff"} {
		if err := diskscantest.MakeReplica(d.Path, n, diskscantest.Replica{}); err != nil {
			t.Fatal(err)
		}
	}
	h.exp.Add(diskscan.ReplicaRef{DiskID: d.UUID, DataDirectoryName: "pvc-own-r-000000ff"})
	inv := diskscan.NewInventory(h.disks, h.exp, diskscan.Options{})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	changes := make(chan orphan.Observation, 8)
	mon := orphan.NewMonitor(inv, orphan.MonitorOptions{Clock: clk, OnChange: func(o orphan.Observation) { changes <- o }})
	ctx := t.Context()
	if err := mon.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer mon.Stop()
	store := orphan.NewMemStore()
	sw := &orphan.Sweeper{Store: store, Judge: diskscan.NewJudge(h.disks, h.exp), Deleter: diskscan.NewDeleter(h.disks, h.exp, diskscan.Options{}), Clock: clk}
	// The host says the node is Ready: a disk is Ready only under a Ready node.
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: d.NodeID},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: d.NodeID}: {Health: orphan.HealthReady}}}
	next := func() orphan.Snapshot {
		t.Helper()
		select {
		case o := <-changes:
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			return o.Snapshot
		case <-time.After(10 * time.Second): // a hang guard, not timing logic
			t.Fatal("no observation")
		}
		return orphan.Snapshot{}
	}

	snap := next()
	if _, res, err := sw.Run(ctx, snap, cycle); err != nil || len(res.Created) != 2 {
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
	if _, res, err := sw.Run(ctx, snap, cycle); err != nil || len(res.Purged) != 1 || res.Purged[0] != aName {
		t.Fatalf("purge sweep: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, diskscan.ReplicasDir, "pvc-a-r-0000000a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("purged directory: %v", err)
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
	if _, res, err := sw.Run(ctx, snap, cycle); err != nil || len(res.Forgotten) != 1 || len(res.Created) != 1 {
		t.Fatalf("after b vanished: %+v, %v", res, err)
	}

	// The host evicts the disk: records forgotten, data kept; they come
	// back once the eviction is over.
	evicted := cycle
	evicted.Scopes = map[orphan.Scope]orphan.ScopeStatus{d.Scope(): {Health: orphan.HealthDiskEvicted}}
	if _, res, err := sw.Run(ctx, snap, evicted); err != nil || len(res.Forgotten) != 1 || store.Len() != 0 {
		t.Fatalf("evicted: %+v, %v, %d records", res, err, store.Len())
	}
	if _, err := os.Stat(filepath.Join(d.Path, diskscan.ReplicasDir, "pvc-c-r-0000000c", diskscan.MetaFile)); err != nil {
		t.Fatalf("eviction touched data: %v", err)
	}
	if _, res, err := sw.Run(ctx, snap, cycle); err != nil || len(res.Created) != 1 {
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
	if _, res, err := sw.Run(ctx, snap, cycle); err != nil || len(res.Forgotten) != 1 || store.Len() != 0 {
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
	set, _ := diskscan.NewDiskSet(d)
	src.EXPECT().Expected(gomock.Any(), d).Return(nil, errors.New("informer not synced"))
	src.EXPECT().Expected(gomock.Any(), d).Return(diskscan.NameSet{"pvc-1-r-12345678": {}}, nil)
	j := diskscan.NewJudge(set, src)
	it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: "n", DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
		orphan.ParamDataName: "pvc-1-r-12345678", orphan.ParamDiskName: "d", orphan.ParamDiskUUID: "u", orphan.ParamDiskPath: "/var/lib/longhorn"}}
	for _, want := range []orphan.Outcome{orphan.OutcomeUndecided, orphan.OutcomeOwned} {
		v, err := j.Judge(context.Background(), it)
		if err != nil || v.Outcome != want {
			t.Fatalf("%+v %v, want %v", v, err, want)
		}
	}
}
