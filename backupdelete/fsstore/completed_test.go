package fsstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

// TestDeleteCompletedBackupRefuses: under the deletion lock, a backup cfg
// with an empty CreatedTime (Longhorn's mark of a backup in progress)
// while a backup lock of the volume is live, or a cfg that cannot be
// read, stops the deletion before anything is removed, and the lock is
// released.
func TestDeleteCompletedBackupRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(v *lhVolume)
		want  error
	}{
		{"in progress", func(v *lhVolume) {
			v.inProgressBackup("backup-1", ckA, ckS)
			// A backup taker that wrote its lock after ours: it ranks
			// after us, so it does not block the deletion lock, but it
			// is live.
			v.lock("lock-00000000000000b1", 1, false, time.Now().Add(30*time.Second))
		}, backupdelete.ErrInProgress},
		{"corrupt", func(v *lhVolume) {
			v.write("backups/backup_backup-1.cfg", `{"Name":"backup-1","VolumeName":"vol-a","Blocks":[{"Offset":0,"BlockChecksum":"../../x"}]}`)
		}, backupdelete.ErrCorrupt},
		{"truncated", func(v *lhVolume) { v.write("backups/backup_backup-1.cfg", `{"Name":"backup-1","Vol`) }, backupdelete.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, v, clk := lockFixture(t, Options{})
			c.setup(v)
			before := v.read("volume.cfg")
			err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), ref1) })
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			if !v.exists("backups/backup_backup-1.cfg") || !v.blockExists(ckA) || v.read("volume.cfg") != before {
				t.Fatal("something was removed or rewritten")
			}
			if ours := ourLocks(v, "lock-00000000000000b1.lck"); len(ours) != 0 {
				t.Fatalf("lock files left: %v", ours)
			}
		})
	}
	t.Run("completed", func(t *testing.T) {
		s, v, clk := lockFixture(t, Options{})
		if err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), ref1) }); err != nil {
			t.Fatal(err)
		}
		if v.exists("backups/backup_backup-1.cfg") || v.blockExists(ckA) {
			t.Fatal("not deleted")
		}
	})
}

