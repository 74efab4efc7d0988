package orphantest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// runStoreTests checks that the Stores newStore makes honour the contract
// of orphan.Store. newStore is called once per subtest and must return an
// empty store.
func runStoreTests(t *testing.T, newStore func(t *testing.T) orphan.Store) {
	t.Helper()
	ctx := context.Background()

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		s := newStore(t)
		want := SampleRecord("node-1", "pvc-1-0123abcd")
		got, err := s.Create(ctx, want)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		checkSameRecord(t, "Create's result", got, want)
		read, err := s.Get(ctx, want.Name)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		checkSameRecord(t, "Get's result", read, want)
	})

	t.Run("CreateTwiceIsAlreadyExists", func(t *testing.T) {
		s := newStore(t)
		r := SampleRecord("node-1", "pvc-1-0123abcd")
		if _, err := s.Create(ctx, r); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if _, err := s.Create(ctx, r); !errors.Is(err, orphan.ErrAlreadyExists) {
			t.Fatalf("second Create: got %v, want an error wrapping ErrAlreadyExists", err)
		}
	})

	t.Run("UnknownKindIsKeptAsIs", func(t *testing.T) {
		// Longhorn's Orphan CRD holds more types than caretaker's kind
		// table (shard-instance, shardgroup-instance): a Store holds and
		// lists such a record like any other, unchanged.
		s := newStore(t)
		want := SampleUnknownKindRecord("node-1")
		if _, err := s.Create(ctx, want); err != nil {
			t.Fatalf("Create of an unknown kind: %v", err)
		}
		read, err := s.Get(ctx, want.Name)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		checkSameRecord(t, "Get's result", read, want)
		for _, sel := range []orphan.Selector{{NodeID: "node-1"}, {NodeID: "node-1", Kind: want.Kind}} {
			list, err := s.List(ctx, sel)
			if err != nil {
				t.Fatalf("List(%+v): %v", sel, err)
			}
			if len(list) != 1 {
				t.Fatalf("List(%+v) = %d records, want the one of the unknown kind", sel, len(list))
			}
			checkSameRecord(t, "List's result", list[0], want)
		}
	})

	t.Run("GetMissingIsNotFound", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx, "orphan-missing"); !errors.Is(err, orphan.ErrNotFound) {
			t.Fatalf("Get: got %v, want an error wrapping ErrNotFound", err)
		}
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		s := newStore(t)
		r := SampleRecord("node-1", "pvc-1-0123abcd")
		if _, err := s.Create(ctx, r); err != nil {
			t.Fatalf("Create: %v", err)
		}
		for i := range 2 {
			if err := s.Delete(ctx, r.Name); err != nil {
				t.Fatalf("Delete #%d: %v", i+1, err)
			}
		}
		if _, err := s.Get(ctx, r.Name); !errors.Is(err, orphan.ErrNotFound) {
			t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
		}
	})

	t.Run("ListFiltersByNodeAndKind", func(t *testing.T) {
		s := newStore(t)
		a := SampleRecord("node-a", "pvc-1-0123abcd")
		b := SampleRecord("node-b", "pvc-2-0123abcd")
		c := SampleInstanceRecord("node-a", orphan.KindEngineInstance, "pvc-3-e-0")
		for _, r := range []orphan.Record{a, b, c} {
			if _, err := s.Create(ctx, r); err != nil {
				t.Fatalf("Create %s: %v", r.Name, err)
			}
		}
		cases := []struct {
			sel  orphan.Selector
			want []string
		}{
			{orphan.Selector{}, []string{a.Name, b.Name, c.Name}},
			{orphan.Selector{NodeID: "node-a"}, []string{a.Name, c.Name}},
			{orphan.Selector{Kind: orphan.KindReplicaData}, []string{a.Name, b.Name}},
			{orphan.Selector{NodeID: "node-a", Kind: orphan.KindEngineInstance}, []string{c.Name}},
			{orphan.Selector{NodeID: "node-z"}, nil},
		}
		for _, tc := range cases {
			got, err := s.List(ctx, tc.sel)
			if err != nil {
				t.Fatalf("List(%+v): %v", tc.sel, err)
			}
			if !sameNames(names(got), tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.sel, names(got), tc.want)
			}
		}
	})

	t.Run("UpdateChangesDeletionAndConditionsOnly", func(t *testing.T) {
		s := newStore(t)
		orig := SampleRecord("node-1", "pvc-1-0123abcd")
		stored, err := s.Create(ctx, orig)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		upd := stored.Clone()
		upd.DeletionRequested = true
		upd.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse,
			Reason: "DiskEvicted", Message: "test", LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0).UTC())}}
		upd.NodeID = "someone-else"
		upd.Parameters = map[string]string{"DataName": "tampered"}
		got, err := s.Update(ctx, upd)
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		read, err := s.Get(ctx, orig.Name)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		for label, r := range map[string]orphan.Record{"Update's result": got, "Get's result": read} {
			if !r.DeletionRequested {
				t.Errorf("%s: DeletionRequested not stored", label)
			}
			if len(r.Conditions) != 1 || r.Conditions[0].Reason != "DiskEvicted" {
				t.Errorf("%s: conditions = %+v, want the DiskEvicted condition", label, r.Conditions)
			}
			if r.NodeID != orig.NodeID || r.Parameters[orphan.ParamDataName] != orig.Parameters[orphan.ParamDataName] {
				t.Errorf("%s: immutable fields changed: node %q params %v", label, r.NodeID, r.Parameters)
			}
		}
	})

	t.Run("DismissalIsKept", func(t *testing.T) {
		s := newStore(t)
		check := func(what, name string, want bool) {
			t.Helper()
			r, err := s.Get(ctx, name)
			if err != nil {
				t.Fatalf("%s: Get: %v", what, err)
			}
			if r.Dismissed != want {
				t.Errorf("%s: Get's Dismissed = %v, want %v", what, r.Dismissed, want)
			}
			list, err := s.List(ctx, orphan.Selector{})
			if err != nil {
				t.Fatalf("%s: List: %v", what, err)
			}
			for _, l := range list {
				if l.Name == name && l.Dismissed != want {
					t.Errorf("%s: List's Dismissed = %v, want %v", what, l.Dismissed, want)
				}
			}
		}
		// Created dismissed.
		a := SampleRecord("node-1", "pvc-1-0123abcd")
		a.Dismissed = true
		got, err := s.Create(ctx, a)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if !got.Dismissed {
			t.Errorf("Create's result is not dismissed")
		}
		check("created dismissed", a.Name, true)

		// Dismissed by an Update; conditions written later on a fresh read
		// keep it.
		b, err := s.Create(ctx, SampleRecord("node-1", "pvc-2-0123abcd"))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		check("created", b.Name, false)
		b.Dismissed = true
		if b, err = s.Update(ctx, b); err != nil {
			t.Fatalf("Update (dismiss): %v", err)
		}
		check("dismissed by Update", b.Name, true)
		b.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse,
			Reason: "Dismissed", Message: "test", LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0).UTC())}}
		if b, err = s.Update(ctx, b); err != nil {
			t.Fatalf("Update (conditions): %v", err)
		}
		check("conditions written", b.Name, true)

		// Un-dismissed: back to normal.
		b.Dismissed = false
		if _, err = s.Update(ctx, b); err != nil {
			t.Fatalf("Update (un-dismiss): %v", err)
		}
		check("un-dismissed", b.Name, false)

		// A deletion requested of a dismissed record keeps the dismissal.
		c, err := s.Create(ctx, SampleRecord("node-1", "pvc-3-0123abcd"))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		c.Dismissed, c.DeletionRequested = true, true
		if _, err = s.Update(ctx, c); err != nil {
			t.Fatalf("Update (dismiss and request): %v", err)
		}
		check("dismissed and requested", c.Name, true)
		if r, err := s.Get(ctx, c.Name); err != nil || !r.DeletionRequested {
			t.Errorf("dismissed and requested: Get = %+v, %v; want DeletionRequested", r, err)
		}
	})

	t.Run("StaleUpdateIsConflict", func(t *testing.T) {
		s := newStore(t)
		stored, err := s.Create(ctx, SampleRecord("node-1", "pvc-1-0123abcd"))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if stored.ResourceVersion == "" {
			t.Skip("store does not report resource versions")
		}
		first := stored.Clone()
		first.DeletionRequested = true
		if _, err := s.Update(ctx, first); err != nil {
			t.Fatalf("first Update: %v", err)
		}
		stale := stored.Clone()
		if _, err := s.Update(ctx, stale); !errors.Is(err, orphan.ErrConflict) {
			t.Fatalf("Update with a stale version: got %v, want ErrConflict", err)
		}
		read, _ := s.Get(ctx, stored.Name)
		if !read.DeletionRequested {
			t.Fatalf("the stale update overwrote the first one")
		}
	})

	t.Run("UpdateMissingIsNotFound", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Update(ctx, SampleRecord("node-1", "pvc-1-0123abcd")); !errors.Is(err, orphan.ErrNotFound) {
			t.Fatalf("Update: got %v, want ErrNotFound", err)
		}
	})

	t.Run("ReturnedRecordsAreCopies", func(t *testing.T) {
		s := newStore(t)
		r := SampleRecord("node-1", "pvc-1-0123abcd")
		if _, err := s.Create(ctx, r); err != nil {
			t.Fatalf("Create: %v", err)
		}
		r.Parameters[orphan.ParamDataName] = "changed-after-create"
		got, _ := s.Get(ctx, r.Name)
		got.Parameters[orphan.ParamDataName] = "changed-after-get"
		list, _ := s.List(ctx, orphan.Selector{})
		again, _ := s.Get(ctx, r.Name)
		for _, x := range append(list, again) {
			if x.Parameters[orphan.ParamDataName] != "pvc-1-0123abcd" {
				t.Fatalf("the store shares maps with its callers: DataName = %q", x.Parameters[orphan.ParamDataName])
			}
		}
	})

	t.Run("ConcurrentCreatesOneWins", func(t *testing.T) {
		s := newStore(t)
		r := SampleRecord("node-1", "pvc-1-0123abcd")
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Create(ctx, r)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		ok := 0
		for err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, orphan.ErrAlreadyExists):
				t.Errorf("concurrent Create: unexpected error %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d concurrent Creates succeeded, want exactly 1", ok)
		}
	})

	t.Run("CancelledContextFails", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Create(cctx, SampleRecord("node-1", "pvc-1-0123abcd")); err == nil {
			t.Fatalf("Create with a cancelled context succeeded")
		}
		if _, err := s.Get(ctx, SampleRecord("node-1", "pvc-1-0123abcd").Name); !errors.Is(err, orphan.ErrNotFound) {
			t.Fatalf("a Create with a cancelled context left a record behind (Get: %v)", err)
		}
	})
}

