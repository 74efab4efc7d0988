// Package orphanctrl is a per-node orphan controller for Longhorn v1
// filesystem disks on controller-runtime's manager: the same job as
// examples/kube's agent (Orphan resources in step with the replica
// directories on the node's disks; a deleted Orphan's directory purged),
// written the way operator authors build controllers.
//
// Setup adds two parts to a manager:
//
//   - the orphan.Monitor over the diskscan adapter, wrapped by
//     salvage.WithCopies so each orphaned directory is inspected as a copy
//     of its volume, as a Runnable that does not need leader election
//     (every node runs its own);
//   - a controller whose every request is the node's one key, fed by the
//     Monitor's changes through a channel source and by the manager's
//     cache (the node's Orphans, its Longhorn Node, the Replicas, the
//     Volumes). Its reconcile runs one orphan.Sweeper cycle, with every
//     Volume's robustness for the last-copy guard (a list the cache
//     could not give is incomplete: every volume is then unknown; a
//     detached volume, whose robustness Longhorn leaves unknown, is
//     stated from its Replicas, listed from the API server each sweep,
//     by orphan.LonghornVolumeState: one list each for up to 16 such
//     volumes, past that one list per 100 volumes by the selector
//     longhornvolume in (...); a failed list leaves its volumes
//     unknown), and
//     the names of the node's Orphans that carry a person's last-copy
//     override, the label caretaker.io/last-copy-override=true
//     (orphan.LabelLastCopyOverride): it lets the purge of a faulted
//     volume's copy through once the Orphan is also deleted, never an
//     automatic one.
//
// A DaemonSet's copies each hold and do what their own node needs:
// NewLocalCache gives the manager's cache for it (this node's Orphans,
// Longhorn Node and Replicas only, Replicas and every Volume stripped to
// the fields read; replicas are not selected by label because Longhorn's
// labels follow a replica's spec only when longhorn-manager writes it, but
// filtered on the way into the informer by spec.nodeID and spec.diskID,
// and listed anew when the node's disks change), an event wakes the
// node only when it changes what the node's sweep reads and is not the
// echo of the controller's own write, and a first sweep that finds
// thousands of orphans creates their records a few at a time
// (Config.MaxCreates, the core's SweeperOptions.MaxCreates) so that a deletion asked for meanwhile is
// served by the next sweep.
//
// The records are kept by Store, an orphan.Store over client.Client that
// lists through the manager's cache and reads every record it acts on
// through the uncached API reader: the Sweeper's re-read before a purge
// never sees a stale cache. The README tells the three traps (cached
// re-reads, leader election, one reconcile per node) and what this
// controller does about each.
package orphanctrl
