package orphan_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestLastCopyGuard: the last-copy guard's table. One orphan directory
// (volume pvc-a) beside three owned ones, cleanable and due; what
// happens to its purge by its Copy, its volume's state and the request.
func TestLastCopyGuard(t *testing.T) {
	recoverable := &orphan.Copy{Volume: "pvc-a", Recoverable: true, Rank: 1}
	broken := &orphan.Copy{Volume: "pvc-a", Reasons: []string{"layer volume-snap-s1.img is missing"}}
	empty := &orphan.Copy{Volume: "pvc-a", Reasons: []string{"volume-meta: volume.meta: missing"}, NoData: true}
	faulted := map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}
	cases := []struct {
		name      string
		dataName  string // default pvc-a-0123abcd
		kind      orphan.Kind
		copy      *orphan.Copy
		volumes   map[string]orphan.VolumeState
		complete  bool
		requested bool
		override  bool
		allow     bool
		want      string // "purge" or the rule refusing
	}{
		{name: "faulted volume: no automatic purge", copy: recoverable, volumes: faulted, want: "LastCopy"},
		{name: "faulted volume: no requested purge", copy: recoverable, volumes: faulted, requested: true, want: "LastCopy"},
		{name: "faulted volume: a requested purge with the override goes on", copy: recoverable, volumes: faulted, requested: true, override: true, want: "purge"},
		{name: "faulted volume: the override never lets an automatic purge through", copy: recoverable, volumes: faulted, override: true, want: "LastCopy"},
		{name: "degraded volume: the automatic purge waits", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDegraded}, want: "VolumeDegraded"},
		{name: "degraded volume: a requested purge goes on", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDegraded}, requested: true, want: "purge"},
		{name: "healthy volume: auto-deletion goes on", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, want: "purge"},
		{name: "deleted volume: auto-deletion goes on", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDeleted}, want: "purge"},
		{name: "a volume missing from a complete list is deleted", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-b": orphan.VolumeFaulted}, complete: true, want: "purge"},
		{name: "a volume missing from an incomplete list is unknown", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-b": orphan.VolumeHealthy}, want: "VolumeUnknown"},
		{name: "no volumes at all: unknown", copy: recoverable, want: "VolumeUnknown"},
		{name: "unknown volume: a requested purge goes on", copy: recoverable, requested: true, want: "purge"},
		{name: "a state caretaker does not know is unknown", copy: recoverable, volumes: map[string]orphan.VolumeState{"pvc-a": "rebuilding"}, want: "VolumeUnknown"},
		{name: "a copy of no known volume is unknown", copy: &orphan.Copy{Recoverable: true}, complete: true, want: "VolumeUnknown"},
		{name: "an unrecoverable copy of a faulted volume that holds data stays", copy: broken, volumes: faulted, want: "LastCopy"},
		{name: "an unrecoverable copy of a faulted volume: no requested purge", copy: broken, volumes: faulted, requested: true, want: "LastCopy"},
		{name: "an unrecoverable copy of a faulted volume: a requested purge with the override goes on", copy: broken, volumes: faulted, requested: true, override: true, want: "purge"},
		{name: "an unrecoverable copy of a degraded volume waits", copy: broken, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDegraded}, want: "VolumeDegraded"},
		{name: "an unrecoverable copy of an unknown volume waits", copy: broken, want: "VolumeUnknown"},
		{name: "an unrecoverable copy of a deleted volume goes", copy: broken, complete: true, want: "purge"},
		{name: "an unrecoverable copy of a healthy volume goes", copy: broken, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, want: "purge"},
		{name: "a copy proven to hold no data of a faulted volume goes", copy: empty, volumes: faulted, want: "purge"},
		{name: "a recoverable copy proven to hold no data of a faulted volume goes", copy: &orphan.Copy{Volume: "pvc-a", Recoverable: true, NoData: true}, volumes: faulted, want: "purge"},
		{name: "a copy proven to hold no data of a degraded volume goes", copy: empty, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDegraded}, want: "purge"},
		{name: "a copy proven to hold no data of an unknown volume goes", copy: empty, want: "purge"},
		{name: "an inspected instance proven to hold no data is not covered", kind: orphan.KindReplicaInstance, copy: empty, volumes: faulted, want: "purge"},
		{name: "a directory nobody inspected is possibly recoverable", volumes: faulted, want: "LastCopy"},
		{name: "a directory nobody inspected, requested, faulted", volumes: faulted, requested: true, want: "LastCopy"},
		{name: "a directory nobody inspected of a healthy volume goes", volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, want: "purge"},
		{name: "a directory nobody inspected of a deleted volume goes", complete: true, want: "purge"},
		{name: "a directory whose name gives no volume is unknown", dataName: "pvc-a-0123", complete: true, want: "VolumeUnknown"},
		{name: "the guard can be turned off", copy: recoverable, volumes: faulted, allow: true, want: "purge"},
		{name: "an instance nobody inspected is not covered", kind: orphan.KindReplicaInstance, volumes: faulted, want: "purge"},
		{name: "an inspected recoverable instance is covered", kind: orphan.KindReplicaInstance, copy: recoverable, volumes: faulted, want: "LastCopy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newGuardWorld(0, 3, false)
			it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
			if tc.dataName != "" {
				it = replicaItem("n1", "disk-1", tc.dataName)
			}
			if tc.kind == orphan.KindReplicaInstance {
				it = lvolItem(7)
				it.NodeID = "n1"
				w.in.Scopes[orphan.Scope{NodeID: "n1"}] = orphan.ScopeStatus{Health: orphan.HealthReady}
				for i := range 3 {
					w.in.Candidates = append(w.in.Candidates, orphan.Candidate{Item: lvolItem(i), Verdict: orphan.Owned("y")})
				}
			}
			it.Copy = tc.copy
			rec := requestedRecords(t, []orphan.Item{it})[0]
			rec.DeletionRequested = tc.requested
			w.in.Candidates = append(w.in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Orphan("not expected")})
			w.in.Records = []orphan.Record{rec}
			w.in.Policy = orphan.Policy{Kinds: orphan.Kinds()}
			w.in.Volumes, w.in.VolumesComplete, w.in.Guard.AllowLastCopy = tc.volumes, tc.complete, tc.allow
			if tc.override {
				w.in.LastCopyOverride = map[string]bool{rec.Name: true}
			}
			p := orphan.Decide(w.in)
			got := "purge"
			if len(p.Purge) != 1 {
				if len(p.Refused) != 1 {
					t.Fatalf("purges %+v, refused %+v", p.Purge, p.Refused)
				}
				got, _, _ = strings.Cut(p.Refused[0].Reason, ":")
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s (refused %+v)", got, tc.want, p.Refused)
			}
			if got == "purge" {
				return
			}
			// The refusal says what the copy holds.
			holds := "nobody inspected the copy, so it may hold the volume's data"
			switch {
			case tc.copy != nil && tc.copy.Recoverable:
				holds = "the copy holds data the tool can export"
			case tc.copy != nil:
				holds = "the copy holds data the tool cannot export today: " + strings.Join(tc.copy.Reasons, "; ")
			}
			if !strings.HasSuffix(p.Refused[0].Reason, "; "+holds) {
				t.Fatalf("refusal %q does not end in %q", p.Refused[0].Reason, holds)
			}
			// Visible as the mass-deletion guard's: kept, marked, refused.
			if len(p.Keep) != 1 || len(p.Conditions) != 1 {
				t.Fatalf("keep %+v, conditions %+v", p.Keep, p.Conditions)
			}
			marked := false
			for _, c := range p.Conditions[0].Conditions {
				marked = marked || c.Type == orphan.ConditionPurgeGuarded && c.Status == metav1.ConditionTrue && c.Reason == tc.want && c.Message != ""
			}
			if !marked {
				t.Fatalf("conditions %+v, want PurgeGuarded=True with reason %s", p.Conditions[0].Conditions, tc.want)
			}
		})
	}
}

