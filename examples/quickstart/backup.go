package main

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/orphan"
	clocktesting "k8s.io/utils/clock/testing"
)

// runBackup writes a volume with a few backups in Longhorn's backupstore
// layout under dir, deletes one asynchronously while a new backup of the
// same volume waits for it, shows the block garbage collection, and turns
// a failed backup into a `backup` orphan record that is then purged.
func runBackup(ctx context.Context, w io.Writer, dir string) error {
	// The lock protocol waits 2 s after writing a lock file; a fake clock
	// stepped whenever something waits on it keeps the quickstart instant
	// while every file operation is real.
	clk := clocktesting.NewFakeClock(time.Now())
	stopClock := stepWhileWaiting(clk)
	defer stopClock()

	store, err := fsstore.New(fsstore.Options{Dir: dir, Clock: clk})
	if err != nil {
		return err
	}
	defer store.Close()

	const vol = "vol-quickstart"
	ref := func(name string) backupdelete.BackupRef {
		return backupdelete.BackupRef{Target: "default", Volume: vol, Name: name}
	}
	host := &quickstartHost{backups: map[string]*backupdelete.Backup{}}

	// backup-a and backup-b share one block; backup-b is large; backup-d's
	// upload failed (the host records it as Error).
	if err := store.WriteVolume(ctx, fsstore.Volume{Name: vol, Size: 1 << 30, DataEngine: "v1"}); err != nil {
		return err
	}
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if err := writeQuickstartBackup(ctx, store, host, ref("backup-a"), day, "shared", "a1", "a2"); err != nil {
		return err
	}
	if err := writeQuickstartBackup(ctx, store, host, ref("backup-d"), day.Add(24*time.Hour), "shared", "d1"); err != nil {
		return err
	}
	if err := writeQuickstartBackup(ctx, store, host, ref("backup-b"), day.Add(48*time.Hour), "shared", "b1", "b2", "b3", "b4", "b5", "b6"); err != nil {
		return err
	}
	host.backups["backup-d"].State = backupdelete.StateError
	before, err := store.BlockFiles(ctx, vol)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "backupstore in Longhorn's layout: %s/\n", fsstore.VolumePath(vol))
	v, err := store.ReadVolume(ctx, vol)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "volume %s: backup-a (3 blocks), backup-d (2 blocks, failed), backup-b (7 blocks); %d block files; LastBackupName %s\n", vol, before, v.LastBackupName)

	// Delete backup-b asynchronously, as a controller would.
	done := make(chan error, 1)
	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{Clock: clk, OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		return err
	}
	defer drv.Close()
	step := func(name string) (backupdelete.StepResult, error) {
		b := host.backups[name]
		res, err := drv.Reconcile(ctx, backupdelete.Request{Ref: b.Ref, State: b.State})
		if err != nil {
			return res, err
		}
		if res.Finalize {
			fmt.Fprintf(w, "  %s: %s -> finalized (gone from the backupstore, finalizer removed)\n", name, b.State)
			delete(host.backups, name)
			return res, nil
		}
		note := ""
		if res.StartCommand {
			note = " (delete command started in the background)"
		}
		fmt.Fprintf(w, "  %s: %s -> %s%s\n", name, b.State, res.State, note)
		b.State = res.State
		return res, nil
	}
	fmt.Fprintln(w, "delete backup-b asynchronously; backup-c is requested meanwhile:")
	if _, err := step("backup-b"); err != nil {
		return err
	}
	if g := backupdelete.CreationGate(ref("backup-c"), host.list()); g.Wait {
		fmt.Fprintf(w, "  backup-c: Pending, %q\n", g.Message)
	} else {
		return errors.New("backup-c was not held back")
	}
	if err := <-done; err != nil {
		return fmt.Errorf("delete command: %w", err)
	}
	fmt.Fprintln(w, "  backup-b: delete command returned")
	if res, err := step("backup-b"); err != nil || !res.Finalize {
		return fmt.Errorf("backup-b not finalized: %+v %v", res, err)
	}
	after, err := store.BlockFiles(ctx, vol)
	if err != nil {
		return err
	}
	v, err = store.ReadVolume(ctx, vol)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  block GC: %d block files before, %d after (backup-b's 6 own blocks removed, the shared one kept); volume.cfg BlockCount %d, LastBackupName %s\n",
		before, after, v.BlockCount, v.LastBackupName)
	if g := backupdelete.CreationGate(ref("backup-c"), host.list()); g.Wait {
		return errors.New("backup-c still held back")
	}
	if err := writeQuickstartBackup(ctx, store, host, ref("backup-c"), day.Add(72*time.Hour), "shared", "a1", "c1"); err != nil {
		return err
	}
	fmt.Fprintln(w, "  backup-c: gate open, InProgress -> Completed")

	// The failed backup becomes an orphan record of kind backup.
	fb, err := backupdelete.NewOrphans(host, store, backupdelete.OrphansOptions{NodeID: "node-1"})
	if err != nil {
		return err
	}
	snap, err := fb.Scan(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "failed backups: %d\n", len(snap.Items))
	for _, it := range snap.Items {
		rec, err := orphan.NewRecord(it, time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
		if err != nil {
			return err
		}
		verdict, err := fb.Judge(ctx, it)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  record %s kind %s\n", rec.Name, rec.Kind)
		keys := make([]string, 0, len(rec.Parameters))
		for k := range rec.Parameters {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "    %s=%s\n", k, rec.Parameters[k])
		}
		fmt.Fprintf(w, "  judged %s: %s\n", verdict.Outcome, verdict.Reason)
		if err := fb.Delete(ctx, rec); err != nil {
			return err
		}
		gone, err := store.BackupExists(ctx, ref(it.Param(orphan.ParamBackupName)))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  purged through the Backupstore by backupdelete.Orphans: %s still there = %v\n", it.Param(orphan.ParamBackupName), gone)
	}
	// The host still lists backup-d as Error (its record outlives the
	// data); the scan checks the backupstore, so no record comes back.
	snap, err = fb.Scan(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "scan after the purge, host still says Error: %d failed backups listed\n", len(snap.Items))
	for _, sk := range snap.Skipped {
		fmt.Fprintf(w, "  skipped %s: %s\n", sk.Name, sk.Reason)
	}
	names, err := store.Backups(ctx, vol)
	if err != nil {
		return err
	}
	final, err := store.BlockFiles(ctx, vol)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "left: %v, %d block files\n", names, final)
	return nil
}

