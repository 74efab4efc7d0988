package longhorn

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caretaker-storage/caretaker/orphan"
)

func volumeObj(name, robustness, state string, n int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
		"metadata": map[string]any{"name": name, "namespace": "longhorn-system", "managedFields": []any{"x"}},
		"spec":     map[string]any{"numberOfReplicas": n, "size": "1048576"},
		"status":   map[string]any{"robustness": robustness, "state": state, "currentNodeID": ""},
	}}
}

func replicaObj(volume, name string, healthy, failed, active, deleting bool) unstructured.Unstructured {
	spec := map[string]any{"active": active, "volumeName": volume}
	if healthy {
		spec["healthyAt"] = "2026-01-01T00:00:00Z"
	}
	if failed {
		spec["failedAt"] = "2026-01-02T00:00:00Z"
	}
	u := unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "labels": map[string]any{LabelVolume: volume}},
		"spec":     spec,
	}}
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	return u
}

// TestVolumeStateOfDetachedVolume: a stripped detached Volume with
// robustness unknown is stated from its Replicas; a Replica labelled for
// another volume is not counted; an attached volume keeps its robustness.
func TestVolumeStateOfDetachedVolume(t *testing.T) {
	s, _ := StripVolume(volumeObj("pvc-1", "unknown", "detached", 2))
	vol := s.(*unstructured.Unstructured)
	if !NeedsReplicas(vol) {
		t.Fatalf("a stripped detached volume does not need its replicas: %v", vol.Object)
	}
	if _, ok := vol.Object["metadata"].(map[string]any)["managedFields"]; ok {
		t.Fatalf("StripVolume kept managedFields")
	}
	ok := replicaObj("pvc-1", "r1", true, false, true, false)
	failed := replicaObj("pvc-1", "r2", true, true, true, false)
	other := replicaObj("pvc-2", "r3", true, false, true, false)
	deleting := replicaObj("pvc-1", "r4", true, false, true, true)
	inactive := replicaObj("pvc-1", "r5", true, false, false, false)
	for _, tc := range []struct {
		name     string
		replicas []unstructured.Unstructured
		want     orphan.VolumeState
	}{
		{"two healthy", []unstructured.Unstructured{ok, ok}, orphan.VolumeHealthy},
		{"one of two", []unstructured.Unstructured{ok, failed}, orphan.VolumeDegraded},
		{"none healthy", []unstructured.Unstructured{failed, deleting, inactive}, orphan.VolumeFaulted},
		{"none at all", nil, orphan.VolumeFaulted},
		{"another volume's replica does not count", []unstructured.Unstructured{other, other}, orphan.VolumeFaulted},
	} {
		if got := VolumeStateOf(vol, tc.replicas); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	att := volumeObj("pvc-1", "degraded", "attached", 2)
	if NeedsReplicas(att) || VolumeStateOf(att, []unstructured.Unstructured{ok, ok}) != orphan.VolumeDegraded {
		t.Errorf("an attached volume is not stated by its robustness")
	}
	if NeedsReplicas(volumeObj("pvc-1", "faulted", "detached", 2)) {
		t.Errorf("a faulted detached volume needs its replicas")
	}
}
