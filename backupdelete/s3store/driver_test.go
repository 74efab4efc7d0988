package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/internal/s3test"
	"github.com/caretaker-storage/caretaker/orphan"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Driver's normal, error and crash scenarios (Longhorn's asynchronous
// backup deletion, longhorn/longhorn#8746) and the failed-backup orphan
// flow, as backupdelete's tests run them on fsstore, here on a real S3
// server.

var epoch = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// host plays the backup controller over a Store.
type host struct {
	t       *testing.T
	e       *env
	faulty  *backupstoretest.Faulty
	clk     *clocktesting.FakeClock
	drv     *backupdelete.Driver
	done    chan error
	backups map[string]*backupdelete.Backup
	message map[string]string
	log     []string
}

func newHost(t *testing.T) *host {
	t.Helper()
	e := newEnv(t, true, Options{MaxAttempts: 2})
	h := &host{t: t, e: e, clk: clocktesting.NewFakeClock(epoch), done: make(chan error, 16),
		backups: map[string]*backupdelete.Backup{}, message: map[string]string{}}
	h.faulty = &backupstoretest.Faulty{Store: e.store}
	var err error
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

// create writes a completed backup as a creator does: under a backup
// lock, blocks first, then the cfg.
func (h *host) create(name string, at time.Time, blocks ...string) {
	h.t.Helper()
	ctx := ctxT(h.t)
	s := h.e.store
	if _, err := s.ReadVolume(ctx, "vol-a"); err != nil {
		must(h.t, s.WriteVolume(ctx, Volume{Name: "vol-a", Size: 1 << 30}))
	}
	lock, err := s.Lock(ctx, "vol-a", LockBackup)
	if err != nil {
		h.t.Fatalf("creating %s: %v", name, err)
	}
	defer lock.Release()
	var maps []BlockMapping
	for i, b := range blocks {
		must(h.t, s.WriteBlock(ctx, "vol-a", b, []byte(b)))
		maps = append(maps, BlockMapping{Offset: int64(i) << 21, BlockChecksum: b})
	}
	ts := at.Format(time.RFC3339)
	must(h.t, s.WriteBackup(ctx, Backup{Name: name, VolumeName: "vol-a", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}))
	h.backups[name] = &backupdelete.Backup{Ref: h.ref(name), State: backupdelete.StateCompleted}
}

func (h *host) set(name string, s backupdelete.State, msg string) {
	b := h.backups[name]
	if b.State != s || h.message[name] != msg {
		h.log = append(h.log, fmt.Sprintf("%s %s -> %s %s", name, b.State, s, msg))
	}
	b.State, h.message[name] = s, msg
}

func (h *host) reconcileDelete(name string) backupdelete.StepResult {
	h.t.Helper()
	b := h.backups[name]
	res, err := h.drv.Reconcile(context.Background(), backupdelete.Request{Ref: b.Ref, State: b.State, Message: h.message[name]})
	must(h.t, err)
	if res.Finalize {
		h.log = append(h.log, name+" finalized")
		delete(h.backups, name)
		return res
	}
	h.set(name, res.State, res.Message)
	return res
}

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
	case <-time.After(30 * time.Second):
		h.t.Fatal("the delete command did not return")
		return nil
	}
}

func (h *host) exists(name string) bool {
	ok, err := h.e.store.BackupExists(context.Background(), h.ref(name))
	must(h.t, err)
	return ok
}

func (h *host) blockCount() int { return len(h.e.blocks(h.t, "vol-a")) }

// fillVolume: backup-a small, backup-b with many blocks of its own,
// sharing one block.
func fillVolume(h *host) {
	h.create("backup-a", epoch, checksum("shared"), checksum("a1"))
	big := []string{checksum("shared")}
	for i := range 40 {
		big = append(big, checksum(fmt.Sprint("b", i)))
	}
	h.create("backup-b", epoch.Add(time.Hour), big...)
}

