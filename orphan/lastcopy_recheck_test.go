package orphan_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestLastCopyRecheckAtPurge: with Cycle.LookupVolume set, Reconcile judges
// each purge the last-copy guard covers anew by its volume's state at the
// moment of deletion, not only by the state Cycle.Volumes gave when the
// cycle started. One orphan directory of volume pvc-a, cleanable and due,
// beside three owned ones.
func TestLastCopyRecheckAtPurge(t *testing.T) {
	recoverable := &orphan.Copy{Volume: "pvc-a", Recoverable: true, Rank: 1}
	healthy := map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}
	faulted := map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}
	errLookup := errors.New("the volume's API is down")
	now := func(st orphan.VolumeState) func(context.Context, string) (orphan.VolumeState, bool, error) {
		return func(context.Context, string) (orphan.VolumeState, bool, error) { return st, true, nil }
	}
	cases := []struct {
		name      string
		copy      *orphan.Copy
		volumes   map[string]orphan.VolumeState // Cycle.Volumes, when the cycle starts
		complete  bool
		lookup    func(context.Context, string) (orphan.VolumeState, bool, error)
		requested bool
		override  bool
		allow     bool
		want      string // "purge" or the rule refusing at the moment of deletion
		looked    bool   // the lookup must be asked for pvc-a
	}{
		{name: "unset: purged as before", copy: recoverable, volumes: healthy, want: "purge"},
		{name: "faulted since a healthy plan: no automatic purge", copy: recoverable, volumes: healthy, lookup: now(orphan.VolumeFaulted), want: "LastCopy", looked: true},
		{name: "listed deleted, back faulted: no automatic purge", copy: recoverable, complete: true, lookup: now(orphan.VolumeFaulted), want: "LastCopy", looked: true},
		{name: "a directory nobody inspected, faulted since", volumes: healthy, lookup: now(orphan.VolumeFaulted), want: "LastCopy", looked: true},
		{name: "faulted since: no requested purge without the override", copy: recoverable, volumes: healthy, requested: true, lookup: now(orphan.VolumeFaulted), want: "LastCopy", looked: true},
		{name: "faulted: a requested purge with the override goes on", copy: recoverable, volumes: faulted, requested: true, override: true, lookup: now(orphan.VolumeFaulted), want: "purge", looked: true},
		{name: "degraded since: the automatic purge waits", copy: recoverable, volumes: healthy, lookup: now(orphan.VolumeDegraded), want: "VolumeDegraded", looked: true},
		{name: "a failed lookup refuses an automatic purge", copy: recoverable, volumes: healthy, want: "VolumeUnknown", looked: true,
			lookup: func(context.Context, string) (orphan.VolumeState, bool, error) {
				return orphan.VolumeHealthy, true, errLookup
			}},
		{name: "a failed lookup refuses a requested purge", copy: recoverable, volumes: healthy, requested: true, want: "VolumeUnknown", looked: true,
			lookup: func(context.Context, string) (orphan.VolumeState, bool, error) { return "", false, errLookup }},
		{name: "still healthy: purged", copy: recoverable, volumes: healthy, lookup: now(orphan.VolumeHealthy), want: "purge", looked: true},
		{name: "not known, the list complete: deleted, purged", copy: recoverable, complete: true, want: "purge", looked: true,
			lookup: func(context.Context, string) (orphan.VolumeState, bool, error) { return "", false, nil }},
		{name: "not known, the list incomplete: unknown", copy: recoverable, volumes: healthy, want: "VolumeUnknown", looked: true,
			lookup: func(context.Context, string) (orphan.VolumeState, bool, error) { return "", false, nil }},
		{name: "a copy proven to hold no data is not covered: no lookup", copy: &orphan.Copy{Volume: "pvc-a", NoData: true}, volumes: healthy, want: "purge",
			lookup: func(context.Context, string) (orphan.VolumeState, bool, error) { return "", false, errLookup }},
		{name: "an unrecoverable copy holding data is covered: faulted since the plan, kept", copy: &orphan.Copy{Volume: "pvc-a", Reasons: []string{"missing-backing-image"}},
			volumes: healthy, lookup: now(orphan.VolumeFaulted), want: "LastCopy", looked: true},
		{name: "the guard turned off: no lookup", copy: recoverable, volumes: healthy, allow: true, want: "purge",
			lookup: func(context.Context, string) (orphan.VolumeState, bool, error) { return "", false, errLookup }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newSweepHarness()
			ctx := context.Background()
			d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
			it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
			it.Copy = tc.copy
			items := []orphan.Item{it}
			for i := range 3 {
				owned := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-w%d-0123abcd", i))
				h.judge.Set(mustName(t, owned), orphan.Owned("expected"))
				items = append(items, owned)
			}
			rec := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
			rec.DeletionRequested = tc.requested
			h.seed(t, rec)
			var (
				mu     sync.Mutex
				looked []string
			)
			cyc := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"),
				Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}, Volumes: tc.volumes, VolumesComplete: tc.complete}
			cyc.Guard.AllowLastCopy = tc.allow
			if tc.override {
				cyc.LastCopyOverride = map[string]bool{rec.Name: true}
			}
			if tc.lookup != nil {
				cyc.LookupVolume = func(ctx context.Context, volume string) (orphan.VolumeState, bool, error) {
					mu.Lock()
					looked = append(looked, volume)
					mu.Unlock()
					return tc.lookup(ctx, volume)
				}
			}
			plan, res, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{Items: items, Scopes: ready(d1)}, cyc)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Purge) != 1 || len(plan.Refused) != 0 {
				t.Fatalf("the plan must purge (the state at the cycle's start allows it): purge %+v, refused %+v", plan.Purge, plan.Refused)
			}
			if tc.looked != (len(looked) == 1 && looked[0] == "pvc-a") || !tc.looked && len(looked) != 0 {
				t.Fatalf("looked up %v; want pvc-a once: %v", looked, tc.looked)
			}
			got, getErr := h.store.Get(ctx, rec.Name)
			if tc.want == "purge" {
				if len(res.Purged) != 1 || len(res.Refused) != 0 || len(h.deleter.Deleted()) != 1 || !errors.Is(getErr, orphan.ErrNotFound) {
					t.Fatalf("want the purge: %+v; deleted %v; record %v", res, h.deleter.Deleted(), getErr)
				}
				return
			}
			if len(res.Purged) != 0 || len(h.deleter.Deleted()) != 0 {
				t.Fatalf("purged %v, deleted %v; want nothing purged", res.Purged, h.deleter.Deleted())
			}
			if len(res.Refused) != 1 || res.Refused[0].Name != rec.Name || !strings.HasPrefix(res.Refused[0].Reason, tc.want+":") {
				t.Fatalf("refused %+v; want %s refused by %s", res.Refused, rec.Name, tc.want)
			}
			if tc.lookup != nil && strings.Contains(tc.name, "failed") && !strings.Contains(res.Refused[0].Reason, errLookup.Error()) {
				t.Fatalf("refusal %q does not carry the lookup's error", res.Refused[0].Reason)
			}
			// The record stays, marked with the refusal, and an automatic
			// purge is not left behind as a deletion request.
			if getErr != nil || !hasCondition(got, orphan.ConditionError, metav1.ConditionTrue) || got.DeletionRequested != tc.requested {
				t.Fatalf("record: %v, %+v (requested %v); want it kept with Error=True, requested %v", getErr, got.Conditions, got.DeletionRequested, tc.requested)
			}
		})
	}
}

