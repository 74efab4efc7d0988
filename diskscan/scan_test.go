package diskscan

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

var testTime = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// Longhorn's e2e cases and the adversarial entries, on one disk.
func TestScanClassifiesEntries(t *testing.T) {
	base := t.TempDir()
	d := makeDisk(t, base, "node-1", "disk-1", "uuid-1")
	other := makeDisk(t, t.TempDir(), "node-2", "disk-9", "uuid-9")
	f := newFixture(t, d)

	replica(t, d, "pvc-owned-r-1234abcd", disktest.Replica{})
	replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{Size: 8 << 20, Written: 64 << 10})
	replica(t, d, "nosuffixatall", disktest.Replica{})
	replica(t, d, "pvc-short-r-abcd", disktest.Replica{})
	replica(t, d, "pvc-nometa-r-00000001", disktest.Replica{NoMeta: true})
	replica(t, d, "pvc-corrupt-r-00000002", disktest.Replica{Meta: []byte(`{"Size":1,`)})
	replica(t, d, "pvc-partial-r-00000003", disktest.Replica{Meta: []byte(`{"Size":1,"Head":"h"}`)})
	replica(t, d, "pvc-huge-r-00000004", disktest.Replica{Meta: []byte(`{"Size":1,"Head":"` + strings.Repeat("x", DefaultMaxMetaSize) + `"}`)})
	replica(t, d, "-00000005", disktest.Replica{}) // no volume part
	replica(t, other, "pvc-elsewhere-r-0000000a", disktest.Replica{})
	rd := filepath.Join(d.Path, ReplicasDir)
	must(t, os.Symlink(filepath.Join(other.Path, ReplicasDir, "pvc-elsewhere-r-0000000a"), filepath.Join(rd, "pvc-link-r-0000000b")))
	must(t, os.Symlink("/", filepath.Join(rd, "pvc-root-r-0000000c")))
	must(t, os.WriteFile(filepath.Join(rd, "pvc-file-r-0000000d"), []byte("x"), 0o644))
	must(t, os.Mkdir(filepath.Join(rd, tombstonePrefix+"pvc-gone-r-0000000e"+tombstoneSuffix), 0o755))
	f.expect(d, "pvc-owned-r-1234abcd", "pvc-nometa-r-00000001-not-this-one")

	rep := f.scan().Disks[0]
	if rep.Status.Health != orphan.HealthReady {
		t.Fatalf("health %v", rep.Status)
	}
	if got, want := orphanNames(rep), []string{"pvc-lost-r-deadbeef"}; !equalStrings(got, want) {
		t.Fatalf("orphans %v, want %v", got, want)
	}
	if rep.Owned != 1 || rep.Entries != 13 {
		t.Errorf("owned %d entries %d, want 1 and 13", rep.Owned, rep.Entries)
	}
	o := rep.Orphans[0]
	if o.Meta.Size != 8<<20 || o.Item.Param(orphan.ParamDiskUUID) != "uuid-1" || o.Item.Param(orphan.ParamDiskType) != "filesystem" ||
		o.Item.DataEngine != orphan.DataEngineV1 || o.Item.Kind != orphan.KindReplicaData {
		t.Errorf("orphan %+v", o)
	}
	// The 8 MiB image has 64 KiB written: a sparse file counts its blocks only.
	if o.AllocatedBytes < 64<<10 || o.AllocatedBytes >= 1<<20 || rep.OrphanBytes != o.AllocatedBytes {
		t.Errorf("allocated %d (total %d), want about 64 KiB", o.AllocatedBytes, rep.OrphanBytes)
	}
	reasons := skippedReasons(rep)
	wantReason := map[string]string{
		"nosuffixatall":          "-<8 letters or digits>",
		"pvc-short-r-abcd":       "-<8 letters or digits>",
		"-00000005":              "-<8 letters or digits>",
		"pvc-nometa-r-00000001":  "no volume.meta",
		"pvc-corrupt-r-00000002": "invalid volume.meta",
		"pvc-partial-r-00000003": `missing key "Dirty"`,
		"pvc-huge-r-00000004":    "too large",
		"pvc-link-r-0000000b":    "symbolic link",
		"pvc-root-r-0000000c":    "symbolic link",
		"pvc-file-r-0000000d":    "not a directory",
		tombstonePrefix + "pvc-gone-r-0000000e" + tombstoneSuffix: "purge in progress",
	}
	for name, want := range wantReason {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("skipped %s: reason %q, want it to contain %q", name, reasons[name], want)
		}
	}
	if len(reasons) != len(wantReason) {
		t.Errorf("skipped %v, want exactly %d", reasons, len(wantReason))
	}
	snap := f.scan().Snapshot()
	if len(snap.Items) != 1 || snap.Scopes[d.Scope()].Health != orphan.HealthReady || len(snap.Skipped) != len(wantReason) {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestScanMissingReplicasDirIsReady(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	must(t, os.Remove(filepath.Join(d.Path, ReplicasDir)))
	f := newFixture(t, d)
	rep := f.scan().Disks[0]
	if rep.Status.Health != orphan.HealthReady || !strings.Contains(rep.Status.Message, "no replicas directory") || len(rep.Orphans) != 0 {
		t.Fatalf("%+v", rep)
	}
}

// A disk that is not what the host expects reports no items and says why.
func TestScanDiskHealth(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(t *testing.T, d *Disk)
		health orphan.Health
		msg    string
	}{
		{"config missing", func(t *testing.T, d *Disk) { must(t, os.Remove(filepath.Join(d.Path, ConfigFile))) }, orphan.HealthDiskInvalid, "no longhorn-disk.cfg"},
		{"config corrupt", func(t *testing.T, d *Disk) { writeFile(t, filepath.Join(d.Path, ConfigFile), `{"diskUUID":`) }, orphan.HealthDiskInvalid, "not a JSON object"},
		{"config without UUID", func(t *testing.T, d *Disk) { writeFile(t, filepath.Join(d.Path, ConfigFile), `{"diskName":"d"}`) }, orphan.HealthDiskInvalid, "no diskUUID"},
		{"config oversized", func(t *testing.T, d *Disk) {
			writeFile(t, filepath.Join(d.Path, ConfigFile), `{"diskUUID":"u","x":"`+strings.Repeat("y", DefaultMaxConfigSize)+`"}`)
		}, orphan.HealthDiskInvalid, "larger than"},
		{"UUID changed", func(t *testing.T, d *Disk) { must(t, disktest.WriteConfig(d.Path, "d", "other-uuid")) }, orphan.HealthDiskChanged, "diskUUID other-uuid, expected u"},
		{"host expects another filesystem", func(t *testing.T, d *Disk) { d.FSID = "0000deadbeef" }, orphan.HealthDiskChanged, "expected 0000deadbeef"},
		{"path missing", func(t *testing.T, d *Disk) { must(t, os.RemoveAll(d.Path)) }, orphan.HealthDiskInvalid, "does not exist"},
		{"replicas is a symlink", func(t *testing.T, d *Disk) {
			rd := filepath.Join(d.Path, ReplicasDir)
			must(t, os.RemoveAll(rd))
			must(t, os.Symlink("/", rd))
		}, orphan.HealthDiskInvalid, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := makeDisk(t, t.TempDir(), "n", "d", "u")
			replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
			c.break_(t, &d)
			f := newFixture(t, d)
			rep := f.scan().Disks[0]
			if rep.Status.Health != c.health || !strings.Contains(rep.Status.Message, c.msg) || len(rep.Orphans) != 0 {
				t.Fatalf("status %+v orphans %v, want %s containing %q and no orphans", rep.Status, orphanNames(rep), c.health, c.msg)
			}
		})
	}
	t.Run("expected source fails", func(t *testing.T) {
		d := makeDisk(t, t.TempDir(), "n", "d", "u")
		replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
		inv := newOrphans(t, ExpectedFunc(func(context.Context, Disk) (NameSet, error) { return nil, errors.New("informer not synced") }), Options{}, d)
		snap, err := inv.Scan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st := snap.Scopes[d.Scope()]; st.Health != orphan.HealthUnknown || !strings.Contains(st.Message, "informer not synced") || len(snap.Items) != 0 {
			t.Fatalf("%+v", snap)
		}
	})
}

