package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	clocktesting "k8s.io/utils/clock/testing"
)

// Epoch is the time the Driver's fake clock starts at, and the first
// backup's creation time in FillVolume.
var Epoch = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// Host plays Longhorn's backup controller over a Store, for the Driver's
// scenarios (asynchronous backup deletion, longhorn/longhorn#8746): it
// keeps each backup's state and message, applies the Driver's results,
// logs the transitions and gates creations. All its backups are in
// volume vol-a of target "default".
type Host struct {
	T      *testing.T
	Store  Store                   // the store under test
	Faulty *backupstoretest.Faulty // Store, as the Driver sees it
	Clock  *clocktesting.FakeClock // the Driver's (its backoff)
	Driver *backupdelete.Driver

	// Backups are the backup records by name, and Message their
	// messages: the controller's view, which the Driver's results change.
	Backups map[string]*backupdelete.Backup
	Message map[string]string
	// Log holds "name old -> new message" for each change, and
	// "name finalized".
	Log []string
	// CountBlocks, when set, counts vol-a's blocks in place of the
	// Store's BlockFiles: a witness that reads the backend directly.
	CountBlocks func() int

	done chan error
}

// NewHost returns a Host whose Driver runs over s through a Faulty with
// no fault queued, on a fake clock at Epoch. The Driver closes when the
// test ends.
func NewHost(t *testing.T, s Store) *Host {
	t.Helper()
	h := &Host{T: t, Store: s, Faulty: &backupstoretest.Faulty{Store: s}, Clock: clocktesting.NewFakeClock(Epoch),
		Backups: map[string]*backupdelete.Backup{}, Message: map[string]string{}, done: make(chan error, 16)}
	var err error
	h.Driver, err = backupdelete.NewDriver(h.Faulty, backupdelete.DriverOptions{Clock: h.Clock,
		OnDone: func(_ backupdelete.BackupRef, err error) { h.done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Driver.Close)
	return h
}

// Ref returns the ref of backup name.
func (h *Host) Ref(name string) backupdelete.BackupRef {
	return backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: name}
}

// Create writes a completed backup as a creator does (under a backup
// lock, blocks first, then the cfg) and records it Completed.
func (h *Host) Create(name string, at time.Time, blocks ...string) {
	h.T.Helper()
	ctx := context.Background()
	if _, err := h.Store.ReadVolume(ctx, "vol-a"); err != nil {
		h.must(h.Store.WriteVolume(ctx, lhformat.Volume{Name: "vol-a", Size: 1 << 30}))
	}
	lock, err := h.Store.Lock(ctx, "vol-a", lhformat.LockBackup)
	if err != nil {
		h.T.Fatalf("creating %s: %v", name, err)
	}
	defer lock.Release()
	var maps []lhformat.BlockMapping
	for i, b := range blocks {
		h.must(h.Store.WriteBlock(ctx, "vol-a", b, []byte(b)))
		maps = append(maps, lhformat.BlockMapping{Offset: int64(i) << 21, BlockChecksum: b})
	}
	ts := at.Format(time.RFC3339)
	h.must(h.Store.WriteBackup(ctx, lhformat.Backup{Name: name, VolumeName: "vol-a", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}))
	h.Backups[name] = &backupdelete.Backup{Ref: h.Ref(name), State: backupdelete.StateCompleted}
}

// Set gives backup name state s and message msg, logging a change.
func (h *Host) Set(name string, s backupdelete.State, msg string) {
	b := h.Backups[name]
	if b.State != s || h.Message[name] != msg {
		h.Log = append(h.Log, fmt.Sprintf("%s %s -> %s %s", name, b.State, s, msg))
	}
	b.State, h.Message[name] = s, msg
}

// ReconcileDelete runs one deletion reconcile of backup name and applies
// its result.
func (h *Host) ReconcileDelete(name string) backupdelete.StepResult {
	h.T.Helper()
	b := h.Backups[name]
	res, err := h.Driver.Reconcile(context.Background(), backupdelete.Request{Ref: b.Ref, State: b.State, Message: h.Message[name]})
	h.must(err)
	if res.Finalize {
		h.Log = append(h.Log, name+" finalized")
		delete(h.Backups, name)
		return res
	}
	h.Set(name, res.State, res.Message)
	return res
}

// Gate asks whether backup name may start now.
func (h *Host) Gate(name string) backupdelete.GateResult {
	var others []backupdelete.Backup
	for _, b := range h.Backups {
		others = append(others, *b)
	}
	return backupdelete.CreationGate(h.Ref(name), others)
}

// WaitCommand waits for the Driver's next delete command to return, and
// returns its error.
func (h *Host) WaitCommand() error {
	h.T.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(30 * time.Second):
		h.T.Fatal("the delete command did not return")
		return nil
	}
}

// Exists reports whether backup name's cfg is in the store.
func (h *Host) Exists(name string) bool {
	h.T.Helper()
	ok, err := h.Store.BackupExists(context.Background(), h.Ref(name))
	h.must(err)
	return ok
}

