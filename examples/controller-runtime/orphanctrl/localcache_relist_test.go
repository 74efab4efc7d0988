package orphanctrl

import (
	"context"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// versionedServer answers LISTs as kube-apiserver's watch cache may: a
// LIST at resourceVersion N ("not older than N", what client-go's
// reflector asks when it relists) is answered at exactly N, with the
// objects that existed then; a LIST at "" (the latest) with every object.
type versionedServer struct {
	t       *testing.T
	objs    []unstructured.Unstructured // in creation order
	created []int                       // the resource version each was created at
	rv      int
	asked   []string // the resourceVersion of each LIST
}

func (s *versionedServer) add(u unstructured.Unstructured) {
	s.rv++
	u.SetResourceVersion(strconv.Itoa(s.rv))
	s.objs = append(s.objs, u)
	s.created = append(s.created, s.rv)
}

func (s *versionedServer) ListWithContext(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.asked = append(s.asked, o.ResourceVersion)
	at := s.rv
	if o.ResourceVersion != "" && o.ResourceVersion != "0" {
		n, err := strconv.Atoi(o.ResourceVersion)
		if err != nil {
			s.t.Fatalf("resourceVersion %q", o.ResourceVersion)
		}
		at = n
	}
	out := &unstructured.UnstructuredList{}
	out.SetAPIVersion("longhorn.io/v1beta2")
	out.SetKind("List")
	out.SetResourceVersion(strconv.Itoa(at))
	for i, u := range s.objs {
		if s.created[i] <= at {
			out.Items = append(out.Items, *u.DeepCopy())
		}
	}
	return out, nil
}

func (s *versionedServer) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewEmptyWatch(), nil
}

func object(kind, ns, name string, spec map[string]any) unstructured.Unstructured {
	return unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

// TestRelistAfterTheSelectionGrewReadsTheLatestVersion: the node-local
// filter lists at the latest version when the reflector relists at the
// version it last synced. A volume created after the first LIST (which
// wanted none) and wanted since, or a replica on a disk added since, is in
// the relist, and the filter is not ready until the cache holds it: read
// at the old version, the relist lacks it, and ready would let the
// guard take the wanted volume as deleted (its last copy purged) or the
// new disk's directory as claimed by nothing.
func TestRelistAfterTheSelectionGrewReadsTheLatestVersion(t *testing.T) {
	const ns = "longhorn-system"
	for _, tc := range []struct {
		kind  string
		f     func(*LocalCache) *filter
		grow  func(*LocalCache)
		added unstructured.Unstructured
	}{{
		kind: "volume", f: func(l *LocalCache) *filter { return l.volumes },
		grow:  func(l *LocalCache) { l.setVolumes(map[string]bool{"pvc-late": true}) },
		added: object("Volume", ns, "pvc-late", map[string]any{"numberOfReplicas": int64(3)}),
	}, {
		kind: "replica", f: func(l *LocalCache) *filter { return l.replicas },
		grow: func(l *LocalCache) { l.setDisks(map[string]bool{"uuid-1": true, "uuid-2": true}) },
		// Claims the new disk while naming another node.
		added: object("Replica", ns, "r-new-disk", map[string]any{"nodeID": "node-2", "diskID": "uuid-2", "dataDirectoryName": "pvc-a-1"}),
	}} {
		t.Run(tc.kind, func(t *testing.T) {
			lc := NewLocalCache(ns, "node-1")
			lc.setDisks(map[string]bool{"uuid-1": true})
			srv := &versionedServer{t: t}
			srv.add(object("Volume", ns, "pvc-other", nil))
			f := tc.f(lc)
			lw := &localLW{f: f, inner: srv}
			ctx := context.Background()

			first, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			synced := first.(*unstructured.UnstructuredList).GetResourceVersion()
			if !f.ready(first.(*unstructured.UnstructuredList).Items) {
				t.Fatal("not ready after the first list is cached")
			}

			srv.add(tc.added) // dropped by the watch: not kept then
			tc.grow(lc)
			if f.ready(first.(*unstructured.UnstructuredList).Items) {
				t.Fatal("ready after the selection grew, before a relist")
			}
			// client-go's reflector relists at the version it last synced.
			again, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: synced})
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.asked[len(srv.asked)-1]; got != "" {
				t.Errorf("the relist asked the API server for resourceVersion %q, not the latest", got)
			}
			items := again.(*unstructured.UnstructuredList).Items
			found := false
			for _, u := range items {
				found = found || u.GetName() == tc.added.GetName()
			}
			if !found {
				t.Errorf("the relist lacks %s %s, created after the first list and selected since", tc.kind, tc.added.GetName())
			}
			if f.ready(first.(*unstructured.UnstructuredList).Items) {
				t.Errorf("ready while the cache holds only the first list, without %s", tc.added.GetName())
			}
			if !f.ready(items) {
				t.Error("not ready once the cache holds the relist")
			}
		})
	}
}