// Two disks of one node on one filesystem: neither is trusted. On two
// nodes (two machines that happen to report the same ID) both are fine.
func TestScanSharedFilesystem(t *testing.T) {
	base := t.TempDir()
	a := makeDisk(t, base, "n", "a", "ua")
	b := makeDisk(t, base, "n", "b", "ub")
	c := makeDisk(t, base, "m", "c", "uc")
	replica(t, a, "pvc-x-r-00000001", disktest.Replica{})
	replica(t, c, "pvc-x-r-00000001", disktest.Replica{})
	f := newFixture(t, a, b, c)
	for _, rep := range f.scan().Disks {
		switch rep.Disk.NodeID {
		case "n":
			if rep.Status.Health != orphan.HealthDiskInvalid || !strings.Contains(rep.Status.Message, "shared with disk") || len(rep.Orphans) != 0 {
				t.Errorf("disk %s: %+v", rep.Disk.Name, rep.Status)
			}
		case "m":
			if rep.Status.Health != orphan.HealthReady || len(rep.Orphans) != 1 {
				t.Errorf("disk %s: %+v", rep.Disk.Name, rep.Status)
			}
		}
	}
	// The deleter refuses on a shared filesystem too, whatever it was told.
	fsid, _ := FSID(a.Path)
	a.FSID = fsid
	err := newOrphans(t, NewStaticExpected(), Options{}, a, b).Delete(context.Background(), record(t, a, "pvc-x-r-00000001"))
	if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, ErrDiskInvalid) {
		t.Fatalf("delete on a shared filesystem: %v", err)
	}
	if !exists(t, filepath.Join(a.Path, ReplicasDir, "pvc-x-r-00000001")) {
		t.Fatal("data deleted")
	}
}