func TestDriverNormal(t *testing.T) {
	h := newHost(t)
	fillVolume(h)
	if n := h.blockCount(); n != 42 {
		t.Fatalf("%d blocks", n)
	}
	hold := make(chan struct{})
	h.faulty.InjectDelete(backupstoretest.Fault{Wait: hold})
	h.reconcileDelete("backup-b")
	if g := h.gate("backup-c"); !g.Wait || g.Message != "Wait for backup backup-b to be deleted" {
		t.Fatalf("gate %+v, want backup-c Pending behind backup-b", g)
	}
	if res := h.reconcileDelete("backup-b"); res.StartCommand || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v: Deleting must not start a second command", res)
	}
	close(hold)
	must(t, h.waitCommand())
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if g := h.gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v after backup-b is gone", g)
	}
	h.create("backup-c", epoch.Add(2*time.Hour), checksum("shared"), checksum("c1"))
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

// TestDriverError: the server refuses to delete backup-b's cfg (403) until
// the fault is lifted: Error with Longhorn's message, a backoff cycle,
// then the deletion completes.
func TestDriverError(t *testing.T) {
	h := newHost(t)
	fillVolume(h)
	var mu sync.Mutex
	deny := true
	h.e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if deny && op == "DeleteObject" && strings.HasSuffix(r.URL.Path, "backup_backup-b.cfg") {
			return s3test.AccessDenied()
		}
		return nil
	})
	h.reconcileDelete("backup-b")
	if err := h.waitCommand(); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("%v, want ErrAccessDenied", err)
	}
	h.reconcileDelete("backup-b")
	if s := h.backups["backup-b"]; s.State != backupdelete.StateError || !strings.Contains(h.message["backup-b"], "access denied") ||
		!strings.HasPrefix(h.message["backup-b"], "Failed to delete the backup backup-b in the backupstore, err ") {
		t.Fatalf("backup-b %q %q", s.State, h.message["backup-b"])
	}
	if strings.Contains(h.message["backup-b"], h.e.srv.SecretKey) {
		t.Fatal("the secret key is in the backup's message")
	}
	if g := h.gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v: an Error backup must not block", g)
	}
	if res := h.reconcileDelete("backup-b"); res.StartCommand {
		t.Fatal("retried within the backoff")
	}
	mu.Lock()
	deny = false
	mu.Unlock()
	h.clk.Step(10 * time.Second)
	if res := h.reconcileDelete("backup-b"); !res.StartCommand {
		t.Fatalf("%+v, want a retry after the backoff", res)
	}
	must(t, h.waitCommand())
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.exists("backup-b") || !h.exists("backup-a") || h.blockCount() != 2 {
		t.Fatalf("after the retry: %d blocks", h.blockCount())
	}
}

