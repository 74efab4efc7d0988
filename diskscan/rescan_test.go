package diskscan

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// The rescan's caches (the listing, kept while <disk>/replicas keeps its
// stamp; the classification, kept while the expected set has the same
// content) must never hide a change. Each test below makes one change
// after a scan that trusted its cache, and checks that the next scan sees
// it: its report equals a cold scan's by a new Orphans.

// rescanDisk is a disk with an owned directory, an orphan, a file and a
// directory with an invalid name, and the fixture scanning it.
func rescanDisk(t *testing.T, opts Options) (Disk, *fixture) {
	t.Helper()
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixtureWith(t, opts, d)
	replica(t, d, "pvc-own-r-0000000a", disktest.Replica{})
	replica(t, d, "pvc-own-r-0000000b", disktest.Replica{})
	replica(t, d, "pvc-lost-r-0000000c", disktest.Replica{})
	writeFile(t, filepath.Join(d.Path, ReplicasDir, "stray-file"), "x")
	must(t, os.Mkdir(filepath.Join(d.Path, ReplicasDir, "not-a-replica"), 0o755))
	f.expect(d, "pvc-own-r-0000000a", "pvc-own-r-0000000b")
	return d, f
}

// sameAsCold fails unless got equals a cold scan of the same disks with the
// same source.
func sameAsCold(t *testing.T, f *fixture, got DiskReport) {
	t.Helper()
	cold, err := newOrphans(t, f.o.expected, settled, f.o.Disks()...).Report(context.Background())
	must(t, err)
	want := cold.Disks[0]
	if got.Status.Health != want.Status.Health || got.Entries != want.Entries || got.Owned != want.Owned ||
		!reflect.DeepEqual(orphanNames(got), orphanNames(want)) || !reflect.DeepEqual(skippedReasons(got), skippedReasons(want)) {
		t.Fatalf("rescan: health %s entries %d owned %d orphans %v skipped %v\ncold:   health %s entries %d owned %d orphans %v skipped %v",
			got.Status.Health, got.Entries, got.Owned, orphanNames(got), skippedReasons(got),
			want.Status.Health, want.Entries, want.Owned, orphanNames(want), skippedReasons(want))
	}
	for i := range got.Orphans {
		if got.Orphans[i].Meta != want.Orphans[i].Meta {
			t.Fatalf("%s: meta %+v, cold %+v", got.Orphans[i].Name, got.Orphans[i].Meta, want.Orphans[i].Meta)
		}
	}
}

// replicasStamp is the stamp <disk>/replicas has now.
func replicasStamp(t *testing.T, d Disk) dirStamp {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(d.Path, ReplicasDir))
	must(t, err)
	st, ok := stampOf(fi)
	if !ok {
		t.Skip("no directory stamps on this platform")
	}
	return st
}

// An unchanged disk is not listed again once its listing is settled.
func TestRescanSkipsListingOfUnchangedDisk(t *testing.T) {
	d, f := rescanDisk(t, settled)
	first := f.scan().Disks[0]
	n := f.o.listings.Load()
	again := f.scan().Disks[0]
	if got := f.o.listings.Load() - n; got != 0 {
		t.Fatalf("an unchanged settled disk was listed %d more times", got)
	}
	if again.Entries != first.Entries || again.Owned != 2 || !equalStrings(orphanNames(again), []string{"pvc-lost-r-0000000c"}) ||
		!reflect.DeepEqual(skippedReasons(again), skippedReasons(first)) {
		t.Fatalf("first %+v\nagain %+v", first, again)
	}
	sameAsCold(t, f, again)
	_ = d
}