// Several disks of one node, each its own filesystem (tmpfs), and the
// same directory name on two of them: two items with different names.
func TestScanSeveralDisks(t *testing.T) {
	base := t.TempDir()
	var disks []Disk
	for _, n := range []string{"d1", "d2", "d3"} {
		mountTmpfs(t, filepath.Join(base, "n-"+n))
		disks = append(disks, makeDisk(t, base, "n", n, "uuid-"+n))
	}
	replica(t, disks[0], "pvc-same-r-00000001", disktest.Replica{})
	replica(t, disks[1], "pvc-same-r-00000001", disktest.Replica{})
	replica(t, disks[2], "pvc-other-r-00000002", disktest.Replica{})
	f := newFixture(t, disks...)
	f.expect(disks[2], "pvc-other-r-00000002")
	snap, err := f.o.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Items) != 2 || len(snap.Scopes) != 3 {
		t.Fatalf("%+v", snap)
	}
	for s, st := range snap.Scopes {
		if st.Health != orphan.HealthReady {
			t.Errorf("%s: %+v", s, st)
		}
	}
	n0, err0 := snap.Items[0].Name()
	n1, err1 := snap.Items[1].Name()
	if err0 != nil || err1 != nil || n0 == n1 || snap.Items[0].Param(orphan.ParamDiskName) == snap.Items[1].Param(orphan.ParamDiskName) {
		t.Fatalf("items %+v: names %s %s", snap.Items, n0, n1)
	}
}

