// Package nodecache holds what a per-node agent keeps of a Longhorn
// cluster: its node's share of the Replicas (Replicas), the Volumes its
// orphans belong to (Volumes), and its node's Orphans read from an
// informer's cache instead of the API server (Store). Each keeps memory in
// proportion to the node, not the cluster, and so does each start: the
// Replicas come through watches that select the node's objects by their
// labels, the Volumes one by name, and every object is stripped to the
// fields caretaker reads and dropped unless the node needs it.
//
// # Why a label selector needs a Confirmer behind it
//
// Longhorn labels each Replica with its node (LabelNode, longhornnode)
// and disk UUID (LabelDiskUUID, longhorndiskuuid), types.LonghornNodeKey
// and types.LonghornDiskUUIDKey in longhorn-manager's types/types.go, and
// its own code lists a disk's replicas by them
// (datastore.ListReplicasByDiskUUID). Replicas selects by both: the node's
// label, and its disks' UUIDs (a reconnected disk's replicas can still
// name the old node). But the labels follow spec.nodeID and spec.diskID
// only for writes made through longhorn-manager's DataStore: CreateReplica
// and UpdateReplica in datastore/longhorn.go set them from the spec before
// each write. Any other writer (kubectl edit or patch, a restore tool, an
// object written before the labels existed) leaves them stale, and
// nothing at the API server recomputes them. And caretaker's claim rule is
// wider than the labels say: a replica claims its directory on the disk
// whose UUID is its spec.diskID whatever its spec.nodeID, and one without
// a diskID claims by node and path (see diskscan.StaticExpected). A
// replica missing from the expected set makes its live directory look
// orphaned.
//
// So the selected view is fast, not trusted: what it alone finds orphaned
// is confirmed against a full, consistent list of the Replicas before it
// is recorded, and again before anything is purged (Confirmer,
// ConfirmingDeleter). The full list runs only for a sweep that finds a
// candidate no earlier confirmation covered, or that purges; never in
// steady state.
//
// Of what the watches list, client-go's informer transform strips each
// Replica to the fields caretaker reads (longhorn.StripReplica), and
// Replicas keeps only the replicas that can claim a directory on this
// node: spec.nodeID is the node, or spec.diskID is one of the node's disk
// UUIDs, or both are empty. An update that moves a replica away drops it;
// one that moves it here adds it (a watch event carries the whole object).
//
// # Restart storms
//
// ListPages reads every list in pages and resumes a page whose continue
// token expired from the token the API server offers in its 410 answer,
// not from the first page. Backoff429 makes a client wait out the 429s
// API priority and fairness answers when every agent starts at once.
//
// The full lists stay paged lists, not watch-lists (a watch with
// sendInitialEvents, which kube-apiserver 1.34 serves): on kube-apiserver
// 1.34.2 a watch-list of 2,000 Replicas carried about 1,440 KiB on the
// wire against 110 KiB for the paged list, since a list answer over
// 128 KiB is gzipped and a watch stream is not, and it was no faster
// (0.3 to 0.5 s against 0.2 to 0.9 s).
//
// # Concurrency
//
// Every type is safe for concurrent use; Run methods block until their
// context ends.
package nodecache
