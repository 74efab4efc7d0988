package orphan_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// A finalizer purges one record on a user's request through
// PurgeRecord, which applies every rule the cycle applies: here the
// volume of the orphaned directory is faulted, so its last copy is
// refused, and the finalizer keeps the object and tries again later.
func ExampleSweeper_PurgeRecord() {
	ctx := context.Background()
	dir := func(name string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: name, orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn",
				orphan.ParamDiskUUID: "9d7c6a52-0d1e-4c1b-8f55-2f1d5b6f1a01", orphan.ParamDiskType: "filesystem",
			}}
	}
	world := orphantest.NewMemAdapter(orphan.KindReplicaData) // stands in for diskscan.NewOrphans
	_ = world.Put(dir("pvc-live-0a1b2c3d"), true)
	_ = world.Put(dir("pvc-live-0a1b2c3e"), true)
	_ = world.Put(dir("pvc-gone-1a2b3c4d"), false)
	_ = world.Put(dir("pvc-sick-5e6f7a8b"), false)
	store := orphan.NewMemStore()
	sweeper, _ := orphan.NewSweeper(store, world, orphan.SweeperOptions{})
	cycle := orphan.Cycle{
		Selector:        orphan.Selector{NodeID: "node-1"},
		Scopes:          map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}},
		Volumes:         map[string]orphan.VolumeState{"pvc-live": orphan.VolumeHealthy, "pvc-sick": orphan.VolumeFaulted},
		VolumesComplete: true, // pvc-gone is deleted
	}
	// The node controller's cycle records the orphans.
	snap, _ := world.Scan(ctx)
	_, _, _ = sweeper.Reconcile(ctx, snap, cycle)

	// A user deletes both records; the finalizer runs for each.
	for _, data := range []string{"pvc-gone-1a2b3c4d", "pvc-sick-5e6f7a8b"} {
		name, _ := dir(data).Name()
		_ = store.RequestDeletion(ctx, name)
		out, err := sweeper.PurgeRecord(ctx, name, cycle, orphan.PurgeRecordOptions{})
		var refused *orphan.Refusal
		switch {
		case errors.As(err, &refused):
			fmt.Println(data, "refused by", refused.Rule, "- keep the finalizer, requeue")
		case err != nil:
			fmt.Println(data, "failed:", err)
		default:
			fmt.Println(data, out)
		}
	}
	// Output:
	// pvc-gone-1a2b3c4d Purged
	// pvc-sick-5e6f7a8b refused by LastCopy - keep the finalizer, requeue
}
