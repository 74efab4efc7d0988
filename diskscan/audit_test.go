package diskscan

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// A purge interrupted after its rename leaves a marked tombstone. If the
// directory's name becomes expected again while a directory of that name
// is back (Longhorn made a fresh one for the replica, or the host's view
// was stale when the purge judged it), the tombstone may hold the only
// copy of the replica's data: it is kept and reported, never removed,
// while any replica expects its name.
func TestFinishKeepsTombstoneOfExpectedNameWhenNameTaken(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	replica(t, d, "pvc-back-r-00000002", disktest.Replica{Size: 4 << 20, Written: 1 << 20})
	replica(t, d, "pvc-keep-r-00000003", disktest.Replica{})
	tomb, _ := plantTombstone(t, d, "pvc-back-r-00000002")
	// A new directory of the same name, made after the purge's rename.
	fresh := replica(t, d, "pvc-back-r-00000002", disktest.Replica{})
	f.expect(d, "pvc-back-r-00000002", "pvc-keep-r-00000003")
	f.scan()

	err := f.o.FinishInterrupted(context.Background())
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrStillExpected) {
		t.Errorf("FinishInterrupted: %v, want a refusal wrapping ErrStillExpected", err)
	}
	if !exists(t, filepath.Join(tomb, MetaFile)) || !exists(t, filepath.Join(tomb, "volume-head-000.img")) {
		t.Fatal("the tombstone of an expected name was removed")
	}
	if !exists(t, filepath.Join(fresh, MetaFile)) {
		t.Fatal("the live directory was touched")
	}

	// Once no replica expects the name, the tombstone is finished.
	f.exp.Replace([]ReplicaRef{{NodeID: d.NodeID, DiskID: d.UUID, DataDirectoryName: "pvc-keep-r-00000003"}})
	if err := f.o.FinishInterrupted(context.Background()); err != nil {
		t.Fatalf("FinishInterrupted after the name is no longer expected: %v", err)
	}
	if _, err := os.Lstat(tomb); !os.IsNotExist(err) {
		t.Fatalf("tombstone left after its name stopped being expected: %v", err)
	}
	if !exists(t, filepath.Join(fresh, MetaFile)) {
		t.Fatal("the other directory of that name was removed")
	}
}

// FinishInterrupted asks the expected source again right before each
// tombstone it finishes, as Delete does before each step: a replica that
// starts expecting a name while another tombstone is being removed (which
// may take long on a large replica) keeps that name's tombstone, which is
// renamed back.
func TestFinishReasksExpectedBeforeEachTombstone(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	names := []string{"pvc-aaaa-r-00000001", "pvc-bbbb-r-00000002"}
	tombs := map[string]string{}
	for _, n := range names {
		lost := replica(t, d, n, disktest.Replica{})
		for i := range 4 {
			writeFile(t, filepath.Join(lost, "volume-snap-s"+string(rune('0'+i))+".img"), "data")
		}
		tombs[n], _ = plantTombstone(t, d, n)
	}
	replica(t, d, "pvc-keep-r-00000003", disktest.Replica{})
	f.expect(d, "pvc-keep-r-00000003")
	f.scan()

	// While the first tombstone is removed, the other's name becomes
	// expected (a replica restored onto it, a host view catching up).
	var first, other string
	f.o.hooks.afterRemove = func(path string) {
		if first != "" {
			return
		}
		for _, n := range names {
			if filepath.Base(filepath.Dir(path)) == filepath.Base(tombs[n]) {
				first = n
			}
		}
		for _, n := range names {
			if n != first {
				other = n
			}
		}
		f.expect(d, other)
	}
	if err := f.o.FinishInterrupted(context.Background()); err != nil {
		t.Fatalf("FinishInterrupted: %v", err)
	}
	if first == "" {
		t.Fatal("no tombstone was removed")
	}
	if exists(t, tombs[first]) {
		t.Errorf("tombstone of %s (not expected) left", first)
	}
	if !exists(t, filepath.Join(d.Path, ReplicasDir, other, MetaFile)) {
		t.Fatalf("%s became expected during the finish and was removed, not renamed back", other)
	}
}

