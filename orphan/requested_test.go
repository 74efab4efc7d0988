package orphan_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestRequestedDeletionNeverSitsSilently: a user deletes an orphan, and
// this cycle's judgement of its item is undecided (its directory became a
// symbolic link, its meta unreadable). The cycle says so in
// Result.Refused and keeps Error=True with the reason on the record for as
// long as the request stands; once the item is an orphan again the purge
// goes on, and once the request is withdrawn the Error clears.
func TestRequestedDeletionNeverSitsSilently(t *testing.T) {
	ctx := context.Background()
	h := newSweepHarness()
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	name, _ := item.Name()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	snap := orphan.Snapshot{Items: []orphan.Item{item, replicaItem("n1", "disk-1", "pvc-b-0123abcd")}, Scopes: ready(d1)}
	h.judge.Set(mustName(t, snap.Items[1]), orphan.Owned("a replica expects it"))
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"),
		Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, VolumesComplete: true}
	run := func() (orphan.Plan, orphan.Result) {
		t.Helper()
		p, res, err := h.sweeper.Reconcile(ctx, snap, cycle)
		must(t, err)
		return p, res
	}
	errorCond := func() *metav1.Condition {
		t.Helper()
		r, err := h.store.Get(ctx, name)
		must(t, err)
		return meta.FindStatusCondition(r.Conditions, orphan.ConditionError)
	}
	run() // created
	must(t, h.store.RequestDeletion(ctx, name))
	why := "volume.meta cannot be read: unexpected end of JSON input"
	h.judge.Set(name, orphan.Undecided(why))

	for range 2 { // and it stays so, cycle after cycle
		p, res := run()
		if !refusedAs(p.Refused, name, orphan.RuleUndecided, why) || !refusedAs(res.Refused, name, orphan.RuleUndecided, why) {
			t.Fatalf("a requested, undecided record is not reported refused: plan %+v, result %+v", p.Refused, res.Refused)
		}
		if c := errorCond(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != orphan.ReasonPurgeRefused || !strings.Contains(c.Message, why) {
			t.Fatalf("Error = %+v, want True with why", c)
		}
	}

	// Withdrawn (a Store that allows it): the Error clears.
	r, _ := h.store.Get(ctx, name)
	r.DeletionRequested = false
	_, err := h.store.Update(ctx, r)
	must(t, err)
	if _, res := run(); len(res.Refused) != 0 {
		t.Fatalf("refused with no request: %+v", res.Refused)
	}
	if c := errorCond(); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Error after the request ended = %+v, want False", c)
	}

	// Requested again, and the item is an orphan again: purged.
	must(t, h.store.RequestDeletion(ctx, name))
	h.judge.Set(name, orphan.Orphan("nothing expects it"))
	if _, res := run(); len(res.Purged) != 1 {
		t.Fatalf("not purged once decided: %+v", res)
	}
}

// A requested record whose scope was not scanned completely (its disk's
// scan failed this cycle) is reported too.
func TestRequestedDeletionInAnUnknownScopeIsReported(t *testing.T) {
	ctx := context.Background()
	h := newSweepHarness()
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	name, _ := item.Name()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")}
	if _, _, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{Items: []orphan.Item{item}, Scopes: ready(d1)}, cycle); err != nil {
		t.Fatal(err)
	}
	must(t, h.store.RequestDeletion(ctx, name))
	unknown := map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthUnknown, Message: "listing replicas: input/output error"}}
	_, res, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{Scopes: unknown}, cycle)
	must(t, err)
	if !refusedAs(res.Refused, name, orphan.RuleScopeUnknown, "input/output error") {
		t.Fatalf("Refused = %+v", res.Refused)
	}
	r, _ := h.store.Get(ctx, name)
	if c := meta.FindStatusCondition(r.Conditions, orphan.ConditionError); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Error = %+v", c)
	}
}

func refusedAs(rs []orphan.Refusal, name, rule, why string) bool {
	for _, r := range rs {
		if r.Name == name && r.Rule == rule && strings.Contains(r.Reason, why) {
			return true
		}
	}
	return false
}
