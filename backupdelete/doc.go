// Package backupdelete deletes backups from a backupstore asynchronously,
// holds back backup creations while a deletion of the same volume runs, and
// turns failed backups into orphan records. It implements Longhorn's
// "Delete backup in the backupstore asynchronously" (longhorn/longhorn#8746) and the failed-backup
// half of Longhorn's "Orphaned Data Cleanup" (longhorn/longhorn#685, #3898), with Longhorn's states and messages, so a Longhorn-style
// backup controller can adopt it without migrating its objects.
//
// # In short
//
// You implement a Backupstore, or open Longhorn's layout on a mount with
// fsstore.New or in an S3 bucket with s3store.New. The one constructor is NewDriver(store, DriverOptions{}).
// The loop, per backup being deleted, in your backup controller:
//
//	res, err := drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: state, Message: msg})
//	// store res.State and res.Message on your backup object (err: retry);
//	// res.Finalize: remove the finalizer; else requeue at res.RequeueAt
//
// DriverOptions.OnDone wakes the controller when a deletion command
// ends; Close the driver on shutdown. The backup-delete example runs
// this loop for one backup.
//
// # In depth
//
// The decisions are pure and synchronous:
//
//   - Step is the deletion state machine for one backup: (state, in-progress
//     record, presence in the backupstore, backoff, now) → next state,
//     message, start the command?, finalize?, requeue at.
//   - CreationGate says whether a new backup must wait (Pending, "Wait for
//     backup <name> to be deleted").
//   - ProgressTracker is the creation progress monitor's timing: 2 s
//     doubling to 10 min while the status is unreadable, a steady 2 s once
//     it is, Error after 24 h without a readable status.
//   - ExpiredFailedBackups applies Longhorn's failed-backup-ttl.
//
// Driver and ProgressMonitor are the thin drivers around them: goroutines,
// an injected k8s.io/utils/clock, and the host's adapters. Orphans, built
// by NewOrphans, is the orphan.Adapter of failed backups: one value that
// is package orphan's Inventory, Judge and Deleter for kind
// orphan.KindBackup, built and used like diskscan's and spdk's.
//
// The host plugs in a Backupstore (delete a backup; does it exist), and for
// the failed-backup orphans a BackupLister (its backup records). Package
// fsstore is a real Backupstore: a filesystem in Longhorn's backupstore
// layout with its lock protocol, for an NFS or CIFS mount; package
// s3store is the same in an S3 bucket (Longhorn's s3:// targets). Package
// backupstoretest has the conformance suite every host interface runs in
// one line (RunConformanceTests), in-memory implementations and a fault
// injector; package mocks has gomock mocks.
//
// # Host duties
//
//  1. Build one Driver per process over your Backupstore, and Close it on
//     shutdown. Do not persist its records: a new process must start with
//     none, which is how a crash is detected (longhorn/longhorn#8746).
//  2. Reconcile every backup whose deletion was requested (in Kubernetes:
//     deletion timestamp set) with Driver.Reconcile, passing its current
//     state and message. Write the result's State and Message to the
//     backup's status; remove the finalizer when Finalize; requeue at
//     RequeueAt (and when DriverOptions.OnDone fires).
//  3. Before starting a new backup, call CreationGate with the other
//     backups; while it says Wait, keep the new one Pending with its
//     Message.
//  4. While a backup is being created, run ProgressMonitor.Run for it (or
//     drive a ProgressTracker from your own loop) and write the progress;
//     a give-up comes back as State Error with a message.
//  5. For failed backups, build the adapter with NewOrphans over your
//     BackupLister and the Backupstore (which must be a
//     CompletedBackupDeleter: fsstore.Store and s3store.Store are), and run orphan's loop with
//     it, exactly as for diskscan and spdk (below): orphan.NewMonitor on it,
//     orphan.NewSweeper over your orphan Store and it, Cycle.ObservedAt =
//     Observation.StartedAt. Enable auto-deletion with
//     orphan.Policy.FailedBackups (Longhorn's setting has no item for
//     it). Your backup records may go on saying Error after a
//     purge, as long as you like: a backup that is no longer in the
//     backupstore gets no record (see Orphans). A host with one backup
//     target may report an empty Target: its records are named as
//     DefaultBackupTarget's ("default"), and GetBackup is then asked for
//     Target "default" first and "" second. For Longhorn's
//     failed-backup-ttl, request the deletion of what ExpiredFailedBackups
//     returns (the Driver then deletes it).
//
// # A complete loop
//
//	store, _ := fsstore.New(fsstore.Options{Dir: "/mnt/nfs-backupstore", LockWait: time.Minute})
//	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{
//		OnDone: func(ref backupdelete.BackupRef, err error) { queue.Add(ref) },
//	})
//	if err != nil { ... } // a nil store
//	defer drv.Close()
//
//	func reconcile(ctx context.Context, b *Backup) error {
//		if b.DeletionRequested {
//			res, err := drv.Reconcile(ctx, backupdelete.Request{Ref: b.Ref, State: b.State, Message: b.Message})
//			if errors.Is(err, backupdelete.ErrInvalidRef) || errors.Is(err, backupdelete.ErrClosed) {
//				return err
//			}
//			if res.Finalize {
//				return removeFinalizer(ctx, b)
//			}
//			b.State, b.Message = res.State, res.Message
//			queue.AddAfter(b.Ref, time.Until(res.RequeueAt))
//			return updateStatus(ctx, b)
//		}
//		if b.State == backupdelete.StateNew || b.State == backupdelete.StatePending {
//			if g := backupdelete.CreationGate(b.Ref, otherBackups(b)); g.Wait {
//				b.State, b.Message = backupdelete.StatePending, g.Message
//				queue.AddAfter(b.Ref, 5*time.Second)
//				return updateStatus(ctx, b)
//			}
//			return startBackup(ctx, b)
//		}
//		return nil
//	}
//
// The failed-backup orphans' loop, the same as every orphan adapter's
// apart from the constructor:
//
//	orphans, err := backupdelete.NewOrphans(backupLister, store, backupdelete.OrphansOptions{NodeID: node})
//	if err != nil { ... } // a missing part, or a store that cannot tell a backup in progress
//	mon, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue() }})
//	if err != nil { ... }
//	if err := mon.Start(ctx); err != nil { ... }
//	defer mon.Stop()
//	sweeper, err := orphan.NewSweeper(orphanStore, orphans, orphan.SweeperOptions{})
//	if err != nil { ... }
//	for range reconcileRequests {
//		obs, ok := mon.Latest()
//		if !ok || obs.Err != nil {
//			continue // nothing trustworthy yet; records stay as they are
//		}
//		plan, res, err := sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
//			Selector:   orphan.Selector{NodeID: node, Kind: orphan.KindBackup},
//			Scopes:     map[orphan.Scope]orphan.ScopeStatus{{NodeID: node}: {Health: orphan.HealthReady}},
//			Policy:     orphan.Policy{FailedBackups: true, GracePeriod: grace},
//			ObservedAt: obs.StartedAt,
//		})
//		log(res, err)
//		if !plan.RequeueAt.IsZero() {
//			requeueAt(plan.RequeueAt)
//		}
//	}
//
// # Errors
//
// Sentinels for errors.Is: ErrInvalidRef (a name that is not a valid
// backupstore name; not retryable), ErrLocked (a conflicting backupstore
// lock; retryable), ErrCorrupt (an unparsable backupstore file; nothing is
// deleted because of it), ErrNotFound (a host record that does not exist),
// ErrPanic (a delete command panicked; it becomes an Error record),
// ErrTimeout (a command ran past DriverOptions.CommandTimeout),
// ErrClosed, ErrInvalidSetting (every *SettingError wraps it), and
// ErrInProgress (a CompletedBackupDeleter found the backup still being
// written), and ErrListingInconsistent (a listing of the volume's backups
// contradicted volume.cfg or itself: nothing was deleted, and the Driver
// retries after the backoff). ErrNotFound and ErrInvalidSetting are the same values as every
// other caretaker package's, so errors.Is matches across packages.
// NewOrphans refuses a missing part, or a Backupstore that is not a
// CompletedBackupDeleter, with an error wrapping orphan.ErrIncomplete.
// Orphans.Delete turns every reason not to purge (a record that is not a
// valid backup, a host record that is gone, changed, not failed or another
// backup's, a backup in progress or unreadable in the backupstore, a
// volume locked by a running backup or restore) into
// orphan.ErrPreconditionFailed, so the orphan Sweeper refuses the purge
// visibly (PurgeRefused, with the store's reason) and keeps the record. A delete command's error never escapes
// the Driver as an error: it becomes the backup's Error state with
// Longhorn's message "Failed to delete the backup <name> in the
// backupstore, err <err>", and the command is retried after the backoff.
//
// # Logging
//
// The Driver logs through DriverOptions.Logger and is silent when it is
// nil, the default: it never falls back to slog.Default. Step logs
// nothing; the Driver logs what it decided and what its commands did.
// Every line names the backup with "backup" (its name), "volume" and, when
// set, "target"; "attempt" counts the commands this Driver started for the
// backup (a new Driver starts from zero):
//
//	Info   backupdelete: deletion started         state, attempt, backoff
//	Info   backupdelete: deletion finished        state, attempt
//	Warn   backupdelete: deletion failed          state (Error), attempt, reason, message
//	Warn   backupdelete: presence check failed    err
//	Debug  backupdelete: backing off              state, attempt, retry_in
//	Debug  backupdelete: waiting                  state, attempt, reason
//	Info   backupdelete: delete command succeeded attempt
//	Error  backupdelete: delete command failed    attempt, op (delete), err (its first line)
//
// Logging never changes what the Driver does, and no lock is held while
// the handler runs. The command lines come from the command's goroutine.
//
// # Metrics
//
// The Driver reports each act to DriverOptions.Hooks (nil, the default,
// means none) as an Event: the presence check (OpCheck: ok or failed),
// each Reconcile with the step it took (OpReconcile: started, finished,
// error, backoff, waiting, or failed when it returned no result), and
// each delete command (OpDelete: ok or failed), and each collection of a
// volume before an unseen deletion is finalized (OpCollect: ok or failed;
// see Collector), with the backup, its next
// state, the step's Why, the attempt and the duration by
// DriverOptions.Clock. Op, Outcome, State and Why are fit for a metric's
// labels. The hooks run after the act, outside the Driver's lock, and
// see copies: they cannot change what it does. orphan and rebuild have
// hooks of the same shape.
//
// # Concurrency
//
// Step, CreationGate, ExpiredFailedBackups and ParseFailedBackupTTL are pure.
// A ProgressTracker belongs to one goroutine. Driver is safe for concurrent
// use by many reconcilers; at most one command runs per backup, at most
// DriverOptions.MaxConcurrent in all (the rest queue, recorded as running).
// Orphans is safe for concurrent use if its lister and store are. Backupstore implementations must be safe for concurrent use.
//
// # Differences from Longhorn's controller
//
// Two rows of Step refine Longhorn's: it never starts a second command for
// a backup whose own command still runs (Longhorn does when a status update
// was lost), and it finalizes only once the command has returned, not as
// soon as the cfg is gone; otherwise the finalized backup stops holding
// creations while its command still holds the deletion lock, and the
// creation fails on that lock, which is the very complaint longhorn/longhorn#8742 reports and #8746 fixes.
// The default backoff is the proposal's 10 s to 1 min; Longhorn's code later
// moved to 1 min to 24 h, available through BackoffOptions.
//
// # Failed-backup orphans (caretaker's own)
//
// Longhorn never shipped orphan records for failed backups (its
// failed-backup-ttl deletes them from the backup controller). caretaker's
// are purged only after these re-checks at the moment of deletion: the
// host still has exactly that backup's record in Error or Unknown, and the
// backupstore, under its own exclusion of backup creators, finds that
// nothing writes the backup any more (Unknown means the host lost track of
// it, and it may still be running). Longhorn marks a backup in progress
// with an empty CreatedTime, and its writer holds a backup lock on the
// volume until it has written the final cfg; a backup that failed
// mid-upload keeps the empty CreatedTime for good, and its lock expires
// (150 s without a refresh). So such a backup is purged, with the blocks
// only it uploaded, when no backup lock of its volume is live, and
// refused (the lock named) while one is. Longhorn's own deletion
// (backupstore deltablock.go DeleteDeltaBlockBackup) removes a backup
// whatever its CreatedTime; only another backup in progress holds its
// block collection back, as it does ours. Target, volume and backup names are validated (never empty,
// never path-like) before anything is asked of the host or the store.
package backupdelete