// ourLocks lists the lock files in the volume other than the given
// foreign ones.
func ourLocks(v *lhVolume, foreign ...string) []string {
	entries, _ := os.ReadDir(filepath.Join(v.dir, "locks"))
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lck") && !contains(foreign, e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deadBackup is a volume (threeBackups) with a backup whose creation died
// mid-upload: its cfg is the one Longhorn's performBackup writes before
// uploading (an empty CreatedTime, no blocks), and it had uploaded ckD
// (only its own) and ckS (shared) when it died.
func deadBackup(t *testing.T, v *lhVolume) backupdelete.BackupRef {
	t.Helper()
	v.write("backups/backup_backup-4.cfg", longhornBackupCfg("backup-4", "vol-a", "", "", nil))
	v.block(ckD)
	return backupdelete.BackupRef{Volume: "vol-a", Name: "backup-4"}
}

var ckD = checksum("d") // uploaded by the dead backup-4 only

// TestDeleteCompletedBackupAbandoned: a backup cfg with an empty
// CreatedTime and no live backup lock of its volume is a backup whose
// writer died: DeleteCompletedBackup removes it and collects the blocks
// no other backup references (found by listing every block file, since
// its cfg lists none), whatever the deletion's collection mode. A live
// backup lock (acquired, or a newer taker's) holds it back with the
// reason; an expired one, judged on the store's clock, does not.
func TestDeleteCompletedBackupAbandoned(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name string
		// lock, if set, writes a lock file in the volume.
		lock func(v *lhVolume)
		// clockAhead moves the store's clock forward from the real time.
		clockAhead time.Duration
		// other adds another dead backup in progress.
		other   bool
		want    error
		purged  bool
		ckDGone bool
	}{
		{name: "no lock", purged: true, ckDGone: true},
		{name: "expired acquired backup lock", lock: func(v *lhVolume) {
			v.lock("lock-00000000000000b1", 1, true, now.Add(-LockExpiry-2*time.Second))
		}, purged: true, ckDGone: true},
		{name: "backup lock expired by the store's clock", lock: func(v *lhVolume) {
			v.lock("lock-00000000000000b1", 1, true, now)
		}, clockAhead: LockExpiry + time.Second, purged: true, ckDGone: true},
		{name: "another deletion's lock", lock: func(v *lhVolume) {
			v.lock("lock-00000000000000d1", 2, true, now)
		}, purged: true, ckDGone: true},
		{name: "another dead backup in progress holds the blocks back", other: true, purged: true},
		{name: "live acquired backup lock", lock: func(v *lhVolume) {
			v.lock("lock-00000000000000b1", 1, true, now)
		}, want: backupdelete.ErrLocked},
		{name: "live backup lock newer than ours", lock: func(v *lhVolume) {
			v.lock("lock-00000000000000b1", 1, false, now.Add(30*time.Second))
		}, want: backupdelete.ErrInProgress},
		{name: "unreadable fresh lock file", lock: func(v *lhVolume) {
			v.write("locks/lock-00000000000000b1.lck", `{"Name":"lock-00000000000000b1","Ty`)
			if err := os.Chtimes(filepath.Join(v.dir, "locks/lock-00000000000000b1.lck"), now.Add(30*time.Second), now.Add(30*time.Second)); err != nil {
				t.Fatal(err)
			}
		}, want: backupdelete.ErrInProgress},
	} {
		for _, full := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/full=%v", c.name, full), func(t *testing.T) {
				s, v, clk := lockFixture(t, Options{FullCollection: full})
				clk.SetTime(now.Add(c.clockAhead))
				if !full {
					// A first deletion makes the next one targeted.
					if err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), ref1) }); err != nil {
						t.Fatal(err)
					}
				}
				dead := deadBackup(t, v)
				if c.other {
					v.write("backups/backup_backup-5.cfg", longhornBackupCfg("backup-5", "vol-a", "", "", nil))
				}
				if c.lock != nil {
					c.lock(v)
				}
				err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), dead) })
				if c.want != nil {
					if !errors.Is(err, c.want) {
						t.Fatalf("%v, want %v", err, c.want)
					}
					if !strings.Contains(err.Error(), "lock-00000000000000b1") {
						t.Errorf("the error does not name the live lock: %v", err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				if got := !v.exists("backups/backup_backup-4.cfg"); got != c.purged {
					t.Fatalf("cfg removed = %v, want %v", got, c.purged)
				}
				if got := !v.blockExists(ckD); got != c.ckDGone {
					t.Fatalf("its own block removed = %v, want %v", got, c.ckDGone)
				}
				for _, ck := range []string{ckS, ckB, ckC} {
					if !v.blockExists(ck) {
						t.Fatalf("block %s referenced by another backup was removed", ck[:8])
					}
				}
				if c.other && !v.exists("backups/backup_backup-5.cfg") {
					t.Fatal("the other backup in progress was removed")
				}
				if ours := ourLocks(v, "lock-00000000000000b1.lck", "lock-00000000000000d1.lck"); len(ours) != 0 {
					t.Fatalf("lock files left: %v", ours)
				}
			})
		}
	}
}

// TestLockExpiryBoundary: Longhorn's FileLock.isExpired is strict: a lock
// exactly LockExpiry old is live.
func TestLockExpiryBoundary(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{
		{LockExpiry - time.Nanosecond, false},
		{LockExpiry, false},
		{LockExpiry + time.Nanosecond, true},
		{-time.Minute, false}, // a file time ahead of our clock
	} {
		if got := lhformat.Expired(now, now.Add(-c.age)); got != c.want {
			t.Errorf("age %v: expired %v, want %v", c.age, got, c.want)
		}
	}
}
