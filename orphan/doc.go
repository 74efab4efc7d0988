// Package orphan finds what a storage cluster left behind and cleans it up
// without ever destroying live data. It knows nothing about disks or SPDK:
// an Adapter says what exists (Inventory), whether it is owned (Judge) and
// how data is removed (Deleter), and a Store keeps the orphan records.
// Packages diskscan, spdk and backupdelete each ship one adapter, built by
// one constructor (NewOrphans); a host with its own source of orphans
// assembles one with NewAdapter, and one with several uses Combine.
//
// # In short
//
// You implement an Adapter (or take one: diskscan.NewOrphans,
// spdk.NewOrphans, backupdelete.NewOrphans) and a Store (MemStore in
// tests; your Orphan custom resources in an operator, checked with
// orphantest.RunConformanceTests). The constructors are
// NewSweeper(store, adapter, SweeperOptions{}), which runs one cycle, and
// NewMonitor(adapter, MonitorOptions{OnChange: ...}), which scans in the
// background. The loop, on every change and at every plan.RequeueAt:
//
//	obs, ok := mon.Latest() // never waits for a scan
//	if ok && obs.Err == nil {
//		plan, result, err := sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
//			Selector: orphan.Selector{NodeID: node}, Scopes: health,
//			Policy: policy, ObservedAt: obs.StartedAt})
//		// requeue at plan.RequeueAt; log result; after err, retry with backoff
//	}
//
// A user asks for a purge by setting Record.DeletionRequested; the
// Sweeper purges only what it re-judges orphaned at that moment.
//
// # In depth
//
// What the core knows of each kind of orphan (the fields its name is
// hashed from, its scope, its labels, the setting items that auto-delete
// it) is one table, KindSpec: a new kind is one entry in it and an
// adapter.
//
// The core is Decide, a pure function from observations to a Plan: records
// to create, records to forget (drop the record, keep the data), records
// to purge (delete the data, then the record), records to keep, the
// conditions to write on them, and when to look again: a host applies it
// without knowing the policy behind it. Around it sit two thin drivers the host may use or not: a
// Monitor that scans in the background so a slow disk never blocks the
// host's reconcile, and a Sweeper that carries a plan out. A driver that
// plans the same node cycle after cycle may keep a Planner: its Decide
// makes the very same plans, and keeps its working arrays from one cycle
// to the next, so a steady state allocates little besides its plan.
//
// Records are byte-compatible with Longhorn's Orphan objects: the same
// names (Item.Name), labels (Item.Labels), parameter keys (Param*),
// orphan types (Kind), DataCleanable reasons (Health), and the Error and
// InstanceExist conditions.
//
// # Safety
//
// Purging is the only destructive step, and it happens only when all of
// these hold:
//
//  1. The record's deletion was requested (Record.DeletionRequested, set by
//     a user), or the auto-deletion Policy covers its kind and its grace
//     period since CreatedAt (which must be set) is over; and no other
//     record of the input holds its name.
//  2. In this very cycle its scope was scanned completely and is Ready, and
//     so is its node: a node's health dominates its disks' (a node that is
//     evicted or deleted forgets every record on every one of its disks,
//     one that is down holds them all, whatever the disk scan says), and a
//     disk is Ready only under a node the host listed as Ready. See Decide
//     for the whole precedence.
//  3. Its item was seen and judged an orphan by every observation of it.
//  4. The record is marked DataCleanable=True (Longhorn's rule). Decide
//     plans the mark (Plan.Conditions) while the scope is Ready and the
//     Sweeper writes it; a record without it waits a cycle.
//  5. The mass-deletion Guard does not read the scope as a broken view: an
//     empty expected list beside valid data, every valid item of a scope
//     judged an orphan, automatic deletion of more than a share of a
//     scope at once, or more than that share within an hour (the Budget,
//     counted across cycles). It weighs each kind and data engine of a
//     scope on its own, so adapters combined on one node never vouch for
//     each other's orphans. Its refusals are kept, reported in
//     Plan.Refused and Result.Refused, and marked PurgeGuarded=True on the
//     records. Each rule has an explicit opt-out.
//  6. The last-copy guard (see below) does not take the orphan for what
//     may be the last copy of the data of a volume that still needs it.
//  7. At the moment of deletion the Sweeper re-reads the record (still
//     there, still requested or due, still DataCleanable=True) and
//     re-judges the item, and the Deleter re-checks the data itself (disk
//     identity, runtime UUID, still unclaimed, no mount or special file in
//     the way) and refuses with ErrPreconditionFailed if anything changed.
//
// A record marked DataCleanable=False (by a host, or by a forget that was
// cut short) is never purged: a due purge forgets it instead, as Longhorn
// does.
//
// Everything that is unsure is kept (HealthUnknown, OutcomeUndecided — the
// zero Verdict — and one name observed as two kinds); a record whose node
// is down or whose disk cannot be read is kept too, marked
// DataCleanable=False with the reason (Health.Holds), and is cleanable
// again once its scope is Ready; everything that is out of date is
// forgotten, never purged (the item disappeared or became owned, or its
// node or disk was evicted, deleted, removed or replaced: Health.Forgets).
//
// A user may dismiss an orphan (Record.Dismissed; in Kubernetes the label
// LabelDismissed): its data is never purged, auto-deletion passes it by,
// a deletion requested of it is refused (Plan.Refused), and its record
// stays, so the next scan does not record the data anew. Clearing the
// dismissal returns it to the normal rules.
//
// # The last copy of a volume
//
// An orphaned replica may hold the only copy left of a faulted volume's
// data (longhorn/longhorn#7482, #7735). The host passes the state of each
// volume it knows (Input.Volumes, Cycle.Volumes: VolumeHealthy,
// VolumeDegraded, VolumeFaulted, VolumeDeleted), and says with
// VolumesComplete when an unlisted volume is deleted rather than unknown;
// an inspection of the orphan's data (Item.Copy) says which volume it
// belongs to, whether a tool can export it today, and whether it is
// proven to hold none of the volume's data (Copy.NoData). Every copy but
// a NoData one is covered, exportable or not: a copy whose backing image
// was removed from its disk, or whose volume.meta is damaged, still holds
// the user's writes. A replica directory nobody inspected is covered too.
// Then: a covered orphan of a faulted volume is never purged, unless a
// person's request is confirmed by Input.LastCopyOverride (in Kubernetes
// the label LabelLastCopyOverride, with the Orphan deleted); one of a
// degraded volume is not auto-deleted until the volume is healthy (it
// may be reused as a replica, #10726); one of a volume the host did not
// mention is not auto-deleted either; orphans of deleted and healthy
// volumes, and NoData orphans of any volume, go as before. So a host
// that passes no volume states gets no automatic purge of replica data
// that may hold data (each refusal says why, and whether the tool can
// export the copy); see VolumeState. The states are those of when the
// cycle starts; with Cycle.LookupVolume set, Sweeper.Reconcile looks the volume
// up again right before each purge the guard covers and refuses the purge
// if the state then says so, or if the lookup fails.
//
// The record shows what the inspection found: ConditionRecoverable, True
// (reason Recoverable, with the revision counter and the copy's rank
// among its volume's copies) or False: reason NotRecoverable when the
// copy holds data the tool cannot export today (with every reason and
// what to do about it, for example: copy a missing backing image back
// from another node, then export), reason NoData when it holds none.
// When the volume is degraded or faulted, a recoverable copy's reason is
// Reusable and the message adds what a host needs to re-adopt the copy
// as a failed replica (directory, disk, head, size, revision counter);
// caretaker itself never re-adopts a copy.
//
// # The host's duties
//
//  1. Build the Adapter (diskscan.NewOrphans, spdk.NewOrphans,
//     backupdelete.NewOrphans, Combine of several, or NewAdapter of your
//     own pieces) and a Store (or use MemStore); run
//     orphantest.RunConformanceTests against what you wrote yourself. An
//     Inventory that leaves owned items out of its snapshot must say how
//     many in ScopeStatus.OwnedUnlisted, and report an empty expected
//     list as ScopeStatus.NoneExpected, or the Guard cannot tell a broken
//     view from real orphans.
//  2. Start a Monitor on the Adapter; enqueue a reconcile from OnChange.
//  3. In each reconcile, take Monitor.Latest and add what only the cluster
//     knows as Scopes: every node's health (Ready, or NodeUnavailable when
//     it is down, its Kubernetes Ready condition is Unknown or its manager
//     is missing, NodeEvicted when eviction is requested, NodeDeleted when
//     its node object is gone) and each evicted disk (DiskEvicted); a disk
//     the node no longer has is simply not listed. Records of a disk under
//     a node the host does not list as Ready are never purged. Then call Sweeper.Reconcile — or JudgeAll,
//     Decide and Sweeper.Sync separately.
//  4. Requeue at Plan.RequeueAt when it is set (it is Now when a due purge
//     waits only for this plan's DataCleanable mark).
//  5. To delete an orphan on a user's request, set DeletionRequested on
//     its record (Store.Update; in Kubernetes, deleting the object with a
//     finalizer); the next reconcile purges it if it is cleanable, or
//     forgets it (data kept) if it is marked DataCleanable=False.
//  6. Leave the Guard on. Turn a rule off (Cycle.Guard) only for a run a
//     person has checked, such as a tool's explicit flag. Its Budget
//     counts automatic purges across cycles in a ledger: a Store that
//     implements LedgerStore (MemStore does) keeps it across restarts and
//     shares it between the Sweepers of a node; a Sweeper over another
//     Store keeps it in memory and makes automatic purges wait one
//     BudgetWindow after its start (a host calling Decide itself carries
//     Plan.AutoPurges to the next Input.AutoPurges, and sets
//     Input.AutoPurgesSince after losing it).
//  7. Pass the volumes' states (Cycle.Volumes, VolumesComplete) so that
//     auto-deletion of replica data goes on for deleted and healthy
//     volumes; pass Cycle.LastCopyOverride only for records a person
//     confirmed.
//
// One complete loop:
//
//	orphans, err := diskscan.NewOrphans(expected, diskscan.Options{}) // or spdk.NewOrphans, backupdelete.NewOrphans
//	if err != nil { ... }
//	mon, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue() }})
//	if err != nil { ... }
//	if err := mon.Start(ctx); err != nil { ... }
//	defer mon.Stop()
//	sweeper, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{})
//	if err != nil { ... }
//	policy, err := orphan.ParsePolicy(settings["orphan-resource-auto-deletion"], settings["orphan-resource-auto-deletion-grace-period"])
//	if err != nil { ... } // an unknown item in the setting: report it, delete nothing automatically
//	for range reconcileRequests {
//		obs, ok := mon.Latest()
//		if !ok || obs.Err != nil {
//			continue // nothing trustworthy yet; records stay as they are
//		}
//		plan, res, err := sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
//			Selector:        orphan.Selector{NodeID: node},
//			Scopes:          nodeAndDiskHealth(), // e.g. {{NodeID: node}: {Health: orphan.HealthReady}}, plus evicted disks
//			Policy:          policy,
//			Volumes:         volumeStates(), // e.g. {"pvc-a": orphan.VolumeHealthy, "pvc-b": orphan.VolumeFaulted}
//			VolumesComplete: true,           // every volume that exists is listed: the others are deleted
//			ObservedAt:      obs.StartedAt,  // a snapshot older than a purge does not resurrect its record
//		})
//		log(res, err) // res.Failed and err: per-record failures; res.Refused: what was not purged and why
//		if !plan.RequeueAt.IsZero() {
//			requeueAt(plan.RequeueAt)
//		}
//	}
//
// # Split controllers: a finalizer that purges
//
// Longhorn splits an orphan's life between controllers: the node
// controller creates and forgets Orphans, the Orphan's finalizer in the
// orphan controller deletes the data when the object is deleted (a
// user's kubectl delete runs it at once), and the instance manager
// controller handles instance orphans. A host of that shape keeps every
// check by calling Sweeper.PurgeRecord from its finalizer, never its
// Deleter directly:
//
//  1. Build one Adapter, one Store and one Sweeper per node, shared by
//     the node's controllers: the Sweeper refuses a second purge of a
//     record already under way (RuleInProgress), so the cycle and the
//     finalizer never call the Deleter twice at once for one record.
//  2. The node controller runs the cycle (Reconcile, or ReconcileJudged with its own
//     judgement) as in the host's duties above: it creates, marks and
//     forgets records, and carries out automatic purges with the Budget.
//     Its Store maps a deletion timestamp to DeletionRequested.
//  3. The finalizer, for a record being deleted, calls PurgeRecord with
//     the same Cycle the node controller would build now: the node's and
//     disks' health in Scopes (its node must be listed), the volume
//     states and override labels, LookupVolume. It passes the node
//     controller's latest Snapshot (a Monitor's Latest) or Judged in
//     PurgeRecordOptions, or nothing, and PurgeRecord scans.
//  4. On PurgePurged, PurgeReleased or PurgeGone, the record is deleted
//     already (a Kubernetes Store's Delete removes the finalizer); the
//     finalizer has nothing left to do.
//  5. On a *Refusal (errors.Is ErrRefused), the finalizer keeps its
//     finalizer and requeues. PurgeRecord has marked the record
//     Error=True with the rule and reason (and PurgeGuarded=True where a
//     guard refused); the node controller's plans keep Error=True while
//     the deletion stands. A refusal of RuleInProgress or RuleRecheck
//     often resolves by itself; one of a guard's rule, GuardLastCopy
//     say, waits for the volume or a person's override.
//  6. On any other error, requeue with backoff: nothing was deleted
//     unless the Deleter failed half-way, which its next call finishes.
//
// What PurgeRecord sees: the guard's NoneExpected and WholeScope weigh
// the whole group of the observation it is given (a scan of the node, or
// the host's Judged with its evidence), so a finalizer called while the
// view is broken refuses like the cycle; AutoShare and Budget stop only
// automatic purges and never apply to a requested one. A snapshot older
// than the record may no longer show its item: the record is then
// released (PurgeReleased, data kept), never purged, and the next scan
// records the data again.
//
// # A host's own judgement
//
// A host whose own code already decided which items are orphaned
// (Longhorn's disk monitor) passes its decisions as Judged to ReconcileJudged
// and PurgeRecord, with the guard's evidence per group in
// ScopeStatus.Groups; a group without it is refused every purge
// (GuardNoEvidence). The guard then sees only the counts the host
// states: see Judged.
//
// # Where caretaker differs from the proposals and from Longhorn
//
//   - v2 replica instances: the rule of Longhorn's proposal ("Orphaned V2
//     Volume Runtime Resource Cleanup", longhorn/longhorn#10933; the root package lists
//     every proposal) "record stopped and runtime present: orphan" would delete
//     every detached v2 volume's data. Longhorn's code never does it;
//     neither does package instance. Its doc lists the sources and which
//     object each case deletes.
//   - Node over disk: Longhorn's OrphanController.updateDataCleanableCondition
//     (controller/orphan_controller.go) checks the node (down, missing
//     manager, eviction requested) before the disk; Decide resolves scopes
//     in the same order, and also refuses a disk whose node the host did
//     not list.
//   - Outages keep records (longhorn/longhorn#7795). Longhorn today marks
//     an Orphan DataCleanable=False when its node is down, deleted or
//     missing its manager, or its disk is not ready
//     (updateDataCleanableCondition, checkOrphanedReplicaDataCleanable), and
//     its NodeController then deletes every Orphan so marked, whatever
//     the auto-deletion setting; an Orphan whose disk stat fails goes too.
//     The direction of its pending fixes (longhorn/longhorn-manager#3961,
//     #4571) is what Decide does: a node down or without its manager, and
//     a disk that cannot be read, keep their records, marked
//     DataCleanable=False with the reason (HealthNodeUnavailable,
//     HealthDiskInvalid) and never purged while so; records are forgotten
//     only when the node or disk is evicted, the disk removed from the
//     node or replaced by another (HealthDiskChanged: a new UUID under the
//     path), the node deleted, or a Ready scan no longer sees the data.
//     Longhorn reports a deleted node as NodeUnavailable and a removed
//     disk as DiskInvalid; caretaker, which keeps those two for outages,
//     reports them as NodeDeleted and DiskRemoved.
//   - Dismissal (longhorn/longhorn#11286) is caretaker's own. Longhorn's
//     proposed fix, the label longhorn.io/delete-custom-resource-only
//     (longhorn/longhorn-manager#3924), deletes the Orphan and keeps the
//     data, after which the next scan records the data again; a dismissed
//     record instead stays, so it is not found anew, and its DataCleanable
//     is False (reason Dismissed), which Longhorn's own orphan controller
//     also honours.
//   - The Guard and its PurgeGuarded condition are caretaker's own; Longhorn
//     has no mass-deletion check.
//   - DataCleanable=True carries the reason "Ready" and Error=False the
//     reason "NoError" (Longhorn writes empty reasons, which
//     metav1.Condition does not allow). InstanceExist=True carries
//     "Observed": caretaker knows the runtime object was seen, not the
//     instance manager's state, which Longhorn writes as the reason.
//   - Labels are the ones longhorn-manager's Orphan mutating webhook
//     (webhook/resources/orphan/mutator.go) adds, set by caretaker on the
//     record itself (Item.Labels), so that a host without that webhook
//     writes the same objects: longhorn.io/component=orphan,
//     longhorn.io/managed-by=longhorn-manager, longhorn.io/orphan-type,
//     longhornnode; instances also longhorninstancemanager and their own
//     name under longhornengine or longhornreplica. The conditions differ
//     only as this list says: the reasons of True and False conditions
//     that Longhorn leaves empty or fills with the instance manager's
//     state, and caretaker's own PurgeGuarded.
//   - Longhorn's Orphan CRD holds orphan types caretaker does not handle
//     (spec.orphanType shard-instance and shardgroup-instance, for sharded
//     v2 volumes; longhorn-manager k8s/pkg/apis/longhorn/v1beta2/orphan.go).
//     caretaker names and labels them as Longhorn does (KindShardInstance,
//     KindShardGroupInstance) and knows that the setting item "instance"
//     covers them (AutoDeletionItem.Kinds), but they are not in the kind
//     table. A record of a kind outside the kind table is left to its owner: the
//     Stores hold and list it, and Decide keeps it as it is, with a reason
//     naming its type, whatever its scope, the policy or a deletion
//     request says: never purged, never forgotten, no condition written.
//   - Error=True is written by the Sweeper when a purge fails
//     (PurgeFailed) or a re-check refuses it (PurgeRefused), by
//     PurgeRecord when it refuses (PurgeRefused), and by Decide when a
//     requested record's item is undecided or its scope was not scanned
//     completely (PurgeRefused, Refusal rules Undecided and ScopeUnknown);
//     it is cleared by the next plan that keeps the record once its
//     deletion is no longer requested. Longhorn sets it when its cleanup
//     fails, and a request it cannot carry out sits with nothing to show.
//   - Item.Name refuses a path-like name of the data itself (DataName,
//     InstanceName or BackupName ".", "..", or holding a slash or a NUL),
//     which Longhorn's name formula (types.GetOrphanChecksumNameForOrphanedDataStore
//     and its siblings in types/types.go) hashes like any other string:
//     no scan lists such an item, so Decide neither records nor purges
//     it, and forgets a record of it. ReplicaDataName and InstanceName
//     still give Longhorn's name for any fields.
//   - Longhorn counts the grace period from an Orphan's creationTimestamp,
//     which the API server always sets. A record whose CreatedAt is zero
//     (a store that does not keep it) is never due for auto-deletion in
//     caretaker: no grace period can be counted; a requested deletion goes
//     on.
//   - A Store lists one object per name; an input that holds two records
//     of one name (two lists merged, a cache that holds an object twice)
//     is inconsistent, and Decide keeps every record of that name, purging
//     and forgetting none (RuleDuplicateName).
//
// # Hosts built on longhorn-manager's types
//
// A host that already holds Longhorn's objects uses, without conversion
// code of its own: ReplicaDataName and InstanceName (Longhorn's record
// names, from the fields alone); Item.Labels (the labels Longhorn's
// webhook sets, empty values included); ParseAutoDeletionItems (the
// setting keyed by item, as its controllers look it up) and
// ParseAutoDeletion (the kinds, for Policy); RecordFromLonghorn (an
// Orphan's metadata, spec and conditions as a Record); ApplyLonghornConditions
// (a plan's condition changes into Longhorn's condition list, with its
// string timestamps); LonghornVolumeState (a volume's state for the
// last-copy guard, counted from its Replicas while it is detached, when
// Longhorn reports robustness unknown). Package instance judges runtime
// instances as isInstanceOrphanedInInstanceManager does, with the
// differences its doc lists.
//
// # Reasons
//
// The reasons caretaker writes on the conditions Longhorn also has, and
// what longhorn-manager writes in the same case
// (k8s/pkg/apis/longhorn/v1beta2/orphan.go; controller/orphan_controller.go),
// so that a script that reads reasons knows what changes:
//
//	condition            caretaker          Longhorn           when
//	DataCleanable=True   Ready              ""                 the scope is Ready and the record is not held
//	DataCleanable=False  NodeUnavailable    NodeUnavailable    node down, Ready not True, manager pod missing (kept)
//	                     NodeEvicted        NodeEvicted        eviction requested for the node (forgotten)
//	                     NodeDeleted        NodeUnavailable    the node object is gone (forgotten)
//	                     DiskInvalid        DiskInvalid        the disk cannot be read or trusted (kept)
//	                     DiskEvicted        DiskEvicted        eviction requested for the disk (forgotten)
//	                     DiskChanged        DiskChanged        another disk (UUID) under the path (forgotten)
//	                     DiskRemoved        DiskInvalid        the disk is no longer the node's (forgotten)
//	                     Dismissed          (none)             a user dismissed the orphan (kept)
//	                     Gone, Owned,       (none: Longhorn    written just before the record is forgotten
//	                     Mismatch,          deletes the        (see ForgetReason)
//	                     NotCleanable       Orphan)
//	Error=False          NoError            ""                 no purge failed since the last plan
//	Error=True           PurgeFailed        ""                 the Deleter failed (message: the error)
//	                     PurgeRefused       (none)             a re-check at the moment of deletion stopped it
//	InstanceExist=True   Observed           instance state     the runtime object was seen
//
// caretaker's own conditions, PurgeGuarded (reason Clear or the GuardRule)
// and Recoverable (Recoverable, Reusable, NotRecoverable), have no
// Longhorn counterpart. ApplyLonghornConditions writes these reasons into
// Longhorn's condition list as they are.
//
// # Errors
//
// Stores and Deleters classify their failures with the sentinels
// ErrNotFound, ErrAlreadyExists, ErrConflict and ErrPreconditionFailed;
// ErrInvalidItem marks items lacking a field their name needs, and
// ErrInvalidSetting (as a *SettingError) a rejected setting; ErrNotFound,
// ErrInvalidSetting and SettingError are the same values in every
// caretaker package. Sweeper.Sync returns a *multierror.Error of
// *RecordError values, one per record that failed, and the same failures
// as values in Result.Failed; the others are not affected. A precondition
// failure, and a purge the Guard refused, is not an error but a Refusal
// in the Result. Sweeper.PurgeRecord returns its refusals as a *Refusal,
// which wraps ErrRefused; its Rule is a GuardRule or one of the Rule*
// constants. Combine's Delete of a kind no adapter serves is a
// *KindError wrapping ErrNoAdapter.
//
// # Logging
//
// The Monitor and the Sweeper log through the *slog.Logger of their
// options (MonitorOptions.Logger, SweeperOptions.Logger), and are silent
// when it is nil, the default: they never fall back to slog.Default. Decide
// and the Guard log nothing; their decisions reach the log when the
// Sweeper carries them out. Every record-level line carries "orphan" (the
// record's name), "kind" and "node":
//
//	Debug  orphan: scan finished     seq, took, items, scopes, skipped (err if it failed)
//	Warn   orphan: scan failed       seq, took, err
//	Info   orphan: record created    orphan, kind, node
//	Info   orphan: record forgotten  orphan, kind, node, reason, message
//	Info   orphan: data purged       orphan, kind, node, auto
//	Warn   orphan: purge refused     orphan, reason, at: "plan" (the Guard's; no kind or node)
//	                                 or "deletion" (a re-check; with kind and node)
//	                                 or "request" (PurgeRecord's; with kind and node)
//	Error  orphan: sync step failed  op (create, forget, mark, purge, finish), err, orphan, kind, node (none for finish)
//	Debug  orphan: conditions marked orphan, kind, node, conditions
//
// Logging never changes what a driver does, and no lock is held while
// the handler runs.
//
// # Metrics
//
// The Monitor and the Sweeper report each act to the Hooks of their
// options (MonitorOptions.Hooks, SweeperOptions.Hooks; nil, the default,
// means none) as an Event: the act (Op: scan, create, forget, mark,
// purge, finish), how it ended (EventOutcome: ok, failed, refused at
// the moment of deletion, guarded by the Guard in the plan), the
// record's kind and node, and its duration by the driver's clock. Op,
// Outcome and Kind are fit for a metric's labels. The hooks run after
// the act, outside the drivers' locks, and see copies: they cannot
// change what a driver does. backupdelete and rebuild have hooks of the
// same shape; examples/kube exports them as Prometheus metrics.
//
// # Concurrency
//
// Decide, JudgeAll, MergeScopes, Guard, Spec and the types are plain
// values and functions. A Planner is a goroutine-free value for one
// goroutine at a time. MemStore, Monitor's methods, Sweeper and the
// adapters of Combine and NewAdapter (if their parts are) are safe for
// concurrent use. Judges must be safe for concurrent use; Deleters are
// called concurrently for different records and never twice at once for
// one record by one Sweeper (a sync and PurgeRecord included). Run one Sweeper sync at a time per node.
package orphan
