package backupdelete_test

import (
	"crypto/sha512"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/storetest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Driver's scenarios on the filesystem store (package storetest runs
// the normal and crash ones on s3store too).

// quickClock is the real clock with waits divided by 1000, for the store's
// lock protocol (its 2 s settle takes 2 ms); the Driver's backoff runs on a
// separate fake clock the test steps.
type quickClock struct{ clock.RealClock }

func (quickClock) NewTimer(d time.Duration) clock.Timer { return clock.RealClock{}.NewTimer(d / 1000) }
func (quickClock) After(d time.Duration) <-chan time.Time {
	return clock.RealClock{}.After(d / 1000)
}

var ck = storetest.Checksum

// newHost returns a backup controller over a filesystem store at mount.
func newHost(t *testing.T, mount string) *storetest.Host {
	t.Helper()
	s, err := fsstore.New(fsstore.Options{Dir: mount, Clock: quickClock{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return storetest.NewHost(t, s)
}

func TestSeedScenarioNormal(t *testing.T) { storetest.DriverNormal(t, newHost(t, t.TempDir())) }

// makeUndeletable makes backup-b's cfg impossible to remove. Root ignores
// directory permissions, so a read-only directory does not work here; the
// seed's own technique, chattr +i, does on ext4/xfs/btrfs. Where chattr is
// unsupported, the test injects the same EPERM through the Backupstore
// interface instead and says so.
func makeUndeletable(t *testing.T, h *storetest.Host, mount string) (undo func()) {
	t.Helper()
	sum := sha512.Sum512([]byte("vol-a"))
	c := hex.EncodeToString(sum[:2])
	cfg := filepath.Join(mount, "backupstore", "volumes", c[0:2], c[2:4], "vol-a", "backups", "backup_backup-b.cfg")
	if out, err := exec.Command("chattr", "+i", cfg).CombinedOutput(); err == nil {
		t.Logf("made %s immutable with chattr +i", filepath.Base(cfg))
		undone := false
		undo = func() {
			if !undone {
				undone = true
				if out, err := exec.Command("chattr", "-i", cfg).CombinedOutput(); err != nil {
					t.Fatalf("chattr -i: %v %s", err, out)
				}
			}
		}
		t.Cleanup(undo)
		return undo
	} else {
		t.Logf("chattr +i unsupported here (%v %s); injecting EPERM through the Backupstore instead", err, strings.TrimSpace(string(out)))
	}
	perm := &os.PathError{Op: "remove", Path: "backups/backup_backup-b.cfg", Err: syscall.EPERM}
	for range 10 {
		h.Faulty.InjectDelete(backupstoretest.Fault{Err: perm})
	}
	return h.Faulty.Clear
}

func TestSeedScenarioError(t *testing.T) {
	mount := t.TempDir()
	h := newHost(t, mount)
	h.FillVolume()
	undo := makeUndeletable(t, h, mount)

	h.ReconcileDelete("backup-b")
	if err := h.WaitCommand(); err == nil {
		t.Fatal("deleting an immutable cfg succeeded")
	}
	h.ReconcileDelete("backup-b")
	if s := h.Backups["backup-b"]; s.State != backupdelete.StateError || !strings.Contains(h.Message["backup-b"], "operation not permitted") ||
		!strings.HasPrefix(h.Message["backup-b"], "Failed to delete the backup backup-b in the backupstore, err ") {
		t.Fatalf("backup-b %q %q", s.State, h.Message["backup-b"])
	}
	// backup-b in Error does not hold backup-c, which completes.
	if g := h.Gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v: an Error backup must not block", g)
	}
	h.Create("backup-c", epoch.Add(2*time.Hour), ck("shared"), ck("c1"))

	// backup-b cycles Deleting/Error with the backoff.
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		if res := h.ReconcileDelete("backup-b"); res.StartCommand {
			t.Fatal("retried within the backoff")
		}
		h.Clock.Step(wait)
		if res := h.ReconcileDelete("backup-b"); !res.StartCommand {
			t.Fatalf("%+v, want a retry after %v", res, wait)
		}
		h.WaitCommand()
		h.ReconcileDelete("backup-b")
		if h.Backups["backup-b"].State != backupdelete.StateError {
			t.Fatal("want Error again")
		}
	}
	undo()
	h.Clock.Step(40 * time.Second)
	h.ReconcileDelete("backup-b")
	if err := h.WaitCommand(); err != nil {
		t.Fatalf("once writable: %v", err)
	}
	if res := h.ReconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.Exists("backup-b") || !h.Exists("backup-c") || !h.Exists("backup-a") {
		t.Fatal("wrong backups left")
	}
	if n := h.BlockCount(); n != 3 {
		t.Fatalf("%d blocks, want shared, a1, c1 (backup-c's blocks kept)", n)
	}
	var cycle []string
	for _, l := range h.Log {
		if strings.HasPrefix(l, "backup-b") && !strings.HasSuffix(l, "finalized") {
			cycle = append(cycle, strings.SplitN(l, " ", 5)[3])
		}
	}
	if got := strings.Join(cycle, ","); got != "Deleting,Error,Deleting,Error,Deleting,Error,Deleting" {
		t.Fatalf("backup-b went %s", got)
	}
}

// TestSeedScenarioControllerCrash: the first controller's store runs on a
// clock that never advances, so its command hangs mid-protocol after
// writing its deletion lock file.
func TestSeedScenarioControllerCrash(t *testing.T) {
	mount := t.TempDir()
	h := newHost(t, mount)
	stuck, err := fsstore.New(fsstore.Options{Dir: mount, Clock: clocktesting.NewFakeClock(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	locks := filepath.Join(mount, fsstore.VolumePath("vol-a"), "locks")
	storetest.DriverControllerCrash(t, h, stuck, func() bool { e, _ := os.ReadDir(locks); return len(e) == 1 })
}
