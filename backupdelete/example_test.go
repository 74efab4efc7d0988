package backupdelete_test

import (
	"context"
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/orphan"
	clocktesting "k8s.io/utils/clock/testing"
)

// Step is pure: the host can run longhorn/longhorn#8746's state machine from its own
// reconcile loop without the Driver.
func ExampleStep() {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// A controller restarted while backup-b was Deleting: no record.
	res := backupdelete.Step(backupdelete.StepInput{
		Backup:   "backup-b",
		State:    backupdelete.StateDeleting,
		Presence: backupdelete.PresenceExists,
		Now:      now,
	})
	fmt.Println(res.State, "|", res.Message, "| start:", res.StartCommand)

	// Next reconcile: not Deleting, no backoff, so the command restarts.
	res = backupdelete.Step(backupdelete.StepInput{Backup: "backup-b", State: res.State, Message: res.Message, Now: now})
	fmt.Println(res.State, "| start:", res.StartCommand, "| next retry no sooner than", res.Backoff.Delay)
	// Output:
	// Error | No deletion in progress record, retry the deletion command | start: false
	// Deleting | start: true | next retry no sooner than 10s
}

func ExampleCreationGate() {
	others := []backupdelete.Backup{
		{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-b"}, State: backupdelete.StateDeleting},
		{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-x"}, State: backupdelete.StateError},
	}
	g := backupdelete.CreationGate(backupdelete.BackupRef{Volume: "vol-a", Name: "backup-c"}, others)
	fmt.Println(g.Wait, g.Message)
	// Output: true Wait for backup backup-b to be deleted
}

func ExampleDriver() {
	store := backupstoretest.NewMemStore()
	ref := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-b"}
	_ = store.Put(ref, false, "block-1")

	done := make(chan error, 1)
	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{
		Clock:  clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)),
		OnDone: func(_ backupdelete.BackupRef, err error) { done <- err },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drv.Close()

	ctx := context.Background()
	state := backupdelete.StateCompleted
	res, _ := drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: state})
	fmt.Printf("%s -> %s (command started: %v)\n", state, res.State, res.StartCommand)
	state = res.State

	<-done // the host would requeue the backup here
	res, _ = drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: state})
	fmt.Printf("%s -> finalize: %v\n", state, res.Finalize)
	// Output:
	// Completed -> Deleting (command started: true)
	// Deleting -> finalize: true
}

func ExampleExpiredFailedBackups() {
	ttl, _ := backupdelete.ParseFailedBackupTTL("60") // minutes
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	backups := []backupdelete.Backup{
		{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-1"}, State: backupdelete.StateError, FailedAt: now.Add(-2 * time.Hour)},
		{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"}, State: backupdelete.StateUnknown, FailedAt: now.Add(-10 * time.Minute)},
	}
	expired, next := backupdelete.ExpiredFailedBackups(backups, ttl, now)
	fmt.Println(expired, "next at", next.Format(time.Kitchen))
	// Output: [vol-a/backup-1] next at 12:50PM
}

func ExampleProgressTracker() {
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tr := backupdelete.NewProgressTracker("backup-c", backupdelete.MonitorOptions{}, start)
	d := tr.Observe(start, backupdelete.Progress{}, fmt.Errorf("engine restarting"))
	fmt.Println("unreadable, retry in", d.RequeueAt.Sub(start))
	now := d.RequeueAt
	d = tr.Observe(now, backupdelete.Progress{State: backupdelete.StateInProgress, Percent: 40}, nil)
	fmt.Println("readable, poll in", d.RequeueAt.Sub(now), "at", d.Progress.Percent, "%")
	// Output:
	// unreadable, retry in 2s
	// readable, poll in 2s at 40 %
}

// The failed-backup adapter is one value: a host hands it to
// orphan.NewMonitor and orphan.NewSweeper. Here a sweep creates the
// failed backup's record and, once its deletion is requested, purges its
// data from the backupstore.
func ExampleNewOrphans() {
	ctx := context.Background()
	failed := backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000001"}, State: backupdelete.StateError}
	done := backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000002"}, State: backupdelete.StateCompleted}
	lister := backupstoretest.NewMemLister(failed, done)
	store := backupstoretest.NewMemStore()
	_ = store.Put(failed.Ref, false, "block-1")
	_ = store.Put(done.Ref, false, "block-1", "block-2")

	orphans, err := backupdelete.NewOrphans(lister, store, backupdelete.OrphansOptions{NodeID: "node-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	records := orphan.NewMemStore()
	sweeper, err := orphan.NewSweeper(records, orphans, orphan.SweeperOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "node-1", Kind: orphan.KindBackup},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}}} // the host's view of its node
	sweep := func() orphan.Result {
		cycle.ObservedAt = time.Now()
		snap, err := orphans.Scan(ctx)
		if err != nil {
			fmt.Println(err)
		}
		_, res, err := sweeper.Reconcile(ctx, snap, cycle)
		if err != nil {
			fmt.Println(err)
		}
		return res
	}
	fmt.Println("created:", len(sweep().Created))
	name, _ := backupdelete.BackupItem(failed.Ref, "node-1").Name()
	_ = records.RequestDeletion(ctx, name)
	fmt.Println("purged:", len(sweep().Purged))
	gone, _ := store.BackupExists(ctx, failed.Ref)
	kept, _ := store.BackupExists(ctx, done.Ref)
	fmt.Println("failed backup still there:", gone, "completed backup kept:", kept)
	// Output:
	// created: 1
	// purged: 1
	// failed backup still there: false completed backup kept: true
}