// writeQuickstartBackup writes a completed backup as a creator does:
// under a backup lock, blocks first, then the cfg.
func writeQuickstartBackup(ctx context.Context, store *fsstore.Store, host *quickstartHost, ref backupdelete.BackupRef, at time.Time, blocks ...string) error {
	lock, err := store.Lock(ctx, ref.Volume, fsstore.LockBackup)
	if err != nil {
		return err
	}
	defer lock.Release()
	var maps []fsstore.BlockMapping
	for i, b := range blocks {
		sum := sha512.Sum512([]byte(b))
		ck := hex.EncodeToString(sum[:])[:64]
		if err := store.WriteBlock(ctx, ref.Volume, ck, []byte(b)); err != nil {
			return err
		}
		maps = append(maps, fsstore.BlockMapping{Offset: int64(i) << 21, BlockChecksum: ck})
	}
	ts := at.Format(time.RFC3339)
	if err := store.WriteBackup(ctx, fsstore.Backup{Name: ref.Name, VolumeName: ref.Volume, SnapshotName: "snap-" + ref.Name,
		SnapshotCreatedAt: ts, CreatedTime: ts, Size: int64(len(blocks)) << 21, Blocks: maps}); err != nil {
		return err
	}
	// A creator then points volume.cfg at its newest backup.
	v, err := store.ReadVolume(ctx, ref.Volume)
	if err != nil {
		return err
	}
	v.LastBackupName, v.LastBackupAt = ref.Name, ts
	if err := store.WriteVolume(ctx, v); err != nil {
		return err
	}
	host.backups[ref.Name] = &backupdelete.Backup{Ref: ref, State: backupdelete.StateCompleted}
	return nil
}

// quickstartHost is the host's backup records (Backup CRs in Longhorn).
type quickstartHost struct {
	backups map[string]*backupdelete.Backup
}

func (h *quickstartHost) list() []backupdelete.Backup {
	var out []backupdelete.Backup
	for _, b := range h.backups {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b backupdelete.Backup) int { return cmpString(a.Ref.Name, b.Ref.Name) })
	return out
}

func (h *quickstartHost) ListBackups(context.Context) ([]backupdelete.Backup, error) {
	return h.list(), nil
}

func (h *quickstartHost) GetBackup(_ context.Context, ref backupdelete.BackupRef) (backupdelete.Backup, error) {
	if b, ok := h.backups[ref.Name]; ok && b.Ref == ref {
		return *b, nil
	}
	return backupdelete.Backup{}, fmt.Errorf("%s: %w", ref, backupdelete.ErrNotFound)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stepWhileWaiting advances clk by the lock protocol's settle time whenever
// something waits on it, until the returned stop is called.
func stepWhileWaiting(clk *clocktesting.FakeClock) (stop func()) {
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if clk.HasWaiters() {
					clk.Step(fsstore.LockSettle)
				}
			}
		}
	}()
	return func() { close(quit); <-finished }
}
