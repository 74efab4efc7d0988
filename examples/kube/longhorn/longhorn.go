// Package longhorn reads what a caretaker host needs of Longhorn's Node,
// Replica and Volume objects, as unstructured objects, so that examples/kube's agent
// and examples/controller-runtime's controller read them the same way.
package longhorn

import (
	"fmt"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Longhorn's Node and Replica resources.
var (
	NodeGVR    = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "nodes"}
	ReplicaGVR = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "replicas"}
	VolumeGVR  = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "volumes"}
)

// NodeView is what a host takes from its Longhorn Node object: the
// filesystem disks to scan, and the health of the node and of each disk as
// the cluster sees it (eviction, a disk without a UUID yet, a disk of
// another type).
type NodeView struct {
	// Disks are the filesystem disks with a clean absolute path and a
	// UUID, for diskscan.Orphans.SetDisks.
	Disks []diskscan.Disk
	// Scopes holds the node's scope and one scope per disk that is not
	// Ready, for orphan.Cycle.Scopes.
	Scopes map[orphan.Scope]orphan.ScopeStatus
}

// ViewOfNode reads spec.evictionRequested, spec.disks.<name>.{path,
// diskType,evictionRequested}, status.diskStatus.<name>.diskUUID and the
// Ready entry of status.conditions of the Longhorn Node nodeID.
//
// The node's scope is, in this order: HealthNodeDeleted for a nil object
// (the node is gone: its records are forgotten, their data kept);
// HealthNodeEvicted when eviction is requested; HealthNodeUnavailable when
// its Ready condition is False or Unknown (Longhorn's node controller
// writes False with the reason ManagerPodDown, ManagerPodMissing,
// KubernetesNodeGone, KubernetesNodeNotReady, ...: its records are kept,
// marked not cleanable, as longhorn/longhorn#7795 asks); otherwise
// HealthReady, also for a node whose status has no Ready condition yet.
func ViewOfNode(nodeID string, u *unstructured.Unstructured) NodeView {
	node := orphan.Scope{NodeID: nodeID}
	v := NodeView{Scopes: map[orphan.Scope]orphan.ScopeStatus{}}
	if u == nil {
		v.Scopes[node] = orphan.ScopeStatus{Health: orphan.HealthNodeDeleted, Message: "the Longhorn node object " + nodeID + " does not exist"}
		return v
	}
	v.Scopes[node] = orphan.ScopeStatus{Health: orphan.HealthReady}
	if status, reason, msg, ok := readyCondition(u); ok && status != "True" {
		v.Scopes[node] = orphan.ScopeStatus{Health: orphan.HealthNodeUnavailable,
			Message: fmt.Sprintf("the Longhorn node %s is not ready (Ready=%s, %s): %s", nodeID, status, reason, msg)}
	}
	if evict, _, _ := unstructured.NestedBool(u.Object, "spec", "evictionRequested"); evict {
		v.Scopes[node] = orphan.ScopeStatus{Health: orphan.HealthNodeEvicted, Message: "eviction is requested for node " + nodeID}
	}
	disks, _, _ := unstructured.NestedMap(u.Object, "spec", "disks")
	names := make([]string, 0, len(disks))
	for name := range disks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec, _ := disks[name].(map[string]any)
		str := func(k string) string { s, _ := spec[k].(string); return s }
		scope := orphan.Scope{NodeID: nodeID, Disk: name}
		if t := str("diskType"); t != "" && t != diskscan.DiskType {
			// A block (v2) disk: its orphans are instances, not directories;
			// some other inventory speaks for them.
			v.Scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: "disk type " + t + " is not scanned for replica directories"}
			continue
		}
		path := str("path")
		uuid, _, _ := unstructured.NestedString(u.Object, "status", "diskStatus", name, "diskUUID")
		switch {
		case !filepath.IsAbs(path) || filepath.Clean(path) != path:
			v.Scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthDiskInvalid, Message: fmt.Sprintf("disk path %q is not a clean absolute path", path)}
			continue
		case uuid == "":
			v.Scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: "the disk has no UUID in the node status yet"}
			continue
		}
		v.Disks = append(v.Disks, diskscan.Disk{NodeID: nodeID, Name: name, Path: path, UUID: uuid})
		if evict, _ := spec["evictionRequested"].(bool); evict {
			v.Scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthDiskEvicted, Message: "eviction is requested for disk " + name}
		}
	}
	return v
}

// readyCondition finds the Ready entry of a Longhorn Node's
// status.conditions (a list of {type, status, reason, message}).
func readyCondition(u *unstructured.Unstructured) (status, reason, msg string, ok bool) {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, item := range list {
		m, _ := item.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		if str("type") == "Ready" {
			return str("status"), str("reason"), str("message"), true
		}
	}
	return "", "", "", false
}

// ReplicaRefOf reads what diskscan's Judge needs of a Longhorn Replica:
// its name and spec.{nodeID,diskID,diskPath,dataDirectoryName}.
func ReplicaRefOf(u *unstructured.Unstructured) diskscan.ReplicaRef {
	str := func(k string) string { s, _, _ := unstructured.NestedString(u.Object, "spec", k); return s }
	return diskscan.ReplicaRef{
		Name:              u.GetName(),
		NodeID:            str("nodeID"),
		DiskID:            str("diskID"),
		DiskPath:          str("diskPath"),
		DataDirectoryName: str("dataDirectoryName"),
	}
}

