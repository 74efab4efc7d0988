// Package orphan finds what a storage cluster left behind and cleans it up
// without ever destroying live data. It knows nothing about disks or SPDK:
// packages diskscan, spdk and backupdelete, or the host itself, plug in
// what exists (Inventory), whether it is owned (Judge), where orphan
// records live (Store) and how data is removed (Deleter).
//
// The core is Decide, a pure function from observations to a Plan: records
// to create, records to forget (drop the record, keep the data), records
// to purge (delete the data, then the record), records to keep, and when
// to look again. Around it sit two thin drivers the host may use or not: a
// Monitor that scans in the background so a slow disk never blocks the
// host's reconcile, and a Sweeper that carries a plan out.
//
// Records are byte-compatible with Longhorn's Orphan objects: the same
// names (Item.Name), labels (Item.Labels), parameter keys (Param*),
// orphan types (Kind) and DataCleanable reasons (Health).
//
// # Safety
//
// Purging is the only destructive step, and it happens only when all of
// these hold:
//
//  1. The record's deletion was requested (Record.DeletionRequested, set by
//     a user), or the auto-deletion Policy covers its kind and its grace
//     period since CreatedAt is over.
//  2. In this very cycle its scope (node, disk) was scanned completely
//     (HealthReady) and its item was seen and judged an orphan by every
//     observation of it.
//  3. At the moment of deletion the Sweeper re-reads the record and
//     re-judges the item, and the Deleter re-checks the data itself (disk
//     identity, runtime UUID, still unclaimed) and refuses with
//     ErrPreconditionFailed if anything changed.
//
// A record marked DataCleanable=False (by a host, or by a forget that was
// cut short) is never purged: a due purge forgets it instead, as Longhorn
// does.
//
// Everything that is unsure is kept (HealthUnknown, OutcomeUndecided — the
// zero Verdict); everything that is out of date is forgotten, never
// purged (the item disappeared, became owned, or its node or disk is down,
// evicted or changed).
//
// # The host's duties
//
//  1. Implement Inventory (or use diskscan's or spdk's), Judge, Deleter,
//     and Store (or use MemStore); run orphantest's suites against yours.
//  2. Start a Monitor on the Inventory; enqueue a reconcile from OnChange.
//  3. In each reconcile, take Monitor.Latest, add the node and disk
//     states only the cluster knows (evicted, down) as Scopes, and call
//     Sweeper.Run — or JudgeAll, Decide and Sweeper.Sync separately.
//  4. Requeue at Plan.RequeueAt when it is set.
//  5. To delete an orphan on a user's request, set DeletionRequested on
//     its record (Store.Update; in Kubernetes, deleting the object with a
//     finalizer); the next reconcile purges it.
//
// One complete loop:
//
//	mon := orphan.NewMonitor(inventory, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue() }})
//	if err := mon.Start(ctx); err != nil { ... }
//	defer mon.Stop()
//	sweeper := &orphan.Sweeper{Store: store, Judge: judge, Deleter: deleter}
//	policy, err := orphan.ParsePolicy(settings["orphan-resource-auto-deletion"], settings["orphan-resource-auto-deletion-grace-period"])
//	if err != nil { ... } // an unknown item in the setting: report it, delete nothing automatically
//	for range reconcileRequests {
//		obs, ok := mon.Latest()
//		if !ok || obs.Err != nil {
//			continue // nothing trustworthy yet; records stay as they are
//		}
//		plan, res, err := sweeper.Run(ctx, obs.Snapshot, orphan.Cycle{
//			Selector:   orphan.Selector{NodeID: node},
//			Scopes:     map[orphan.Scope]orphan.ScopeStatus{{NodeID: node}: {Health: orphan.HealthReady}},
//			Policy:     policy,
//			ObservedAt: obs.StartedAt, // a snapshot older than a purge does not resurrect its record
//		})
//		log(res, err) // err aggregates per-record failures; the others went through
//		if !plan.RequeueAt.IsZero() {
//			requeueAt(plan.RequeueAt)
//		}
//	}
//
// # Errors
//
// Stores and Deleters classify their failures with the sentinels
// ErrNotFound, ErrAlreadyExists, ErrConflict and ErrPreconditionFailed;
// ErrInvalidItem marks items lacking a field their name needs, and
// ErrInvalidSetting (as a *SettingError) a rejected setting. Sweeper.Sync
// returns a *multierror.Error of *RecordError values, one per record that
// failed; the others are not affected. A precondition failure is not an
// error but a Refusal in the Result.
//
// # Concurrency
//
// Decide, JudgeAll, MergeScopes and the types are plain values and
// functions. MemStore, Monitor's methods and Sweeper are safe for
// concurrent use. Judges must be safe for concurrent use; Deleters are
// called concurrently for different records and never twice at once for
// one record within a sync. Run one Sweeper sync at a time per node.
package orphan