// A directory that disappears drops out of the inventory and the cache.
func TestScanIncremental(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	for _, n := range []string{"pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-c-r-0000000c", "pvc-own-r-000000ff"} {
		replica(t, d, n, disktest.Replica{})
	}
	f.expect(d, "pvc-own-r-000000ff")
	step := func(wantReads int64, wantOrphans ...string) DiskReport {
		t.Helper()
		before := f.o.metaReads.Load()
		rep := f.scan().Disks[0]
		if got := f.o.metaReads.Load() - before; got != wantReads {
			t.Errorf("volume.meta reads %d, want %d", got, wantReads)
		}
		if !equalStrings(orphanNames(rep), wantOrphans) {
			t.Errorf("orphans %v, want %v", orphanNames(rep), wantOrphans)
		}
		if n := len(f.o.caches[d.Scope()].entries); n != len(rep.Orphans)+len(rep.Skipped) {
			t.Errorf("cache holds %d entries, want %d", n, len(rep.Orphans)+len(rep.Skipped))
		}
		return rep
	}
	step(3, "pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-c-r-0000000c")
	step(0, "pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-c-r-0000000c") // unchanged: no meta read
	replica(t, d, "pvc-d-r-0000000d", disktest.Replica{})
	step(1, "pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-c-r-0000000c", "pvc-d-r-0000000d")
	// The engine rewrites b's meta (tmp + rename bumps the directory's
	// mtime); the new meta is corrupt, so b is no longer a replica.
	must(t, disktest.WriteMeta(filepath.Join(d.Path, ReplicasDir, "pvc-b-r-0000000b"), []byte("garbage")))
	stamp(t, filepath.Join(d.Path, ReplicasDir, "pvc-b-r-0000000b"), 1)
	rep := step(1, "pvc-a-r-0000000a", "pvc-c-r-0000000c", "pvc-d-r-0000000d")
	if !strings.Contains(skippedReasons(rep)["pvc-b-r-0000000b"], "invalid volume.meta") {
		t.Errorf("b: %v", rep.Skipped)
	}
	must(t, disktest.WriteMeta(filepath.Join(d.Path, ReplicasDir, "pvc-b-r-0000000b"), disktest.Meta(5<<20)))
	stamp(t, filepath.Join(d.Path, ReplicasDir, "pvc-b-r-0000000b"), 2)
	rep = step(1, "pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-c-r-0000000c", "pvc-d-r-0000000d")
	if rep.Orphans[1].Meta.Size != 5<<20 {
		t.Errorf("b's new meta not seen: %+v", rep.Orphans[1].Meta)
	}
	must(t, os.RemoveAll(filepath.Join(d.Path, ReplicasDir, "pvc-c-r-0000000c")))
	step(0, "pvc-a-r-0000000a", "pvc-b-r-0000000b", "pvc-d-r-0000000d")
	// Replaced by a different directory of the same name (new inode).
	p := filepath.Join(d.Path, ReplicasDir, "pvc-d-r-0000000d")
	must(t, os.Rename(p, filepath.Join(d.Path, "moved-away")))
	replica(t, d, "pvc-d-r-0000000d", disktest.Replica{NoMeta: true})
	step(1, "pvc-a-r-0000000a", "pvc-b-r-0000000b")
	// Becoming expected drops it from the cache without a read.
	f.expect(d, "pvc-a-r-0000000a")
	step(0, "pvc-b-r-0000000b")
	// And no longer expected: an orphan again, validated afresh.
	f.exp.Replace([]ReplicaRef{{DiskID: d.UUID, DataDirectoryName: "pvc-own-r-000000ff"}})
	step(1, "pvc-a-r-0000000a", "pvc-b-r-0000000b")
	step(0, "pvc-a-r-0000000a", "pvc-b-r-0000000b")
}

