package diskscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
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
				refs = append(refs, ReplicaRef{DiskID: bench.disk.UUID, DataDirectoryName: name})
			}
		}
		bench.exp = NewStaticExpected(refs...)
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

// A rescan of the unchanged disk: one listing, one look-up per entry, one
// lstat per unexpected entry, no volume.meta read. It also reports the
// memory an Orphans value keeps per listed entry after a scan (the cache and
// the last report), B/entry, and per cached (unexpected) entry.
func BenchmarkRescanUnchanged100k(b *testing.B) {
	disk, exp, _ := benchDisk(b)
	ctx := context.Background()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	inv := newOrphans(b, exp, settled, disk)
	if _, err := inv.Report(ctx); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	kept := float64(ms.HeapAlloc) - float64(before)
	cached := len(inv.caches[bench.disk.Scope()].entries)
	reads := inv.metaReads.Load()

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := inv.Report(ctx)
		if err != nil || len(r.Disks[0].Orphans) != benchEntries/benchOrphanEvery {
			b.Fatalf("%v: %d orphans", err, len(r.Disks[0].Orphans))
		}
	}
	b.StopTimer()
	if inv.metaReads.Load() != reads {
		b.Fatalf("an unchanged rescan read %d volume.meta files", inv.metaReads.Load()-reads)
	}
	b.ReportMetric(kept/benchEntries, "B/entry")
	b.ReportMetric(kept/float64(cached), "B/cached-entry")
	runtime.KeepAlive(inv)
}

// A first scan of the disk: every unexpected directory's volume.meta is
// read and its size summed.
func BenchmarkColdScan100k(b *testing.B) {
	disk, exp, _ := benchDisk(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		inv := newOrphans(b, exp, settled, disk)
		if _, err := inv.Report(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
