// Package spdk finds and safely removes orphaned v2 (SPDK) runtime objects:
// the engines and replicas Longhorn's v2 data engine leaves in a node's
// SPDK target when the cluster forgot them, typically after the node was
// offline while its volumes moved, were detached or were deleted.
//
// # In short
//
// You implement an instance.Lookup over your Engine and Replica records.
// The constructors: spdkrpc.NewClient(spdkrpc.ClientOptions{}) for the
// node's SPDK target (package spdk/spdkrpc: SPDK's JSON-RPC transport,
// its typed calls and wire types; the zero options dial
// spdkrpc.DefaultSocketPath), then NewOrphans(client, lookup,
// Options{NodeID: node, InstanceManager: im}) (both fields required).
// The result is an orphan.Adapter: hand it to orphan.NewMonitor and
// orphan.NewSweeper and run the orphan package's loop; Close the client
// on shutdown. Orphans.Scan alone lists what SPDK holds, as the
// spdk-inventory example does.
//
// # In depth
//
// It has three layers:
//
//   - Package spdk/spdkrpc: a JSON-RPC 2.0 client over SPDK's Unix socket
//     (spdkrpc.Client), the Caller contract it fulfils, typed calls
//     (spdkrpc.BdevGetBdevs, spdkrpc.NvmfGetSubsystems...) that reject
//     results of the wrong shape, and the wire types (spdkrpc.Bdev,
//     spdkrpc.Lvol, spdkrpc.RaidBdev...): SPDK's JSON objects. It knows
//     nothing of Longhorn; this package needs only its Caller.
//   - Classify and ReadRuntime: engines are RAID bdevs (identity: the bdev
//     UUID), replicas are head lvols (identity: the lvol UUID, never the
//     lvstore's). Longhorn's derived lvols (snapshot lvols
//     "<replica>-snap-<snapshot>", "-rebuilding", "-expired-<8>",
//     "-cloning") are grouped under their replica so that none is judged
//     as a replica of its own; backing image lvols ("bi-...") belong to
//     none.
//   - Orphans, built by NewOrphans: the orphan.Adapter of one node's v2
//     runtime (kinds engine-instance and replica-instance). Scan lists
//     every engine and replica; Judge is instance.Verdict over the host's
//     engine and replica records, confirmed against SPDK; Delete has
//     longhorn/longhorn#10933's delete-time UUID check and caretaker's own rule for replicas:
//     their lvols go only while no replica record of that name exists,
//     asked again before every lvol. What a replica purge deletes is
//     decided by SPDK's snapshot and clone relations (PurgeOrder), never
//     by names alone.
//
// Package spdk/spdktest is a fake SPDK target for tests, with fault
// injection, and the conformance suite of spdkrpc.Caller.
//
// # What a purge deletes
//
//	engine or replica record        v2 engine purge deletes             v2 replica purge deletes
//	none                            the RAID bdev, if its UUID is the   the head lvol and the lvols SPDK reports
//	                                record's                            descending from its chain, if the head's
//	                                                                    UUID is the record's (never shared
//	                                                                    ancestors such as a backing image)
//	stopped, owned by this node     the RAID bdev                       nothing: owned, no orphan record
//	running on another IM           the RAID bdev                       nothing: owned, no orphan record
//	running on this IM              nothing: owned                      nothing: owned
//	in transition, owned elsewhere, nothing: undecided                  nothing: owned
//	being deleted, error, unknown
//
// A RAID bdev holds no data: its base bdevs are the replicas' lvols and
// NVMe-oF connections to other nodes' replicas. An engine purge never
// touches those lvols; it stops exposing the RAID bdev first and detaches
// the connections after it (see NVMe-oF exposures below). A replica
// purge also refuses a tree with an lvol that is not the replica's (a clone
// another volume made of its snapshot, a head whose name only looks like
// one of its lvols) and a tree a RAID bdev is built on; lvols named after
// the replica that SPDK does not relate to it (a stray "-rebuilding" lvol)
// are left alone and listed in Snapshot.Skipped once the head is gone.
//
// # A v2 replica is a copy of its volume's data
//
// Scan gives every replica item an orphan.Copy, so the orphan package's
// last-copy guard (orphan.VolumeState) keeps a v2 replica by its volume's
// state exactly as it keeps a v1 replica directory: an automatic purge of
// a faulted volume's replica is refused (GuardLastCopy), and so is one
// whose volume the host did not give (GuardVolumeUnknown) or that is
// degraded (GuardVolumeDegraded); a healthy or deleted volume's replica
// goes. The copy's volume is read from Longhorn's replica name
// "<volume>-r-<8 hex digits>" (longhorn-manager
// types.GenerateReplicaNameForVolume); a name of another form has no
// volume, and only a person's request purges it. An orphan v2 replica has
// no record by definition (any record makes it owned), so its name is the
// only source of its volume.
//
// A v2 copy is never Recoverable: caretaker's export tool reads v1
// replica directories only. It is outside the guard only when it holds no
// data (Copy.NoData): when bdev_get_bdevs reports, for the head and every
// lvol of its tree (PurgeOrder), driver_specific.lvol.num_allocated_clusters
// and that count is 0 for all of them. A count SPDK leaves out (Longhorn's
// SPDK writes none in bdev_lvol_get_lvols), a listing that fails, a tree
// PurgeOrder refuses: the copy may hold data. Delete proves an empty
// copy empty again right before its purge (ErrNoLongerEmpty). Engines hold
// no data and carry no Copy.
//
// # NVMe-oF exposures and attached controllers
//
// A v2 volume also leaves network objects in SPDK: subsystems exposing an
// engine's RAID bdev or a replica's lvols (nvmf_get_subsystems), and NVMe
// bdev controllers an engine attached to reach its remote replicas
// (bdev_nvme_get_controllers). ReadExposures lists them and
// RelateExposures ties them to engines and replicas, first by SPDK's own
// relations (a namespace's bdev is a RAID bdev or an lvol; a controller's
// bdev "<controller>n1" is a RAID bdev's base), then by Longhorn's names
// (LonghornNQN; a controller named after the replica it reaches, with
// that replica's NQN as subnqn).
//
// They are judged as their owner is: a subsystem or controller goes with
// its engine's or replica's purge when that engine or replica is an
// orphan. A purge removes them in Longhorn's order (Engine.Delete):
// namespaces, then the subsystem, then the RAID bdev or lvols, then the
// controllers the RAID bdev was built on; before each step it re-reads
// the subsystem (same serial number and namespaces, each namespace's bdev
// still with the judged UUID) or the controller (same paths, no RAID bdev
// built on it), asks the records again, and stops with
// ErrExposureChanged if anything differs. A purge refuses, with
// ErrExposureChanged, when a bdev it deletes is exposed by a subsystem it
// cannot attribute to the purged object (a foreign NQN, another object's
// name, other bdevs in the same subsystem): nothing is removed out from
// under another user. Subsystems and controllers whose owner SPDK no
// longer runs on this node (an empty subsystem named after a deleted
// replica, a controller left after its RAID bdev) are judged by their
// Longhorn name against the records and reported in Snapshot.Skipped,
// as is everything caretaker cannot attribute.
//
// # Leftover exposures and controllers
//
// No purge removes those: they have no engine or replica left on the
// node (an interrupted purge, an instance-manager restart:
// longhorn/longhorn#13114). A host calls Orphans.PurgeLeftoverExposures
// after its cycle's purges, on a node it knows is up and not evicted; it
// removes a subsystem or detaches a controller only when, re-checked
// right before every call that removes something:
//
//   - its Longhorn name says whose it is: a subsystem's NQN is
//     LonghornNQN of a Longhorn engine, replica or replica-lvol name
//     (never one starting with "volume-": the engine frontend's stable
//     NQN "volume-<volume>", longhorn-spdk-engine
//     pkg/spdk/enginefrontend.go getStableVolumeNQN, names no record and
//     can look like a replica's name, so even a replica of a volume
//     named "volume-..." keeps its leftovers); a controller is named after a
//     replica (or one of its lvols) and every path's subnqn is that
//     name's LonghornNQN;
//   - the node runs no engine or replica of that name, and no RAID bdev
//     is built on the controller;
//   - the records (the same lookup, asked again) hold no record of it;
//   - a subsystem has no namespace, or each namespace's bdev is gone: a
//     namespace over any existing bdev (a live lvol, a RAID bdev,
//     anything) keeps the subsystem.
//
// Subsystems go first (namespaces, then the subsystem, as a purge does),
// controllers after, path by path by their full transport ID (SPDK
// compares it when it detaches). These objects are not Longhorn orphan
// kinds: caretaker creates no orphan record for them (Longhorn's Orphan
// resources have no such type), so this call is outside the orphan
// package's loop, and it returns a LeftoverReport of what it removed and
// what it kept, with the reasons.
//
// The guard: the lookup must be a RecordCounter, or the call refuses
// with ErrNoRecordCount and removes nothing; and when the view holds no
// record of the owner's kind (engine or replica) at all, every leftover
// of that kind is kept, as Scan reports NoneExpected for the orphan
// guard. What that still allows: on any cluster that has at least one
// v2 replica (or engine) record anywhere, every leftover whose record is
// gone. What it keeps: the leftovers of the last v2 volume a cluster
// deleted, until a v2 volume exists again or someone removes them by
// hand; there is no cap on the number removed once the view holds
// records, because each removal is proven by name, record and SPDK.
//
// # Deviation from Longhorn's proposal and from its code
//
// The proposal is Longhorn's "Orphaned V2 Volume Runtime Resource Cleanup"
// (longhorn/longhorn#10933); the root package lists every proposal.
//
// The proposal judges "record stopped, runtime object present" an orphan for
// both kinds and cleans up with cleanupRequired=true, which for a v2
// replica deletes its lvols. A detached v2 volume's replicas are stopped
// records whose lvols are the volume's data, so that rule would destroy
// every detached volume. Longhorn's code never does it: longhorn-manager
// controller/instance_manager_controller.go,
// InstanceManagerMonitor.createOrphanForInstances, creates instance
// orphans for v1 only (and skips starting, stopping and stopped runtimes
// and empty UUIDs); controller/orphan_controller.go,
// OrphanController.cleanupOrphanedInstance, calls InstanceDelete(...,
// cleanupRequired=false), which in longhorn-spdk-engine pkg/spdk/replica.go,
// Replica.Delete, only stops the NVMe-oF exposure and releases ports.
// caretaker keeps the rule for engines (a RAID bdev holds no data) and
// makes a v2 replica with any record owned (instance.Verdict), and
// Orphans.Delete re-checks "no replica record" itself.
//
// When Longhorn does delete a replica's lvols (Replica.Delete with
// cleanupRequired=true, on Replica deletion) it picks them by name:
// IsReplicaLvol in longhorn-spdk-engine pkg/spdk is a plain prefix test
// ("<replica>-"), which also matches the head of a replica of a volume
// named "<replica>-snap". caretaker follows SPDK's relations
// (driver_specific.lvol base_snapshot and clones of bdev_get_bdevs, as
// SPDK's vbdev_lvol_dump_info_json writes them) and requires the
// replica's name on every lvol it deletes.
//
// The proposal's delete-time UUID check does not exist in Longhorn today;
// caretaker implements it and deletes lvols by UUID. The proposal skips an
// object without a UUID; caretaker also marks the node's scope Unknown for
// that cycle, so its records are kept rather than forgotten as gone.
//
// # Where the adapter runs in a Longhorn deployment
//
// longhorn-manager never opens spdk_tgt's socket: it reaches a node's v2
// data engine through that node's instance-manager, whose
// longhorn-spdk-engine server (pkg/spdk/server.go, NewServer) owns the
// SPDK connection through go-spdk-helper (pkg/spdk/client.NewClient over
// pkg/jsonrpc.Client on /var/tmp/spdk.sock). So a Longhorn adopter runs
// Orphans in the instance-manager pod, beside longhorn-spdk-engine, one
// per node, in either of two ways:
//
//   - with its own spdkrpc.Client on spdkrpc.DefaultSocketPath: SPDK's RPC
//     server takes several connections, and ids are matched per
//     connection;
//   - or with an spdkrpc.Caller over the engine's go-spdk-helper client:
//     jsonrpc.Client.SendCommand(method, params) returns the raw result;
//     decode it into result (a failure is an *spdkrpc.ResultError), turn
//     the *jsonrpc.ResponseError in its jsonrpc.JSONClientError into an
//     *spdkrpc.RPCError with the same code and message, and honour ctx
//     (SendCommand does not take one).
//
// Orphans needs nothing of the connection but spdkrpc.Caller (Orphans and
// the typed calls never look for an *spdkrpc.Client), so the calls can also travel
// elsewhere: a longhorn-manager that keeps the orphan decision can run
// Orphans itself with a Caller that forwards each call to the node's
// instance-manager. What any such Caller must do is Caller's contract,
// which spdktest.RunConformanceTests checks. The records (instance.Lookup)
// come from the Engine and Replica objects wherever Orphans runs.
//
// # Host duties
//
//  1. Run one spdkrpc.Client per node against that node's SPDK socket, and
//     Close it on shutdown.
//  2. Implement instance.Lookup over the engine and replica records
//     (Longhorn: the Engine and Replica custom resources: metadata
//     deletionTimestamp, spec.desireState, spec.nodeID,
//     status.currentState, status.ownerID, status.instanceManagerName). A
//     lookup must answer from the freshest view the host has, and fail
//     (not answer "no record") while that view is not synced.
//  3. Build the adapter with NewOrphans(client, records, Options{NodeID,
//     InstanceManager}): the node's ID and its v2 instance manager's name,
//     both required. Delete refuses records of another node or instance
//     manager.
//  4. Hand it to orphan.NewMonitor, as the Inventory, and to
//     orphan.NewSweeper, or join it with other adapters with
//     orphan.Combine. Each cycle, log or turn Snapshot.Skipped into events
//     (an empty UUID must be fixed upstream: the proposal's UUID source
//     requirement; meanwhile the node's records are kept), and run the
//     cycle with the node's health (down or evicted nodes forget their
//     records and keep the objects). A failed Scan skips the cycle:
//     nothing may be decided on a listing that could not be read.
//  5. Treat ErrUUIDMismatch, ErrReplicaRecordExists and other
//     orphan.ErrPreconditionFailed refusals as "the record is stale": the
//     next cycle forgets or re-creates it.
//  6. Optionally, after the purges of a cycle, call
//     Orphans.PurgeLeftoverExposures and log its report (Kept says why
//     each object stayed).
//
// One complete loop:
//
//	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{}) // spdkrpc.DefaultSocketPath
//	if err != nil { return err }
//	defer client.Close()
//	orphans, err := spdk.NewOrphans(client, records, spdk.Options{NodeID: node, InstanceManager: im})
//	if err != nil { return err }
//	m, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue() }})
//	if err != nil { return err }
//	if err := m.Start(ctx); err != nil { return err }
//	defer m.Stop()
//	s, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{}) // store: the host's orphan records, or orphan.NewMemStore()
//	if err != nil { return err }
//	policy, err := orphan.ParsePolicy(autoDeletionSetting, gracePeriodSetting)
//	if err != nil { return err }
//	for range reconcileRequests {
//		obs, ok := m.Latest()
//		if !ok || obs.Err != nil {
//			continue // nothing trustworthy yet; records stay as they are
//		}
//		for _, sk := range obs.Snapshot.Skipped { log.Printf("skipped %s: %s", sk.Name, sk.Reason) }
//		plan, res, err := s.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
//			Selector:   orphan.Selector{NodeID: node},
//			Scopes:     nodeHealth(), // e.g. {{NodeID: node}: {Health: orphan.HealthNodeEvicted}}
//			Policy:     policy,
//			ObservedAt: obs.StartedAt,
//		})
//		report(res, err)
//		if !plan.RequeueAt.IsZero() { requeueAt(plan.RequeueAt) }
//	}
//
// # Errors
//
// The SPDK calls fail as package spdkrpc documents: an *spdkrpc.RPCError
// with SPDK's code (errors.Is(err, ErrNotFound) for -19, ENODEV), an
// error matching spdkrpc.ErrConnection when the connection failed or a
// reply was unreadable (retryable: the next call dials again), ctx.Err()
// when the context ended. A well-formed reply of the wrong shape (a null
// result, an object or a string where a list belongs, a list element
// that is null or has no name, a delete that answered anything but true,
// an lvol listed without a UUID or an "lvstore/lvol" alias) matches
// ErrUnexpectedResult, this package's sentinel of the malformed-input
// class that spdkrpc.ErrUnexpectedResult and every other caretaker
// package's share. It never means "nothing exists" or "already gone".
//
// NewOrphans fails with an error wrapping orphan.ErrIncomplete when a
// part is missing. Orphans.Scan fails on any of the errors above: a
// listing that could not be read is never an empty one. Orphans.Judge
// never fails: an unreadable record or runtime is an undecided verdict.
// Orphans.Delete returns nil when the object is already gone;
// ErrUUIDMismatch (which wraps orphan.ErrPreconditionFailed) when the
// object was recreated; ErrReplicaRecordExists (also wrapping it) when a
// replica record of that name exists; orphan.ErrPreconditionFailed when
// the record cannot be checked (not v2, no UUID, another node or instance
// manager), the engine's records no longer make it an orphan, or the
// replica's tree holds an lvol that is not the replica's or is used by a
// RAID bdev; ErrExposureChanged (also wrapping it) when a subsystem or
// controller the purge removes changed since it was read, or a bdev it
// deletes is exposed by a subsystem it cannot attribute.
// Orphans.PurgeLeftoverExposures fails with ErrNoRecordCount (wrapping
// orphan.ErrPreconditionFailed) when the lookup cannot count records,
// keeps and reports an object whose re-check fails, and stops on an RPC
// error or an unreadable reply. Any other error (RPC, connection, ErrUnexpectedResult, a
// failed record lookup) leaves the purge to be retried, and nothing is
// deleted after an unreadable reply.
//
// # Concurrency
//
// Orphans is safe for concurrent use, and so is spdkrpc.Client, which
// starts no goroutine. Classify and PurgeOrder are pure. spdk keeps no
// time of its own: every wait is bounded by the caller's context.
package spdk
