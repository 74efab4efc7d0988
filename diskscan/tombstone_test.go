package diskscan

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// FinishInterrupted removes only tombstones it can prove it made: anything
// that merely looks like one is reported and kept, whole.
func TestFinishInterruptedKeepsLookAlikes(t *testing.T) {
	cases := []struct {
		name  string
		plant func(t *testing.T, d Disk, rd string) (keep string)
	}{
		{"directory without marker", func(t *testing.T, d Disk, rd string) string {
			tomb := purge{name: "pvc-x-r-00000001", token: "0123456789abcdef"}.tombstone()
			must(t, os.Mkdir(filepath.Join(rd, tomb), 0o755))
			writeFile(t, filepath.Join(rd, tomb, "someone-elses"), "data")
			return filepath.Join(rd, tomb, "someone-elses")
		}},
		{"directory named like an older caretaker's tombstone", func(t *testing.T, d Disk, rd string) string {
			tomb := tombstonePrefix + "pvc-x-r-00000001" + tombstoneSuffix
			must(t, os.Mkdir(filepath.Join(rd, tomb), 0o755))
			writeFile(t, filepath.Join(rd, tomb, "someone-elses"), "data")
			return filepath.Join(rd, tomb, "someone-elses")
		}},
		{"file named like a tombstone", func(t *testing.T, d Disk, rd string) string {
			tomb := purge{name: "pvc-x-r-00000001", token: "0123456789abcdef"}.tombstone()
			writeFile(t, filepath.Join(rd, tomb), "data")
			return filepath.Join(rd, tomb)
		}},
		{"marker for another inode", func(t *testing.T, d Disk, rd string) string {
			replica(t, d, "pvc-x-r-00000001", disktest.Replica{})
			tomb, p := plantTombstone(t, d, "pvc-x-r-00000001")
			mk := filepath.Join(rd, p.marker())
			data, err := os.ReadFile(mk)
			must(t, err)
			var m purgeMarker
			must(t, json.Unmarshal(data, &m))
			m.Ino++
			data, err = json.Marshal(m)
			must(t, err)
			writeFile(t, mk, string(data))
			return filepath.Join(tomb, MetaFile)
		}},
		{"marker naming another tombstone", func(t *testing.T, d Disk, rd string) string {
			replica(t, d, "pvc-x-r-00000001", disktest.Replica{})
			tomb, p := plantTombstone(t, d, "pvc-x-r-00000001")
			mk := filepath.Join(rd, p.marker())
			data, err := os.ReadFile(mk)
			must(t, err)
			writeFile(t, mk, strings.Replace(string(data), ".del", ".other", 1))
			return filepath.Join(tomb, MetaFile)
		}},
		{"corrupt marker", func(t *testing.T, d Disk, rd string) string {
			replica(t, d, "pvc-x-r-00000001", disktest.Replica{})
			tomb, p := plantTombstone(t, d, "pvc-x-r-00000001")
			writeFile(t, filepath.Join(rd, p.marker()), `{"format":`)
			return filepath.Join(tomb, MetaFile)
		}},
		{"FIFO as marker", func(t *testing.T, d Disk, rd string) string {
			replica(t, d, "pvc-x-r-00000001", disktest.Replica{})
			tomb, p := plantTombstone(t, d, "pvc-x-r-00000001")
			mkfifo(t, filepath.Join(rd, p.marker()))
			return filepath.Join(tomb, MetaFile)
		}},
		{"symlink to a live replica", func(t *testing.T, d Disk, rd string) string {
			live := replica(t, d, "pvc-live-r-00000009", disktest.Replica{})
			tomb := purge{name: "pvc-x-r-00000001", token: "0123456789abcdef"}.tombstone()
			must(t, os.Symlink(live, filepath.Join(rd, tomb)))
			return filepath.Join(live, MetaFile)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := makeDisk(t, t.TempDir(), "n", "d", "u")
			f := newFixture(t, d)
			f.expect(d, "pvc-live-r-00000009")
			rd := filepath.Join(d.Path, ReplicasDir)
			keep := c.plant(t, d, rd)
			before := tombstonesIn(t, d)
			f.scan()
			err := within(t, "FinishInterrupted", func() error { return f.o.FinishInterrupted(context.Background()) })
			if !errorsIs(err, orphan.ErrPreconditionFailed, ErrForeignTombstone) {
				t.Fatalf("FinishInterrupted: %v, want ErrForeignTombstone", err)
			}
			if !exists(t, keep) {
				t.Fatalf("%s was deleted", keep)
			}
			if after := tombstonesIn(t, d); !equalStrings(before, after) {
				t.Fatalf("tombstones and markers %v became %v", before, after)
			}
			// A purge of the same name uses its own token: it removes its
			// directory and nothing of the look-alike.
			dir := replica(t, d, "pvc-x-r-00000001", disktest.Replica{})
			err = within(t, "Delete", func() error { return f.o.Delete(context.Background(), record(t, d, "pvc-x-r-00000001")) })
			if err != nil || exists(t, dir) {
				t.Fatalf("Delete beside a look-alike: %v, directory exists %v", err, exists(t, dir))
			}
			if after := tombstonesIn(t, d); !exists(t, keep) || !equalStrings(before, after) {
				t.Fatalf("Delete beside a look-alike touched it: %v became %v", before, after)
			}
		})
	}
}