// TestLastCopyGuardThroughTheSweeper: Cycle.Volumes reaches the plan, the
// refusal reaches the Result and the record, and nothing is deleted;
// once the host lists the volume as deleted, auto-deletion purges.
func TestLastCopyGuardThroughTheSweeper(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	it.Copy = &orphan.Copy{Volume: "pvc-a", Recoverable: true, Rank: 1}
	items := []orphan.Item{it}
	for i := range 3 {
		owned := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-w%d-0123abcd", i))
		h.judge.Set(mustName(t, owned), orphan.Owned("expected"))
		items = append(items, owned)
	}
	h.seed(t, cleanRecord("n1", "disk-1", "pvc-a-0123abcd"))
	cyc := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"),
		Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}, Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}}
	snap := orphan.Snapshot{Items: items, Scopes: ready(d1)}
	_, res, err := h.sweeper.Reconcile(ctx, snap, cyc)
	if err != nil || len(res.Purged) != 0 || len(res.Refused) != 1 || !strings.HasPrefix(res.Refused[0].Reason, "LastCopy:") || len(h.deleter.Deleted()) != 0 {
		t.Fatalf("faulted: %+v, %v; deleted %v", res, err, h.deleter.Deleted())
	}
	got, err := h.store.Get(ctx, mustName(t, it))
	if err != nil || !hasCondition(got, orphan.ConditionPurgeGuarded, metav1.ConditionTrue) {
		t.Fatalf("record: %v, %+v; want PurgeGuarded=True", err, got.Conditions)
	}
	cyc.Volumes, cyc.VolumesComplete = nil, true
	if _, res, err = h.sweeper.Reconcile(ctx, snap, cyc); err != nil || len(res.Purged) != 1 {
		t.Fatalf("deleted volume: %+v, %v; want the purge", res, err)
	}
}