// TestDriverControllerCrash: the first controller's command is stuck in
// the lock protocol (its deletion lock object written) when the
// controller dies; a new Driver and Store recover by Longhorn's rule (no
// in-progress record: Error, then retried), and the dead deletion lock,
// compatible with ours, does not hold the retry back.
func TestDriverControllerCrash(t *testing.T) {
	h := newHost(t)
	fillVolume(h)
	cfg := h.e.cfg
	cfg.Clock = clocktesting.NewFakeClock(epoch) // never advances: the settle wait never ends
	stuck, err := New(cfg)
	must(t, err)
	crashed, err := backupdelete.NewDriver(stuck, backupdelete.DriverOptions{Clock: h.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()
	res, err := crashed.Reconcile(context.Background(), backupdelete.Request{Ref: h.ref("backup-b"), State: backupdelete.StateCompleted})
	if err != nil || res.State != backupdelete.StateDeleting {
		t.Fatalf("%+v %v", res, err)
	}
	h.set("backup-b", res.State, res.Message)
	locks := "lh/target/" + volumePath("vol-a") + "/locks/"
	deadline := time.Now().Add(20 * time.Second)
	for {
		keys, err := h.e.srv.Keys(h.e.bucket, locks)
		must(t, err)
		if len(keys) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stuck deletion wrote no lock object: %v", keys)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.reconcileDelete("backup-b")
	if h.backups["backup-b"].State != backupdelete.StateError || h.message["backup-b"] != backupdelete.MessageNoDeletionRecord {
		t.Fatalf("%q %q", h.backups["backup-b"].State, h.message["backup-b"])
	}
	if res := h.reconcileDelete("backup-b"); !res.StartCommand {
		t.Fatalf("%+v, want the command retried", res)
	}
	must(t, h.waitCommand())
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.exists("backup-b") || !h.exists("backup-a") || h.blockCount() != 2 {
		t.Fatalf("after recovery: backup-b exists %v, %d blocks", h.exists("backup-b"), h.blockCount())
	}
}

// TestDriverServerRestartMidDeletion: the server goes away in the middle
// of a deletion, right after backup-b's cfg is deleted and before its
// blocks are. The command fails; once the server is back the Driver finds
// the backup gone and, since it did not see the deletion succeed, first
// collects the volume (Collector), then finalizes. Nothing referenced is
// lost, and the blocks only backup-b referenced are gone before its
// record is.
func TestDriverServerRestartMidDeletion(t *testing.T) {
	h := newHost(t)
	fillVolume(h)
	var mu sync.Mutex
	down := false
	h.e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if op == "DeleteObject" && strings.HasSuffix(r.URL.Path, "backup_backup-b.cfg") {
			down = true // the server dies right after this request
			return &s3test.Fault{Forward: true, Drop: true}
		}
		if down && !strings.Contains(r.URL.Path, "/locks/") {
			return &s3test.Fault{Drop: true}
		}
		return nil
	})
	h.reconcileDelete("backup-b")
	if err := h.waitCommand(); err == nil {
		t.Fatal("the deletion succeeded with the server down")
	}
	h.e.proxy.SetHook(nil) // the server is back
	if n := h.blockCount(); n != 42 {
		t.Fatalf("%d blocks after the failed deletion, want all 42", n)
	}
	if res := h.reconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v: the cfg is gone, want the deletion finished and finalized", res)
	}
	if h.exists("backup-b") || !h.exists("backup-a") || h.blockCount() != 2 {
		t.Fatalf("%d blocks left, want backup-a's shared and a1", h.blockCount())
	}
}

