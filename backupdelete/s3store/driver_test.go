package s3store

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/storetest"
	"github.com/caretaker-storage/caretaker/internal/s3test"
	"github.com/caretaker-storage/caretaker/orphan"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Driver's normal, error and crash scenarios (Longhorn's asynchronous
// backup deletion, longhorn/longhorn#8746) and the failed-backup orphan
// flow, as backupdelete's tests run them on fsstore, here on a real S3
// server.

var epoch = storetest.Epoch

// host is storetest's backup controller over a Store on a real S3 server
// (through the fault-injecting proxy), with the server at hand; it counts
// blocks on the server's disk, not through the Store.
type host struct {
	*storetest.Host
	e *env
}

func newHost(t *testing.T) *host {
	t.Helper()
	e := newEnv(t, true, Options{MaxAttempts: 2})
	h := &host{Host: storetest.NewHost(t, e.store), e: e}
	h.CountBlocks = func() int { return len(e.blocks(t, "vol-a")) }
	return h
}

func TestDriverNormal(t *testing.T) { storetest.DriverNormal(t, newHost(t).Host) }

// TestDriverError: the server refuses to delete backup-b's cfg (403) until
// the fault is lifted: Error with Longhorn's message, a backoff cycle,
// then the deletion completes.
func TestDriverError(t *testing.T) {
	h := newHost(t)
	h.FillVolume()
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
	h.ReconcileDelete("backup-b")
	if err := h.WaitCommand(); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("%v, want ErrAccessDenied", err)
	}
	h.ReconcileDelete("backup-b")
	if s := h.Backups["backup-b"]; s.State != backupdelete.StateError || !strings.Contains(h.Message["backup-b"], "access denied") ||
		!strings.HasPrefix(h.Message["backup-b"], "Failed to delete the backup backup-b in the backupstore, err ") {
		t.Fatalf("backup-b %q %q", s.State, h.Message["backup-b"])
	}
	if strings.Contains(h.Message["backup-b"], h.e.srv.SecretKey) {
		t.Fatal("the secret key is in the backup's message")
	}
	if g := h.Gate("backup-c"); g.Wait {
		t.Fatalf("gate %+v: an Error backup must not block", g)
	}
	if res := h.ReconcileDelete("backup-b"); res.StartCommand {
		t.Fatal("retried within the backoff")
	}
	mu.Lock()
	deny = false
	mu.Unlock()
	h.Clock.Step(10 * time.Second)
	if res := h.ReconcileDelete("backup-b"); !res.StartCommand {
		t.Fatalf("%+v, want a retry after the backoff", res)
	}
	must(t, h.WaitCommand())
	if res := h.ReconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v", res)
	}
	if h.Exists("backup-b") || !h.Exists("backup-a") || h.BlockCount() != 2 {
		t.Fatalf("after the retry: %d blocks", h.BlockCount())
	}
}

// TestDriverControllerCrash: the stuck controller's Store runs on a
// clock that never advances, so its deletion stops in the lock
// protocol's settle wait, its deletion lock object written.
func TestDriverControllerCrash(t *testing.T) {
	h := newHost(t)
	cfg := h.e.cfg
	cfg.Clock = clocktesting.NewFakeClock(epoch) // never advances: the settle wait never ends
	stuck, err := New(cfg)
	must(t, err)
	locks := "lh/target/" + volumePath("vol-a") + "/locks/"
	storetest.DriverControllerCrash(t, h.Host, stuck, func() bool {
		keys, err := h.e.srv.Keys(h.e.bucket, locks)
		must(t, err)
		return len(keys) == 1
	})
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
	h.FillVolume()
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
	h.ReconcileDelete("backup-b")
	if err := h.WaitCommand(); err == nil {
		t.Fatal("the deletion succeeded with the server down")
	}
	h.e.proxy.SetHook(nil) // the server is back
	if n := h.BlockCount(); n != 42 {
		t.Fatalf("%d blocks after the failed deletion, want all 42", n)
	}
	if res := h.ReconcileDelete("backup-b"); !res.Finalize {
		t.Fatalf("%+v: the cfg is gone, want the deletion finished and finalized", res)
	}
	if h.Exists("backup-b") || !h.Exists("backup-a") || h.BlockCount() != 2 {
		t.Fatalf("%d blocks left, want backup-a's shared and a1", h.BlockCount())
	}
}

// TestDriverRestartCollects: the process dies between backup-b's cfg and
// its blocks; a new process (new Store, new Driver, no record) finds the
// backup Deleting and gone, collects the volume's unreferenced blocks,
// then finalizes. Without the collection the 40 blocks only backup-b
// referenced would stay until some later deletion in the volume.
func TestDriverRestartCollects(t *testing.T) {
	h := newHost(t)
	h.FillVolume()
	h.e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		if op == "DeleteObjects" {
			return &s3test.Fault{Drop: true} // the process dies here
		}
		return nil
	})
	if _, err := h.e.store.DeleteBackupReport(ctxT(t), h.Ref("backup-b")); err == nil {
		t.Fatal("the deletion succeeded although its block deletes were dropped")
	}
	h.e.proxy.SetHook(nil)
	if h.Exists("backup-b") || h.BlockCount() != 42 {
		t.Fatalf("backup-b exists %v, %d blocks: want the cfg gone and every block left", h.Exists("backup-b"), h.BlockCount())
	}
	fresh, err := New(h.e.cfg)
	must(t, err)
	drv, err := backupdelete.NewDriver(fresh, backupdelete.DriverOptions{Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	res, err := drv.Reconcile(ctxT(t), backupdelete.Request{Ref: h.Ref("backup-b"), State: backupdelete.StateDeleting})
	if err != nil || !res.Finalize {
		t.Fatalf("%+v, %v: want collected and finalized", res, err)
	}
	if !h.Exists("backup-a") || h.BlockCount() != 2 {
		t.Fatalf("%d blocks left, want backup-a's 2", h.BlockCount())
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
