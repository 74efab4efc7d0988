package crstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// beforeDelete is a dynamic client whose resources run hook right before
// each Delete call reaches the API server: the moment between the Store's
// own re-read and its delete, where another writer can act.
type beforeDelete struct {
	dynamic.Interface
	hook func(name string)
}

func (c beforeDelete) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return beforeDeleteNR{c.Interface.Resource(gvr), c.hook}
}

type beforeDeleteNR struct {
	dynamic.NamespaceableResourceInterface
	hook func(string)
}

func (r beforeDeleteNR) Namespace(ns string) dynamic.ResourceInterface {
	return beforeDeleteR{r.NamespaceableResourceInterface.Namespace(ns), r.hook}
}

type beforeDeleteR struct {
	dynamic.ResourceInterface
	hook func(string)
}

func (r beforeDeleteR) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	r.hook(name)
	return r.ResourceInterface.Delete(ctx, name, opts, sub...)
}

// TestAutoDeletionNeverLandsOverAChangeMadeMeanwhile: the Sweeper records
// an auto-deletion with Update (DeletionRequested, the ResourceVersion it
// read). A forget that marks the record DataCleanable=False between the
// Store's re-read and its delete must make Update fail with ErrConflict and
// leave the object as the forget left it: a deletion recorded over a
// change the Sweeper never saw would let the purge go on.
func TestAutoDeletionNeverLandsOverAChangeMadeMeanwhile(t *testing.T) {
	ctx := context.Background()
	dc := client(t)
	ns := kubetest.Namespace(t, dc, "store-race")
	ri := dc.Resource(crstore.GVR).Namespace(ns)
	changed := false
	forget := func(name string) {
		if changed {
			return
		}
		changed = true
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		cond := map[string]any{"type": orphan.ConditionDataCleanable, "status": "False", "reason": string(orphan.ReasonGone),
			"message": "forgotten meanwhile", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "lastProbeTime": ""}
		if err := unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"); err != nil {
			t.Error(err)
			return
		}
		if _, err := ri.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	s := crstore.New(beforeDelete{dc, forget}, crstore.Options{Namespace: ns, OwnerID: "node-1"})

	r := orphantest.SampleRecord("node-1", "pvc-1-0123abcd")
	r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable,
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}
	if _, err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Get(ctx, r.Name)
	if err != nil || !cur.Cleanable() {
		t.Fatalf("Get = %+v, %v; want a cleanable record", cur, err)
	}
	cur.DeletionRequested = true
	if _, err := s.Update(ctx, cur); !errors.Is(err, orphan.ErrConflict) {
		t.Fatalf("Update over a change made meanwhile: err = %v, want ErrConflict", err)
	}
	if !changed {
		t.Fatal("the change was never made: the test did not reach the delete")
	}
	u, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetDeletionTimestamp() != nil {
		t.Fatalf("the object was deleted over the forget's change")
	}
	after, err := s.Get(ctx, r.Name)
	if err != nil || after.Cleanable() || after.DeletionRequested {
		t.Fatalf("after: cleanable=%v requested=%v (err %v); want the forget's record, untouched", after.Cleanable(), after.DeletionRequested, err)
	}
}
