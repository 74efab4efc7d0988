package fsstore

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	clocktesting "k8s.io/utils/clock/testing"
)

// A listing of backups/ that leaves out a backup that is there (an NFS
// client's stale directory cache): the deletion must delete nothing, not
// even the deleted backup's cfg, and say why.

// lieVolume: backup-3, volume.cfg's last, shares ckS with backup-2 (the
// backup deleted); backup-1 shares nothing with either.
func lieVolume(t *testing.T, last string) (string, *lhVolume) {
	mount := t.TempDir()
	v := newLonghornVolume(t, mount, "vol-a")
	v.volumeCfg(last, "2026-11-03T00:00:00Z", 4)
	v.backup("backup-1", "2026-11-01T00:00:00Z", ckA)
	v.backup("backup-2", "2026-11-02T00:00:00Z", ckS, ckB)
	v.backup("backup-3", "2026-11-03T00:00:00Z", ckS, ckC)
	for _, ck := range []string{ckA, ckS, ckB, ckC} {
		v.block(ck)
	}
	return mount, v
}

// omitting lists the backups as listBackupNames does, without the named
// ones.
func omitting(names ...string) func(vol *os.Root) ([]string, error) {
	return func(vol *os.Root) ([]string, error) {
		all, err := listBackupNames(vol)
		return slices.DeleteFunc(all, func(n string) bool { return slices.Contains(names, n) }), err
	}
}

var ref2 = backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"}