// TestLastCopyRecheckLooksUpTheDirectorysVolumeToo: an inspection that
// names another volume than the directory's does not narrow the re-check
// at the moment of deletion: both volumes are looked up, and the
// directory's volume faulted since the plan keeps the copy.
func TestLastCopyRecheckLooksUpTheDirectorysVolumeToo(t *testing.T) {
	h := newSweepHarness()
	ctx := context.Background()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	it.Copy = &orphan.Copy{Volume: "pvc-b", Recoverable: true}
	items := []orphan.Item{it}
	for i := range 3 {
		owned := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-w%d-0123abcd", i))
		h.judge.Set(mustName(t, owned), orphan.Owned("expected"))
		items = append(items, owned)
	}
	rec := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	h.seed(t, rec)
	var (
		mu     sync.Mutex
		looked = map[string]bool{}
	)
	cyc := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"),
		Policy:  orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
		Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy, "pvc-b": orphan.VolumeHealthy},
		LookupVolume: func(ctx context.Context, volume string) (orphan.VolumeState, bool, error) {
			mu.Lock()
			looked[volume] = true
			mu.Unlock()
			if volume == "pvc-a" {
				return orphan.VolumeFaulted, true, nil
			}
			return orphan.VolumeHealthy, true, nil
		}}
	plan, res, err := h.sweeper.Reconcile(ctx, orphan.Snapshot{Items: items, Scopes: ready(d1)}, cyc)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Purge) != 1 {
		t.Fatalf("the plan must purge (both volumes healthy at the cycle's start): %+v", plan)
	}
	if !looked["pvc-a"] || !looked["pvc-b"] {
		t.Fatalf("looked up %v; want both pvc-a and pvc-b", looked)
	}
	if len(res.Purged) != 0 || len(h.deleter.Deleted()) != 0 {
		t.Fatalf("purged %v, deleted %v; want the copy kept", res.Purged, h.deleter.Deleted())
	}
	if len(res.Refused) != 1 || !strings.HasPrefix(res.Refused[0].Reason, "LastCopy:") || !strings.Contains(res.Refused[0].Reason, "pvc-a") {
		t.Fatalf("refused %+v; want LastCopy for volume pvc-a", res.Refused)
	}
}
