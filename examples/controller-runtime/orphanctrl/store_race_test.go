package orphanctrl_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/orphan"
)

// cleanableRecord is a replica-data record marked DataCleanable=True, as
// a cycle marks every record before its data may be purged.
func cleanableRecord(t *testing.T, dataName string) orphan.Record {
	t.Helper()
	it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: "n1", DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
		orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn", orphan.ParamDiskUUID: "u-1", orphan.ParamDataName: dataName}}
	r, err := orphan.NewRecord(it, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue,
		Reason: orphan.ReasonCleanable, LastTransitionTime: metav1.Now()}}
	return r
}

// TestUpdateRequestingDeletionRefusesAChangeMadeMeanwhile guards the
// Sweeper's recording of an auto-deletion (Store.Update with
// DeletionRequested and the ResourceVersion it read) against what another
// writer does between the Store's own re-read and its delete call: a
// forget that marks the record DataCleanable=False, or the object deleted
// and recreated under the same name (a new UID). The Store must answer
// ErrConflict and leave the object as the other writer left it, never
// delete it: a deletion request recorded over a change the Sweeper never
// saw would let the purge go on.
func TestUpdateRequestingDeletionRefusesAChangeMadeMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, e *env, name string)
	}{
		{"marked not cleanable", func(t *testing.T, e *env, name string) {
			var o orphanctrl.Orphan
			if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &o); err != nil {
				t.Error(err)
				return
			}
			o.Status.Conditions = []crstore.Condition{{Type: orphan.ConditionDataCleanable, Status: "False",
				Reason: string(orphan.ReasonGone), Message: "forgotten meanwhile", LastTransitionTime: time.Now().UTC().Format(time.RFC3339)}}
			if err := e.c.Status().Update(context.Background(), &o); err != nil {
				t.Error(err)
			}
		}},
		{"recreated with a new UID", func(t *testing.T, e *env, name string) {
			ctx := context.Background()
			var o orphanctrl.Orphan
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &o); err != nil {
				t.Error(err)
				return
			}
			o.Finalizers = nil
			if err := e.c.Update(ctx, &o); err != nil {
				t.Error(err)
				return
			}
			if err := e.c.Delete(ctx, &o); err != nil {
				t.Error(err)
				return
			}
			fresh := &orphanctrl.Orphan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: o.Labels,
				Finalizers: []string{crstore.Finalizer}}, Spec: o.Spec}
			for {
				err := e.c.Create(ctx, fresh)
				if err == nil {
					return
				}
				if !apierrors.IsAlreadyExists(err) {
					t.Error(err)
					return
				}
				time.Sleep(10 * time.Millisecond) // the old object is still going
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			plain := orphanctrl.NewStore(e.c, e.c, e.ns, "")
			rec := cleanableRecord(t, "pvc-a-r-1")
			if _, err := plain.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			cur, err := plain.Get(ctx, rec.Name)
			if err != nil || !cur.Cleanable() {
				t.Fatalf("get: %+v, %v", cur, err)
			}
			before, err := e.getOrphan(rec.Name)
			if err != nil {
				t.Fatal(err)
			}

			wc, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			var changed atomic.Bool
			ic := interceptor.NewClient(wc, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if obj.GetName() == rec.Name && changed.CompareAndSwap(false, true) {
						tc.change(t, e, rec.Name) // between the Store's re-read and its delete
					}
					return c.Delete(ctx, obj, opts...)
				},
			})
			st := orphanctrl.NewStore(ic, ic, e.ns, "")
			cur.DeletionRequested = true
			_, err = st.Update(ctx, cur)
			if !changed.Load() {
				t.Fatal("the Store never called Delete: the change was not made where it was meant to be")
			}
			if !errors.Is(err, orphan.ErrConflict) {
				t.Errorf("Update over a change made meanwhile: err = %v, want ErrConflict", err)
			}
			after, err := e.getOrphan(rec.Name)
			if err != nil {
				t.Fatalf("the object is gone: %v", err)
			}
			if after.DeletionTimestamp != nil {
				t.Errorf("the object changed meanwhile is being deleted (uid %s, was %s; conditions %+v)", after.UID, before.UID, after.Status.Conditions)
			}
			if !slices.Contains(after.Finalizers, crstore.Finalizer) && after.UID == before.UID {
				t.Errorf("finalizer gone: %v", after.Finalizers)
			}
		})
	}
}
