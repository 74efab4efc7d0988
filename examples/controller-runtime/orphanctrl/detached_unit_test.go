package orphanctrl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// replicaServer is a client.Reader of Replicas: a LIST by a label
// selector answers the matching replicas, three a page; a test can make
// a continued page fail or answer at another resource version.
type replicaServer struct {
	replicas []unstructured.Unstructured
	lists    []string // the label selector of each first page
	pageErr  error    // returned by a continued page
	pageRV   string   // the resource version of continued pages; "": the first's
}

func (s *replicaServer) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("no GET here")
}

func (s *replicaServer) List(_ context.Context, obj client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	from := 0
	if o.Continue != "" {
		if s.pageErr != nil {
			return s.pageErr
		}
		from, _ = strconv.Atoi(o.Continue)
	} else {
		s.lists = append(s.lists, o.LabelSelector.String())
	}
	var match []unstructured.Unstructured
	for _, r := range s.replicas {
		if o.LabelSelector.Matches(labels.Set(r.GetLabels())) {
			match = append(match, *r.DeepCopy())
		}
	}
	list := obj.(*unstructured.UnstructuredList)
	list.SetResourceVersion("100")
	if from > 0 && s.pageRV != "" {
		list.SetResourceVersion(s.pageRV)
	}
	list.Items = match[from:min(from+3, len(match))]
	if from+3 < len(match) {
		list.SetContinue(strconv.Itoa(from + 3))
	}
	return nil
}

// detachedVolumes returns n detached volumes (robustness unknown, one
// replica wanted) and a healthy replica of each, on another node.
func detachedVolumes(n int) ([]*unstructured.Unstructured, []unstructured.Unstructured) {
	var vols []*unstructured.Unstructured
	var reps []unstructured.Unstructured
	for i := range n {
		name := fmt.Sprintf("pvc-d%02d", i)
		v := object("Volume", "longhorn-system", name, map[string]any{"numberOfReplicas": int64(1)})
		v.Object["status"] = map[string]any{"robustness": "unknown", "state": "detached"}
		vols = append(vols, &v)
		r := object("Replica", "longhorn-system", name+"-r1", map[string]any{"nodeID": "node-9", "volumeName": name,
			"active": true, "healthyAt": "2026-01-01T00:00:00Z"})
		r.SetLabels(map[string]string{longhorn.LabelVolume: name})
		reps = append(reps, r)
	}
	return vols, reps
}

// TestDetachedVolumesCountedTogetherOrNotAtAll: past 16 detached
// volumes, one set-based list (paged, every page at the first page's
// version) states them all; up to 16, one list each. A list whose
// continued page fails, or answers at another resource version, states
// none of its volumes: they stay unknown, never counted from a part of
// their replicas.
func TestDetachedVolumesCountedTogetherOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	newController := func(srv *replicaServer) *Controller {
		return &Controller{cfg: Config{Namespace: "longhorn-system"}, api: srv, log: slog.New(slog.DiscardHandler)}
	}
	vols, reps := detachedVolumes(20)

	srv := &replicaServer{replicas: reps}
	got := newController(srv).countDetached(ctx, vols)
	if len(srv.lists) != 1 || len(got) != 20 {
		t.Fatalf("20 detached volumes: %d lists, %d stated; want one list stating 20", len(srv.lists), len(got))
	}
	for n, s := range got {
		if s != orphan.VolumeHealthy {
			t.Fatalf("%s is %q; want healthy from its replica", n, s)
		}
	}

	srv = &replicaServer{replicas: reps}
	if got := newController(srv).countDetached(ctx, vols[:16]); len(srv.lists) != 16 || len(got) != 16 {
		t.Fatalf("16 detached volumes: %d lists, %d stated; want one list each", len(srv.lists), len(got))
	}

	for name, srv := range map[string]*replicaServer{
		"failed page":           {replicas: reps, pageErr: errors.New("the continue token expired")},
		"page at a new version": {replicas: reps, pageRV: "101"},
	} {
		if got := newController(srv).countDetached(ctx, vols); len(got) != 0 {
			t.Errorf("%s: %d volumes stated from a partial list: %v", name, len(got), got)
		}
	}

	// A name that is no label value stays unknown; the others are counted.
	bad := object("Volume", "longhorn-system", "-bad-", map[string]any{"numberOfReplicas": int64(1)})
	bad.Object["status"] = map[string]any{"robustness": "unknown", "state": "detached"}
	srv = &replicaServer{replicas: reps}
	got = newController(srv).countDetached(ctx, append(vols[:17:17], &bad))
	if _, ok := got["-bad-"]; ok || len(got) != 17 || len(srv.lists) != 1 {
		t.Errorf("with a volume named -bad-: %d stated, %d lists; want the 17 others in one list", len(got), len(srv.lists))
	}
}