// The incremental scan always agrees with a cold scan by a new Orphans,
// through a seeded random run of the changes a disk sees.
func TestScanIncrementalMatchesCold(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	f := newFixture(t, d)
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("pvc-%02d-r-%08x", i, i)
	}
	expected := map[string]bool{}
	for step := range 300 {
		name := names[rng.IntN(len(names))]
		p := filepath.Join(d.Path, ReplicasDir, name)
		switch op := rng.IntN(6); op {
		case 0, 1:
			must(t, disktest.MakeReplica(d.Path, name, disktest.Replica{NoImage: rng.IntN(2) == 0}))
		case 2:
			must(t, os.RemoveAll(p))
		case 3:
			if exists(t, p) {
				metas := [][]byte{disktest.Meta(int64(rng.IntN(100))), []byte("{"), []byte("{}")}
				must(t, disktest.WriteMeta(p, metas[rng.IntN(len(metas))]))
			}
		case 4, 5:
			expected[name] = !expected[name]
			var refs []ReplicaRef
			for n, ok := range expected {
				if ok {
					refs = append(refs, ReplicaRef{DiskID: d.UUID, DataDirectoryName: n})
				}
			}
			f.exp.Replace(refs)
		}
		if exists(t, p) {
			// Give every change its own modification time: the kernel's
			// timestamps are too coarse to tell apart two changes made in
			// the same few milliseconds, which RacyWindow covers in real
			// use and the settled clock switches off here.
			stamp(t, p, step)
		}
		got := f.scan().Disks[0]
		cold, err := newOrphans(t, f.exp, settled, f.o.Disks()...).Report(context.Background())
		must(t, err)
		want := cold.Disks[0]
		if !reflect.DeepEqual(orphanNames(got), orphanNames(want)) || got.Owned != want.Owned || !reflect.DeepEqual(skippedReasons(got), skippedReasons(want)) {
			t.Fatalf("step %d: incremental %v owned %d skipped %v; cold %v owned %d skipped %v",
				step, orphanNames(got), got.Owned, skippedReasons(got), orphanNames(want), want.Owned, skippedReasons(want))
		}
		for i := range got.Orphans {
			if got.Orphans[i].Meta != want.Orphans[i].Meta {
				t.Fatalf("step %d: %s meta %+v, cold %+v", step, got.Orphans[i].Name, got.Orphans[i].Meta, want.Orphans[i].Meta)
			}
		}
	}
}

// A directory changed within RacyWindow of the scan is validated again
// next time: its timestamps might not move with a change in the same tick.
func TestScanRacyWindow(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	p := replica(t, d, "pvc-a-r-0000000a", disktest.Replica{})
	fi, err := os.Stat(p)
	must(t, err)
	clk := clocktesting.NewFakeClock(fi.ModTime())
	inv := newOrphans(t, NewStaticExpected(), Options{Clock: clk}, d)
	for i, want := range []int64{1, 2, 3} {
		if i == 2 {
			clk.SetTime(fi.ModTime().Add(RacyWindow + time.Millisecond))
		}
		_, err := inv.Scan(context.Background())
		must(t, err)
		if got := inv.metaReads.Load(); got != want {
			t.Fatalf("scan %d: %d reads, want %d", i, got, want)
		}
	}
	if _, err := inv.Scan(context.Background()); err != nil || inv.metaReads.Load() != 3 {
		t.Fatalf("settled directory read again: %d reads", inv.metaReads.Load())
	}
}

