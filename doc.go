// Package caretaker is the root of a library that storage operators on
// Kubernetes import to find and safely clean up what their clusters leave
// behind, and to trigger the maintenance that keeps data healthy. It holds
// no code of its own: the work is in the packages below, which need no
// controller framework. The host keeps its own controllers, informers and
// custom resources, and plugs small adapters into caretaker's interfaces.
//
// # Packages
//
//   - orphan: orphan items and records with Longhorn's names, labels and
//     conditions; the judgement verdict; Decide, the pure planner; the
//     auto-deletion policy; the background Monitor and the Sweeper that
//     carries plans out; MemStore; orphantest conformance suites.
//   - diskscan: Longhorn v1 filesystem disks: disk config, filesystem ID,
//     incremental scans of replica directories, and a confined deleter.
//   - instance: Longhorn's judgement of runtime instances (engine and
//     replica processes, RAID bdevs and head lvols) against the host's
//     Engine and Replica records.
//   - spdk: the v2 runtime inventory (engines are RAID bdevs, replicas
//     head lvols) and UUID-checked deletion; spdk/spdkrpc, SPDK JSON-RPC
//     over its Unix socket; spdktest, a fake SPDK speaking the real wire
//     format.
//   - backupdelete: asynchronous backup deletion, the creation gate,
//     failed-backup orphans; its backup stores in Longhorn's layout are
//     backupdelete/fsstore (a filesystem or NFS backup target) and
//     backupdelete/s3store (an S3 backup target).
//   - salvage: read-only inspection of a leftover Longhorn v1 replica
//     directory (can the volume's data be read back from it, and why
//     not), the ranking of a volume's copies by the engine's freshness
//     rules, and the export of the raw image as the engine reads it,
//     raw or qcow2 backing image included.
//   - rebuild: offline replica rebuilding: when to attach a degraded volume
//     in maintenance mode, and never leaving it stuck attached.
//   - tokenring: the scylla-operator-compatible token ring hash and cleanup
//     trigger, ring-ownership analysis that cleans only the nodes that
//     really lost ranges, the Scheduler that orders cleanups so that no two
//     replicas of a range clean at once, and the CleanupDriver that runs
//     them; tokenring/mgmtapi cleans Cassandra nodes through k8ssandra's
//     Management API.
//
// # The host's loop
//
// Every package follows one pattern: observe, decide purely, apply through
// a thin driver that re-checks before anything destructive. Every orphan
// adapter (diskscan, spdk, backupdelete) is built the same way, by one
// constructor, NewOrphans, and the loop is the same apart from it. For
// orphaned replica directories on one node:
//
//	orphans, err := diskscan.NewOrphans(hostReplicas, diskscan.Options{}) // hostReplicas: a diskscan.ExpectedSource over the replica cache
//	err = orphans.SetDisks(diskscan.Disk{...})                             // this node's disks, again whenever its Node object changes
//	mon, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{OnChange: enqueue})
//	_ = mon.Start(ctx)
//	defer mon.Stop()
//	sweeper, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{})
//	for range reconciles {
//		obs, ok := mon.Latest() // never blocks on a scan
//		if !ok || obs.Err != nil {
//			continue
//		}
//		plan, result, err := sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
//			Selector:   orphan.Selector{NodeID: node},
//			Scopes:     clusterView(node), // evicted or down nodes and disks
//			Policy:     policy,            // orphan.ParsePolicy(settings...)
//			ObservedAt: obs.StartedAt,
//		})
//		report(plan, result, err)
//	}
//
// # One surface
//
// The packages share their names for the same ideas. A driver's one pass,
// which a Kubernetes host calls from its reconcile, is Reconcile
// (orphan.Sweeper, backupdelete.Driver, rebuild.Driver); what blocks until
// its work is done or its context ends is Run (orphan.Monitor,
// backupdelete.ProgressMonitor, tokenring.CleanupDriver). Configuration is
// an Options struct whose zero value is the documented defaults. A
// constructor that can fail returns (*T, error) and its error names the
// option that is invalid; one that cannot returns *T. Every error text
// starts with its package's name ("diskscan: ..."), and the sentinels of
// malformed input (diskscan.ErrCorrupt, salvage.ErrCorrupt,
// tokenring.ErrMalformedReply, ...) are one class under errors.Is, as are
// those of a refused redirect.
//
// # Design documents
//
// caretaker implements these enhancement proposals, and the package docs
// cite them by name:
//
//   - Longhorn's "Orphaned Data Cleanup" (orphaned replica
//     directories and failed backups; issues longhorn/longhorn#685 and
//     #3898), implemented by orphan, diskscan and backupdelete;
//   - Longhorn's "Orphaned V2 Volume Runtime Resource Cleanup"
//     (SPDK engines and replicas left after a node outage;
//     longhorn/longhorn#10933), implemented by orphan, instance and spdk;
//   - Longhorn's "Delete backup in the backupstore
//     asynchronously" (longhorn/longhorn#8746; the lock bug #8742), implemented by
//     backupdelete;
//   - Longhorn's "Automatic Offline Replica Rebuilding"
//     (longhorn/longhorn#6071), implemented by rebuild;
//   - scylla-operator's "Run node cleanup after scaling the
//     cluster", implemented by tokenring.
//
// Where the real code of Longhorn or scylla-operator is safer than its
// proposal, caretaker follows the code and says so in the package doc.
//
// See the README for the runnable quickstart.
package caretaker
