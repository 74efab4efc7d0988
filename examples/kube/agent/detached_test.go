package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// setDetachedVolume makes the Volume name detached with the robustness
// Longhorn leaves on a detached volume ("unknown"), of n replicas.
func (e *env) setDetachedVolume(name string, n int64) {
	e.t.Helper()
	e.setVolume(name, "unknown")
	ri := e.dc.Resource(longhorn.VolumeGVR).Namespace(e.ns)
	obj, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	obj.Object["spec"].(map[string]any)["numberOfReplicas"] = n
	if _, err := ri.Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// volumeReplica creates a Replica of volume on another node, labelled
// longhornvolume=<volume> as longhorn-manager labels them, healthy or
// failed.
func (e *env) volumeReplica(volume, name string, healthy bool) {
	e.t.Helper()
	spec := map[string]any{"nodeID": "node-9", "diskID": "uuid-9", "diskPath": "/var/lib/longhorn",
		"dataDirectoryName": volume + "-99999999", "volumeName": volume, "active": true,
		"healthyAt": "2026-01-01T00:00:00Z"}
	if !healthy {
		spec["failedAt"] = "2026-01-02T00:00:00Z"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{"name": name, "namespace": e.ns,
			"labels": map[string]any{"longhornnode": "node-9", longhorn.LabelVolume: volume}},
		"spec": spec,
	}}
	if _, err := e.dc.Resource(longhorn.ReplicaGVR).Namespace(e.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestDetachedVolumesAreStatedFromTheirReplicas: with auto-deletion on,
// the recoverable orphan of a detached volume (robustness "unknown")
// whose other replica is healthy is purged; those of a detached volume
// whose only other replica failed, and of one with no Replica at all,
// stay, guarded as last copies of faulted volumes.
func TestDetachedVolumesAreStatedFromTheirReplicas(t *testing.T) {
	const (
		healthyDir = "pvc-det-ok-aaaaaaa1"
		failedDir  = "pvc-det-failed-bbbbbbb1"
		noneDir    = "pvc-det-none-ccccccc1"
	)
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.setDetachedVolume("pvc-det-ok", 1)
	e.volumeReplica("pvc-det-ok", "pvc-det-ok-r-1", true)
	e.setDetachedVolume("pvc-det-failed", 1)
	e.volumeReplica("pvc-det-failed", "pvc-det-failed-r-1", false)
	e.setDetachedVolume("pvc-det-none", 2)
	for _, dir := range []string{healthyDir, failedDir, noneDir} {
		e.recoverableDir(d, dir, 3)
	}
	e.startAgent("node-1", "-auto-delete=replica-data", "-grace-period=0")
	e.waitFor("the orphan of the detached volume with a healthy replica to be purged", func() error {
		if exists(t, d.dir(healthyDir)) {
			return errors.New(healthyDir + " still there")
		}
		return nil
	})
	for _, tc := range []struct{ dir, volume string }{{failedDir, "pvc-det-failed"}, {noneDir, "pvc-det-none"}} {
		name := longhornName(d, tc.dir)
		e.waitFor("the orphan of "+tc.volume+" to be guarded as a last copy", func() error {
			o, ok := e.nodeOrphans("node-1")[name]
			if !ok {
				return errors.New("no Orphan")
			}
			g := condition(o, "PurgeGuarded")
			if g["status"] != "True" || g["reason"] != "LastCopy" || !strings.Contains(fmt.Sprint(g["message"]), "volume "+tc.volume+", which is faulted") {
				return fmt.Errorf("PurgeGuarded = %v", g)
			}
			return nil
		})
		if !exists(t, d.dir(tc.dir)) {
			t.Fatalf("the last copy of %s was purged", tc.volume)
		}
	}
	if !exists(t, d.dir(ownedDir)) {
		t.Fatal("auto-deletion removed the directory a Replica expects")
	}
}
