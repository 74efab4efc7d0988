package orphan_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// Hooks count what the drivers do, here purges by outcome: what a host
// exports as a metric (examples/kube exports Prometheus counters and
// histograms this way). A user asked to delete two orphans; a replica
// claimed one of them again before the sweep, so its purge is refused.
func ExampleHooksFunc() {
	var (
		mu     sync.Mutex
		purges = map[orphan.EventOutcome]int{}
	)
	hooks := orphan.HooksFunc(func(e orphan.Event) {
		if e.Op == orphan.OpPurge {
			mu.Lock() // the Sweeper observes from several goroutines
			purges[e.Outcome]++
			mu.Unlock()
		}
	})

	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	store := orphan.NewMemStore()
	judge := &orphantest.Judge{Default: orphan.Orphan("no replica uses it")}
	var plan orphan.Plan
	for _, name := range []string{"pvc-a-1a2b3c4d", "pvc-b-5e6f7a8b"} {
		rec, _ := orphan.NewRecord(orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: name, orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn/",
				orphan.ParamDiskUUID: "9d7c6a52-0d1e-4c1b-8f55-2f1d5b6f1a01", orphan.ParamDiskType: "filesystem",
			}}, now)
		rec.DeletionRequested = true
		rec.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
		_, _ = store.Create(ctx, rec)
		plan.Purge = append(plan.Purge, orphan.Purge{Record: rec})
		if name == "pvc-b-5e6f7a8b" {
			judge.Set(rec.Name, orphan.Owned("replica pvc-b-r-1 claims it"))
		}
	}

	sweeper, _ := orphan.NewSweeper(store, orphantest.FakeAdapter(nil, judge, &orphantest.Deleter{}),
		orphan.SweeperOptions{Hooks: hooks})
	_, _ = sweeper.Sync(ctx, plan)
	fmt.Println("ok:", purges[orphan.EventOK], "refused:", purges[orphan.EventRefused])
	// Output:
	// ok: 1 refused: 1
}