// SampleRecord returns a valid replica-data record on disk "disk-1" of
// node, for the data directory dataName.
func SampleRecord(node, dataName string) orphan.Record {
	r, err := orphan.NewRecord(orphan.Item{
		Kind:       orphan.KindReplicaData,
		NodeID:     node,
		DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{
			orphan.ParamDataName: dataName,
			orphan.ParamDiskName: "disk-1",
			orphan.ParamDiskUUID: "4c8e0c8a-1b0f-4e4b-9d55-6a3a0d3c1c11",
			orphan.ParamDiskPath: "/var/lib/longhorn",
			orphan.ParamDiskType: "filesystem",
		},
	}, time.Unix(1700000000, 0).UTC())
	if err != nil {
		panic(fmt.Sprintf("orphantest: SampleRecord: %v", err)) // the fields above are complete
	}
	return r
}

// SampleUnknownKindRecord returns a record on node of a kind caretaker's
// table does not hold, as longhorn-manager writes one for its sharded v2
// volumes: orphan type shard-instance, with the labels
// types.GetOrphanLabelsForOrphanedShardInstance gives it.
func SampleUnknownKindRecord(node string) orphan.Record {
	return orphan.Record{
		Name:       "orphan-" + strings.Repeat("5a", 32),
		Kind:       orphan.Kind("shard-instance"),
		NodeID:     node,
		DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{
			orphan.ParamInstanceName:    "vol-1-shard-0",
			orphan.ParamInstanceUUID:    "9b3c1f4e-2a77-4d0e-8f51-0c6a2e9d7b10",
			orphan.ParamInstanceManager: "instance-manager-1",
		},
		Labels: map[string]string{
			orphan.LabelComponent:       orphan.LabelValueComponent,
			orphan.LabelManagedBy:       orphan.LabelValueManagedBy,
			orphan.LabelOrphanType:      "shard-instance",
			orphan.LabelNode:            node,
			orphan.LabelInstanceManager: "instance-manager-1",
			"longhornshard":             "vol-1-shard-0",
		},
		CreatedAt: time.Unix(1700000000, 0).UTC(),
	}
}