// <disk>/replicas is a mount point: another disk's replicas directory
// bind-mounted there (a mistaken mount, a host path set up twice). The
// disk's own identity checks pass (its longhorn-disk.cfg and filesystem
// are the disk's), but the directories under replicas are another disk's,
// which the disk's expected set knows nothing about: every one of them
// looks orphaned. The scan marks the disk invalid, and neither Delete nor
// FinishInterrupted removes anything through that mount.
func TestReplicasMountPointIsNotTheDisk(t *testing.T) {
	a := makeDisk(t, t.TempDir(), "n", "a", "ua")
	b := makeDisk(t, t.TempDir(), "m", "b", "ub") // another node's disk, not this Orphans'
	f := newFixture(t, a)
	replica(t, a, "pvc-own-r-00000001", disktest.Replica{})
	f.expect(a, "pvc-own-r-00000001")
	live := replica(t, b, "pvc-live-r-11111111", disktest.Replica{Size: 4 << 20, Written: 1 << 20})
	replica(t, b, "pvc-half-r-22222222", disktest.Replica{})
	tomb, _ := plantTombstone(t, b, "pvc-half-r-22222222")
	if rep := f.scan().Disks[0]; rep.Status.Health != orphan.HealthReady {
		t.Fatalf("before the mount: %+v", rep.Status)
	}
	mountBind(t, filepath.Join(b.Path, ReplicasDir), filepath.Join(a.Path, ReplicasDir))

	rep := f.scan().Disks[0]
	if rep.Status.Health != orphan.HealthDiskInvalid || len(rep.Orphans) != 0 {
		t.Errorf("scan through the mount: status %+v, orphans %v; want the disk invalid and no orphan", rep.Status, orphanNames(rep))
	}
	err := f.o.Delete(context.Background(), record(t, a, "pvc-live-r-11111111"))
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) {
		t.Errorf("Delete through the mount: %v, want a refusal wrapping ErrMountPoint", err)
	}
	if err := f.o.FinishInterrupted(context.Background()); err != nil {
		t.Logf("FinishInterrupted: %v", err)
	}
	if !exists(t, filepath.Join(live, MetaFile)) || !exists(t, filepath.Join(live, "volume-head-000.img")) {
		t.Fatal("another disk's replica was purged through a mount on replicas")
	}
	if !exists(t, filepath.Join(tomb, MetaFile)) {
		t.Fatal("another disk's tombstone was finished through a mount on replicas")
	}
}

// A purge renamed a directory to its tombstone, and before its checks
// after the rename, the name became expected again and a directory of
// that name was made (Longhorn creating the replica's directory anew).
// The purge refuses and puts the tombstone back only where the name is
// free: rename(2) replaces an empty directory, which would take the new
// directory's place under the replica's feet; os.Root.Rename, like
// os.Rename, refuses to replace a directory, and this holds it. The
// tombstone is kept (and FinishInterrupted keeps it while the name is
// expected and taken), and so is the new directory.
func TestPurgeRestoreNeverReplacesANewDirectory(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{Size: 4 << 20, Written: 1 << 20})
	replica(t, d, "pvc-kept-r-00000001", disktest.Replica{})
	f.expect(d, "pvc-kept-r-00000001")
	f.scan()
	var tombPath string
	var fresh os.FileInfo
	f.o.hooks.afterTombstone = func(replicas, tomb string) {
		tombPath = filepath.Join(replicas, tomb)
		must(t, os.Mkdir(lost, 0o755)) // empty, as Longhorn makes it first
		fi, err := os.Lstat(lost)
		must(t, err)
		fresh = fi
		f.expect(d, "pvc-lost-r-deadbeef")
	}
	err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrStillExpected) {
		t.Errorf("Delete: %v, want a refusal wrapping ErrStillExpected", err)
	}
	now, lerr := os.Lstat(lost)
	if lerr != nil || !os.SameFile(now, fresh) {
		t.Fatalf("the new directory of the expected name was replaced by the tombstone (%v)", lerr)
	}
	if !exists(t, filepath.Join(tombPath, MetaFile)) || !exists(t, filepath.Join(tombPath, "volume-head-000.img")) {
		t.Fatal("the tombstone's data is gone")
	}
	// The finish keeps it while the name is expected and taken.
	if err := f.o.FinishInterrupted(context.Background()); !errorsIs(err, ErrStillExpected) {
		t.Errorf("FinishInterrupted: %v, want the tombstone kept with ErrStillExpected", err)
	}
	if !exists(t, filepath.Join(tombPath, MetaFile)) {
		t.Fatal("FinishInterrupted removed the tombstone of an expected name")
	}
}
