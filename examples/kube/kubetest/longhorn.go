package kubetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// Longhorn is a test's Longhorn: the Node, Replica and Volume objects
// (the stand-in CRDs Main installs) in one namespace, and the nodes'
// disks as directories under Base. Every method fails the test on error.
type Longhorn struct {
	T         testing.TB
	Client    dynamic.Interface
	Namespace string
	// Base holds the disks: Base/<node>/<disk>.
	Base string
}

// Disk is a Longhorn v1 disk of a node, on the real filesystem.
type Disk struct {
	Node, Name, Path, UUID string
}

// Dir is the path of the replica directory dataName on the disk.
func (d Disk) Dir(dataName string) string { return filepath.Join(d.Path, "replicas", dataName) }

// OrphanName is Longhorn's name for the orphan of a replica directory,
// computed here on its own: "orphan-" + sha256 of
// <node>-<disk name>-<disk path>-<disk UUID>-<data directory>.
func OrphanName(d Disk, dataName string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{d.Node, d.Name, d.Path, d.UUID, dataName}, "-")))
	return "orphan-" + hex.EncodeToString(sum[:])
}

// AddNode creates a disk directory and the Longhorn Node object naming it,
// with the disk's UUID in its status.
func (l *Longhorn) AddNode(node, diskName string) Disk {
	l.T.Helper()
	d := Disk{Node: node, Name: diskName, Path: filepath.Join(l.Base, node, diskName), UUID: uuid.NewString()}
	if err := diskscantest.NewDisk(d.Path, d.Name, d.UUID); err != nil {
		l.T.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Node",
		"metadata": map[string]any{"name": node, "namespace": l.Namespace},
		"spec": map[string]any{
			"name": node,
			"disks": map[string]any{diskName: map[string]any{
				"path": d.Path, "diskType": "filesystem", "allowScheduling": true, "evictionRequested": false,
			}},
		},
	}}
	ctx := context.Background()
	ri := l.Client.Resource(longhorn.NodeGVR).Namespace(l.Namespace)
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		l.T.Fatal(err)
	}
	created.Object["status"] = map[string]any{"diskStatus": map[string]any{diskName: map[string]any{"diskUUID": d.UUID}}}
	if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		l.T.Fatal(err)
	}
	return d
}

// Owned makes a replica directory and the Replica object that expects it.
func (l *Longhorn) Owned(d Disk, dataName string) {
	l.T.Helper()
	l.OrphanDir(d, dataName)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{
			"name": "replica-" + dataName, "namespace": l.Namespace, "labels": map[string]any{"longhornnode": d.Node},
		},
		"spec": map[string]any{"nodeID": d.Node, "diskID": d.UUID, "diskPath": d.Path, "dataDirectoryName": dataName},
	}}
	if _, err := l.Client.Resource(longhorn.ReplicaGVR).Namespace(l.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		l.T.Fatal(err)
	}
}

// OrphanDir makes a replica directory that no Replica expects.
func (l *Longhorn) OrphanDir(d Disk, dataName string) {
	l.T.Helper()
	if err := diskscantest.MakeReplica(d.Path, dataName, diskscantest.Replica{Size: 1 << 20, Written: 4096}); err != nil {
		l.T.Fatal(err)
	}
}

// RecoverableDir writes a Longhorn v1 replica directory, in the engine's
// format, that an inspection finds recoverable: one snapshot and a head,
// with the revision counter revision.
func (l *Longhorn) RecoverableDir(d Disk, dataName string, revision int64) {
	l.T.Helper()
	r := salvagetest.Replica{Size: 1 << 20, Counter: true, Revision: revision,
		Snapshots: []salvagetest.Layer{{Writes: []salvagetest.Write{salvagetest.Block(0, 'a')}}},
		Head:      salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(1, 'b')}}}
	if err := salvagetest.WriteReplica(d.Dir(dataName), r); err != nil {
		l.T.Fatal(err)
	}
}

// SetVolume creates or updates the Longhorn Volume name (3 replicas,
// detached) with status.robustness.
func (l *Longhorn) SetVolume(name, robustness string) {
	l.T.Helper()
	ctx := context.Background()
	ri := l.Client.Resource(longhorn.VolumeGVR).Namespace(l.Namespace)
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj, err = ri.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
			"metadata": map[string]any{"name": name, "namespace": l.Namespace},
			"spec":     map[string]any{"numberOfReplicas": int64(3), "size": "1048576"},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		l.T.Fatal(err)
	}
	obj.Object["status"] = map[string]any{"robustness": robustness, "state": "detached"}
	if _, err := ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		l.T.Fatal(err)
	}
}

// SetDetachedVolume makes the Volume name detached, with the robustness
// Longhorn leaves on a detached volume ("unknown") and n replicas.
func (l *Longhorn) SetDetachedVolume(name string, n int64) {
	l.T.Helper()
	l.SetVolume(name, "unknown")
	ri := l.Client.Resource(longhorn.VolumeGVR).Namespace(l.Namespace)
	obj, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		l.T.Fatal(err)
	}
	obj.Object["spec"].(map[string]any)["numberOfReplicas"] = n
	if _, err := ri.Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		l.T.Fatal(err)
	}
}

// VolumeReplica creates a Replica of volume on another node (node-9, so
// no test node's scan expects a directory of it), labelled
// longhornvolume=<volume> as longhorn-manager labels them, healthy or
// failed.
func (l *Longhorn) VolumeReplica(volume, name string, healthy bool) {
	l.T.Helper()
	spec := map[string]any{"nodeID": "node-9", "diskID": "uuid-9", "diskPath": "/var/lib/longhorn",
		"dataDirectoryName": volume + "-99999999", "volumeName": volume, "active": true,
		"healthyAt": "2026-01-01T00:00:00Z"}
	if !healthy {
		spec["failedAt"] = "2026-01-02T00:00:00Z"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{"name": name, "namespace": l.Namespace,
			"labels": map[string]any{"longhornnode": "node-9", longhorn.LabelVolume: volume}},
		"spec": spec,
	}}
	if _, err := l.Client.Resource(longhorn.ReplicaGVR).Namespace(l.Namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		l.T.Fatal(err)
	}
}

// HealReplica clears the failedAt of the Replica name: Longhorn salvaged it.
func (l *Longhorn) HealReplica(name string) {
	l.T.Helper()
	ri := l.Client.Resource(longhorn.ReplicaGVR).Namespace(l.Namespace)
	u, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		l.T.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "spec", "failedAt")
	if _, err := ri.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		l.T.Fatal(err)
	}
}

// SetDiskEviction sets spec.disks[<disk>].evictionRequested of the disk's
// Node.
func (l *Longhorn) SetDiskEviction(d Disk, evict bool) {
	l.T.Helper()
	patch := fmt.Sprintf(`{"spec":{"disks":{%q:{"evictionRequested":%t}}}}`, d.Name, evict)
	if _, err := l.Client.Resource(longhorn.NodeGVR).Namespace(l.Namespace).Patch(context.Background(), d.Node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		l.T.Fatal(err)
	}
}

// Exists reports whether path exists (without following a last link),
// failing the test on any other error.
func Exists(t testing.TB, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// Tombstones lists the purge tombstones in a disk's replicas directory.
func Tombstones(t testing.TB, d Disk) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.Path, "replicas"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".caretaker-purge.") {
			out = append(out, e.Name())
		}
	}
	return out
}
