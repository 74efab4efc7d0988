package orphanctrl

import (
	"fmt"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestPacedKeepsEveryRecordedItem: of a snapshot of ten items, three of
// which have records, a limit of two keeps the three and the first two
// new ones, holds five back, and holds back one just created though the
// list does not show it yet (the next new one takes its place).
func TestPacedKeepsEveryRecordedItem(t *testing.T) {
	var snap orphan.Snapshot
	var recs []orphan.Record
	names := make([]string, 10)
	for i := range 10 {
		it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: "n1", DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
			orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn", orphan.ParamDiskUUID: "u-1",
			orphan.ParamDataName: fmt.Sprintf("pvc-a-%08d", i)}}
		snap.Items = append(snap.Items, it)
		var err error
		if names[i], err = it.Name(); err != nil {
			t.Fatal(err)
		}
		if i == 1 || i == 5 || i == 9 {
			r, err := orphan.NewRecord(it, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
	}
	none := func(string) bool { return false }
	got, held := paced(snap, recs, 2, none)
	var kept []int
	for _, it := range got.Items {
		for i, n := range names {
			if name, _ := it.Name(); name == n {
				kept = append(kept, i)
			}
		}
	}
	if fmt.Sprint(kept) != "[0 1 2 5 9]" || held != 5 {
		t.Errorf("kept items %v, held %d; want [0 1 2 5 9], 5", kept, held)
	}
	if _, held := paced(snap, recs, 100, none); held != 0 {
		t.Errorf("held %d under a limit above the new items; want 0", held)
	}
	got, held = paced(snap, recs, 2, func(n string) bool { return n == names[0] })
	if len(got.Items) != 5 || held != 5 {
		t.Errorf("with item 0 just created: %d items, held %d; want 5 (1, 2, 3, 5, 9), 5", len(got.Items), held)
	}
	for _, it := range got.Items {
		if n, _ := it.Name(); n == names[0] {
			t.Errorf("the item just created was planned again")
		}
	}
}
