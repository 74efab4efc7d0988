package crstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func client(t *testing.T) dynamic.Interface {
	t.Helper()
	dc, err := kubetest.Require(t).Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// newStore returns a store in a namespace of its own, so it starts empty.
func newStore(t *testing.T) *crstore.Store {
	dc := client(t)
	return crstore.New(dc, crstore.Options{Namespace: kubetest.Namespace(t, dc, "store"), OwnerID: "node-1", FieldManager: "crstore-test"})
}

func TestStoreConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Store: func(t *testing.T) orphan.Store { return newStore(t) }})
}

// TestObjectsAreLonghorns checks the object the store writes field by field.
func TestObjectsAreLonghorns(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	r := orphantest.SampleRecord("node-1", "pvc-1-0123abcd")
	if _, err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	u, err := client(t).Resource(crstore.GVR).Namespace(s.Namespace()).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "longhorn.io/v1beta2" || u.GetKind() != "Orphan" {
		t.Errorf("apiVersion/kind = %s/%s", u.GetAPIVersion(), u.GetKind())
	}
	if fs := u.GetFinalizers(); len(fs) != 1 || fs[0] != "longhorn.io" {
		t.Errorf("finalizers = %v, want [longhorn.io]", fs)
	}
	wantLabels := map[string]string{
		"longhorn.io/component": "orphan", "longhorn.io/managed-by": "longhorn-manager",
		"longhorn.io/orphan-type": "replica", "longhornnode": "node-1",
	}
	for k, v := range wantLabels {
		if u.GetLabels()[k] != v {
			t.Errorf("label %s = %q, want %q", k, u.GetLabels()[k], v)
		}
	}
	spec := u.Object["spec"].(map[string]any)
	if spec["nodeID"] != "node-1" || spec["orphanType"] != "replica" || spec["dataEngine"] != "v1" {
		t.Errorf("spec = %v", spec)
	}
	params := spec["parameters"].(map[string]any)
	for k, v := range r.Parameters {
		if params[k] != v {
			t.Errorf("spec.parameters.%s = %v, want %q", k, params[k], v)
		}
	}
	if owner, _, _ := unstructured.NestedString(u.Object, "status", "ownerID"); owner != "node-1" {
		t.Errorf("status.ownerID = %q, want node-1", owner)
	}
}

// TestDeletionRequestIsADeletionTimestamp: a user's delete leaves the
// object, marked, until Store.Delete removes the finalizer.
func TestDeletionRequestIsADeletionTimestamp(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	ri := client(t).Resource(crstore.GVR).Namespace(s.Namespace())
	r := orphantest.SampleRecord("node-1", "pvc-1-0123abcd")
	if _, err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := ri.Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil { // kubectl delete orphan NAME
		t.Fatal(err)
	}
	got, err := s.Get(ctx, r.Name)
	if err != nil {
		t.Fatalf("Get after a user's delete: %v (the finalizer should hold the object)", err)
	}
	if !got.DeletionRequested {
		t.Fatalf("DeletionRequested = false after a user's delete")
	}
	if err := s.Delete(ctx, r.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, r.Name); !errors.Is(err, orphan.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
}

// TestAutoDeletionIsADeleteThatSurvives: Update with DeletionRequested
// deletes the object on the server, so another store (a restarted agent)
// sees the request.
func TestAutoDeletionIsADeleteThatSurvives(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	stored, err := s.Create(ctx, orphantest.SampleRecord("node-1", "pvc-1-0123abcd"))
	if err != nil {
		t.Fatal(err)
	}
	stored.DeletionRequested = true
	if _, err := s.Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	u, err := client(t).Resource(crstore.GVR).Namespace(s.Namespace()).Get(ctx, stored.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetDeletionTimestamp() == nil {
		t.Fatalf("no deletion timestamp on the server after Update with DeletionRequested")
	}
	other := crstore.New(client(t), crstore.Options{Namespace: s.Namespace()})
	again, err := other.Get(ctx, stored.Name)
	if err != nil || !again.DeletionRequested {
		t.Fatalf("a second store sees DeletionRequested=%v (err %v), want true", again.DeletionRequested, err)
	}
}

// TestDeleteNeverRequestsDeletion: Delete removes the finalizer before the
// object, so no one ever sees a deletion request it did not make.
func TestDeleteNeverRequestsDeletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	ri := client(t).Resource(crstore.GVR).Namespace(s.Namespace())
	r := orphantest.SampleRecord("node-1", "pvc-1-0123abcd")
	if _, err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := ri.Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + r.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := s.Delete(ctx, r.Name); err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		obj, ok := ev.Object.(interface {
			GetDeletionTimestamp() *metav1.Time
			GetFinalizers() []string
		})
		if !ok {
			continue
		}
		if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) > 0 {
			t.Fatalf("%s event: the object was marked for deletion while it still had finalizers %v", ev.Type, obj.GetFinalizers())
		}
		if ev.Type == "DELETED" {
			return
		}
	}
	t.Fatalf("no DELETED event within 30 s")
}

// TestConditionsRoundTrip: conditions are stored in Longhorn's shape and
// read back as metav1.Conditions.
func TestConditionsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	stored, err := s.Create(ctx, orphantest.SampleRecord("node-1", "pvc-1-0123abcd"))
	if err != nil {
		t.Fatal(err)
	}
	stored.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse,
		Reason: string(orphan.HealthDiskEvicted), Message: "evicted", LastTransitionTime: metav1.Unix(1700000000, 0)}}
	if _, err := s.Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	u, err := client(t).Resource(crstore.GVR).Namespace(s.Namespace()).Get(ctx, stored.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := u.Object["status"].(map[string]any)["conditions"].([]any)
	c := conds[0].(map[string]any)
	if c["type"] != "DataCleanable" || c["status"] != "False" || c["reason"] != "DiskEvicted" || c["lastTransitionTime"] != "2023-11-14T22:13:20Z" {
		t.Fatalf("stored condition = %v", c)
	}
	got, err := s.Get(ctx, stored.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Conditions) != 1 || !got.Conditions[0].LastTransitionTime.Equal(&stored.Conditions[0].LastTransitionTime) {
		t.Fatalf("conditions read back = %+v", got.Conditions)
	}
}
