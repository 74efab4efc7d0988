package backupdelete_test

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
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
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Seed 002's three test-plan scenarios, on the real filesystem store.

// quickClock is the real clock with waits divided by 1000, for the store's
// lock protocol (its 2 s settle takes 2 ms); the Driver's backoff runs on a
// separate fake clock the test steps.
type quickClock struct{ clock.RealClock }

func (quickClock) NewTimer(d time.Duration) clock.Timer { return clock.RealClock{}.NewTimer(d / 1000) }
func (quickClock) After(d time.Duration) <-chan time.Time {
	return clock.RealClock{}.After(d / 1000)
}

func ck(seed string) string {
	s := sha512.Sum512([]byte(seed))
	return hex.EncodeToString(s[:])[:64]
}

// host plays the backup controller: it keeps each backup's state and
// message, applies the Driver's results, and gates creations.
type host struct {
	t       *testing.T
	store   *fsstore.Store
	faulty  *backupstoretest.Faulty
	clk     *clocktesting.FakeClock
	drv     *backupdelete.Driver
	done    chan error
	backups map[string]*backupdelete.Backup
	message map[string]string
	log     []string
}

func newHost(t *testing.T, mount string) *host {
	t.Helper()
	s, err := fsstore.New(fsstore.Options{Dir: mount, Clock: quickClock{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h := &host{t: t, store: s, clk: clocktesting.NewFakeClock(epoch), done: make(chan error, 16),
		backups: map[string]*backupdelete.Backup{}, message: map[string]string{}}
	h.faulty = &backupstoretest.Faulty{Store: s}
	h.drv, err = backupdelete.NewDriver(h.faulty, backupdelete.DriverOptions{Clock: h.clk,
		OnDone: func(_ backupdelete.BackupRef, err error) { h.done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.drv.Close)
	return h
}

func (h *host) ref(name string) backupdelete.BackupRef {
	return backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: name}
}

// create writes a completed backup the way a creator does: under a backup
// lock, blocks first, then the cfg.
func (h *host) create(name string, at time.Time, blocks ...string) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.store.ReadVolume(ctx, "vol-a"); err != nil {
		if err := h.store.WriteVolume(ctx, fsstore.Volume{Name: "vol-a", Size: 1 << 30}); err != nil {
			h.t.Fatal(err)
		}
	}
	lock, err := h.store.Lock(ctx, "vol-a", fsstore.LockBackup)
	if err != nil {
		h.t.Fatalf("creating %s: %v", name, err)
	}
	defer lock.Release()
	var maps []fsstore.BlockMapping
	for i, b := range blocks {
		if err := h.store.WriteBlock(ctx, "vol-a", b, []byte(b)); err != nil {
			h.t.Fatal(err)
		}
		maps = append(maps, fsstore.BlockMapping{Offset: int64(i) << 21, BlockChecksum: b})
	}
	ts := at.Format(time.RFC3339)
	if err := h.store.WriteBackup(ctx, fsstore.Backup{Name: name, VolumeName: "vol-a", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}); err != nil {
		h.t.Fatal(err)
	}
	h.backups[name] = &backupdelete.Backup{Ref: h.ref(name), State: backupdelete.StateCompleted}
}

func (h *host) set(name string, s backupdelete.State, msg string) {
	b := h.backups[name]
	if b.State != s || h.message[name] != msg {
		h.log = append(h.log, fmt.Sprintf("%s %s -> %s %s", name, b.State, s, msg))
	}
	b.State, h.message[name] = s, msg
}

// reconcileDelete runs one deletion reconcile and applies it.
func (h *host) reconcileDelete(name string) backupdelete.StepResult {
	h.t.Helper()
	b := h.backups[name]
	res, err := h.drv.Reconcile(context.Background(), backupdelete.Request{Ref: b.Ref, State: b.State, Message: h.message[name]})
	if err != nil {
		h.t.Fatal(err)
	}
	if res.Finalize {
		h.log = append(h.log, name+" finalized")
		delete(h.backups, name)
		return res
	}
	h.set(name, res.State, res.Message)
	return res
}

// gate asks whether a new backup may start now.
func (h *host) gate(name string) backupdelete.GateResult {
	var others []backupdelete.Backup
	for _, b := range h.backups {
		others = append(others, *b)
	}
	return backupdelete.CreationGate(h.ref(name), others)
}

func (h *host) waitCommand() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(20 * time.Second):
		h.t.Fatal("the delete command did not return")
		return nil
	}
}

func (h *host) exists(name string) bool {
	ok, err := h.store.BackupExists(context.Background(), h.ref(name))
	if err != nil {
		h.t.Fatal(err)
	}
	return ok
}

func (h *host) blockCount() int {
	n, err := h.store.BlockFiles(context.Background(), "vol-a")
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// seedVolume: backup-a small, backup-b large (many blocks of its own),
// sharing one block.
func seedVolume(h *host) {
	h.create("backup-a", epoch, ck("shared"), ck("a1"))
	big := []string{ck("shared")}
	for i := range 40 {
		big = append(big, ck(fmt.Sprint("b", i)))
	}
	h.create("backup-b", epoch.Add(time.Hour), big...)
}

func TestSeedScenarioNormal(t *testing.T) {
	h := newHost(t, t.TempDir())
	seedVolume(h)
	if n := h.blockCount(); n != 42 {
		t.Fatalf("%d blocks", n)
	}
	// Hold the command so that backup-b is observably Deleting while
	// backup-c is requested.
	hold := make(chan struct{})
	h.faulty.InjectDelete(backupstoretest.Fault{Wait: hold})
	h.reconcileDelete("backup-b")
	g := h.gate("backup-c")
	if !g.Wait || g.Message != "Wait for backup backup-b to be deleted" {
		t.Fatalf("gate %+v, want backup-c Pending behind backup-b", g)
	}
	if res := h.reconcileDelete("backup-b"); res.StartCommand || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v: Deleting must not start a second command", res)
	}
	close(hold)
	if err := h.waitCommand(); err != nil {
		t.Fatal(err)
	}
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if g := h.gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v after backup-b is gone", g)
	}
	h.create("backup-c", epoch.Add(2*time.Hour), ck("shared"), ck("c1"))
	if h.exists("backup-b") || !h.exists("backup-a") || !h.exists("backup-c") {
		t.Fatal("wrong backups left")
	}
	if n := h.blockCount(); n != 3 {
		t.Fatalf("%d blocks left, want shared, a1, c1", n)
	}
	want := []string{"backup-b Completed -> Deleting ", "backup-b finalized"}
	if strings.Join(h.log, "|") != strings.Join(want, "|") {
		t.Fatalf("transitions %q, want %q", h.log, want)
	}
}

