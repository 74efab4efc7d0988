package nodecache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
	"github.com/caretaker-storage/caretaker/orphan"
)

// readCounter counts the GETs and the LIST requests (pages) made through
// a ResourceInterface. With limit set it serves lists in pages of that
// many objects; with expire set, the first request for a page after the
// first is answered as kube-apiserver answers a continue token etcd
// compacted since: 410 Expired with a token to go on at a later version
// (here the real token, so the objects are the same; the list still
// counts as resumed).
type readCounter struct {
	dynamic.ResourceInterface
	limit  int64
	expire bool

	mu          sync.Mutex
	gets, lists int
	expired     bool
}

func (c *readCounter) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.ResourceInterface.Get(ctx, name, opts, sub...)
}

func (c *readCounter) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	c.mu.Lock()
	c.lists++
	expire := c.expire && opts.Continue != "" && !c.expired
	c.expired = c.expired || expire
	c.mu.Unlock()
	if c.limit > 0 {
		opts.Limit = c.limit
	}
	if expire {
		se := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
		se.ErrStatus.Continue = opts.Continue
		return nil, se
	}
	return c.ResourceInterface.List(ctx, opts)
}

func (c *readCounter) take() (gets, lists int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gets, lists, c.gets, c.lists = c.gets, c.lists, 0, 0
	return gets, lists
}

// TestManyWantedVolumesAreReadWithOneList (issue 37's edge: more than
// MaxVolumeWatches orphan volumes on a node): 120 wanted volumes, 100 of
// them existing and 20 deleted, none watched. A sweep reads them with one
// paged list (here in pages of 30, so 4 requests), not 120 GETs, and
// gets each state right: the existing ones with their robustness, the 20
// known deleted. Through a list whose continue token expired and was
// resumed at a later version, the existing volumes are read but the 20
// absent ones stay unresolved (the set is incomplete: the guard takes
// them as unknown, not deleted). A handful of volumes is still read with
// GETs, which cost less than a list of the namespace.
func TestManyWantedVolumesAreReadWithOneList(t *testing.T) {
	c := kubetest.Require(t)
	dc, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, dc, "nodecache")
	vri := dc.Resource(longhorn.VolumeGVR).Namespace(ns)
	wanted := map[string]bool{}
	for i := range 100 {
		name := fmt.Sprintf("vol-%03d", i)
		robustness := "healthy"
		if i%10 == 0 {
			robustness = "faulted"
		}
		createVolume(t, vri, ns, name, robustness, "attached", 3)
		wanted[name] = true
	}
	for i := range 20 {
		wanted[fmt.Sprintf("gone-%02d", i)] = true
	}
	ctx := context.Background()
	check := func(states map[string]orphan.VolumeState) {
		t.Helper()
		for n := range wanted {
			s, ok := states[n]
			switch {
			case n[:4] == "gone" && ok:
				t.Fatalf("%s, deleted, has state %q", n, s)
			case n[:4] == "vol-" && n[6] == '0' && s != orphan.VolumeFaulted, n[:4] == "vol-" && n[6] != '0' && s != orphan.VolumeHealthy:
				t.Fatalf("%s has state %q (ok %v)", n, s, ok)
			}
		}
	}

	rc := &readCounter{ResourceInterface: vri, limit: 30}
	v := nodecache.NewVolumes(rc, nil, ns, func() {})
	for sweep := range 2 {
		v.Ensure(ctx, wanted)
		gets, lists := rc.take()
		if gets != 0 || lists != 4 {
			t.Fatalf("sweep %d read 120 volumes with %d GETs and %d list pages; want no GET and the 4 pages of one list", sweep, gets, lists)
		}
		states, complete := v.States()
		if !complete {
			t.Fatalf("sweep %d: the states are incomplete after a whole list", sweep)
		}
		check(states)
	}

	resumed := &readCounter{ResourceInterface: vri, limit: 30, expire: true}
	v = nodecache.NewVolumes(resumed, nil, ns, func() {})
	v.Ensure(ctx, wanted)
	states, complete := v.States()
	if complete {
		t.Fatal("a resumed list proved 20 volumes deleted")
	}
	if len(states) != 100 {
		t.Fatalf("a resumed list read %d of the 100 existing volumes", len(states))
	}
	check(states)

	few := &readCounter{ResourceInterface: vri, limit: 30}
	v = nodecache.NewVolumes(few, nil, ns, func() {})
	v.Ensure(ctx, map[string]bool{"vol-001": true, "vol-010": true, "gone-00": true})
	if gets, lists := few.take(); gets != 3 || lists != 0 {
		t.Fatalf("3 volumes were read with %d GETs and %d list pages; want 3 GETs", gets, lists)
	}
	states, complete = v.States()
	if !complete || states["vol-001"] != orphan.VolumeHealthy || states["vol-010"] != orphan.VolumeFaulted || len(states) != 2 {
		t.Fatalf("States = %v, complete %v", states, complete)
	}
}

// TestManyDetachedVolumesAreCountedInFewLists: 30 detached volumes
// (robustness unknown), a third with a healthy other replica, a third
// with a failed one, a third with none. Past MaxVolumeGets detached
// volumes a sweep lists their Replicas with one set-based selector, not
// one list each, and states every volume as its own list would.
func TestManyDetachedVolumesAreCountedInFewLists(t *testing.T) {
	c := kubetest.Require(t)
	dc, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, dc, "nodecache")
	vri := dc.Resource(longhorn.VolumeGVR).Namespace(ns)
	rri := dc.Resource(longhorn.ReplicaGVR).Namespace(ns)
	ctx := context.Background()
	wanted := map[string]bool{}
	for i := range 30 {
		name := fmt.Sprintf("vol-%02d", i)
		createVolume(t, vri, ns, name, "unknown", "detached", 2)
		wanted[name] = true
		if i%3 == 2 {
			continue
		}
		spec := map[string]any{"nodeID": "node-9", "diskID": "uuid-9", "dataDirectoryName": name + "-0a1b2c3d",
			"volumeName": name, "active": true, "healthyAt": "2026-01-01T00:00:00Z"}
		if i%3 == 1 {
			spec["failedAt"] = "2026-01-02T00:00:00Z"
		}
		if _, err := rri.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
			"metadata": map[string]any{"name": name + "-r1", "namespace": ns, "labels": map[string]any{longhorn.LabelVolume: name}},
			"spec":     spec,
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	rc := &readCounter{ResourceInterface: rri}
	v := nodecache.NewVolumes(vri, rc, ns, func() {})
	v.Ensure(ctx, wanted)
	if _, lists := rc.take(); lists != 1 {
		t.Fatalf("30 detached volumes' Replicas took %d lists, want one", lists)
	}
	states, complete := v.States()
	if !complete || len(states) != 30 {
		t.Fatalf("States = %v, complete %v", states, complete)
	}
	kinds := map[orphan.VolumeState]bool{}
	for name := range wanted {
		one := nodecache.NewVolumes(vri, rri, ns, func() {})
		one.Ensure(ctx, map[string]bool{name: true})
		alone, _ := one.States()
		if states[name] == "" || states[name] != alone[name] {
			t.Fatalf("%s is %q from the shared list, %q from its own", name, states[name], alone[name])
		}
		kinds[states[name]] = true
	}
	if len(kinds) < 2 {
		t.Fatalf("every volume has the same state %v: the test tells nothing", kinds)
	}
}