// A marker whose tombstone is gone (a crash before the rename, or after
// the removal) is dropped; the directory it names is untouched.
func TestFinishInterruptedDropsStaleMarkers(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000009")
	dir := replica(t, d, "pvc-x-r-00000001", disktest.Replica{})
	rr, err := os.OpenRoot(filepath.Join(d.Path, ReplicasDir))
	must(t, err)
	defer rr.Close()
	fi, err := rr.Lstat("pvc-x-r-00000001")
	must(t, err)
	p, err := newPurge("pvc-x-r-00000001")
	must(t, err)
	must(t, writeMarker(rr, p, fi)) // crash before the rename
	f.scan()
	must(t, f.o.FinishInterrupted(context.Background()))
	if ts := tombstonesIn(t, d); len(ts) != 0 || !exists(t, filepath.Join(dir, MetaFile)) {
		t.Fatalf("left %v; directory exists %v", ts, exists(t, dir))
	}
}

// After the rename the tombstone must be the directory that was checked:
// same type, device and inode. A directory removed and replaced by a
// symbolic link (which may get the same inode number) is refused and put
// back untouched.
func TestPurgeRefusesATombstoneOfAnotherType(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	victim := replica(t, d, "pvc-live-r-00000009", disktest.Replica{})
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000009")
	f.scan()
	reused := false
	f.o.hooks.afterTombstone = func(replicas, tomb string) {
		p := filepath.Join(replicas, tomb)
		var st syscall.Stat_t
		must(t, syscall.Lstat(p, &st))
		must(t, os.RemoveAll(p))
		// The filesystem usually hands the freed inode to the next file
		// created in the same place; try a few times to get it back.
		for range 64 {
			must(t, os.Symlink(victim, p))
			var now syscall.Stat_t
			must(t, syscall.Lstat(p, &now))
			if now.Ino == st.Ino {
				reused = true
				return
			}
			must(t, os.Remove(p))
			must(t, os.Mkdir(p+".spin", 0o755)) // take the next inode, then free it
			must(t, os.Remove(p+".spin"))
		}
		must(t, os.Symlink(victim, p))
	}
	err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
	t.Logf("the symlink got the directory's inode number: %v", reused)
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrNotReplica) {
		t.Fatalf("Delete: %v", err)
	}
	if fi, err := os.Lstat(lost); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("what was found was not put back under the name: %v %v", fi, err)
	}
	if !exists(t, filepath.Join(victim, MetaFile)) {
		t.Fatal("the symlink's target lost data")
	}
}

// A cancelled purge stops between entries, returns ctx's error, and
// leaves a marked tombstone that FinishInterrupted then finishes.
func TestPurgeCancelledMidway(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	for i := range 20 {
		writeFile(t, filepath.Join(lost, "volume-snap-s"+string(rune('a'+i))+".img"), "data")
	}
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000001")
	f.scan()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	removed := 0
	f.o.hooks.afterRemove = func(string) {
		if removed++; removed == 3 {
			cancel()
		}
	}
	err := f.o.Delete(ctx, record(t, d, "pvc-lost-r-deadbeef"))
	f.o.hooks.afterRemove = nil
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Delete: %v, want context.Canceled", err)
	}
	if removed != 3 {
		t.Fatalf("the walk removed %d entries after the cancellation at 3", removed)
	}
	got := tombstonesIn(t, d)
	if len(got) != 2 {
		t.Fatalf("left %v, want the tombstone and its marker", got)
	}
	p, isMarker, ok := parsePurgeEntry(got[1])
	if !ok || isMarker || !equalStrings(got, []string{p.marker(), p.tombstone()}) || p.name != "pvc-lost-r-deadbeef" {
		t.Fatalf("left %v, want the tombstone and its marker", got)
	}
	must(t, f.o.FinishInterrupted(context.Background()))
	if got := tombstonesIn(t, d); len(got) != 0 || exists(t, lost) {
		t.Fatalf("after FinishInterrupted: %v", got)
	}
}

// A directory whose tombstone or marker name would not fit in a path
// component cannot be purged safely, so it is never reported as an
// orphan: it is skipped with the reason.
func TestScanSkipsNamesTooLongToPurge(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	long := strings.Repeat("v", 225) + "-12345678" // 234 bytes: a valid name, but its marker would not fit
	replica(t, d, long, disktest.Replica{})
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000001")
	rep := f.scan().Disks[0]
	if len(rep.Orphans) != 0 || !strings.Contains(skippedReasons(rep)[long], "too long") {
		t.Fatalf("orphans %v, skipped %v", orphanNames(rep), skippedReasons(rep))
	}
	if err := f.o.Delete(context.Background(), record(t, d, long)); !errorsIs(err, orphan.ErrPreconditionFailed, ErrUnsafePath) {
		t.Fatalf("Delete: %v", err)
	}
}