// makeUndeletable makes backup-b's cfg impossible to remove. Root ignores
// directory permissions, so a read-only directory does not work here; the
// seed's own technique, chattr +i, does on ext4/xfs/btrfs. Where chattr is
// unsupported, the test injects the same EPERM through the Backupstore
// interface instead and says so.
func makeUndeletable(t *testing.T, h *host, mount string) (undo func()) {
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
		h.faulty.InjectDelete(backupstoretest.Fault{Err: perm})
	}
	return h.faulty.Clear
}

func TestSeedScenarioError(t *testing.T) {
	mount := t.TempDir()
	h := newHost(t, mount)
	seedVolume(h)
	undo := makeUndeletable(t, h, mount)

	h.reconcileDelete("backup-b")
	if err := h.waitCommand(); err == nil {
		t.Fatal("deleting an immutable cfg succeeded")
	}
	h.reconcileDelete("backup-b")
	if s := h.backups["backup-b"]; s.State != backupdelete.StateError || !strings.Contains(h.message["backup-b"], "operation not permitted") ||
		!strings.HasPrefix(h.message["backup-b"], "Failed to delete the backup backup-b in the backupstore, err ") {
		t.Fatalf("backup-b %q %q", s.State, h.message["backup-b"])
	}
	// backup-b in Error does not hold backup-c, which completes.
	if g := h.gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v: an Error backup must not block", g)
	}
	h.create("backup-c", epoch.Add(2*time.Hour), ck("shared"), ck("c1"))

	// backup-b cycles Deleting/Error with the backoff.
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		if res := h.reconcileDelete("backup-b"); res.StartCommand {
			t.Fatal("retried within the backoff")
		}
		h.clk.Step(wait)
		if res := h.reconcileDelete("backup-b"); !res.StartCommand {
			t.Fatalf("%+v, want a retry after %v", res, wait)
		}
		h.waitCommand()
		h.reconcileDelete("backup-b")
		if h.backups["backup-b"].State != backupdelete.StateError {
			t.Fatal("want Error again")
		}
	}
	undo()
	h.clk.Step(40 * time.Second)
	h.reconcileDelete("backup-b")
	if err := h.waitCommand(); err != nil {
		t.Fatalf("once writable: %v", err)
	}
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.exists("backup-b") || !h.exists("backup-c") || !h.exists("backup-a") {
		t.Fatal("wrong backups left")
	}
	if n := h.blockCount(); n != 3 {
		t.Fatalf("%d blocks, want shared, a1, c1 (backup-c's blocks kept)", n)
	}
	var cycle []string
	for _, l := range h.log {
		if strings.HasPrefix(l, "backup-b") && !strings.HasSuffix(l, "finalized") {
			cycle = append(cycle, strings.SplitN(l, " ", 5)[3])
		}
	}
	if got := strings.Join(cycle, ","); got != "Deleting,Error,Deleting,Error,Deleting,Error,Deleting" {
		t.Fatalf("backup-b went %s", got)
	}
}

