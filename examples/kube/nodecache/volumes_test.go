package nodecache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
	"github.com/caretaker-storage/caretaker/orphan"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// failingGets is a ResourceInterface whose Get and List fail, as a
// throttled or unreachable API server does.
type failingGets struct{ dynamic.ResourceInterface }

var errDown = errors.New("the API server is unreachable")

func (failingGets) Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error) {
	return nil, errDown
}

func (failingGets) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return nil, errDown
}

func createVolume(t *testing.T, ri dynamic.ResourceInterface, ns, name, robustness, state string, replicas int64) {
	t.Helper()
	ctx := context.Background()
	obj, err := ri.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"numberOfReplicas": replicas, "size": "1048576"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = map[string]any{"robustness": robustness, "state": state}
	if _, err := ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestVolumesAreCompleteOnlyWhenEveryWantedVolumeIsRead: the states of
// the wanted volumes are read from a real API server: an existing one with
// its robustness, a detached one from its Replicas, a missing one left out
// with the set complete (the guard then takes it as deleted). When the
// reads fail, the set is incomplete and no volume is left out as if it
// were deleted; a detached volume whose Replicas cannot be listed is
// unknown, never counted.
func TestVolumesAreCompleteOnlyWhenEveryWantedVolumeIsRead(t *testing.T) {
	c := kubetest.Require(t)
	dc, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubetest.Namespace(t, dc, "nodecache")
	vri := dc.Resource(longhorn.VolumeGVR).Namespace(ns)
	rri := dc.Resource(longhorn.ReplicaGVR).Namespace(ns)
	createVolume(t, vri, ns, "vol-faulted", "faulted", "attached", 3)
	createVolume(t, vri, ns, "vol-detached", "unknown", "detached", 2)
	if _, err := rri.Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{"name": "vol-detached-r1", "namespace": ns, "labels": map[string]any{longhorn.LabelVolume: "vol-detached"}},
		"spec": map[string]any{"nodeID": "node-9", "diskID": "uuid-9", "dataDirectoryName": "vol-detached-0a1b2c3d",
			"volumeName": "vol-detached", "active": true, "healthyAt": "2026-01-01T00:00:00Z"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wanted := map[string]bool{"vol-faulted": true, "vol-detached": true, "vol-gone": true}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v := nodecache.NewVolumes(vri, rri, ns, func() {})
	done := make(chan struct{})
	go func() { defer close(done); v.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for !v.HasSynced() {
		if ctx.Err() != nil {
			t.Fatal("the Volume watch did not sync")
		}
		time.Sleep(10 * time.Millisecond) // polling the watch's first list, bounded by ctx
	}
	// A watch event for a detached volume that lands while a sweep counts
	// its Replicas leaves it unknown until the next sweep (the count was
	// made for the object before the event): sweep until it is counted,
	// as the host's loop does, a few times at most.
	want := map[string]orphan.VolumeState{"vol-faulted": orphan.VolumeFaulted, "vol-detached": orphan.VolumeDegraded}
	var states map[string]orphan.VolumeState
	var complete bool
	for sweep := 0; sweep < 5; sweep++ {
		v.Ensure(ctx, wanted)
		states, complete = v.States()
		if states["vol-detached"] != "" {
			break
		}
		time.Sleep(50 * time.Millisecond) // the next sweep, bounded by the loop
	}
	if !complete || len(states) != len(want) || states["vol-faulted"] != want["vol-faulted"] || states["vol-detached"] != want["vol-detached"] {
		t.Fatalf("States = %v, complete %v; want %v (vol-gone left out as deleted), complete", states, complete, want)
	}

	// The same volumes through an API server that does not answer.
	down := nodecache.NewVolumes(failingGets{vri}, failingGets{rri}, ns, func() {})
	down.Ensure(ctx, wanted)
	if states, complete := down.States(); complete || len(states) != 0 {
		t.Fatalf("with every read failing: States = %v, complete %v; want none, incomplete", states, complete)
	}
	// Volumes read, but the detached one's Replicas not listed: it is
	// unknown ("" to the guard), not faulted, healthy or deleted.
	half := nodecache.NewVolumes(vri, failingGets{rri}, ns, func() {})
	half.Ensure(ctx, wanted)
	states, complete = half.States()
	if s, ok := states["vol-detached"]; !ok || s != "" || !complete {
		t.Fatalf("with the Replicas not listed: States = %v, complete %v; want vol-detached unknown (\"\")", states, complete)
	}
}
