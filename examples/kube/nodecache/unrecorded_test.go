package nodecache_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
	"github.com/caretaker-storage/caretaker/orphan"
)

// TestUnrecordedLeavesOutWhatHasARecord: a candidate with a record was
// confirmed when it was recorded, so only the others are candidates.
func TestUnrecordedLeavesOutWhatHasARecord(t *testing.T) {
	item := func(data string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaData, NodeID: "n1", Parameters: map[string]string{
			orphan.ParamDiskName: "d", orphan.ParamDiskPath: "/var/lib/longhorn", orphan.ParamDiskUUID: "u1",
			orphan.ParamDataName: data,
		}}
	}
	recorded, fresh := item("vol-a-0123abcd"), item("vol-b-4567ef01")
	name, err := recorded.Name()
	if err != nil {
		t.Fatal(err)
	}
	snap := orphan.Snapshot{Items: []orphan.Item{recorded, fresh}}
	got := nodecache.Unrecorded(snap, []orphan.Record{{Name: name}})
	if len(got) != 1 || !got[nodecache.CandidateKey(fresh)] {
		t.Fatalf("candidates %v, want only %s", got, nodecache.CandidateKey(fresh))
	}
	if got := nodecache.Unrecorded(snap, nil); len(got) != 2 {
		t.Fatalf("with no records, candidates %v, want both items", got)
	}
}