// Every change to the entries of <disk>/replicas shows up in the next
// scan, whether the listing before was settled (its stamp then moves) or
// within RacyWindow (then it is listed again even if the stamp stayed the
// same, as it may when the change falls in the tick of the listing).
func TestRescanSeesEveryChangeOfEntries(t *testing.T) {
	changes := []struct {
		name   string
		change func(t *testing.T, d Disk)
	}{
		{"orphan added", func(t *testing.T, d Disk) { replica(t, d, "pvc-new-r-0000000d", disktest.Replica{}) }},
		{"owned removed", func(t *testing.T, d Disk) {
			must(t, os.RemoveAll(filepath.Join(d.Path, ReplicasDir, "pvc-own-r-0000000a")))
		}},
		{"orphan removed", func(t *testing.T, d Disk) {
			must(t, os.RemoveAll(filepath.Join(d.Path, ReplicasDir, "pvc-lost-r-0000000c")))
		}},
		{"file removed", func(t *testing.T, d Disk) { must(t, os.Remove(filepath.Join(d.Path, ReplicasDir, "stray-file"))) }},
		{"owned renamed to an orphan name", func(t *testing.T, d Disk) {
			r := filepath.Join(d.Path, ReplicasDir)
			must(t, os.Rename(filepath.Join(r, "pvc-own-r-0000000a"), filepath.Join(r, "pvc-moved-r-0000000e")))
		}},
		{"orphan renamed", func(t *testing.T, d Disk) {
			r := filepath.Join(d.Path, ReplicasDir)
			must(t, os.Rename(filepath.Join(r, "pvc-lost-r-0000000c"), filepath.Join(r, "pvc-lost-r-0000000f")))
		}},
		{"invalid name renamed valid", func(t *testing.T, d Disk) {
			r := filepath.Join(d.Path, ReplicasDir)
			replica(t, d, "pvc-x-r-00000010", disktest.Replica{})
			must(t, os.Rename(filepath.Join(r, "pvc-x-r-00000010"), filepath.Join(r, "not-a-replica2")))
			must(t, os.Rename(filepath.Join(r, "not-a-replica2"), filepath.Join(r, "pvc-x-r-00000011")))
		}},
		{"owned replaced by a symlink", func(t *testing.T, d Disk) {
			p := filepath.Join(d.Path, ReplicasDir, "pvc-own-r-0000000b")
			must(t, os.Rename(p, filepath.Join(d.Path, "elsewhere")))
			must(t, os.Symlink(filepath.Join(d.Path, "elsewhere"), p))
		}},
		{"orphan replaced by a symlink", func(t *testing.T, d Disk) {
			p := filepath.Join(d.Path, ReplicasDir, "pvc-lost-r-0000000c")
			must(t, os.Rename(p, filepath.Join(d.Path, "elsewhere")))
			must(t, os.Symlink(filepath.Join(d.Path, "elsewhere"), p))
		}},
		{"file replaced by a directory", func(t *testing.T, d Disk) {
			p := filepath.Join(d.Path, ReplicasDir, "stray-file")
			must(t, os.Remove(p))
			must(t, os.Mkdir(p, 0o755))
		}},
		{"orphan replaced by another directory", func(t *testing.T, d Disk) {
			p := filepath.Join(d.Path, ReplicasDir, "pvc-lost-r-0000000c")
			must(t, os.Rename(p, filepath.Join(d.Path, "elsewhere")))
			replica(t, d, "pvc-lost-r-0000000c", disktest.Replica{NoMeta: true})
		}},
	}
	for _, c := range changes {
		t.Run(c.name+"/settled", func(t *testing.T) {
			d, f := rescanDisk(t, settled)
			f.scan()
			if !f.o.caches[d.Scope()].trusted {
				t.Fatal("the settled listing is not trusted: the test proves nothing")
			}
			c.change(t, d)
			n := f.o.listings.Load()
			got := f.scan().Disks[0]
			if f.o.listings.Load() == n {
				t.Error("the change did not make the scan list the directory again")
			}
			sameAsCold(t, f, got)
		})
		t.Run(c.name+"/racy", func(t *testing.T) {
			// The scan's clock is the kernel's now: the directory just
			// changed, so its listing is within RacyWindow.
			d, f := rescanDisk(t, Options{Clock: clocktesting.NewFakeClock(time.Now())})
			f.scan()
			cache := f.o.caches[d.Scope()]
			if cache.trusted {
				t.Fatal("a listing within RacyWindow is trusted")
			}
			c.change(t, d)
			// The worst case: the change fell in the tick of the listing
			// and left the directory's stamp as it was.
			cache.stamp = replicasStamp(t, d)
			sameAsCold(t, f, f.scan().Disks[0])
		})
	}
}

// A changed volume.meta of an unexpected directory shows up in the next
// scan, settled or within RacyWindow.
func TestRescanSeesChangedMeta(t *testing.T) {
	for _, racy := range []bool{false, true} {
		opts := settled
		if racy {
			opts = Options{Clock: clocktesting.NewFakeClock(time.Now())}
		}
		d, f := rescanDisk(t, opts)
		p := filepath.Join(d.Path, ReplicasDir, "pvc-lost-r-0000000c")
		stamp(t, p, 1)
		f.scan()
		f.scan()
		must(t, disktest.WriteMeta(p, disktest.Meta(7<<20)))
		if racy {
			// Within the window nothing of it is cached, even if the
			// directory's identity did not move.
			if ce := f.o.caches[d.Scope()].entries["pvc-lost-r-0000000c"]; ce != nil {
				t.Fatalf("racy entry cached: %+v", ce)
			}
		} else {
			stamp(t, p, 2)
		}
		got := f.scan().Disks[0]
		if len(got.Orphans) != 1 || got.Orphans[0].Meta.Size != 7<<20 {
			t.Fatalf("racy %v: new meta not seen: %+v", racy, got.Orphans)
		}
		sameAsCold(t, f, got)
	}
}