// TestLastCopyNeverPurgedWithoutOverride is the last-copy guard's
// property: whatever else the input says (every other rule of the guard
// turned off, deletions requested, records cleanable, overrides of other
// records), no plan purges a recoverable orphan of a faulted volume
// unless its deletion was requested and its record is overridden, and no
// automatic purge takes a recoverable orphan of a volume that is not
// known healthy or deleted. The Planner plans the same.
func TestLastCopyNeverPurgedWithoutOverride(t *testing.T) {
	var planner orphan.Planner
	hits := 0
	for seed := range uint64(4000) {
		rng := rand.New(rand.NewPCG(seed, 22))
		in := randomInput(rng)
		in.Guard = orphan.Guard{AllowNoneExpected: true, AllowWholeScope: true, AllowAnyShare: true, AllowOverBudget: true}
		if in.Volumes == nil {
			in.Volumes = map[string]orphan.VolumeState{}
		}
		in.Volumes["pvc-f"] = orphan.VolumeFaulted
		for i := range in.Candidates {
			if rng.IntN(2) == 0 {
				in.Candidates[i].Item.Copy = &orphan.Copy{Volume: "pvc-f", Recoverable: true}
			}
		}
		for i := range in.Records {
			r := &in.Records[i]
			r.DeletionRequested = r.DeletionRequested || rng.IntN(2) == 0
			if rng.IntN(2) == 0 {
				r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: "Ready"}}
			}
		}
		for n := range 3 {
			in.Scopes[orphan.Scope{NodeID: fmt.Sprintf("n%d", n)}] = orphan.ScopeStatus{Health: orphan.HealthReady}
		}
		p := orphan.Decide(in)
		if pp := planner.Decide(in); !reflect.DeepEqual(p, pp) {
			t.Fatalf("seed %d: the Planner's plan differs from Decide's", seed)
		}
		for _, pu := range p.Purge {
			vols, recoverable := copiesOf(pu)
			if !recoverable {
				continue
			}
			for _, vol := range vols {
				state, listed := in.Volumes[vol]
				if !listed && in.VolumesComplete && vol != "" {
					state = orphan.VolumeDeleted
				}
				if state == orphan.VolumeFaulted && (pu.Auto || !in.LastCopyOverride[pu.Record.Name]) {
					t.Fatalf("seed %d: purge of %s, a recoverable copy of faulted volume %s (auto %v)", seed, pu.Record.Name, vol, pu.Auto)
				}
				if pu.Auto && state != orphan.VolumeHealthy && state != orphan.VolumeDeleted {
					t.Fatalf("seed %d: automatic purge of %s, a recoverable copy of volume %q in state %q", seed, pu.Record.Name, vol, state)
				}
			}
		}
		for _, r := range p.Refused {
			if strings.HasPrefix(r.Reason, "LastCopy:") {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Fatal("no input met the last-copy guard: the property was never put to the test")
	}
}

// ExampleVolumeState: the last-copy guard keeps the orphaned replica of a
// faulted volume, the last copy of its data, from auto-deletion, and lets
// the orphan of a deleted volume go.
func ExampleVolumeState() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	node, disk := orphan.Scope{NodeID: "node-1"}, orphan.Scope{NodeID: "node-1", Disk: "disk-1"}
	dir := func(name string) orphan.Item {
		return orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: name, orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn",
				orphan.ParamDiskUUID: "9d7c6a52-0d1e-4c1b-8f55-2f1d5b6f1a01", orphan.ParamDiskType: "filesystem",
			}}
	}
	in := orphan.Input{
		Now:    now,
		Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady}, disk: {Health: orphan.HealthReady}},
		Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
		// The host lists every volume: pvc-old is gone, pvc-db is faulted.
		Volumes:         map[string]orphan.VolumeState{"pvc-db": orphan.VolumeFaulted, "pvc-web": orphan.VolumeHealthy},
		VolumesComplete: true,
	}
	last := dir("pvc-db-1a2b3c4d")
	last.Copy = &orphan.Copy{Volume: "pvc-db", Recoverable: true, Revision: 412, Rank: 1} // an inspection's verdict
	for _, it := range []orphan.Item{last, dir("pvc-old-5e6f7a8b")} {
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Orphan("no replica uses it")})
		r, _ := orphan.NewRecord(it, now.Add(-time.Hour))
		r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
		in.Records = append(in.Records, r)
	}
	for _, name := range []string{"pvc-web-0a1b2c3d", "pvc-web-9f8e7d6c"} {
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: dir(name), Verdict: orphan.Owned("a replica of pvc-web")})
	}
	plan := orphan.Decide(in)
	for _, p := range plan.Purge {
		fmt.Println("purge", p.Record.Param(orphan.ParamDataName))
	}
	for _, r := range plan.Refused {
		rule, _, _ := strings.Cut(r.Reason, ":")
		fmt.Println("keep", rule)
	}
	// Output:
	// purge pvc-old-5e6f7a8b
	// keep LastCopy
}
