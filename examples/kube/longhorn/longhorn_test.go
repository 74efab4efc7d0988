package longhorn

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caretaker-storage/caretaker/orphan"
)

func TestViewOfNodeReadsHealthFromTheNode(t *testing.T) {
	node := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"evictionRequested": false,
			"disks": map[string]any{
				"good":    map[string]any{"path": "/var/lib/longhorn", "diskType": "filesystem"},
				"evicted": map[string]any{"path": "/mnt/b", "evictionRequested": true},
				"block":   map[string]any{"path": "/dev/nvme1n1", "diskType": "block"},
				"relpath": map[string]any{"path": "mnt/c"},
				"dotdot":  map[string]any{"path": "/mnt/../etc"},
				"nouuid":  map[string]any{"path": "/mnt/d"},
			},
		},
		"status": map[string]any{"diskStatus": map[string]any{
			"good": map[string]any{"diskUUID": "u-good"}, "evicted": map[string]any{"diskUUID": "u-ev"},
			"relpath": map[string]any{"diskUUID": "u-rel"}, "dotdot": map[string]any{"diskUUID": "u-dd"},
		}},
	}}
	v := ViewOfNode("n1", node)
	if len(v.Disks) != 2 || v.Disks[0].Name != "evicted" || v.Disks[1].Name != "good" || v.Disks[1].UUID != "u-good" {
		t.Fatalf("disks = %+v, want evicted and good, in name order", v.Disks)
	}
	want := map[string]orphan.Health{
		"":        orphan.HealthReady,
		"evicted": orphan.HealthDiskEvicted,
		"block":   orphan.HealthUnknown,
		"relpath": orphan.HealthDiskInvalid,
		"dotdot":  orphan.HealthDiskInvalid,
		"nouuid":  orphan.HealthUnknown,
	}
	for disk, h := range want {
		if got := v.Scopes[orphan.Scope{NodeID: "n1", Disk: disk}].Health; got != h {
			t.Errorf("disk %q: health %q, want %q", disk, got, h)
		}
	}
	if _, ok := v.Scopes[orphan.Scope{NodeID: "n1", Disk: "good"}]; ok {
		t.Errorf("a ready disk has a scope of its own: %+v", v.Scopes)
	}

	node.Object["spec"].(map[string]any)["evictionRequested"] = true
	if h := ViewOfNode("n1", node).Scopes[orphan.Scope{NodeID: "n1"}].Health; h != orphan.HealthNodeEvicted {
		t.Errorf("node eviction: health %q, want %q", h, orphan.HealthNodeEvicted)
	}
	if v := ViewOfNode("n1", nil); len(v.Disks) != 0 || v.Scopes[orphan.Scope{NodeID: "n1"}].Health != orphan.HealthNodeDeleted {
		t.Errorf("a missing node: %+v, want no disks and HealthNodeDeleted", v)
	}
}

// TestViewOfNodeDownIsUnavailable: a Longhorn Node whose Ready condition
// is False or Unknown (its manager pod missing, its Kubernetes node not
// ready) is HealthNodeUnavailable, which keeps its records; eviction
// still wins, and a node with no Ready condition yet is Ready.
func TestViewOfNodeDownIsUnavailable(t *testing.T) {
	node := func(ready string, evict bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"evictionRequested": evict}}}
		if ready != "" {
			u.Object["status"] = map[string]any{"conditions": []any{
				map[string]any{"type": "Schedulable", "status": "True"},
				map[string]any{"type": "Ready", "status": ready, "reason": "ManagerPodMissing", "message": "manager pod missing"},
			}}
		}
		return u
	}
	for _, tc := range []struct {
		ready string
		evict bool
		want  orphan.Health
	}{
		{"True", false, orphan.HealthReady},
		{"", false, orphan.HealthReady},
		{"False", false, orphan.HealthNodeUnavailable},
		{"Unknown", false, orphan.HealthNodeUnavailable},
		{"False", true, orphan.HealthNodeEvicted},
	} {
		st := ViewOfNode("n1", node(tc.ready, tc.evict)).Scopes[orphan.Scope{NodeID: "n1"}]
		if st.Health != tc.want {
			t.Errorf("Ready=%q evict=%v: health %q, want %q", tc.ready, tc.evict, st.Health, tc.want)
		}
		if tc.want == orphan.HealthNodeUnavailable && !strings.Contains(st.Message, "ManagerPodMissing") {
			t.Errorf("Ready=%q: message %q does not say why", tc.ready, st.Message)
		}
	}
}

func TestReplicaRefOfReadsTheSpec(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "pvc-1-r-abc"},
		"spec": map[string]any{"nodeID": "n1", "diskID": "u-good", "diskPath": "/var/lib/longhorn",
			"dataDirectoryName": "pvc-1-0a1b2c3d", "unrelated": 7},
	}}
	r := ReplicaRefOf(u)
	if r.Name != "pvc-1-r-abc" || r.NodeID != "n1" || r.DiskID != "u-good" || r.DiskPath != "/var/lib/longhorn" || r.DataDirectoryName != "pvc-1-0a1b2c3d" {
		t.Fatalf("ref = %+v", r)
	}
}

// TestVolumeStatesReadsRobustness: each Volume's status.robustness is
// its state, Longhorn's values spelled as caretaker's; a volume without
// one is listed with a state the guard treats as unknown.
func TestVolumeStatesReadsRobustness(t *testing.T) {
	vol := func(name, robustness string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}}
		if robustness != "" {
			u.Object["status"] = map[string]any{"robustness": robustness}
		}
		return u
	}
	got := VolumeStates([]*unstructured.Unstructured{vol("a", "healthy"), vol("b", "degraded"), vol("c", "faulted"), vol("d", "unknown"), vol("e", "")})
	want := map[string]orphan.VolumeState{"a": orphan.VolumeHealthy, "b": orphan.VolumeDegraded, "c": orphan.VolumeFaulted, "d": "unknown", "e": ""}
	if len(got) != len(want) {
		t.Fatalf("states = %v, want %v", got, want)
	}
	for k, w := range want {
		if s, ok := got[k]; !ok || s != w {
			t.Errorf("%s: %q (listed %v), want %q", k, s, ok, w)
		}
	}
}