// A changed expected set shows up in the next scan of an unchanged disk,
// without listing it again: one replica added, one removed, and the same
// number of replicas with other names, handed out by StaticExpected
// (Replace, Add) and by a source that builds a new set every call.
func TestRescanSeesChangedExpectedSet(t *testing.T) {
	type setter func(f *fixture, d Disk, names ...string)
	replace := func(f *fixture, d Disk, names ...string) {
		var refs []ReplicaRef
		for _, n := range names {
			refs = append(refs, ReplicaRef{DiskID: d.UUID, DataDirectoryName: n})
		}
		f.exp.Replace(refs)
	}
	sources := map[string]func(t *testing.T) (Disk, *fixture, setter){
		"StaticExpected.Replace": func(t *testing.T) (Disk, *fixture, setter) {
			d, f := rescanDisk(t, settled)
			return d, f, replace
		},
		"new set every call": func(t *testing.T) (Disk, *fixture, setter) {
			d, f := rescanDisk(t, settled)
			var current []string
			f.o.expected = ExpectedFunc(func(context.Context, Disk) (NameSet, error) {
				s := NameSet{}
				for _, n := range current {
					s[n] = struct{}{}
				}
				return s, nil
			})
			return d, f, func(_ *fixture, _ Disk, names ...string) { current = names }
		},
		"new strings every call": func(t *testing.T) (Disk, *fixture, setter) {
			d, f := rescanDisk(t, settled)
			var current []string
			f.o.expected = ExpectedFunc(func(context.Context, Disk) (NameSet, error) {
				s := NameSet{}
				for _, n := range current {
					s[strings.Clone(n)] = struct{}{}
				}
				return s, nil
			})
			return d, f, func(_ *fixture, _ Disk, names ...string) { current = names }
		},
	}
	steps := []struct {
		name  string
		names []string
		owned int
	}{
		{"unchanged", []string{"pvc-own-r-0000000a", "pvc-own-r-0000000b"}, 2},
		{"one added", []string{"pvc-own-r-0000000a", "pvc-own-r-0000000b", "pvc-lost-r-0000000c"}, 3},
		{"one removed", []string{"pvc-own-r-0000000a", "pvc-lost-r-0000000c"}, 2},
		{"same count, other names", []string{"pvc-own-r-0000000a", "pvc-own-r-0000000b"}, 2},
		{"same count, a name not on disk", []string{"pvc-own-r-0000000a", "pvc-elsewhere-r-00000099"}, 1},
		{"none", nil, 0},
		{"back", []string{"pvc-own-r-0000000a", "pvc-own-r-0000000b"}, 2},
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			d, f, set := source(t)
			set(f, d, steps[0].names...)
			f.scan()
			n := f.o.listings.Load()
			for _, s := range steps {
				set(f, d, s.names...)
				got := f.scan().Disks[0]
				if got.Owned != s.owned {
					t.Errorf("%s: owned %d, want %d", s.name, got.Owned, s.owned)
				}
				sameAsCold(t, f, got)
			}
			if f.o.listings.Load() != n {
				t.Errorf("the unchanged disk was listed again %d times", f.o.listings.Load()-n)
			}
		})
	}
	t.Run("StaticExpected.Add", func(t *testing.T) {
		d, f := rescanDisk(t, settled)
		f.scan()
		f.expect(d, "pvc-lost-r-0000000c")
		got := f.scan().Disks[0]
		if got.Owned != 3 || len(got.Orphans) != 0 {
			t.Fatalf("added replica not seen: owned %d, orphans %v", got.Owned, orphanNames(got))
		}
		sameAsCold(t, f, got)
	})
}

