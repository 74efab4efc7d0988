// Package spdk finds and safely removes orphaned v2 (SPDK) runtime objects:
// the engines and replicas Longhorn's v2 data engine leaves in a node's
// SPDK target when the cluster forgot them, typically after the node was
// offline while its volumes moved, were detached or were deleted.
//
// It has three layers:
//
//   - Client: a JSON-RPC 2.0 client over SPDK's Unix socket
//     (DefaultSocketPath). Requests and replies are whole JSON values on one
//     stream; one reader goroutine per connection hands replies to
//     concurrent callers by id. Typed calls (BdevGetBdevs,
//     BdevLvolGetLvstores, BdevLvolGetLvols, BdevRaidGetBdevs,
//     BdevLvolDelete, BdevRaidDelete) work over any Caller.
//   - Classify and Inventory: engines are RAID bdevs (identity: the bdev
//     UUID), replicas are head lvols (identity: the lvol UUID, never the
//     lvstore's). Longhorn's derived lvols ("<replica>-snap-<snapshot>",
//     "-rebuilding", "-expired-<8>", "-cloning") are attributed to their
//     replica; backing image lvols ("bi-...") to none. Inventory is an
//     orphan.Inventory of kind engine-instance and replica-instance items.
//   - Deleter: an orphan.Deleter with seed 001's delete-time validation:
//     it re-reads the object and deletes only if its UUID is the recorded
//     one (else ErrUUIDMismatch); a replica's whole lvol tree goes, clones
//     before the snapshots they depend on, the head last, each by UUID.
//
// Whether an instance is an orphan is decided by orphan.JudgeInstance
// (seed 001's table) through orphan.InstanceJudge, over the host's engine
// and replica records. Package spdk/spdktest is a fake SPDK target for
// tests, with fault injection.
//
// # Host duties
//
//  1. Run one Client per node against that node's SPDK socket, and Close it
//     on shutdown.
//  2. Give Inventory and Deleter the node's ID and its v2 instance manager's
//     name; a Deleter refuses records of another node or instance manager.
//  3. Implement orphan.InstanceLookup over the engine and replica records
//     (Longhorn: the Engine and Replica custom resources: spec.desireState,
//     status.currentState, status.ownerID, status.instanceManagerName) and
//     use orphan.InstanceJudge as the Judge, for both planning and the
//     Sweeper's re-judgement.
//  4. Each period, Scan, log or turn Snapshot.Skipped into events (an empty
//     UUID must be fixed upstream: seed 001's UUID source requirement), and
//     run the cycle with the node's health (down or evicted nodes forget
//     their records and keep the objects).
//  5. Treat ErrUUIDMismatch and other orphan.ErrPreconditionFailed refusals
//     as "the record is stale": the next cycle forgets or re-creates it.
//
// One complete loop:
//
//	client := spdk.NewClient(spdk.Options{})
//	defer client.Close()
//	inv := &spdk.Inventory{RPC: client, NodeID: node, InstanceManager: im}
//	sweeper := &orphan.Sweeper{
//		Store:   store, // the host's orphan records, or orphan.NewMemStore()
//		Judge:   orphan.InstanceJudge{Lookup: records},
//		Deleter: &spdk.Deleter{RPC: client, NodeID: node, InstanceManager: im},
//	}
//	policy, err := orphan.ParsePolicy(autoDeletionSetting, gracePeriodSetting)
//	if err != nil { return err }
//	for range ticker.C {
//		snap, err := inv.Scan(ctx)
//		if err != nil { continue } // retried next period; nothing changes
//		for _, s := range snap.Skipped { log.Printf("skipped %s: %s", s.Name, s.Reason) }
//		_, res, err := sweeper.Run(ctx, snap, orphan.Cycle{
//			Selector: orphan.Selector{NodeID: node},
//			Scopes:   nodeHealth(), // e.g. {node}: NodeEvicted
//			Policy:   policy,
//		})
//		report(res, err)
//	}
//
// # Errors
//
// A Call returns ctx.Err() when its context ends first; an *RPCError with
// SPDK's code and message when SPDK answered with an error (errors.Is(err,
// ErrNoSuchDevice) for -19, ENODEV); an error matching ErrConnection when
// the connection failed (dial, write, a dropped connection, or an
// unreadable reply: a *ProtocolError for garbage or a truncated value,
// ErrReplyTooLarge for a reply over Options.MaxReplySize). Connection
// errors fail every call in flight on that connection and are retryable:
// the next call dials again. A *ResultError is a well-formed reply of the
// wrong shape; the connection stays up. ErrClosed follows Close.
//
// Deleter.Delete returns nil when the object is already gone;
// ErrUUIDMismatch (which wraps orphan.ErrPreconditionFailed) when the
// object was recreated; orphan.ErrPreconditionFailed when the record
// cannot be checked (not v2, no UUID, another node) or the replica's tree
// has a clone it does not own. Any other error leaves the purge to be
// retried, and nothing is deleted after an unreadable reply.
//
// # Concurrency
//
// Client, Inventory and Deleter are safe for concurrent use. A Client
// holds one connection and one reader goroutine while connected; Close
// fails the calls in flight and waits for the reader to exit. No call
// outlives its context: a cancelled call returns at once and its late
// reply is dropped. Classify and PurgeOrder are pure.
package spdk
