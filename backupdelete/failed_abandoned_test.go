package backupdelete_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/orphan"
)

// abandonedFixture is a filesystem backupstore with volume vol-a: a
// completed backup-1 {kept, shared}, and backup-2, which the host reports
// failed, whose upload died after writing Longhorn's in-progress cfg (an
// empty CreatedTime, no blocks) and the blocks own and shared.
type abandonedFixture struct {
	store             *fsstore.Store
	mount             string
	fb                *backupdelete.Orphans
	failed            backupdelete.Backup
	rec               orphan.Record
	kept, shared, own string
}

func newAbandonedFixture(t *testing.T) *abandonedFixture {
	t.Helper()
	ctx := context.Background()
	mount := t.TempDir()
	s, err := fsstore.New(fsstore.Options{Dir: mount, Clock: quickClock{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &abandonedFixture{store: s, mount: mount, kept: ck("kept"), shared: ck("shared"), own: ck("own")}
	must(t, s.WriteVolume(ctx, fsstore.Volume{Name: "vol-a", Size: 1 << 30}))
	for _, b := range []string{f.kept, f.shared, f.own} {
		must(t, s.WriteBlock(ctx, "vol-a", b, []byte(b)))
	}
	at := epoch.Format(time.RFC3339)
	must(t, s.WriteBackup(ctx, fsstore.Backup{Name: "backup-0000000000000001", VolumeName: "vol-a", SnapshotCreatedAt: at, CreatedTime: at,
		Blocks: []fsstore.BlockMapping{{Offset: 0, BlockChecksum: f.kept}, {Offset: 2 << 20, BlockChecksum: f.shared}}}))
	must(t, s.WriteBackup(ctx, fsstore.Backup{Name: "backup-0000000000000002", VolumeName: "vol-a"}))
	ok := backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000001"}, State: backupdelete.StateCompleted}
	f.failed = backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000002"}, State: backupdelete.StateError}
	f.fb = newOrphans(t, newLister(ok, f.failed), s)
	f.rec = orphan.Record{Name: "orphan-x", Kind: orphan.KindBackup, NodeID: "node-1", Parameters: map[string]string{
		orphan.ParamBackupTarget: backupdelete.DefaultBackupTarget, orphan.ParamBackupVolume: "vol-a", orphan.ParamBackupName: f.failed.Ref.Name}}
	return f
}

func (f *abandonedFixture) blocks(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, b := range []string{f.kept, f.shared, f.own} {
		_, err := os.Stat(filepath.Join(f.mount, fsstore.VolumePath("vol-a"), "blocks", b[0:2], b[2:4], b+".blk"))
		out[b] = err == nil
	}
	return out
}

// TestOrphansPurgeAbandonedBackup: the most common failed backup, one
// whose upload died, is purged when no backup lock of its volume is live,
// with the block only it uploaded; the blocks another backup references
// stay.
func TestOrphansPurgeAbandonedBackup(t *testing.T) {
	ctx := context.Background()
	f := newAbandonedFixture(t)
	if err := f.fb.Delete(ctx, f.rec); err != nil {
		t.Fatalf("purge of a backup whose upload died: %v", err)
	}
	if ok, err := f.store.BackupExists(ctx, f.failed.Ref); err != nil || ok {
		t.Fatalf("backup still there (%v, %v)", ok, err)
	}
	got := f.blocks(t)
	if got[f.own] || !got[f.shared] || !got[f.kept] {
		t.Fatalf("blocks present %v: want only its own gone", got)
	}
}

// writeLock writes a lock file in vol-a's locks directory as Longhorn's
// backup or restore would, with the given file time.
func (f *abandonedFixture) writeLock(t *testing.T, name string, typ int, acquired bool, mtime time.Time) {
	t.Helper()
	dir := filepath.Join(f.mount, fsstore.VolumePath("vol-a"), "locks")
	must(t, os.MkdirAll(dir, 0o700))
	p := filepath.Join(dir, name+".lck")
	body := `{"Name":"` + name + `","Type":` + map[int]string{1: "1", 2: "2"}[typ] + `,"Acquired":` + map[bool]string{true: "true", false: "false"}[acquired] + `}`
	must(t, os.WriteFile(p, []byte(body), 0o600))
	must(t, os.Chtimes(p, mtime, mtime))
}

// TestOrphansAbandonedBackupWaitsForLiveLock: while a backup lock of the
// volume is live, the same purge deletes nothing and is refused
// (orphan.ErrPreconditionFailed, which the Sweeper shows as PurgeRefused)
// with the lock named; an expired lock (more than 150 s since its file
// was written) holds nothing back.
func TestOrphansAbandonedBackupWaitsForLiveLock(t *testing.T) {
	ctx := context.Background()
	t.Run("held by a running backup", func(t *testing.T) {
		f := newAbandonedFixture(t)
		// Another process (Longhorn's backup) holds the volume's
		// backup lock, refreshed, for as long as it runs.
		other, err := fsstore.New(fsstore.Options{Dir: f.mount, Clock: quickClock{}})
		must(t, err)
		defer other.Close()
		lock, err := other.Lock(ctx, "vol-a", fsstore.LockBackup)
		must(t, err)
		defer lock.Release()
		err = f.fb.Delete(ctx, f.rec)
		if !errors.Is(err, orphan.ErrPreconditionFailed) || !strings.Contains(err.Error(), lock.Name()) {
			t.Fatalf("%v, want a refusal naming %s", err, lock.Name())
		}
		f.wantUntouched(t)
	})
	t.Run("a backup taker newer than the deletion", func(t *testing.T) {
		f := newAbandonedFixture(t)
		f.writeLock(t, "lock-00000000000000b1", 1, false, time.Now().Add(time.Minute))
		err := f.fb.Delete(ctx, f.rec)
		if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, backupdelete.ErrInProgress) ||
			!strings.Contains(err.Error(), "lock-00000000000000b1") {
			t.Fatalf("%v, want a refusal wrapping ErrInProgress naming the lock", err)
		}
		f.wantUntouched(t)
	})
	t.Run("expired", func(t *testing.T) {
		f := newAbandonedFixture(t)
		f.writeLock(t, "lock-00000000000000b1", 1, true, time.Now().Add(-fsstore.LockExpiry-5*time.Second))
		if err := f.fb.Delete(ctx, f.rec); err != nil {
			t.Fatalf("an expired backup lock held the purge back: %v", err)
		}
		if ok, _ := f.store.BackupExists(ctx, f.failed.Ref); ok {
			t.Fatal("backup still there")
		}
		if f.blocks(t)[f.own] {
			t.Fatal("its own block is still there")
		}
	})
}

func (f *abandonedFixture) wantUntouched(t *testing.T) {
	t.Helper()
	if ok, err := f.store.BackupExists(context.Background(), f.failed.Ref); err != nil || !ok {
		t.Fatalf("backup removed (%v, %v)", ok, err)
	}
	for b, present := range f.blocks(t) {
		if !present {
			t.Fatalf("block %s removed", b[:8])
		}
	}
}

// TestSweeperRefusesAbandonedBackupWhileAWriterRuns: through the orphan
// Sweeper, a requested purge of a backup whose upload died is refused
// visibly (Result.Refused, with the store's reason) while another backup
// of its volume is being written, the record stays, and the next sweep
// after the writer is gone purges it with the block only it uploaded.
func TestSweeperRefusesAbandonedBackupWhileAWriterRuns(t *testing.T) {
	ctx := context.Background()
	failed := bk("backup-0000000000000001", backupdelete.StateError)
	running := bk("backup-0000000000000002", backupdelete.StateInProgress)
	h := newSweepHarness(t, failed, running)
	must(t, h.mem.Put(running.Ref, true, "shared"))
	must(t, h.mem.PutAbandoned(failed.Ref, "shared", "own"))
	name, _ := backupdelete.BackupItem(failed.Ref, "node-1").Name()

	snap, at := h.scan(t)
	h.run(t, snap, at)
	must(t, h.records.RequestDeletion(ctx, name))
	h.clock.Step(time.Second)
	snap, at = h.scan(t)
	_, res := h.run(t, snap, at)
	if len(res.Purged) != 0 || len(res.Refused) != 1 || res.Refused[0].Name != name ||
		!strings.Contains(res.Refused[0].Reason, "being written") {
		t.Fatalf("purged %v refused %+v, want a refusal saying a backup is being written", res.Purged, res.Refused)
	}
	if ok, _ := h.mem.BackupExists(ctx, failed.Ref); !ok {
		t.Fatal("purged while a writer ran")
	}
	if h.records.Len() != 1 {
		t.Fatalf("%d records, want the refused one kept", h.records.Len())
	}

	// The writer finished and its backup was deleted by the host.
	must(t, h.mem.DeleteBackup(ctx, running.Ref))
	h.lister.mu.Lock()
	delete(h.lister.backups, running.Ref)
	h.lister.mu.Unlock()
	h.clock.Step(time.Minute)
	snap, at = h.scan(t)
	if _, res := h.run(t, snap, at); len(res.Purged) != 1 {
		t.Fatalf("purge after the writer left: %+v", res)
	}
	if got := h.mem.Blocks("default", "vol-a"); len(got) != 0 {
		t.Fatalf("blocks %v left, want the abandoned upload collected", got)
	}
}