// StaticExpected.Replace with the same names keeps the set it handed out,
// so a rescan finds the very same set; other names get a new set.
func TestStaticExpectedReplaceKeepsEqualSets(t *testing.T) {
	d := Disk{NodeID: "n", Name: "d", Path: "/var/lib/longhorn/", UUID: "u"}
	refs := []ReplicaRef{{DiskID: "u", DataDirectoryName: "a-r-00000001"}, {DiskID: "u", DataDirectoryName: "b-r-00000002"}}
	s := NewStaticExpected(refs...)
	before, _ := s.Expected(context.Background(), d)
	s.Replace([]ReplicaRef{refs[1], refs[0]})
	same, _ := s.Expected(context.Background(), d)
	if !sameNameSet(before, same) {
		t.Error("Replace with the same names handed out a new set")
	}
	s.Replace([]ReplicaRef{refs[0], {DiskID: "u", DataDirectoryName: "c-r-00000003"}})
	other, _ := s.Expected(context.Background(), d)
	if sameNameSet(before, other) || !other.Has("c-r-00000003") || other.Has("b-r-00000002") || !before.Has("b-r-00000002") {
		t.Errorf("Replace with other names: %v (before %v)", other, before)
	}
}

// A disk whose UUID or filesystem changed is reported so by the next scan,
// and its listing is not reused when it comes back.
func TestRescanSeesChangedDisk(t *testing.T) {
	t.Run("UUID", func(t *testing.T) {
		d, f := rescanDisk(t, settled)
		f.scan()
		must(t, disktest.WriteConfig(d.Path, d.Name, "another-uuid"))
		if got := f.scan().Disks[0]; got.Status.Health != orphan.HealthDiskChanged || len(got.Orphans) != 0 {
			t.Fatalf("changed UUID: %+v", got.Status)
		}
		must(t, disktest.WriteConfig(d.Path, d.Name, d.UUID))
		n := f.o.listings.Load()
		got := f.scan().Disks[0]
		if f.o.listings.Load() == n {
			t.Error("the disk that came back was not listed again")
		}
		sameAsCold(t, f, got)
	})
	t.Run("host's UUID", func(t *testing.T) {
		d, f := rescanDisk(t, settled)
		f.scan()
		d2 := d
		d2.UUID = "another-uuid"
		must(t, f.o.SetDisks(d2))
		if got := f.scan().Disks[0]; got.Status.Health != orphan.HealthDiskChanged {
			t.Fatalf("changed UUID: %+v", got.Status)
		}
	})
	t.Run("FSID", func(t *testing.T) {
		d, f := rescanDisk(t, settled)
		f.scan()
		// Another filesystem at the disk path, holding a copy of the disk:
		// same config, same names.
		unmount := mountTmpfs(t, d.Path)
		must(t, disktest.NewDisk(d.Path, d.Name, d.UUID))
		for _, n := range []string{"pvc-own-r-0000000a", "pvc-own-r-0000000b", "pvc-lost-r-0000000c"} {
			replica(t, d, n, disktest.Replica{})
		}
		if got := f.scan().Disks[0]; got.Status.Health != orphan.HealthDiskChanged || len(got.Orphans) != 0 {
			t.Fatalf("another filesystem: %+v", got.Status)
		}
		unmount()
		n := f.o.listings.Load()
		got := f.scan().Disks[0]
		if got.Status.Health != orphan.HealthReady || f.o.listings.Load() == n {
			t.Errorf("the disk that came back: %+v, listed again: %v", got.Status, f.o.listings.Load() != n)
		}
		sameAsCold(t, f, got)
	})
}

// listNames, which parses getdents64 itself, lists what os.ReadDir lists,
// with the same types, for every kind of entry.
func TestListNamesMatchesReadDir(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dir, "a-dir"), 0o755))
	writeFile(t, filepath.Join(dir, "a-file"), "x")
	must(t, os.Symlink("a-dir", filepath.Join(dir, "a-link")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "a-fifo"), 0o644))
	for i := range 3000 { // more than one getdents buffer
		must(t, os.Mkdir(filepath.Join(dir, fmt.Sprintf("pvc-%04d-r-%08x", i, i)), 0o755))
	}
	want := map[string]fs.FileMode{}
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		want[e.Name()] = e.Type()
	}
	rr, err := os.OpenRoot(dir)
	must(t, err)
	defer rr.Close()
	f, st, ok, err := openListing(rr)
	must(t, err)
	defer f.Close()
	names, types, err := listNames(f, rr, entriesHint(st), nil, nil)
	must(t, err)
	got := map[string]fs.FileMode{}
	for i, n := range names {
		got[n] = types[i]
	}
	if !ok || len(names) != len(want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("listNames: %d entries (stamp %v), os.ReadDir %d; differ: %v", len(names), ok, len(want), !reflect.DeepEqual(got, want))
	}
}
