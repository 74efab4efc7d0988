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