// VolumeStates reads status.robustness of Longhorn Volume objects into
// the last-copy guard's volume states, by volume name (orphan.Cycle's
// Volumes). Longhorn's robustness values (longhorn-manager's
// VolumeRobustness in k8s/pkg/apis/longhorn/v1beta2/volume.go) are
// "healthy", "degraded", "faulted" and "unknown", and caretaker's
// VolumeHealthy, VolumeDegraded and VolumeFaulted are spelled the same.
// Longhorn reports "unknown" for a detached volume, and an object whose
// status has no robustness yet reads as "": both are states the guard
// does not know, so it treats the volume as unknown (a recoverable
// orphan of it is not auto-deleted), never as deleted. A host that lists
// a detached volume's Replicas (NeedsReplicas) states it with
// VolumeStateOf instead.
func VolumeStates(objs []*unstructured.Unstructured) map[string]orphan.VolumeState {
	out := make(map[string]orphan.VolumeState, len(objs))
	for _, u := range objs {
		r, _, _ := unstructured.NestedString(u.Object, "status", "robustness")
		out[u.GetName()] = orphan.VolumeState(r)
	}
	return out
}

// LabelVolume is the label longhorn-manager puts on each Replica of a
// volume, with the volume's name (types.GetVolumeLabels): a host lists a
// volume's Replicas with the selector LabelVolume=<volume>.
const LabelVolume = "longhornvolume"

// NeedsReplicas reports whether the guard's state of the Volume u comes
// from its Replicas (orphan.LonghornVolumeState's rule 2): it is detached
// and its robustness is unknown or not set.
func NeedsReplicas(u *unstructured.Unstructured) bool {
	r, _, _ := unstructured.NestedString(u.Object, "status", "robustness")
	st, _, _ := unstructured.NestedString(u.Object, "status", "state")
	return orphan.LonghornVolumeNeedsReplicas(r, st)
}

// VolumeStateOf is orphan.LonghornVolumeState of the Volume u
// (status.robustness, status.state, spec.numberOfReplicas) with replicas,
// every Replica object labelled LabelVolume=<u's name>, listed for this
// call.
func VolumeStateOf(u *unstructured.Unstructured, replicas []unstructured.Unstructured) orphan.VolumeState {
	r, _, _ := unstructured.NestedString(u.Object, "status", "robustness")
	st, _, _ := unstructured.NestedString(u.Object, "status", "state")
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "numberOfReplicas")
	copies := make([]orphan.ReplicaCopy, 0, len(replicas))
	for i := range replicas {
		if replicas[i].GetLabels()[LabelVolume] != u.GetName() {
			continue // not this volume's, whatever the list said
		}
		copies = append(copies, ReplicaCopyOf(&replicas[i]))
	}
	return orphan.LonghornVolumeState(r, st, int(min(n, 1<<20)), copies)
}

// ReplicaCopyOf reads what orphan.ReplicaCopy holds of a Longhorn
// Replica: spec.healthyAt, spec.failedAt, spec.active and whether a
// deletion timestamp is set.
func ReplicaCopyOf(u *unstructured.Unstructured) orphan.ReplicaCopy {
	str := func(k string) string { s, _, _ := unstructured.NestedString(u.Object, "spec", k); return s }
	active, _, _ := unstructured.NestedBool(u.Object, "spec", "active")
	return orphan.ReplicaCopy{Name: u.GetName(), HealthyAt: str("healthyAt"), FailedAt: str("failedAt"),
		Active: active, Deleting: u.GetDeletionTimestamp() != nil}
}

// The informer transforms below (client-go's cache.TransformFunc, for
// SharedIndexInformer.SetTransform or a DeltaFIFO's Transformer) keep of
// each object only what this package's readers read, so that a host's
// cache holds a few hundred bytes per object instead of the whole object
// with its managedFields. Anything that is not an *unstructured.Unstructured
// (a cache.DeletedFinalStateUnknown tombstone) is passed through unchanged.

// StripReplica keeps metadata.{name,namespace,resourceVersion,uid} and
// spec.{nodeID,diskID,diskPath,dataDirectoryName,volumeName}: what
// ReplicaRefOf reads, and the volume.
func StripReplica(obj any) (any, error) {
	return strip(obj, []string{"spec", "nodeID"}, []string{"spec", "diskID"}, []string{"spec", "diskPath"},
		[]string{"spec", "dataDirectoryName"}, []string{"spec", "volumeName"}), nil
}

// StripVolume keeps the metadata above, status.robustness, status.state
// and spec.numberOfReplicas: what VolumeStates, NeedsReplicas and
// VolumeStateOf read.
func StripVolume(obj any) (any, error) {
	return strip(obj, []string{"status", "robustness"}, []string{"status", "state"}, []string{"spec", "numberOfReplicas"}), nil
}

// StripNode keeps the metadata above and spec.evictionRequested,
// spec.disks, status.diskStatus.<disk>.diskUUID and status.conditions:
// what ViewOfNode reads (Longhorn's diskStatus also carries each disk's
// scheduled replicas and sizes, which it drops).
func StripNode(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := strip(u, []string{"spec", "evictionRequested"}, []string{"spec", "disks"}, []string{"status", "conditions"}).(*unstructured.Unstructured)
	disks, _, _ := unstructured.NestedMap(u.Object, "status", "diskStatus")
	for name := range disks {
		if id, ok, _ := unstructured.NestedString(u.Object, "status", "diskStatus", name, "diskUUID"); ok {
			_ = unstructured.SetNestedField(out.Object, id, "status", "diskStatus", name, "diskUUID")
		}
	}
	return out, nil
}

// strip returns a new object with u's apiVersion, kind, name, namespace,
// uid and resourceVersion, and copies of the fields at paths.
func strip(obj any, paths ...[]string) any {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	for _, p := range paths {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, p...); ok {
			_ = unstructured.SetNestedField(out.Object, v, p...)
		}
	}
	return out
}
