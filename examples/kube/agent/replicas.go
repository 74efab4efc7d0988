package agent

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// Why the Replica watch has no label selector.
//
// Longhorn labels each Replica with its node (longhornnode) and disk UUID
// (longhorndiskuuid), types.LonghornNodeKey and types.LonghornDiskUUIDKey
// in longhorn-manager's types/types.go, and its own code lists a disk's
// replicas by them (datastore.ListReplicasByDiskUUID). But the labels
// follow spec.nodeID and spec.diskID only for writes made through
// longhorn-manager's DataStore: CreateReplica and UpdateReplica in
// datastore/longhorn.go set them from the spec before each write. Any
// other writer (kubectl edit or patch, a restore tool, an object written
// before the labels existed) leaves them stale, and nothing at the API
// server recomputes them. And caretaker's claim rule is wider than the
// labels say: a replica claims its directory on the disk whose UUID is its
// spec.diskID whatever its spec.nodeID (a reconnected disk's replicas can
// still name the old node), and one without a diskID claims by node and
// path (see diskscan.StaticExpected). A replica missing from the expected
// set makes its live directory look orphaned, so no selector is safe.
//
// So the watch is wide, and the memory is not: client-go's informer
// transform strips each Replica to the fields caretaker reads
// (longhorn.StripReplica), and localReplicas keeps only the replicas that
// can claim a directory on this node: spec.nodeID is the node, or
// spec.diskID is one of the node's disk UUIDs, or both are empty. An
// update that moves a replica away drops it; one that moves it here adds
// it (a watch event carries the whole object). What stays proportional
// to the cluster is the bytes the API server streams, decoded and
// dropped, not the agent's cache, and a change elsewhere wakes nothing.

// localReplicas is a node's share of the cluster's Replicas: a store for
// localWatch, and the KnownObjects of its queue. It is safe for concurrent
// use.
type localReplicas struct {
	nodeID  string
	disks   map[string]bool // the node's disk UUIDs when the watch started
	changed func()          // called after a change of the node's share

	mu   sync.Mutex
	refs map[string]diskscan.ReplicaRef // by namespace/name
}

func newLocalReplicas(nodeID string, diskUUIDs map[string]bool, changed func()) *localReplicas {
	return &localReplicas{nodeID: nodeID, disks: maps.Clone(diskUUIDs), changed: changed, refs: map[string]diskscan.ReplicaRef{}}
}

// claimsHere says whether r can claim a directory on one of the node's
// disks by diskscan.StaticExpected's rule; a replica with no data
// directory yet claims nothing anywhere.
func (s *localReplicas) claimsHere(r diskscan.ReplicaRef) bool {
	if r.DataDirectoryName == "" {
		return false
	}
	return r.NodeID == s.nodeID || (r.DiskID != "" && s.disks[r.DiskID]) || (r.DiskID == "" && r.NodeID == "")
}

// keep is localWatch's keep: whether a listed replica is the node's.
func (s *localReplicas) keep(u *unstructured.Unstructured) bool {
	return s.claimsHere(longhorn.ReplicaRefOf(u))
}

// apply is localWatch's apply: it keeps, replaces or drops the delta's
// replica, and calls changed only when the node's share changed.
func (s *localReplicas) apply(d cache.Delta) {
	key, err := deltaKey(d)
	if err != nil {
		return
	}
	var ref diskscan.ReplicaRef
	keep := false
	if u, ok := d.Object.(*unstructured.Unstructured); ok && d.Type != cache.Deleted {
		ref = longhorn.ReplicaRefOf(u)
		keep = s.claimsHere(ref)
	}
	s.mu.Lock()
	old, had := s.refs[key]
	switch {
	case keep && (!had || old != ref):
		s.refs[key] = ref
	case !keep && had:
		delete(s.refs, key)
	default:
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.changed()
}

// Refs returns the node's share.
func (s *localReplicas) Refs() []diskscan.ReplicaRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]diskscan.ReplicaRef, 0, len(s.refs))
	for _, r := range s.refs {
		out = append(out, r)
	}
	return out
}

// Len is the number of replicas held.
func (s *localReplicas) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refs)
}

// ListKeys implements cache.KeyListerGetter.
func (s *localReplicas) ListKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slicesKeys(s.refs)
}

// GetByKey implements cache.KeyListerGetter.
func (s *localReplicas) GetByKey(key string) (any, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refs[key]
	return r, ok, nil
}

func slicesKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
