package orphan_test

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// A host built on longhorn-manager's types reads an Orphan into a Record
// and writes a plan's condition changes back into its status, with no
// conversion of its own beyond copying the condition fields.
func ExampleRecordFromLonghorn() {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	params := map[string]string{orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn",
		orphan.ParamDiskUUID: "uuid-1", orphan.ParamDataName: "pvc-1-0123abcd"}
	// What the host holds: o.ObjectMeta, o.Spec, o.Status.Conditions.
	meta := metav1.ObjectMeta{Name: orphan.ReplicaDataName("node-1", "disk-1", "/var/lib/longhorn", "uuid-1", "pvc-1-0123abcd"),
		CreationTimestamp: metav1.NewTime(created)}
	spec := orphan.LonghornOrphanSpec{NodeID: "node-1", OrphanType: "replica", DataEngine: "v1", Parameters: params}
	var conds []orphan.LonghornCondition // o.Status.Conditions, converted field by field

	r, err := orphan.RecordFromLonghorn(meta, spec, conds)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Kind, r.Scope(), r.Cleanable())

	// A plan marks it cleanable; the host writes that into o.Status.
	conds, changed := orphan.ApplyLonghornConditions(conds, []metav1.Condition{
		{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable},
	}, created.Add(time.Minute))
	fmt.Println(changed, conds[0].Type, conds[0].Status, conds[0].LastTransitionTime)
	// Output:
	// replica node-1/disk-1 false
	// true DataCleanable True 2026-01-01T00:01:00Z
}
