package diskscan

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
)

// The benchmark disk: 100k replica directories with real volume.meta
// files, 1% of them orphans. Building it takes a while, so it is built once
// per test binary run and removed by TestMain.
const (
	benchEntries     = 100_000
	benchOrphanEvery = 100
)

var bench struct {
	once sync.Once
	dir  string
	disk Disk
	exp  *StaticExpected
	refs []ReplicaRef // the expected replicas, with the disk's UUID and path
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

func benchDisk(b *testing.B) (Disk, *StaticExpected, string) {
	b.Helper()
	bench.once.Do(func() {
		bench.dir, bench.err = os.MkdirTemp("", "diskscan-bench-")
		if bench.err != nil {
			return
		}
		bench.disk = Disk{NodeID: "node-1", Name: "disk-1", Path: filepath.Join(bench.dir, "disk"), UUID: "uuid-bench"}
		if bench.err = disktest.NewDisk(bench.disk.Path, bench.disk.Name, bench.disk.UUID); bench.err != nil {
			return
		}
		var refs []ReplicaRef
		for i := range benchEntries {
			name := fmt.Sprintf("pvc-%06d-r-%08x", i, uint32(i)*2654435761)
			if bench.err = disktest.MakeReplica(bench.disk.Path, name, disktest.Replica{NoImage: true}); bench.err != nil {
				return
			}
			if i%benchOrphanEvery != 0 {
				refs = append(refs, ReplicaRef{Name: name, DiskID: bench.disk.UUID, DiskPath: bench.disk.Path, DataDirectoryName: name})
			}
		}
		bench.exp, bench.refs = NewStaticExpected(refs...), refs
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.disk, bench.exp, filepath.Join(bench.disk.Path, ReplicasDir)
}

// The yardstick: a bare os.ReadDir of the same replicas directory.
func BenchmarkReadDir100k(b *testing.B) {
	_, _, dir := benchDisk(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := os.ReadDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// The same listing without os.ReadDir's sort, which a scan skips:
// the fairer yardstick of "one directory read".
func BenchmarkReadDirUnsorted100k(b *testing.B) {
	_, _, dir := benchDisk(b)
	b.ReportAllocs()
	for b.Loop() {
		f, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.ReadDir(-1); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// readDirUnsorted is the yardstick: one unsorted listing of dir.
func readDirUnsorted(b *testing.B, dir string) {
	f, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadDir(-1); err != nil {
		b.Fatal(err)
	}
}

// A rescan of the unchanged disk, against an unsorted ReadDir of the same
// replicas directory measured in the same loop (x-readdir: the rescan's
// time over the listing's). The host hands the expected set three ways:
//
//   - same-set: the very set it handed out last time;
//   - new-set: a new map with the same names every cycle, as an
//     ExpectedFunc building it from its informer cache makes it: the same
//     strings, the objects' (the maps are built outside the timer; the
//     scan pays for telling they are equal, by the strings' addresses);
//   - new-strings: the same, but every name a new copy of its string, as
//     after an informer relist (the scan pays for a digest of the names);
//   - replace: StaticExpected.Replace with all the refs every cycle. The
//     scan's cost is x-readdir; Replace's own cost (building the sets and
//     finding them equal to the last ones), which the host pays once per
//     cycle, is replace-x-readdir.
//
// same-set also reports the memory an Orphans value keeps after a scan
// (the cache and the last report), per listed entry (B/entry) and per
// cached unexpected entry (B/cached-entry).
func BenchmarkRescanUnchanged100k(b *testing.B) {
	disk, exp, dir := benchDisk(b)
	set, err := exp.Expected(context.Background(), disk)
	if err != nil {
		b.Fatal(err)
	}
	alternate := func(a, b NameSet) ExpectedSource {
		calls := 0
		return ExpectedFunc(func(context.Context, Disk) (NameSet, error) {
			calls++
			if calls%2 == 0 {
				return a, nil
			}
			return b, nil
		})
	}
	fresh := func() NameSet {
		s := make(NameSet, len(set))
		for name := range set {
			s[strings.Clone(name)] = struct{}{}
		}
		return s
	}
	b.Run("same-set", func(b *testing.B) { benchRescan(b, disk, dir, exp, nil) })
	b.Run("new-set", func(b *testing.B) { benchRescan(b, disk, dir, alternate(maps.Clone(set), maps.Clone(set)), nil) })
	b.Run("new-strings", func(b *testing.B) { benchRescan(b, disk, dir, alternate(fresh(), fresh()), nil) })
	replaced := NewStaticExpected(bench.refs...)
	b.Run("replace", func(b *testing.B) {
		benchRescan(b, disk, dir, replaced, func() { replaced.Replace(bench.refs) })
	})
}

// benchRescan measures rescans of disk with source against the yardstick;
// host, if not nil, runs before each rescan and is timed apart.
func benchRescan(b *testing.B, disk Disk, dir string, source ExpectedSource, host func()) {
	ctx := context.Background()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	inv := newOrphans(b, source, settled, disk)
	if _, err := inv.Report(ctx); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	kept := float64(ms.HeapAlloc) - float64(before)
	cached := len(inv.caches[bench.disk.Scope()].entries)
	reads := inv.metaReads.Load()

	var readDir, scan, hostTime time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		readDirUnsorted(b, dir)
		t1 := time.Now()
		if host != nil {
			host()
		}
		t2 := time.Now()
		r, err := inv.Report(ctx)
		t3 := time.Now()
		if err != nil || len(r.Disks[0].Orphans) != benchEntries/benchOrphanEvery || r.Disks[0].Owned != benchEntries-benchEntries/benchOrphanEvery {
			b.Fatalf("%v: %d orphans, %d owned", err, len(r.Disks[0].Orphans), r.Disks[0].Owned)
		}
		readDir += t1.Sub(t0)
		hostTime += t2.Sub(t1)
		scan += t3.Sub(t2)
	}
	b.StopTimer()
	if inv.metaReads.Load() != reads {
		b.Fatalf("an unchanged rescan read %d volume.meta files", inv.metaReads.Load()-reads)
	}
	n := float64(b.N)
	b.ReportMetric(float64(scan)/n, "scan-ns/op")
	b.ReportMetric(float64(readDir)/n, "readdir-ns/op")
	b.ReportMetric(float64(scan)/float64(readDir), "x-readdir")
	if host != nil {
		b.ReportMetric(float64(hostTime)/float64(readDir), "replace-x-readdir")
	} else {
		b.ReportMetric(kept/benchEntries, "B/entry")
		b.ReportMetric(kept/float64(cached), "B/cached-entry")
	}
	runtime.KeepAlive(inv)
}

// A first scan of the disk by a new Orphans (every unexpected directory's
// volume.meta read and its size summed), against Longhorn's own cycle on
// the same tree measured in the same loop (x-longhorn).
//
// Each iteration is cold: a new Orphans keeps nothing from the one
// before (the benchmark fails unless it lists the directory and reads
// every orphan's volume.meta). The page cache is warm for both. The two
// take turns going first, and each starts after a collection, so neither
// pays for the other's garbage.
func BenchmarkColdScan100k(b *testing.B) {
	disk, exp, _ := benchDisk(b)
	ctx := context.Background()
	if got, err := longhornCycle(disk.Path, bench.refs); err != nil || len(got) != benchEntries/benchOrphanEvery {
		b.Fatalf("Longhorn's cycle found %d orphans: %v", len(got), err)
	}
	var longhorn, cold time.Duration
	runLonghorn := func() {
		runtime.GC()
		t0 := time.Now()
		if _, err := longhornCycle(disk.Path, bench.refs); err != nil {
			b.Fatal(err)
		}
		longhorn += time.Since(t0)
	}
	runScan := func() {
		inv := newOrphans(b, exp, settled, disk)
		runtime.GC()
		t0 := time.Now()
		r, err := inv.Report(ctx)
		cold += time.Since(t0)
		if err != nil || len(r.Disks[0].Orphans) != benchEntries/benchOrphanEvery {
			b.Fatalf("%v: %d orphans", err, len(r.Disks[0].Orphans))
		}
		if inv.listings.Load() != 1 || inv.metaReads.Load() != benchEntries/benchOrphanEvery {
			b.Fatalf("not a cold scan: %d listings, %d volume.meta reads", inv.listings.Load(), inv.metaReads.Load())
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			runLonghorn()
			runScan()
		} else {
			runScan()
			runLonghorn()
		}
		i++
	}
	n := float64(b.N)
	b.ReportMetric(float64(cold)/n, "scan-ns/op")
	b.ReportMetric(float64(longhorn)/n, "longhorn-ns/op")
	b.ReportMetric(float64(cold)/float64(longhorn), "x-longhorn")
}

// longhornCycle is what longhorn-manager's disk monitor does for one
// filesystem disk every 30 s (controller/monitor/disk_monitor.go:
// getReplicaDirectoryNames → util.GetPossibleReplicaDirectoryNames, then
// getOrphanedReplicaDirectoryNames → isVolumeMetaFileExist →
// util.GetVolumeMeta): list <disk>/replicas keeping the directories whose
// name matches -[a-zA-Z0-9]{8}$, drop the data directory of every replica
// of the disk whose spec.diskPath is the disk's path, then read and parse
// the volume.meta of every name left, dropping those that fail. It is
// modelled in-process, in Longhorn's favour: Longhorn runs find (with
// basename per entry) and cat through nsenter, which costs processes this
// model does not.
func longhornCycle(diskPath string, replicas []ReplicaRef) (map[string]string, error) {
	dir := filepath.Join(diskPath, ReplicasDir)
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, e := range entries {
		if e.IsDir() && longhornDirName.MatchString(e.Name()) {
			names[e.Name()] = ""
		}
	}
	for _, r := range replicas {
		if r.DiskPath == diskPath {
			delete(names, r.DataDirectoryName)
		}
	}
	for name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name, MetaFile))
		if err != nil {
			delete(names, name)
			continue
		}
		var meta lhreplicatest.ManagerVolumeMeta
		if err := json.Unmarshal(data, &meta); err != nil {
			delete(names, name)
		}
	}
	return names, nil
}

// longhornDirName is the pattern Longhorn's find applies to each name.
var longhornDirName = regexp.MustCompile(`-[a-zA-Z0-9]{8}$`)

// BenchmarkScanDeepChain is a cold scan of a disk whose one unexpected
// replica directory holds a chain of 6,000 nested directories: the size
// walk stops at MaxWalkDepth, so a scan costs about what a directory
// MaxWalkDepth deep costs, whatever the chain's length (on the commit
// before the bound it took minutes).
func BenchmarkScanDeepChain(b *testing.B) {
	base := b.TempDir()
	p := filepath.Join(base, "disk")
	if err := disktest.NewDisk(p, "d", "u"); err != nil {
		b.Fatal(err)
	}
	d := Disk{NodeID: "n", Name: "d", Path: p, UUID: "u"}
	if err := disktest.MakeReplica(p, "pvc-deep-r-0000abcd", disktest.Replica{}); err != nil {
		b.Fatal(err)
	}
	nestChain(b, filepath.Join(p, ReplicasDir, "pvc-deep-r-0000abcd"), 6000, 100)
	ctx := context.Background()
	var opens int64
	for b.Loop() {
		inv := newOrphans(b, NewStaticExpected(), settled, d)
		r, err := inv.Report(ctx)
		if err != nil || len(r.Disks[0].Skipped) != 1 {
			b.Fatalf("%v: %+v", err, r.Disks[0].Skipped)
		}
		opens = inv.walkOpens.Load()
	}
	b.ReportMetric(float64(opens), "dir-opens/scan")
}
