package orphanctrl

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// CacheOptions returns the manager cache options that keep what nodeID's
// controller caches node-local, for manager.Options.Cache:
//
//   - only namespace is watched (DefaultNamespaces);
//   - Orphans: only the node's, by the label longhornnode=<nodeID>, which
//     the Store writes on every Orphan it creates and lists by;
//   - Longhorn Nodes: only nodeID's object, by the field selector
//     metadata.name=<nodeID>;
//   - Replicas: every replica of the namespace (no selector: see below),
//     each stripped by StripReplica to the five fields the controller
//     reads;
//   - Volumes: every volume, stripped by StripVolume to its robustness
//     (NewLocalCache keeps only the node's wanted volumes);
//   - everything else: managed fields stripped.
//
// Replicas are not selected by label. Longhorn labels a replica with its
// node (longhornnode) and disk UUID (longhorndiskuuid), but only when
// longhorn-manager's datastore writes it (CreateReplica and UpdateReplica
// in datastore/longhorn.go set them from spec.nodeID and spec.diskID); a
// spec changed by any other writer, or a replica of a release before the
// disk label, keeps a stale label, and a replica whose diskID names this
// node's disk while its nodeID and label name another still claims its
// directory here. A selector that missed one would make its live
// directory look orphaned, so the watch stays wide and each cached
// object small. NewLocalCache adds to these options a filter between the
// wide watch and the informer that keeps only the node's replicas.
//
// nodeID must not be empty. A manager that also runs other controllers
// can start from these options and add its own ByObject entries; a
// Transform or selector it sets on the four kinds above replaces this one.
func CacheOptions(namespace, nodeID string) cache.Options {
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&Orphan{}:                   {Label: labels.SelectorFromSet(labels.Set{orphan.LabelNode: nodeID})},
			newUnstructured(NodeGVK):    {Field: fields.OneTermEqualSelector("metadata.name", nodeID)},
			newUnstructured(ReplicaGVK): {Transform: StripReplica},
			newUnstructured(VolumeGVK):  {Transform: StripVolume},
		},
	}
}

// StripReplica is a cache transform for Longhorn Replica objects: it keeps
// apiVersion, kind, metadata.{name,namespace,uid,resourceVersion} and
// spec.{nodeID,diskID,diskPath,dataDirectoryName}, what the controller
// reads to tell which directories a replica claims. Anything that is not
// an *unstructured.Unstructured is returned unchanged.
func StripReplica(obj any) (any, error) {
	return strip(obj, [][]string{
		{"spec", "nodeID"}, {"spec", "diskID"}, {"spec", "diskPath"}, {"spec", "dataDirectoryName"},
	}), nil
}

// StripVolume is a cache transform for Longhorn Volume objects: it keeps
// apiVersion, kind, metadata.{name,namespace,uid,resourceVersion},
// status.robustness, status.state and spec.numberOfReplicas, what the
// last-copy guard reads (longhorn.StripVolume). Anything that is not an
// *unstructured.Unstructured is returned unchanged.
func StripVolume(obj any) (any, error) {
	return longhorn.StripVolume(obj)
}

// strip returns a new object with the identity of obj and the string
// fields at paths.
func strip(obj any, paths [][]string) any {
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
		if s, found, _ := unstructured.NestedString(u.Object, p...); found {
			_ = unstructured.SetNestedField(out.Object, s, p...)
		}
	}
	return out
}
