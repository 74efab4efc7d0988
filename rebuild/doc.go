// Package rebuild decides when a degraded volume should be rebuilt offline:
// attached in maintenance mode so that its lost replicas can be rebuilt,
// then detached again. It implements longhorn/longhorn#6071 (automatic offline replica
// rebuilding for engines that cannot rebuild while serving I/O, such as
// Longhorn's v2 data engine) and designs against the failures Longhorn
// users met since: a rebuilding ticket re-created forever while no replica
// could be scheduled, so the volume never detached, and rebuilding that
// never started after a setting change.
//
// # In short
//
// You implement a VolumeSource (each volume, its replicas and settings,
// as a Volume) and a TicketStore (the volume's attachment tickets). The
// one constructor is NewDriver(volumes, tickets, Options{}). The loop,
// on every change of a volume or of its tickets:
//
//	d, err := drv.Reconcile(ctx, volumeName)
//	// err: retry with backoff; else, if d.RequeueAt is set, reconcile again then
//
// The driver puts and deletes the rebuilding ticket itself; your
// attacher honours it like any other ticket. The rebuild-sim example
// runs this loop on rebuildtest's simulated cluster.
//
// The ticket's ID is Longhorn's own ("volume-rebuilding-controller-"
// and the volume's name, TicketID), so that a host speaking Longhorn's
// attachment API sees the ticket it expects. The driver therefore takes
// that ID as its own: run it only where Longhorn's volume-rebuilding
// controller does not run, or the two would put and delete one ticket,
// each on its own judgement.
//
// # In depth
//
// The mechanism is an attachment ticket. While a volume is detached,
// degraded, and rebuilding can make progress, the rebuilding ticket
// ("volume-rebuilding-controller-<volume>", priority 800, frontend
// disabled) asks the host's attachment controller to attach it on its
// owner node. Every workload attacher has a higher priority (CSI 900,
// Longhorn API 1000): when one appears the rebuilding ticket is deleted and
// the rebuild ends. Once the replicas are healthy the ticket is deleted and
// the volume detaches. When rebuilding cannot progress (no replica can be
// reused or scheduled, rebuilds keep failing, or nothing the host can
// observe moves for Options.StallTimeout) the ticket is deleted too, and
// the next attempt waits for a backoff that doubles up to
// Options.MaxBackoff. The OfflineRebuilding condition says which of these
// is happening, and why.
//
// # Never stuck attached
//
// A rebuild can hang: the replica stays "rebuilding" while nothing is
// copied. Being in ReplicaRebuilding is therefore not progress. Progress
// is only what the host reports moving, each kind counted against a
// high-water mark of the attempt so that a flapping state cannot restart
// the clock: the first maintenance attachment, a new high of healthy
// replicas, and a new high of Volume.RebuildProgress (the sum of the
// rebuilding replicas' Replica.RebuildProgress; the mark restarts when a
// replica becomes healthy or a rebuild is counted as failed, and failed
// rebuilds are bounded by Options.MaxFailedRebuilds). So the ticket, and
// the attachment it asks for, is held at most Options.StallTimeout after
// the last progress, plus the host's requeue delay; then it is deleted and
// the next attempt backs off.
//
// The decision is Planner.Decide, a pure function: no goroutines, no I/O,
// no clock: its Input carries Now. Driver is a thin layer that reads the
// volume, tickets and setting through the
// host's VolumeSource and TicketStore, decides, applies the ticket change,
// and reports the status. A host may use either.
//
// # Host duties
//
//  1. Describe each volume as a Volume: its attachment state, robustness,
//     deletion, desired replica count, and each replica's state as the host
//     judges it (ReplicaHealthy counts; LastFailedAt when known; for a
//     rebuilding replica, RebuildProgress: in Longhorn the engine's
//     Status.RebuildStatus[<replica address>].Progress). A host that cannot
//     measure progress leaves it zero and sets Options.StallTimeout above
//     its longest rebuild of one replica. Ask the
//     host's replica scheduler whether a failed replica can be reused
//     (CanReuseFailedReplica) or a new one placed (CanScheduleReplica).
//     Parse the volume's own field with ParseVolumeSetting.
//  2. Implement TicketStore over the volume's attachment tickets, with each
//     ticket's priority, and VolumeSource (volumes, the global setting
//     SettingName, and status updates). NotFound is ErrNotFound, wrapped
//     with the name of what is missing. Run rebuildtest.RunConformanceTests
//     against both in one line.
//  3. Run an attachment controller that attaches a volume for its
//     highest-priority ticket, in maintenance mode (no frontend) when that
//     ticket has DisableFrontend, and detaches it when no ticket is left.
//     While attached for the rebuilding ticket, rebuild replicas.
//  4. Call Driver.Reconcile for a volume whenever it, its replicas or its
//     tickets change, and again at Decision.RequeueAt. Call
//     Driver.ReconcileAll for every volume when the global setting changes
//     and when a node or disk becomes schedulable.
//  5. Show Decision.Condition with meta.SetStatusCondition, and
//     Decision.Required as Status.OfflineReplicaRebuildingRequired.
//  6. When calling Planner.Decide directly, keep each volume's
//     Decision.Record and pass it back in the next Input.
//
// One complete loop, with a client-go work queue keyed by volume name:
//
//	driver, err := rebuild.NewDriver(volumes, tickets, rebuild.Options{}) // Options.Clock nil: the real clock
//	if err != nil {
//		return err
//	}
//	for {
//		item, shutdown := queue.Get()
//		if shutdown {
//			return nil
//		}
//		name := item.(string)
//		dec, err := driver.Reconcile(ctx, name)
//		switch {
//		case err != nil:
//			log.Printf("offline rebuilding of %s: %v", name, err)
//			queue.AddRateLimited(name)
//		case !dec.RequeueAt.IsZero():
//			queue.Forget(name)
//			queue.AddAfter(name, time.Until(dec.RequeueAt))
//		default:
//			queue.Forget(name)
//		}
//		queue.Done(name)
//	}
//
// Package rebuildtest has an in-memory cluster with such an attachment
// controller and a simulation that runs it on a fake clock;
// examples/rebuild-sim prints its timeline.
//
// # Errors
//
// ParseGlobalSetting and ParseVolumeSetting return a *SettingError (the
// shared settings error, with the accepted values), which wraps
// ErrInvalidSetting, for an unknown value; an unknown value never enables
// rebuilding. Invalid Options wrap ErrInvalidOptions. Hosts wrap
// ErrNotFound (caretaker's shared NotFound class) for a missing volume or
// ticket: deleting what is gone is
// success, and a volume that is gone is forgotten. Every other host error
// is returned by Driver.Reconcile wrapped with what was being done, and is
// retryable: the driver keeps a volume's record only once its ticket change
// succeeded. An unknown global setting is applied as "disabled" and
// returned. ReconcileAll returns every failure in a *multierror.Error.
// Decide never fails and never panics.
//
// # Logging
//
// The Driver logs through Options.Logger and is silent when it is nil, the
// default: it never falls back to slog.Default. The Planner logs nothing;
// the Driver logs each decision once it has applied it. Every line carries
// "volume", and the decision lines "action" (create, keep, wait, delete)
// and "reason" (the OfflineRebuilding condition's reason):
//
//	Info   rebuild: attaching      ticket, node, message (the ticket was created)
//	Info   rebuild: interrupted    message (a higher-priority ticket took the volume)
//	Info   rebuild: released       message (completed, disabled, deleting, faulted...)
//	Warn   rebuild: gave up        message, failures, retry_at (CannotProgress)
//	Info   rebuild: volume gone    action, ticket
//	Warn   rebuild: invalid setting err
//	Error  rebuild: apply failed   op (put-ticket, delete-ticket, update-status), err
//	Debug  rebuild: decided        the decisions that keep or wait
//
// Logging never changes what the Driver does, and no lock is held while
// the handler runs.
//
// # Metrics
//
// The Driver reports each Reconcile to Options.Hooks (nil, the default,
// means none) as an Event that mirrors what Reconcile returned: the act
// (OpReconcile, or OpForget for a volume that is gone), the outcome (ok
// or failed, with the error), the decision's action and reason when one
// was made, and the duration by Options.Clock. Op, Outcome, Action and
// Reason are fit for a metric's labels. The hooks run after the act,
// outside the Driver's lock, and see copies: they cannot change what it
// does. orphan and backupdelete have hooks of the same shape.
//
// # Concurrency
//
// A Planner is immutable and may be shared. A Driver is safe for concurrent
// use; it starts no goroutines and holds no lock while calling the host.
// Reconciles of one volume should be serialized (work queues do that); if
// they are not, a stale decision can be applied once and the next reconcile
// corrects it. Host interface methods are called concurrently for
// different volumes.
//
// # Differences from Longhorn
//
// Longhorn's volume-rebuilding-controller creates its ticket with the
// frontend parameter "any"; the proposal and this package ask for frontend
// disabled (maintenance mode). Longhorn now checks that a failed replica
// can be reused or a new one scheduled before it creates the ticket (the
// fix for tickets re-created forever), and deletes the ticket when
// scheduling fails while attached; but it has no backoff and no stall
// limit, so a rebuild that passes the check and still fails is retried at
// every detach, and an attachment that makes no progress is kept. Here
// every attempt is bounded (MaxFailedRebuilds, StallTimeout) and given-up
// attempts back off. A replica that stays rebuilding is not progress by
// itself: only a rising RebuildProgress (Longhorn's engine rebuild status
// Progress) or a replica becoming healthy keeps the ticket past
// StallTimeout, so a rebuild that hangs releases the volume.
package rebuild
