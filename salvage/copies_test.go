package salvage_test

import (
	"context"
	"path/filepath"
	"testing"

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
