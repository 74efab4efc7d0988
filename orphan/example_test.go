package orphan_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Decide is pure: observations in, a plan out.
func ExampleDecide() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	disk := orphan.Scope{NodeID: "node-1", Disk: "disk-1"}
	dir := func(name string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: name, orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn",
				orphan.ParamDiskUUID: "9d7c6a52-0d1e-4c1b-8f55-2f1d5b6f1a01", orphan.ParamDiskType: "filesystem",
			}}
	}
	// A record from an earlier cycle whose directory is gone now.
	old, _ := orphan.NewRecord(dir("pvc-old-1a2b3c4d"), now.Add(-time.Hour))

	plan := orphan.Decide(orphan.Input{
		Now: now,
		// The disk scan says the disk is Ready; the host says its node is.
		// A disk is Ready only under a Ready node.
		Scopes: map[orphan.Scope]orphan.ScopeStatus{
			{NodeID: "node-1"}: {Health: orphan.HealthReady},
			disk:               {Health: orphan.HealthReady},
		},
		Candidates: []orphan.Candidate{
			{Item: dir("pvc-new-5e6f7a8b"), Verdict: orphan.Orphan("no replica uses it")},
			{Item: dir("pvc-live-0a1b2c3d"), Verdict: orphan.Owned("replica pvc-live-r-1")},
		},
		Records: []orphan.Record{old},
	})
	for _, r := range plan.Create {
		fmt.Println("create", r.Param(orphan.ParamDataName))
	}
	for _, f := range plan.Forget {
		fmt.Println("forget", f.Record.Param(orphan.ParamDataName), "because", f.Reason)
	}
	// Output:
	// create pvc-new-5e6f7a8b
	// forget pvc-old-1a2b3c4d because Gone
}

// The guard refuses what looks like a broken view: here the host's list
// of replicas expected on the disk came back empty (a replica list read
// from the wrong namespace), so every directory looks orphaned.
func ExampleGuard() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	node, disk := orphan.Scope{NodeID: "node-1"}, orphan.Scope{NodeID: "node-1", Disk: "disk-1"}
	dir := func(name string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: name, orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn/",
				orphan.ParamDiskUUID: "9d7c6a52-0d1e-4c1b-8f55-2f1d5b6f1a01", orphan.ParamDiskType: "filesystem",
			}}
	}
	var in orphan.Input
	in.Now = now
	in.Scopes = map[orphan.Scope]orphan.ScopeStatus{
		node: {Health: orphan.HealthReady},
		disk: {Health: orphan.HealthReady, NoneExpected: true}, // diskscan's evidence
	}
	for _, name := range []string{"pvc-a-1a2b3c4d", "pvc-b-5e6f7a8b"} {
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: dir(name), Verdict: orphan.Orphan("not expected")})
		rec, _ := orphan.NewRecord(dir(name), now.Add(-time.Hour))
		rec.DeletionRequested = true // a user deleted every orphan
		rec.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
		in.Records = append(in.Records, rec)
	}
	plan := orphan.Decide(in)
	fmt.Println("purges:", len(plan.Purge), "refused:", len(plan.Refused))
	guarded := meta.FindStatusCondition(plan.Conditions[0].Conditions, orphan.ConditionPurgeGuarded)
	fmt.Println(guarded.Type, guarded.Reason)

	in.Guard.AllowNoneExpected = true // the host really means it
	fmt.Println("purges with the opt-out:", len(orphan.Decide(in).Purge))
	// Output:
	// purges: 0 refused: 2
	// PurgeGuarded NoneExpected
	// purges with the opt-out: 2
}

func ExampleParsePolicy() {
	p, err := orphan.ParsePolicy("replica-data;instance", "600")
	fmt.Println(p.Kinds, p.GracePeriod, err)

	_, err = orphan.ParsePolicy("replica-data;volumes", "")
	fmt.Println(err)
	// Output:
	// [replica engine-instance replica-instance] 10m0s <nil>
	// setting orphan-resource-auto-deletion="replica-data;volumes": item "volumes": unknown item of a ';'-separated list (accepted: replica-data, instance)
}

func ExampleItem_Name() {
	it := orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: "node-1", DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{
			orphan.ParamInstanceName:    "pvc-1-r-0",
			orphan.ParamInstanceUUID:    "0f6b3c1e-5f4a-4b8e-9d2c-7a1e3b5c9d00",
			orphan.ParamInstanceManager: "instance-manager-1",
		}}
	name, _ := it.Name()
	fmt.Println(name[:len(orphan.NamePrefix)], len(name))
	// Output: orphan- 71
}

// A Sweeper carries a plan out; here with the in-memory store and a
// deleter that only prints.
func ExampleSweeper_Reconcile() {
	ctx := context.Background()
	store := orphan.NewMemStore()
	judge := orphan.JudgeFunc(func(context.Context, orphan.Item) (orphan.Verdict, error) {
		return orphan.Orphan("no instance record"), nil
	})
	deleter := orphan.DeleterFunc(func(_ context.Context, r orphan.Record) error {
		fmt.Println("deleting instance", r.Param(orphan.ParamInstanceName))
		return nil
	})
	inv := orphan.InventoryFunc(func(context.Context) (orphan.Snapshot, error) { return orphan.Snapshot{}, nil })
	adapter, _ := orphan.NewAdapter([]orphan.Kind{orphan.KindEngineInstance}, inv, judge, deleter)
	s, _ := orphan.NewSweeper(store, adapter, orphan.SweeperOptions{})

	node := orphan.Scope{NodeID: "node-1"}
	snap := orphan.Snapshot{
		Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady}},
		Items: []orphan.Item{{Kind: orphan.KindEngineInstance, NodeID: "node-1", DataEngine: orphan.DataEngineV2,
			Parameters: map[string]string{
				orphan.ParamInstanceName: "pvc-9-e-0", orphan.ParamInstanceUUID: "5b0c0d3e-1111-4222-8333-944455556666",
				orphan.ParamInstanceManager: "instance-manager-1",
			}}},
	}
	// The host gives its node's health: an adapter's Ready means only
	// that its scan was complete.
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "node-1"}, Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady}}}

	_, res, _ := s.Reconcile(ctx, snap, cycle)
	fmt.Println("created", len(res.Created))

	recs, _ := store.List(ctx, orphan.Selector{})
	_ = store.RequestDeletion(ctx, recs[0].Name) // a user asks for the deletion
	_, res, _ = s.Reconcile(ctx, snap, cycle)
	fmt.Println("purged", len(res.Purged), "records left", store.Len())
	// Output:
	// created 1
	// deleting instance pvc-9-e-0
	// purged 1 records left 0
}

// A Monitor scans in the background; the host reads the latest result
// without waiting and hears about changes through OnChange.
func ExampleMonitor() {
	inv := orphan.InventoryFunc(func(context.Context) (orphan.Snapshot, error) {
		return orphan.Snapshot{Scopes: map[orphan.Scope]orphan.ScopeStatus{
			{NodeID: "node-1", Disk: "disk-1"}: {Health: orphan.HealthReady},
		}}, nil
	})
	changed := make(chan orphan.Observation, 1)
	mon, err := orphan.NewMonitor(inv, orphan.MonitorOptions{
		Period:   time.Hour,
		OnChange: func(o orphan.Observation) { changed <- o },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := mon.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer mon.Stop()

	o := <-changed // the first scan
	latest, ok := mon.Latest()
	fmt.Println(o.Seq, ok, latest.Seq, len(latest.Snapshot.Scopes))
	// Output: 1 true 1 1
}
