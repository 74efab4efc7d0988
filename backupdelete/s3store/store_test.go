package s3store

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
)

func ref(name string) backupdelete.BackupRef {
	return backupdelete.BackupRef{Volume: "vol-a", Name: name}
}

// TestDeleteTargeted: deleting backup-1 removes its cfg and the one block
// only it referenced, keeps every other block, rewrites volume.cfg's
// BlockCount, and never lists the blocks: the only candidates are the
// deleted backup's.
func TestDeleteTargeted(t *testing.T) {
	e := newEnv(t, true, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	e.proxy.Reset()
	e.store.ResetStats()
	c, err := e.store.DeleteBackupReport(ctx, ref("backup-1"))
	must(t, err)
	st, proxied := e.store.Stats(), e.proxy.Total()
	if c.Removed != 1 || c.Referenced != 3 || c.Full || c.Skipped != "" {
		t.Fatalf("collection %+v, want 1 removed, 3 referenced, targeted", c)
	}
	got := e.blocks(t, "vol-a")
	if got[ckA] || !got[ckS] || !got[ckB] || !got[ckC] {
		t.Fatalf("blocks %v: want only a gone", got)
	}
	if ok, _ := e.store.BackupExists(ctx, ref("backup-1")); ok {
		t.Fatal("backup-1 still there")
	}
	v, err := e.store.ReadVolume(ctx, "vol-a")
	must(t, err)
	if v.BlockCount != 3 || v.LastBackupName != "backup-3" || v.DataEngine != "v1" {
		t.Fatalf("volume.cfg %+v", v)
	}
	t.Logf("targeted deletion of 1 of 3 backups: %d requests: %s", st.Total(), st)
	// Lock: put, list, get (ours), put (acquired), delete at release.
	// Collection: get volume.cfg, get the cfg, list backups and past
	// the listing's end, delete the cfg, 2 cfg reads, list again, one
	// DeleteObjects, put volume.cfg.
	want := map[string]int64{"PutObject": 3, "ListObjectsV2": 4, "GetObject": 5, "DeleteObject": 2, "DeleteObjects": 1}
	for op, n := range want {
		if st.Requests[op] != n {
			t.Errorf("%s: %d requests, want %d (all: %s)", op, st.Requests[op], n, st)
		}
	}
	if int(st.Total()) != proxied {
		t.Errorf("Stats counts %d requests, the proxy saw %d", st.Total(), proxied)
	}
}

// TestDeleteLastBackup: deleting the volume's last backup sets
// LastBackupName to the latest remaining one, as Longhorn does.
func TestDeleteLastBackup(t *testing.T) {
	e := newEnv(t, false, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	must(t, e.store.DeleteBackup(ctx, ref("backup-3")))
	v, err := e.store.ReadVolume(ctx, "vol-a")
	must(t, err)
	if v.LastBackupName != "backup-2" || v.LastBackupAt != "2026-11-02T00:00:00Z" || v.BlockCount != 3 {
		t.Fatalf("volume.cfg %+v", v)
	}
	if got := e.blocks(t, "vol-a"); got[ckC] || !got[ckA] || !got[ckS] || !got[ckB] {
		t.Fatalf("blocks %v", got)
	}
}

// TestInProgressBackupHoldsBlocks: while another backup is in progress
// (its cfg lists none of the blocks it uploaded), no block is deleted;
// the cfg removal stands and LastBackupName is cleared, not guessed.
func TestInProgressBackupHoldsBlocks(t *testing.T) {
	e := newEnv(t, false, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	must(t, e.store.WriteBackup(ctx, Backup{Name: "backup-4", VolumeName: "vol-a"}))
	c, err := e.store.DeleteBackupReport(ctx, ref("backup-3"))
	must(t, err)
	if c.Removed != 0 || !strings.Contains(c.Skipped, "backup-4 in progress") {
		t.Fatalf("%+v", c)
	}
	if got := e.blocks(t, "vol-a"); len(got) != 4 {
		t.Fatalf("blocks %v, want all 4", got)
	}
	v, err := e.store.ReadVolume(ctx, "vol-a")
	must(t, err)
	if v.LastBackupName != "" || v.BlockCount != 4 {
		t.Fatalf("volume.cfg %+v", v)
	}
}

// TestRetryAfterPartialDeletionListsBlocks: a deletion interrupted after
// the cfg removal leaves the deleted backup's own block; deleting again
// (the cfg is gone) lists the volume's blocks and collects it.
func TestRetryAfterPartialDeletionListsBlocks(t *testing.T) {
	e := newEnv(t, false, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	// What a crash right after the cfg's DeleteObject leaves.
	must(t, e.store.del(ctx, volumePath("vol-a")+"/backups/backup_backup-1.cfg"))
	c, err := e.store.DeleteBackupReport(ctx, ref("backup-1"))
	must(t, err)
	if !c.Full || c.Removed != 1 {
		t.Fatalf("%+v, want a full collection removing a", c)
	}
	if got := e.blocks(t, "vol-a"); got[ckA] || len(got) != 3 {
		t.Fatalf("blocks %v", got)
	}
}

// TestInteropSameBytesAsFsstore: the same fixture written by fsstore on a
// filesystem and by s3store in a bucket is the same bytes under the same
// paths (the posix backend keeps object k as the file Dir/bucket/k), and
// so is volume.cfg after the same deletion.
func TestInteropSameBytesAsFsstore(t *testing.T) {
	e := newEnv(t, false, Options{})
	mount := t.TempDir()
	fs1, err := fsstore.New(fsstore.Options{Dir: mount, Clock: fastClock{}})
	must(t, err)
	defer fs1.Close()
	ctx := ctxT(t)
	for _, w := range []interface {
		WriteVolume(context.Context, Volume) error
		WriteBackup(context.Context, Backup) error
		WriteBlock(context.Context, string, string, []byte) error
	}{fs1, e.store} {
		must(t, w.WriteVolume(ctx, Volume{Name: "vol-a", Size: 8 << 20, Labels: map[string]string{"k": "v"}, CreatedTime: "2026-11-01T00:00:00Z",
			LastBackupName: "backup-2", LastBackupAt: "2026-11-02T00:00:00Z", BlockCount: 3, CompressionMethod: "lz4", DataEngine: "v1"}))
		must(t, w.WriteBackup(ctx, Backup{Name: "backup-1", VolumeName: "vol-a", SnapshotName: "s1", SnapshotCreatedAt: "2026-11-01T00:00:00Z",
			CreatedTime: "2026-11-01T00:00:00Z", Size: 4 << 20, Labels: map[string]string{"a": "b"}, CompressionMethod: "lz4",
			Blocks: []BlockMapping{{Offset: 0, BlockChecksum: ckA}, {Offset: 2 << 20, BlockChecksum: ckS}}}))
		must(t, w.WriteBackup(ctx, Backup{Name: "backup-2", VolumeName: "vol-a", SnapshotName: "s2", SnapshotCreatedAt: "2026-11-02T00:00:00Z",
			CreatedTime: "2026-11-02T00:00:00Z", Size: 4 << 20, Blocks: []BlockMapping{{Offset: 0, BlockChecksum: ckS}, {Offset: 2 << 20, BlockChecksum: ckB}}}))
		for _, ck := range []string{ckA, ckS, ckB} {
			must(t, w.WriteBlock(ctx, "vol-a", ck, []byte("data of "+ck)))
		}
	}
	s3root := filepath.Join(e.srv.Dir, e.bucket, "lh", "target")
	compareTrees(t, mount, s3root)
	// The same deletion on both: the same volume.cfg, the same files.
	if _, err := fs1.DeleteBackupReport(ctx, ref("backup-1")); err != nil {
		t.Fatal(err)
	}
	must(t, e.store.DeleteBackup(ctx, ref("backup-1")))
	compareTrees(t, mount, s3root)
}

// compareTrees compares the regular files under backupstore/ of two
// roots, by relative path and content, ignoring locks and empty
// directories.
func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	read := func(root string) map[string][]byte {
		out := map[string][]byte{}
		err := filepath.WalkDir(filepath.Join(root, "backupstore"), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || strings.Contains(p, "/locks/") {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			data, err := os.ReadFile(p)
			out[rel] = data
			return err
		})
		must(t, err)
		return out
	}
	fa, fb := read(a), read(b)
	if len(fa) == 0 || len(fa) != len(fb) {
		t.Fatalf("%d files on the filesystem, %d objects", len(fa), len(fb))
	}
	for p, da := range fa {
		db, ok := fb[p]
		if !ok {
			t.Fatalf("%s: not in the bucket", p)
		}
		if !bytes.Equal(da, db) {
			t.Fatalf("%s differs:\nfsstore %s\ns3store %s", p, da, db)
		}
	}
}

// TestForeignLockExcludesDeletion: a Longhorn backup lock object written
// by another writer (live, acquired) makes the deletion fail with
// ErrLocked naming it, after deleting nothing; once it has expired
// (its Last-Modified more than 150 s old), the deletion proceeds.
func TestForeignLockExcludesDeletion(t *testing.T) {
	e := newEnv(t, false, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	const name = "lock-00000000000000b1"
	key := volumePath("vol-a") + "/locks/" + name + ".lck"
	must(t, e.store.put(ctx, key, []byte(`{"Name":"`+name+`","Type":1,"Acquired":true}`)))
	err := e.store.DeleteBackup(ctx, ref("backup-1"))
	var conflict *LockConflictError
	if !errors.Is(err, backupdelete.ErrLocked) || !errors.As(err, &conflict) || conflict.Blocker.Name != name {
		t.Fatalf("%v, want a lock conflict naming %s", err, name)
	}
	if ok, _ := e.store.BackupExists(ctx, ref("backup-1")); !ok {
		t.Fatal("backup-1 deleted under a live backup lock")
	}
	if got := e.blocks(t, "vol-a"); len(got) != 4 {
		t.Fatalf("blocks %v", got)
	}
	keys, err := e.srv.Keys(e.bucket, "lh/target/"+volumePath("vol-a")+"/locks/")
	must(t, err)
	if len(keys) != 1 {
		t.Fatalf("lock objects left %v, want only the foreign one", keys)
	}
	// Expire it: the posix backend's Last-Modified is the file's mtime.
	old := time.Now().Add(-LockExpiry - 5*time.Second)
	must(t, os.Chtimes(e.srv.ObjectPath(e.bucket, "lh/target/"+key), old, old))
	must(t, e.store.DeleteBackup(ctx, ref("backup-1")))
	if got := e.blocks(t, "vol-a"); got[ckA] {
		t.Fatal("a not collected after the lock expired")
	}
}

// TestLockInteropWithFsstoreRules: our own lock objects are what
// Longhorn's saveLock writes, and a Store's backup lock keeps another
// Store's deletion out.
func TestLockExcludesAcrossStores(t *testing.T) {
	e := newEnv(t, false, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	other, err := New(e.cfg)
	must(t, err)
	lock, err := other.Lock(ctx, "vol-a", LockBackup)
	must(t, err)
	data, err := os.ReadFile(e.srv.ObjectPath(e.bucket, "lh/target/"+volumePath("vol-a")+"/locks/"+lock.Name()+".lck"))
	must(t, err)
	if want := `{"Name":"` + lock.Name() + `","Type":1,"Acquired":true}`; string(data) != want {
		t.Fatalf("lock object %s, want %s", data, want)
	}
	if err := e.store.DeleteBackup(ctx, ref("backup-1")); !errors.Is(err, backupdelete.ErrLocked) {
		t.Fatalf("%v, want ErrLocked", err)
	}
	must(t, lock.Release())
	must(t, e.store.DeleteBackup(ctx, ref("backup-1")))
	keys, err := e.srv.Keys(e.bucket, "lh/target/"+volumePath("vol-a")+"/locks/")
	must(t, err)
	if len(keys) != 0 {
		t.Fatalf("lock objects left: %v", keys)
	}
}

// TestReadSide: Volumes, Backups, ReadBackup and BlockFiles see what was
// written; missing things are ErrNotFound.
func TestReadSide(t *testing.T) {
	e := newEnv(t, false, Options{ListPageSize: 2})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	must(t, e.store.WriteVolume(ctx, Volume{Name: "vol-b"}))
	vols, err := e.store.Volumes(ctx)
	must(t, err)
	if strings.Join(vols, ",") != "vol-a,vol-b" {
		t.Fatalf("volumes %v", vols)
	}
	names, err := e.store.Backups(ctx, "vol-a")
	must(t, err)
	if strings.Join(names, ",") != "backup-1,backup-2,backup-3" {
		t.Fatalf("backups %v (paginated by 2)", names)
	}
	b, err := e.store.ReadBackup(ctx, ref("backup-2"))
	must(t, err)
	if len(b.Blocks) != 2 || b.Blocks[1].BlockChecksum != ckB {
		t.Fatalf("%+v", b)
	}
	if n, err := e.store.BlockFiles(ctx, "vol-a"); err != nil || n != 4 {
		t.Fatalf("%d blocks, %v", n, err)
	}
	if _, err := e.store.ReadBackup(ctx, ref("backup-9")); !errors.Is(err, backupdelete.ErrNotFound) {
		t.Fatalf("%v", err)
	}
	if _, err := e.store.ReadVolume(ctx, "vol-z"); !errors.Is(err, backupdelete.ErrNotFound) {
		t.Fatalf("%v", err)
	}
	must(t, e.store.Check(ctx))
}

// TestCollectBlocks: a block no backup references (leaked by a process
// that crashed after deleting a cfg) is collected by CollectBlocks, which
// deletes no backup and keeps every referenced block.
func TestCollectBlocks(t *testing.T) {
	e := newEnv(t, false, Options{})
	threeBackups(t, e.store)
	ctx := ctxT(t)
	leaked := checksum("leaked")
	must(t, e.store.WriteBlock(ctx, "vol-a", leaked, []byte("x")))
	c, err := e.store.CollectBlocks(ctx, "vol-a")
	must(t, err)
	if !c.Full || c.Removed != 1 || c.Referenced != 4 {
		t.Fatalf("%+v", c)
	}
	if got := e.blocks(t, "vol-a"); got[leaked] || len(got) != 4 {
		t.Fatalf("blocks %v", got)
	}
	wantUntouched(t, e)
	if c, err := e.store.CollectBlocks(ctx, "vol-none"); err != nil || c.Removed != 0 {
		t.Fatalf("%+v %v", c, err)
	}
}
