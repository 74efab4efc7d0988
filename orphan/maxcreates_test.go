package orphan_test

import (
	"context"
	"fmt"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// TestMaxCreatesBatchesABacklog: a first scan that finds 25 orphans with
// MaxCreates 10 creates them in three Reconciles of at most 10, each asking to
// run again at once, and the user's deletion requested meanwhile is
// purged by the next Reconcile, not after the backlog.
func TestMaxCreatesBatchesABacklog(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(testEpoch)
	store := orphan.NewMemStore()
	deleter := &orphantest.Deleter{}
	judge := &orphantest.Judge{Default: orphan.Orphan("not expected")}
	s, err := orphan.NewSweeper(store, orphantest.FakeAdapter(nil, judge, deleter), orphan.SweeperOptions{Clock: clk, MaxCreates: 10})
	if err != nil {
		t.Fatal(err)
	}
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	var items []orphan.Item
	for i := range 25 {
		items = append(items, replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%02d-0123abcd", i)))
	}
	// One owned item keeps the mass-deletion guard quiet about the disk.
	owned := replicaItem("n1", "disk-1", "pvc-live-0123abcd")
	judge.Set(mustName(t, owned), orphan.Owned("expected"))
	snap := orphan.Snapshot{Items: append(items, owned), Scopes: ready(d1)}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")}

	plan, res, err := s.Reconcile(ctx, snap, cycle)
	if err != nil || len(res.Created) != 10 || !plan.RequeueAt.Equal(clk.Now()) {
		t.Fatalf("first Reconcile: created %d, requeue %v, %v; want 10 and now", len(res.Created), plan.RequeueAt, err)
	}
	// A user deletes one of the records created (it is marked cleanable
	// by the next Reconcile first, as Longhorn requires).
	if _, res2, err := s.Reconcile(ctx, snap, cycle); err != nil || len(res2.Created) != 10 {
		t.Fatalf("second Reconcile: created %d, %v; want 10", len(res2.Created), err)
	}
	victim := res.Created[0]
	rec, err := store.Get(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	rec.DeletionRequested = true
	if _, err := store.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	plan, res, err = s.Reconcile(ctx, snap, cycle)
	if err != nil || len(res.Purged) != 1 || res.Purged[0] != victim {
		t.Fatalf("third Reconcile: purged %v, %v; want %s purged before the backlog is done", res.Purged, err, victim)
	}
	if len(res.Created) != 5 || !plan.RequeueAt.IsZero() {
		t.Fatalf("third Reconcile created %d, requeue %v; want the last 5 and no requeue", len(res.Created), plan.RequeueAt)
	}
	all, err := store.List(ctx, orphan.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 24 {
		t.Fatalf("after three Reconciles %d records; want the backlog created", len(all))
	}
}
