package orphan_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// shardRecord is an Orphan object of a type Longhorn's CRD holds and
// caretaker's kind table does not (shard-instance, Longhorn's v2 sharded
// volumes), as longhorn-manager writes it: asked for deletion, marked
// cleanable, on a node caretaker is running a cycle for.
func shardRecord(node string) orphan.Record {
	return orphan.Record{
		Name:       "orphan-" + strings.Repeat("ab", 32),
		Kind:       orphan.Kind("shard-instance"),
		NodeID:     node,
		DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{
			orphan.ParamInstanceName: "vol-1-shard-0", orphan.ParamInstanceUUID: "u-1", orphan.ParamInstanceManager: "im-1",
		},
		Labels:            map[string]string{"longhornshard": "vol-1-shard-0"},
		CreatedAt:         testEpoch,
		DeletionRequested: true,
		Conditions: []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue,
			Reason: "", LastTransitionTime: metav1.NewTime(testEpoch)}},
	}
}

// TestUnknownKindPassesThroughUntouched: a record of a kind caretaker does
// not know is left alone by Decide (kept, with a reason, never purged or
// forgotten, whatever the policy and the request) and by a Sweeper cycle
// (the Store still holds it as it was, and no Deleter saw it).
func TestUnknownKindPassesThroughUntouched(t *testing.T) {
	shard := shardRecord("n1")
	all := orphan.Policy{Kinds: orphan.Kinds(), FailedBackups: true}
	plan := orphan.Decide(orphan.Input{
		Now:     testEpoch.Add(time.Hour),
		Scopes:  ready(orphan.Scope{NodeID: "n1"}),
		Records: []orphan.Record{shard},
		Policy:  all,
		Guard:   orphan.Guard{AllowNoneExpected: true, AllowWholeScope: true, AllowAnyShare: true},
	})
	if len(plan.Purge) != 0 || len(plan.Forget) != 0 || len(plan.Create) != 0 {
		t.Fatalf("plan touches the unknown kind: purge %v forget %v create %v", plan.Purge, plan.Forget, plan.Create)
	}
	if len(plan.Keep) != 1 || plan.Keep[0].Record.Name != shard.Name || !strings.Contains(plan.Keep[0].Reason, "shard-instance") {
		t.Fatalf("keep = %+v, want the record kept with a reason naming its kind", plan.Keep)
	}
	for _, sc := range plan.Conditions {
		if sc.Record.Name == shard.Name {
			t.Fatalf("conditions set on the unknown kind: %+v", sc)
		}
	}

	h := newSweepHarness()
	h.seed(t, shard)
	ctx := context.Background()
	for range 2 {
		_, res, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{}, orphan.Cycle{
			Selector: orphan.Selector{NodeID: "n1"},
			Scopes:   ready(orphan.Scope{NodeID: "n1"}),
			Policy:   all,
			Guard:    orphan.Guard{AllowNoneExpected: true, AllowWholeScope: true, AllowAnyShare: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Purged)+len(res.Forgotten)+len(res.Marked)+len(res.Failed) != 0 {
			t.Fatalf("sweep result touches the unknown kind: %+v", res)
		}
		h.clock.Step(time.Hour)
	}
	got, err := h.store.List(ctx, orphan.Selector{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0].Conditions, shard.Conditions) || !got[0].DeletionRequested || got[0].Kind != shard.Kind {
		t.Fatalf("store after the cycles: %+v, want the record as it was", got)
	}
	if n := len(h.deleter.Deleted()); n != 0 {
		t.Fatalf("the Deleter was called %d times", n)
	}
}
