package orphan_test

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/caretaker-storage/caretaker/orphan"
)

// An orphaned replica directory an inspection found recoverable
// (salvage.CopyInventory fills Item.Copy), of a volume that is faulted: its
// new record carries the verdict, with what a host needs to re-adopt it
// as a failed replica.
func ExampleConditionRecoverable() {
	it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
		orphan.ParamDataName: "pvc-a-1b2c3d4e", orphan.ParamDiskName: "disk-1", orphan.ParamDiskUUID: "uuid-1",
		orphan.ParamDiskPath: "/var/lib/longhorn", orphan.ParamDiskType: "filesystem"}}
	it.Copy = &orphan.Copy{Volume: "pvc-a", Recoverable: true, Revision: 42, Rank: 1, Head: "volume-head-002.img", Size: 1 << 30}
	plan := orphan.Decide(orphan.Input{
		Now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Scopes: map[orphan.Scope]orphan.ScopeStatus{
			{NodeID: "node-1"}:                 {Health: orphan.HealthReady},
			{NodeID: "node-1", Disk: "disk-1"}: {Health: orphan.HealthReady},
		},
		Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("no replica expects it")}},
		Volumes:    map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted},
	})
	c := meta.FindStatusCondition(plan.Create[0].Conditions, orphan.ConditionRecoverable)
	fmt.Println(c.Status, c.Reason)
	fmt.Println(c.Message)
	// Output:
	// True Reusable
	// volume pvc-a: a recoverable copy, revision counter 42, rank 1 among the copies of the volume seen (1 is the best); volume pvc-a is faulted: to re-adopt this copy as a failed replica: dataDirectoryName=pvc-a-1b2c3d4e diskPath=/var/lib/longhorn head=volume-head-002.img size=1073741824 revisionCounter=42
}