// TestSeedScenarioControllerCrash: the first controller's command is stuck
// inside the store's lock protocol (its lock file on disk) when the
// controller dies without cleaning up; a new controller with a new Driver
// and a new Store recovers by the seed's rule.
func TestSeedScenarioControllerCrash(t *testing.T) {
	mount := t.TempDir()
	h := newHost(t, mount)
	seedVolume(h)

	// Controller 1: its store runs on a clock that never advances, so its
	// command hangs mid-protocol, after writing its deletion lock file.
	stuck, err := fsstore.New(fsstore.Options{Dir: mount, Clock: clocktesting.NewFakeClock(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	crashed, err := backupdelete.NewDriver(stuck, backupdelete.DriverOptions{Clock: h.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close() // at test end only: the crash itself cleans nothing up
	res, err := crashed.Reconcile(context.Background(), backupdelete.Request{Ref: h.ref("backup-b"), State: backupdelete.StateCompleted})
	if err != nil || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v %v", res, err)
	}
	h.set("backup-b", res.State, res.Message)
	locks := filepath.Join(mount, fsstore.VolumePath("vol-a"), "locks")
	waitFor(t, func() bool { e, _ := os.ReadDir(locks); return len(e) == 1 })

	// Controller 2 (h.drv) has no record: Error with the seed's message.
	h.reconcileDelete("backup-b")
	if h.backups["backup-b"].State != backupdelete.StateError || h.message["backup-b"] != backupdelete.MessageNoDeletionRecord {
		t.Fatalf("%q %q", h.backups["backup-b"].State, h.message["backup-b"])
	}
	// Then Deleting again; the dead deletion lock is compatible with ours.
	if res := h.reconcileDelete("backup-b"); !res.StartCommand {
		t.Fatalf("%+v, want the command retried", res)
	}
	if err := h.waitCommand(); err != nil {
		t.Fatal(err)
	}
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.exists("backup-b") || !h.exists("backup-a") || h.blockCount() != 2 {
		t.Fatalf("after recovery: backup-b exists %v, %d blocks", h.exists("backup-b"), h.blockCount())
	}
	want := "backup-b Completed -> Deleting |backup-b Deleting -> Error " + backupdelete.MessageNoDeletionRecord + "|backup-b Error -> Deleting |backup-b finalized"
	if got := strings.Join(h.log, "|"); got != want {
		t.Fatalf("transitions\n%s\nwant\n%s", got, want)
	}
}