// BlockCount counts vol-a's blocks, with CountBlocks if set.
func (h *Host) BlockCount() int {
	h.T.Helper()
	if h.CountBlocks != nil {
		return h.CountBlocks()
	}
	n, err := h.Store.BlockFiles(context.Background(), "vol-a")
	h.must(err)
	return n
}

// FillVolume creates backup-a (small) and backup-b (41 blocks), sharing
// one block: 42 blocks in all.
func (h *Host) FillVolume() {
	h.T.Helper()
	h.Create("backup-a", Epoch, Checksum("shared"), Checksum("a1"))
	big := []string{Checksum("shared")}
	for i := range 40 {
		big = append(big, Checksum(fmt.Sprint("b", i)))
	}
	h.Create("backup-b", Epoch.Add(time.Hour), big...)
}

func (h *Host) must(err error) {
	h.T.Helper()
	if err != nil {
		h.T.Fatal(err)
	}
}

// DriverNormal is the normal scenario: backup-b's deletion, held while
// Deleting, gates backup-c's creation and starts no second command; once
// it is done, backup-b finalizes, backup-c may start, and only the blocks
// backup-b alone referenced are gone.
func DriverNormal(t *testing.T, h *Host) {
	h.FillVolume()
	if n := h.BlockCount(); n != 42 {
		t.Fatalf("%d blocks", n)
	}
	// Hold the command so that backup-b is observably Deleting while
	// backup-c is requested.
	hold := make(chan struct{})
	h.Faulty.InjectDelete(backupstoretest.Fault{Wait: hold})
	h.ReconcileDelete("backup-b")
	if g := h.Gate("backup-c"); !g.Wait || g.Message != "Wait for backup backup-b to be deleted" {
		t.Fatalf("gate %+v, want backup-c Pending behind backup-b", g)
	}
	if res := h.ReconcileDelete("backup-b"); res.StartCommand || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v: Deleting must not start a second command", res)
	}
	close(hold)
	if err := h.WaitCommand(); err != nil {
		t.Fatal(err)
	}
	if res := h.ReconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if g := h.Gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v after backup-b is gone", g)
	}
	h.Create("backup-c", Epoch.Add(2*time.Hour), Checksum("shared"), Checksum("c1"))
	if h.Exists("backup-b") || !h.Exists("backup-a") || !h.Exists("backup-c") {
		t.Fatal("wrong backups left")
	}
	if n := h.BlockCount(); n != 3 {
		t.Fatalf("%d blocks left, want shared, a1, c1", n)
	}
	want := []string{"backup-b Completed -> Deleting ", "backup-b finalized"}
	if strings.Join(h.Log, "|") != strings.Join(want, "|") {
		t.Fatalf("transitions %q, want %q", h.Log, want)
	}
}

// DriverControllerCrash is the crash scenario: the first controller's
// command is stuck inside the lock protocol (its deletion lock written)
// when the controller dies without cleaning up. stuck is a second Store
// over the same backupstore whose lock protocol never finishes (its clock
// never advances); lockWritten reports whether its deletion lock is there.
// h's Driver, with no record of the command, recovers by Longhorn's rule
// (no in-progress record: Error, then retried), and the dead deletion
// lock, compatible with ours, does not hold the retry back.
func DriverControllerCrash(t *testing.T, h *Host, stuck backupdelete.Backupstore, lockWritten func() bool) {
	h.FillVolume()
	crashed, err := backupdelete.NewDriver(stuck, backupdelete.DriverOptions{Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close() // at test end only: the crash itself cleans nothing up
	res, err := crashed.Reconcile(context.Background(), backupdelete.Request{Ref: h.Ref("backup-b"), State: backupdelete.StateCompleted})
	if err != nil || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v %v", res, err)
	}
	h.Set("backup-b", res.State, res.Message)
	deadline := time.Now().Add(20 * time.Second)
	for !lockWritten() {
		if time.Now().After(deadline) {
			t.Fatal("the stuck deletion wrote no lock")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// h's Driver has no record: Error with Longhorn's message.
	h.ReconcileDelete("backup-b")
	if h.Backups["backup-b"].State != backupdelete.StateError || h.Message["backup-b"] != backupdelete.MessageNoDeletionRecord {
		t.Fatalf("%q %q", h.Backups["backup-b"].State, h.Message["backup-b"])
	}
	// Then Deleting again; the dead deletion lock is compatible with ours.
	if res := h.ReconcileDelete("backup-b"); !res.StartCommand {
		t.Fatalf("%+v, want the command retried", res)
	}
	if err := h.WaitCommand(); err != nil {
		t.Fatal(err)
	}
	if res := h.ReconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.Exists("backup-b") || !h.Exists("backup-a") || h.BlockCount() != 2 {
		t.Fatalf("after recovery: backup-b exists %v, %d blocks", h.Exists("backup-b"), h.BlockCount())
	}
	want := "backup-b Completed -> Deleting |backup-b Deleting -> Error " + backupdelete.MessageNoDeletionRecord + "|backup-b Error -> Deleting |backup-b finalized"
	if got := strings.Join(h.Log, "|"); got != want {
		t.Fatalf("transitions\n%s\nwant\n%s", got, want)
	}
}