// TestListingOmitsLastBackup: the listing leaves out backup-3 (volume.cfg's
// LastBackupName), whose cfg is there. Longhorn's deletion of backup-2
// would unlink ckS, which backup-3 references. Ours deletes nothing and
// returns ErrListingInconsistent, in a targeted and in a full collection,
// through DeleteBackup and DeleteCompletedBackup; once the listing is
// honest the same deletion goes through.
func TestListingOmitsLastBackup(t *testing.T) {
	for _, full := range []bool{false, true} {
		for _, completed := range []bool{false, true} {
			t.Run(map[bool]string{false: "targeted", true: "full"}[full]+map[bool]string{false: "", true: " completed"}[completed], func(t *testing.T) {
				mount, v := lieVolume(t, "backup-3")
				s := openFast(t, mount, Options{FullCollection: full})
				if !full {
					// A first deletion elsewhere in the volume makes this
					// Store's next one targeted.
					v.backup("backup-0", "2026-10-31T00:00:00Z", ckA)
					must(t, s.DeleteBackup(context.Background(), backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0"}))
				}
				listBackupsWith(t, s, omitting("backup-3"))
				del := s.DeleteBackup
				if completed {
					del = s.DeleteCompletedBackup
				}
				err := del(context.Background(), ref2)
				if !errors.Is(err, backupdelete.ErrListingInconsistent) || !strings.Contains(err.Error(), "backup-3") {
					t.Fatalf("%v, want ErrListingInconsistent naming backup-3", err)
				}
				if !v.exists("backups/backup_backup-2.cfg") {
					t.Error("backup-2's cfg was removed: a refused deletion must leave it for the retry")
				}
				for _, ck := range []string{ckA, ckS, ckB, ckC} {
					if !v.blockExists(ck) {
						t.Errorf("block %s… was unlinked", ck[:8])
					}
				}

				listBackupsWith(t, s, listBackupNames)
				c, err := s.DeleteBackupReport(context.Background(), ref2)
				must(t, err)
				if v.blockExists(ckB) || !v.blockExists(ckS) || !v.blockExists(ckC) || !v.blockExists(ckA) || c.Skipped != "" {
					t.Fatalf("honest retry: %+v; want only ckB gone", c)
				}
			})
		}
	}
}

// TestListingLegitimateStates: what the check lets through. A
// LastBackupName whose cfg is gone (a deletion that died before it
// rewrote volume.cfg), an empty one, the deleted backup as the last one.
func TestListingLegitimateStates(t *testing.T) {
	cases := []struct {
		name   string
		last   string
		victim string
		setup  func(t *testing.T, v *lhVolume)
	}{
		{"last backup's cfg gone", "backup-3", "backup-2", func(t *testing.T, v *lhVolume) {
			must(t, os.Remove(v.dir+"/backups/backup_backup-3.cfg"))
		}},
		{"no last backup", "", "backup-2", nil},
		{"last backup deleted", "backup-3", "backup-3", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mount, v := lieVolume(t, tc.last)
			s := openFast(t, mount, Options{})
			if tc.setup != nil {
				tc.setup(t, v)
			}
			c, err := s.DeleteBackupReport(context.Background(), backupdelete.BackupRef{Volume: "vol-a", Name: tc.victim})
			if err != nil || c.Skipped != "" || c.Removed == 0 {
				t.Fatalf("%+v, %v: a legitimate state was refused", c, err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDriverRetriesOmittingListing: through the Driver, a deletion that
// met a listing leaving out volume.cfg's last backup keeps the backup in
// Error with the reason and the backup's cfg in place, is retried after
// the backoff (refused again while the listing lies), and finishes once
// the listing is honest; backup-3's blocks survive throughout.
func TestDriverRetriesOmittingListing(t *testing.T) {
	mount, v := lieVolume(t, "backup-3")
	s := openFast(t, mount, Options{})
	lie := atomic.Bool{}
	lie.Store(true)
	listBackupsWith(t, s, func(vol *os.Root) ([]string, error) {
		if lie.Load() {
			return omitting("backup-3")(vol)
		}
		return listBackupNames(vol)
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	done := make(chan error, 4)
	drv, err := backupdelete.NewDriver(s, backupdelete.DriverOptions{Clock: clk,
		OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	state, msg := backupdelete.StateCompleted, ""
	reconcile := func() backupdelete.StepResult {
		t.Helper()
		res, err := drv.Reconcile(context.Background(), backupdelete.Request{Ref: ref2, State: state, Message: msg})
		must(t, err)
		state, msg = res.State, res.Message
		return res
	}
	wait := func() error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the delete command did not return")
			return nil
		}
	}
	intact := func() {
		t.Helper()
		if !v.exists("backups/backup_backup-2.cfg") {
			t.Fatal("backup-2's cfg is gone after a refused deletion")
		}
		for _, ck := range []string{ckA, ckS, ckB, ckC} {
			if !v.blockExists(ck) {
				t.Fatalf("block %s… was unlinked", ck[:8])
			}
		}
	}

	for attempt := range 2 {
		if res := reconcile(); !res.StartCommand {
			t.Fatalf("attempt %d: %+v, want the command started", attempt, res)
		}
		if err := wait(); !errors.Is(err, backupdelete.ErrListingInconsistent) {
			t.Fatalf("attempt %d: %v, want ErrListingInconsistent", attempt, err)
		}
		if res := reconcile(); res.State != backupdelete.StateError || !strings.Contains(res.Message, "missing from the listing") || res.Finalize {
			t.Fatalf("attempt %d: %+v, want Error with the listing's reason", attempt, res)
		}
		intact()
		if res := reconcile(); res.StartCommand {
			t.Fatalf("attempt %d: retried within the backoff", attempt)
		}
		clk.Step(time.Minute)
	}

	lie.Store(false)
	if res := reconcile(); !res.StartCommand {
		t.Fatalf("%+v, want a retry after the backoff", res)
	}
	must(t, wait())
	if res := reconcile(); !res.Finalize {
		t.Fatalf("%+v, want the deletion finalized", res)
	}
	if v.exists("backups/backup_backup-2.cfg") || v.blockExists(ckB) || !v.blockExists(ckS) || !v.blockExists(ckC) || !v.blockExists(ckA) {
		t.Fatal("after the honest retry: want backup-2 and only ckB gone")
	}
}

// TestInvalidLastBackupNameIsCorrupt: a LastBackupName that no listing
// can hold and no lookup can find (a path, a space) cannot be checked, so
// the deletion stops as corrupt before it removes anything.
func TestInvalidLastBackupNameIsCorrupt(t *testing.T) {
	for _, last := range []string{"../backup-3", "backup 3"} {
		mount, v := lieVolume(t, last)
		s := openFast(t, mount, Options{})
		if err := s.DeleteBackup(context.Background(), ref2); !errors.Is(err, backupdelete.ErrCorrupt) {
			t.Fatalf("LastBackupName %q: %v, want ErrCorrupt", last, err)
		}
		if !v.exists("backups/backup_backup-2.cfg") || !v.blockExists(ckS) || !v.blockExists(ckB) {
			t.Fatalf("LastBackupName %q: the refused deletion removed something", last)
		}
	}
}
