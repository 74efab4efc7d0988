// Package nodecache holds what a per-node agent keeps of a Longhorn
// cluster: its node's share of the Replicas (Replicas), the Volumes its
// orphans belong to (Volumes), and its node's Orphans read from an
// informer's cache instead of the API server (Store). Each keeps memory in
// proportion to the node, not the cluster: objects come through a watch
// whose list is read in pages and whose every object is stripped to the
// fields caretaker reads and dropped unless the node needs it.
//
// # Why the Replica watch has no label selector
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
// (longhorn.StripReplica), and Replicas keeps only the replicas that can
// claim a directory on this node: spec.nodeID is the node, or spec.diskID
// is one of the node's disk UUIDs, or both are empty. An update that
// moves a replica away drops it; one that moves it here adds it (a watch
// event carries the whole object). What stays proportional to the cluster
// is the bytes the API server streams, decoded and dropped, not the
// agent's cache, and a change elsewhere wakes nothing.
//
// # Concurrency
//
// Every type is safe for concurrent use; Run methods block until their
// context ends.
package nodecache