// SampleInstanceRecord returns a valid v2 instance record of the given kind
// on node.
func SampleInstanceRecord(node string, kind orphan.Kind, instance string) orphan.Record {
	r, err := orphan.NewRecord(orphan.Item{
		Kind:       kind,
		NodeID:     node,
		DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{
			orphan.ParamInstanceName:    instance,
			orphan.ParamInstanceUUID:    "9b2f6f0e-4d8c-4a57-8f0e-1c9d3e2b7a10",
			orphan.ParamInstanceManager: "instance-manager-" + node,
		},
	}, time.Unix(1700000000, 0).UTC())
	if err != nil {
		panic(fmt.Sprintf("orphantest: SampleInstanceRecord: %v", err))
	}
	return r
}

func checkSameRecord(t *testing.T, what string, got, want orphan.Record) {
	t.Helper()
	if got.Name != want.Name || got.Kind != want.Kind || got.NodeID != want.NodeID || got.DataEngine != want.DataEngine {
		t.Errorf("%s: identity = %s/%s/%s/%s, want %s/%s/%s/%s", what,
			got.Name, got.Kind, got.NodeID, got.DataEngine, want.Name, want.Kind, want.NodeID, want.DataEngine)
	}
	if !sameMap(got.Parameters, want.Parameters) {
		t.Errorf("%s: parameters = %v, want %v", what, got.Parameters, want.Parameters)
	}
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", what, k, got.Labels[k], v)
		}
	}
	if got.DeletionRequested != want.DeletionRequested {
		t.Errorf("%s: DeletionRequested = %v, want %v", what, got.DeletionRequested, want.DeletionRequested)
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func names(rs []orphan.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
