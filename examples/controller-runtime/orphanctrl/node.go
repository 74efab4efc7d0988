package orphanctrl

import (
	"fmt"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Longhorn's Node and Replica kinds, which the controller reads from the
// manager's cache as unstructured objects.
var (
	NodeGVK    = GroupVersion.WithKind("Node")
	ReplicaGVK = GroupVersion.WithKind("Replica")
)

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// nodeView is what the controller takes from its Longhorn Node object:
// the filesystem disks to scan, and the health of the node and each disk
// as the cluster sees it (eviction, a disk without a UUID yet). It reads
// the same fields as examples/kube's agent.
type nodeView struct {
	disks  []diskscan.Disk
	scopes map[orphan.Scope]orphan.ScopeStatus
}

// viewOfNode reads spec.evictionRequested, spec.disks.<name>.{path,
// diskType,evictionRequested} and status.diskStatus.<name>.diskUUID of a
// Longhorn Node. A nil object means the node is gone.
func viewOfNode(nodeID string, u *unstructured.Unstructured) nodeView {
	node := orphan.Scope{NodeID: nodeID}
	v := nodeView{scopes: map[orphan.Scope]orphan.ScopeStatus{}}
	if u == nil {
		v.scopes[node] = orphan.ScopeStatus{Health: orphan.HealthNodeUnavailable, Message: "the Longhorn node object " + nodeID + " does not exist"}
		return v
	}
	v.scopes[node] = orphan.ScopeStatus{Health: orphan.HealthReady}
	if evict, _, _ := unstructured.NestedBool(u.Object, "spec", "evictionRequested"); evict {
		v.scopes[node] = orphan.ScopeStatus{Health: orphan.HealthNodeEvicted, Message: "eviction is requested for node " + nodeID}
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
			v.scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: "disk type " + t + " is not scanned by this controller"}
			continue
		}
		path := str("path")
		uuid, _, _ := unstructured.NestedString(u.Object, "status", "diskStatus", name, "diskUUID")
		switch {
		case !filepath.IsAbs(path) || filepath.Clean(path) != path:
			v.scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthDiskInvalid, Message: fmt.Sprintf("disk path %q is not a clean absolute path", path)}
			continue
		case uuid == "":
			v.scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: "the disk has no UUID in the node status yet"}
			continue
		}
		v.disks = append(v.disks, diskscan.Disk{NodeID: nodeID, Name: name, Path: path, UUID: uuid})
		if evict, _ := spec["evictionRequested"].(bool); evict {
			v.scopes[scope] = orphan.ScopeStatus{Health: orphan.HealthDiskEvicted, Message: "eviction is requested for disk " + name}
		}
	}
	return v
}

// replicaRef reads what the Judge needs of a Longhorn Replica.
func replicaRef(u *unstructured.Unstructured) diskscan.ReplicaRef {
	str := func(k string) string { s, _, _ := unstructured.NestedString(u.Object, "spec", k); return s }
	return diskscan.ReplicaRef{
		Name: u.GetName(), NodeID: str("nodeID"), DiskID: str("diskID"),
		DiskPath: str("diskPath"), DataDirectoryName: str("dataDirectoryName"),
	}
}