func TestJudge(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	replica(t, d, "pvc-lost-r-00000002", disktest.Replica{})
	replica(t, d, "pvc-own-r-00000001", disktest.Replica{})
	exp := NewStaticExpected(ReplicaRef{DiskID: "u", DataDirectoryName: "pvc-own-r-00000001"})
	failing := ExpectedFunc(func(context.Context, Disk) (NameSet, error) { return nil, errors.New("api down") })
	item := func(mod func(*orphan.Item)) orphan.Item {
		it := dataItem(d, "pvc-lost-r-00000002")
		mod(&it)
		return it
	}
	cases := []struct {
		name string
		src  ExpectedSource
		it   orphan.Item
		want orphan.Outcome
	}{
		{"orphan", exp, item(func(*orphan.Item) {}), orphan.OutcomeOrphan},
		{"owned", exp, item(func(it *orphan.Item) { it.Parameters[orphan.ParamDataName] = "pvc-own-r-00000001" }), orphan.OutcomeOwned},
		{"source fails", failing, item(func(*orphan.Item) {}), orphan.OutcomeUndecided},
		{"unknown disk", exp, item(func(it *orphan.Item) { it.Parameters[orphan.ParamDiskName] = "x" }), orphan.OutcomeUndecided},
		{"unknown node", exp, item(func(it *orphan.Item) { it.NodeID = "m" }), orphan.OutcomeUndecided},
		{"disk UUID changed", exp, item(func(it *orphan.Item) { it.Parameters[orphan.ParamDiskUUID] = "old" }), orphan.OutcomeUndecided},
		{"disk path changed", exp, item(func(it *orphan.Item) { it.Parameters[orphan.ParamDiskPath] = "/mnt/x" }), orphan.OutcomeUndecided},
		{"v2", exp, item(func(it *orphan.Item) { it.DataEngine = orphan.DataEngineV2 }), orphan.OutcomeUndecided},
		{"instance kind", exp, item(func(it *orphan.Item) { it.Kind = orphan.KindReplicaInstance }), orphan.OutcomeUndecided},
		{"path-like name", exp, item(func(it *orphan.Item) { it.Parameters[orphan.ParamDataName] = ".." }), orphan.OutcomeUndecided},
		{"name with a slash", exp, item(func(it *orphan.Item) { it.Parameters[orphan.ParamDataName] = "../n-d/replicas/pvc-lost-r-00000002" }), orphan.OutcomeUndecided},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := newOrphans(t, c.src, Options{}, d).Judge(context.Background(), c.it)
			if err != nil || v.Outcome != c.want || v.Reason == "" {
				t.Fatalf("verdict %+v, %v; want %v with a reason", v, err, c.want)
			}
		})
	}
}

// The Sweeper plans from the latest scan, which may predate a purge or a
// removal: a replica directory that is no longer there (or is no longer a
// directory) is undecided, never an orphan, so a stale snapshot does not
// recreate a record for it. The look is through the disk's os.Root and
// never follows a link.
func TestJudgeGoneDirectoryIsUndecided(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	d.Path += "/" // Longhorn's default spelling; the look uses the cleaned path
	lost := replica(t, d, "pvc-lost-r-00000002", disktest.Replica{})
	o := newOrphans(t, NewStaticExpected(ReplicaRef{DiskID: "u", DataDirectoryName: "pvc-live-r-00000001"}), Options{}, d)
	judge := func() orphan.Verdict {
		t.Helper()
		v, err := o.Judge(context.Background(), dataItem(d, "pvc-lost-r-00000002"))
		must(t, err)
		return v
	}
	if v := judge(); v.Outcome != orphan.OutcomeOrphan {
		t.Fatalf("present: %+v, want orphan", v)
	}
	must(t, os.RemoveAll(lost))
	if v := judge(); v.Outcome != orphan.OutcomeUndecided || !strings.Contains(v.Reason, "not on disk") {
		t.Fatalf("gone: %+v, want undecided", v)
	}
	// A symbolic link to a real replica directory elsewhere is no replica.
	elsewhere := replica(t, makeDisk(t, t.TempDir(), "m", "x", "ux"), "pvc-lost-r-00000002", disktest.Replica{})
	must(t, os.Symlink(elsewhere, lost))
	if v := judge(); v.Outcome != orphan.OutcomeUndecided || !strings.Contains(v.Reason, "symbolic link") {
		t.Fatalf("symbolic link: %+v, want undecided", v)
	}
	must(t, os.Remove(lost))
	writeFile(t, lost, "not a directory")
	if v := judge(); v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("file: %+v, want undecided", v)
	}
	// No replicas directory at all, or no disk path: gone too.
	must(t, os.Remove(lost))
	must(t, os.Remove(filepath.Join(d.Path, ReplicasDir)))
	if v := judge(); v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("no replicas directory: %+v, want undecided", v)
	}
	must(t, os.RemoveAll(d.Path))
	if v := judge(); v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("no disk path: %+v, want undecided", v)
	}
}

