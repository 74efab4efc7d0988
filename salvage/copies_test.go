package salvage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage"
)

// TestCopyInventoryFillsTheRecord: diskscan lists the unexpected
// directories; the wrapper says which are recoverable copies and ranks
// them per volume, and which holds no data (never ranked, whatever its
// revision counter).
func TestCopyInventoryFillsTheRecord(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	if err := diskscantest.NewDisk(disk, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	good := threeLayers()
	stale := threeLayers()
	stale.Revision = 10
	broken := threeLayers()
	broken.Rebuilding = true
	write(t, disk, "pvc-1-00000001", good)
	write(t, disk, "pvc-1-00000002", stale)
	write(t, disk, "pvc-1-00000003", broken)
	fresh := emptyReplica() // never written; its counter would rank it first
	fresh.Revision = 1000
	write(t, disk, "pvc-1-00000004", fresh)
	write(t, disk, "pvc-2-00000001", good) // expected: not an orphan
	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{Name: "pvc-2-r", NodeID: "node-1", DiskID: "uuid-1", DiskPath: disk, DataDirectoryName: "pvc-2-00000001"})
	inner, err := diskscan.NewOrphans(expected, diskscan.Options{Disks: []diskscan.Disk{{NodeID: "node-1", Name: "disk-1", Path: disk, UUID: "uuid-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := salvage.WithCopies(inner, salvage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := adapter.(orphan.Finisher); !ok {
		t.Error("the wrapped adapter lost diskscan's Finisher")
	}
	before := snapshot(t, disk)
	snap, err := adapter.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]orphan.Copy{
		"pvc-1-00000001": {Volume: "pvc-1", Recoverable: true, Revision: 42, Rank: 1},
		"pvc-1-00000002": {Volume: "pvc-1", Recoverable: true, Revision: 10, Rank: 2},
		"pvc-1-00000003": {Volume: "pvc-1", Recoverable: false, Revision: 42, Rank: 0},
		"pvc-1-00000004": {Volume: "pvc-1", Recoverable: true, Revision: 1000, Rank: 0, NoData: true},
	}
	if len(snap.Items) != len(want) {
		t.Fatalf("%d items, want %d: %+v", len(snap.Items), len(want), snap.Items)
	}
	for _, it := range snap.Items {
		w, c := want[it.Param(orphan.ParamDataName)], it.Copy
		if c == nil || c.Volume != w.Volume || c.Recoverable != w.Recoverable || c.NoData != w.NoData || c.Revision != w.Revision || c.Rank != w.Rank || (len(c.Reasons) > 0) == w.Recoverable {
			t.Errorf("%s: copy %+v, want %+v", it.Param(orphan.ParamDataName), c, w)
		}
		// The reuse hint's head and size, for a recoverable copy only.
		if c != nil && c.Recoverable && !c.NoData && (c.Head != "volume-head-002.img" || c.Size != 4*mib) || c != nil && (!c.Recoverable || c.NoData) && (c.Head != "" || c.Size != 0) {
			t.Errorf("%s: head %q, size %d", it.Param(orphan.ParamDataName), c.Head, c.Size)
		}
	}
	if !equalSnapshots(before, snapshot(t, disk)) {
		t.Error("the scan changed the disk")
	}
}

// TestWithCopiesRechecksNoDataAtThePurge: a faulted volume's copy that a
// scan found holding no data is planned for purge from that snapshot;
// data is written to it before the purge. The purge is refused (the
// Deleter inspects it again), the data stays, and the next scan keeps it
// under the last-copy guard. Once the volume is deleted, the copy with
// data goes: the re-check does not keep it forever.
func TestWithCopiesRechecksNoDataAtThePurge(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("diskscan runs on Linux")
	}
	ctx := context.Background()
	d := diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: filepath.Join(t.TempDir(), "disk"), UUID: "uuid-1"}
	if err := diskscantest.NewDisk(d.Path, d.Name, d.UUID); err != nil {
		t.Fatal(err)
	}
	const emptyDir = "pvc-x-0000000e"
	dir := write(t, d.Path, emptyDir, emptyReplica())
	var refs []diskscan.ReplicaRef
	for i := range 6 {
		name := fmt.Sprintf("pvc-w%d-0000000%d", i, i)
		write(t, d.Path, name, threeLayers())
		refs = append(refs, diskscan.ReplicaRef{Name: name + "-r", NodeID: d.NodeID, DiskID: d.UUID, DiskPath: d.Path, DataDirectoryName: name})
	}
	inner, err := diskscan.NewOrphans(diskscan.NewStaticExpected(refs...), diskscan.Options{Disks: []diskscan.Disk{d}})
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := salvage.WithCopies(inner, salvage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := adapter.(orphan.Finisher); !ok {
		t.Fatal("the wrapped adapter lost diskscan's Finisher")
	}
	store := orphan.NewMemStore()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	sweeper, err := orphan.NewSweeper(store, adapter, orphan.SweeperOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: d.NodeID},
		Scopes:  map[orphan.Scope]orphan.ScopeStatus{{NodeID: d.NodeID}: {Health: orphan.HealthReady}},
		Policy:  orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
		Volumes: map[string]orphan.VolumeState{"pvc-x": orphan.VolumeFaulted}}
	scan := func() orphan.Snapshot {
		t.Helper()
		snap, err := adapter.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Items) != 1 || snap.Items[0].Copy == nil {
			t.Fatalf("items %+v", snap.Items)
		}
		return snap
	}
	old := scan()
	if !old.Items[0].Copy.NoData {
		t.Fatalf("copy %+v, want NoData", *old.Items[0].Copy)
	}
	if _, _, err := sweeper.Reconcile(ctx, old, cycle); err != nil { // records it
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	// The volume's data arrives after the scan.
	f, err := os.OpenFile(filepath.Join(dir, "volume-head-001.img"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("the user's writes"), 8192); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, res, err := sweeper.Reconcile(ctx, old, cycle)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Purged) != 0 || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, salvage.ErrDataAppeared.Error()) {
		t.Fatalf("purged %v refused %+v; want the purge refused because data appeared", res.Purged, res.Refused)
	}
	rec, err := orphan.NewRecord(old.Items[0], clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := adapter.Delete(ctx, rec); !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, salvage.ErrDataAppeared) {
		t.Fatalf("Delete = %v, want ErrPreconditionFailed and ErrDataAppeared", err)
	} else if !strings.HasPrefix(err.Error(), "salvage: ") {
		t.Errorf("Delete = %q, want salvage's prefix", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "volume-head-001.img")); err != nil {
		t.Fatalf("the data was deleted: %v", err)
	}
	// The next scan sees the data: the guard keeps the copy of the
	// faulted volume.
	clk.Step(time.Minute)
	now := scan()
	if now.Items[0].Copy.NoData {
		t.Fatal("NoData after the write")
	}
	if _, res, err = sweeper.Reconcile(ctx, now, cycle); err != nil || len(res.Purged) != 0 || len(res.Refused) != 1 || !strings.HasPrefix(res.Refused[0].Reason, "LastCopy") {
		t.Fatalf("purged %v refused %+v (%v); want LastCopy", res.Purged, res.Refused, err)
	}
	// The volume is deleted: its copy goes.
	clk.Step(time.Minute)
	cycle.Volumes, cycle.VolumesComplete = nil, true
	if _, res, err = sweeper.Reconcile(ctx, scan(), cycle); err != nil || len(res.Purged) != 1 {
		t.Fatalf("purged %v refused %+v (%v); want the deleted volume's copy purged", res.Purged, res.Refused, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there: %v", dir, err)
	}
}