// TestDriverRestartCollects: the process dies between backup-b's cfg and
// its blocks; a new process (new Store, new Driver, no record) finds the
// backup Deleting and gone, collects the volume's unreferenced blocks,
// then finalizes. Without the collection the 40 blocks only backup-b
// referenced would stay until some later deletion in the volume.
func TestDriverRestartCollects(t *testing.T) {
	h := newHost(t)
	fillVolume(h)
	h.e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		if op == "DeleteObjects" {
			return &s3test.Fault{Drop: true} // the process dies here
		}
		return nil
	})
	if _, err := h.e.store.DeleteBackupReport(ctxT(t), h.ref("backup-b")); err == nil {
		t.Fatal("the deletion succeeded although its block deletes were dropped")
	}
	h.e.proxy.SetHook(nil)
	if h.exists("backup-b") || h.blockCount() != 42 {
		t.Fatalf("backup-b exists %v, %d blocks: want the cfg gone and every block left", h.exists("backup-b"), h.blockCount())
	}
	fresh, err := New(h.e.cfg)
	must(t, err)
	drv, err := backupdelete.NewDriver(fresh, backupdelete.DriverOptions{Clock: h.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	res, err := drv.Reconcile(ctxT(t), backupdelete.Request{Ref: h.ref("backup-b"), State: backupdelete.StateDeleting})
	if err != nil || !res.Finalize {
		t.Fatalf("%+v, %v: want collected and finalized", res, err)
	}
	if !h.exists("backup-a") || h.blockCount() != 2 {
		t.Fatalf("%d blocks left, want backup-a's 2", h.blockCount())
	}
}

// lister is the host's backup records.
type lister struct{ backups []backupdelete.Backup }

func (l *lister) ListBackups(context.Context) ([]backupdelete.Backup, error) { return l.backups, nil }
func (l *lister) GetBackup(_ context.Context, ref backupdelete.BackupRef) (backupdelete.Backup, error) {
	for _, b := range l.backups {
		if b.Ref.Volume == ref.Volume && b.Ref.Name == ref.Name {
			return b, nil
		}
	}
	return backupdelete.Backup{}, backupdelete.ErrNotFound
}

// TestFailedBackupOrphans: the failed-backup orphan flow end to end on
// S3. A backup whose upload died (an in-progress cfg, its blocks
// uploaded, no live backup lock) is found by Scan, judged an orphan, and
// purged with the block only it uploaded; while a backup lock of its
// volume is live, the purge is refused and deletes nothing.
func TestFailedBackupOrphans(t *testing.T) {
	e := newEnv(t, false, Options{})
	s := e.store
	ctx := ctxT(t)
	kept, shared, own := checksum("kept"), checksum("shared"), checksum("own")
	must(t, s.WriteVolume(ctx, Volume{Name: "vol-a", Size: 1 << 30}))
	for _, b := range []string{kept, shared, own} {
		must(t, s.WriteBlock(ctx, "vol-a", b, []byte(b)))
	}
	at := epoch.Format(time.RFC3339)
	must(t, s.WriteBackup(ctx, Backup{Name: "backup-0000000000000001", VolumeName: "vol-a", SnapshotCreatedAt: at, CreatedTime: at,
		Blocks: []BlockMapping{{Offset: 0, BlockChecksum: kept}, {Offset: 2 << 20, BlockChecksum: shared}}}))
	must(t, s.WriteBackup(ctx, Backup{Name: "backup-0000000000000002", VolumeName: "vol-a"}))
	failed := backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000002"}, State: backupdelete.StateError}
	ok := backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000001"}, State: backupdelete.StateCompleted}
	fb, err := backupdelete.NewOrphans(&lister{[]backupdelete.Backup{ok, failed}}, s, backupdelete.OrphansOptions{NodeID: "node-1"})
	must(t, err)
	snap, err := fb.Scan(ctx)
	must(t, err)
	if len(snap.Items) != 1 || snap.Items[0].Param(orphan.ParamBackupName) != failed.Ref.Name {
		t.Fatalf("items %+v, want the failed backup", snap.Items)
	}
	v, err := fb.Judge(ctx, snap.Items[0])
	if err != nil || v.Outcome != orphan.OutcomeOrphan {
		t.Fatalf("%+v %v", v, err)
	}
	rec := orphan.Record{Name: "orphan-x", Kind: orphan.KindBackup, NodeID: "node-1", Parameters: map[string]string{
		orphan.ParamBackupTarget: backupdelete.DefaultBackupTarget, orphan.ParamBackupVolume: "vol-a", orphan.ParamBackupName: failed.Ref.Name}}

	// A live backup lock (another writer's) refuses the purge.
	lock, err := s.Lock(ctx, "vol-a", LockBackup)
	must(t, err)
	err = fb.Delete(ctx, rec)
	if !errors.Is(err, orphan.ErrPreconditionFailed) || !strings.Contains(err.Error(), lock.Name()) {
		t.Fatalf("%v, want a refusal naming %s", err, lock.Name())
	}
	if got := e.blocks(t, "vol-a"); len(got) != 3 {
		t.Fatalf("blocks %v after a refused purge", got)
	}
	must(t, lock.Release())

	// A stale one (expired: Last-Modified over 150 s ago) does not.
	stale := volumePath("vol-a") + "/locks/lock-00000000000000b1.lck"
	must(t, s.put(ctx, stale, []byte(`{"Name":"lock-00000000000000b1","Type":1,"Acquired":true}`)))
	old := time.Now().Add(-LockExpiry - 5*time.Second)
	must(t, os.Chtimes(e.srv.ObjectPath(e.bucket, "lh/target/"+stale), old, old))
	must(t, fb.Delete(ctx, rec))
	if exists, _ := s.BackupExists(ctx, failed.Ref); exists {
		t.Fatal("the failed backup is still there")
	}
	if got := e.blocks(t, "vol-a"); got[own] || !got[kept] || !got[shared] {
		t.Fatalf("blocks %v: want only its own gone", got)
	}
	if exists, _ := s.BackupExists(ctx, ok.Ref); !exists {
		t.Fatal("the completed backup was deleted")
	}
}