func TestSetDisksValidation(t *testing.T) {
	bad := [][]Disk{
		{{NodeID: "n", Name: "d", Path: "relative", UUID: "u"}},
		{{NodeID: "n", Name: "d", Path: "/a/../b", UUID: "u"}},
		{{NodeID: "n", Name: "d", Path: "/a/..", UUID: "u"}},
		{{NodeID: "n", Name: "d", Path: "", UUID: "u"}},
		{{NodeID: "n", Name: "d", Path: "var/lib/longhorn/", UUID: "u"}},
		{{NodeID: "n", Name: "d", Path: "/a\x00b", UUID: "u"}},
		{{NodeID: "", Name: "d", Path: "/a", UUID: "u"}},
		{{NodeID: "n", Name: "d", Path: "/a", UUID: ""}},
		{{NodeID: "n", Name: "d", Path: "/a", UUID: "u"}, {NodeID: "n", Name: "d", Path: "/b", UUID: "v"}},
	}
	good := Disk{NodeID: "n", Name: "good", Path: "/g", UUID: "g"}
	o := newOrphans(t, NewStaticExpected(), Options{}, good)
	for _, ds := range bad {
		if _, err := NewOrphans(NewStaticExpected(), Options{Disks: ds}); err == nil {
			t.Errorf("NewOrphans with disks %+v accepted", ds)
		}
		if err := o.SetDisks(ds...); err == nil {
			t.Errorf("SetDisks(%+v) accepted", ds)
		}
		if got := o.Disks(); len(got) != 1 || got[0] != good {
			t.Fatalf("a refused SetDisks changed the disks to %+v", got)
		}
	}
	// Longhorn's default path has a trailing slash; other unclean but
	// absolute paths without ".." are kept as the host wrote them.
	for _, p := range []string{"/var/lib/longhorn/", "/var/lib//longhorn", "/var/./lib/longhorn"} {
		if err := o.SetDisks(Disk{NodeID: "n", Name: "d", Path: p, UUID: "u"}); err != nil {
			t.Errorf("SetDisks with path %q: %v", p, err)
			continue
		}
		if got := o.Disks()[0].Path; got != p {
			t.Errorf("path %q stored as %q", p, got)
		}
	}
	if _, err := NewOrphans(nil, Options{}); !errors.Is(err, ErrNoExpectedSource) {
		t.Errorf("NewOrphans without a source: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// stamp sets p's modification time to the k-th second after testTime, so
// that changes made within one kernel timestamp tick still look different
// (the real-clock case is TestScanRacyWindow's).
func stamp(t *testing.T, p string, k int) {
	t.Helper()
	ts := testTime.Add(time.Duration(k) * time.Second)
	must(t, os.Chtimes(p, ts, ts))
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(s), 0o644))
}

// SetDisks may run while scans, judgements and purges do (hosts call it
// from their Node informer): each scan finishes with the disks it started
// with, and nothing races (the race detector watches).
func TestSetDisksDuringScans(t *testing.T) {
	base := t.TempDir()
	a := makeDisk(t, base, "n", "a", "ua")
	b := makeDisk(t, t.TempDir(), "m", "b", "ub")
	replica(t, a, "pvc-a-r-0000000a", disktest.Replica{})
	replica(t, b, "pvc-b-r-0000000b", disktest.Replica{})
	f := newFixture(t, a)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			disks := []Disk{a}
			if i%2 == 0 {
				disks = append(disks, b)
			}
			if err := f.o.SetDisks(disks...); err != nil {
				t.Error(err) // not Fatal: this is not the test's goroutine
				return
			}
		}
	}()
	for range 20 {
		rep := f.scan()
		if n := len(rep.Disks); n != 1 && n != 2 {
			t.Fatalf("a scan saw %d disks", n)
		}
		for _, d := range rep.Disks {
			if d.Status.Health != orphan.HealthReady || len(d.Orphans) != 1 {
				t.Fatalf("disk %s: %+v", d.Disk.Scope(), d)
			}
		}
		if _, err := f.o.Judge(context.Background(), dataItem(a, "pvc-a-r-0000000a")); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}
