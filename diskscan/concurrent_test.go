package diskscan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// oddDisk makes a disk holding every kind of entry a scan meets: orphans,
// owned directories (more than one classification chunk of them), and
// unexpected entries of every odd sort, spread over the listing. It
// returns the disk and the names of its owned directories.
func oddDisk(t *testing.T) (Disk, []string) {
	t.Helper()
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	var owned []string
	for i := range 2*chunkSize + 100 {
		name := fmt.Sprintf("pvc-own%05d-r-%08d", i, i)
		must(t, os.Mkdir(filepath.Join(rd, name), 0o755))
		owned = append(owned, name)
	}
	for i := range 40 {
		replica(t, d, fmt.Sprintf("pvc-lost%02d-r-%08d", i, i), disktest.Replica{Size: int64(i+1) << 20, Written: int64(i%3) << 12})
	}
	replica(t, d, "pvc-nometa-r-00000001", disktest.Replica{NoMeta: true})
	replica(t, d, "pvc-corrupt-r-00000002", disktest.Replica{Meta: []byte(`{"Size":1,`)})
	replica(t, d, "pvc-partial-r-00000003", disktest.Replica{Meta: []byte(`{"Size":1,"Head":"h"}`)})
	replica(t, d, "pvc-huge-r-00000004", disktest.Replica{Meta: []byte(`{"Size":1,"Head":"` + strings.Repeat("x", DefaultMaxMetaSize) + `"}`)})
	fifoMeta := replica(t, d, "pvc-fifometa-r-00000005", disktest.Replica{})
	mkfifo(t, filepath.Join(fifoMeta, MetaFile))
	sockMeta := replica(t, d, "pvc-sockmeta-r-00000006", disktest.Replica{})
	mknod(t, filepath.Join(sockMeta, MetaFile), syscall.S_IFSOCK, 0)
	dirMeta := replica(t, d, "pvc-dirmeta-r-00000007", disktest.Replica{NoMeta: true})
	must(t, os.Mkdir(filepath.Join(dirMeta, MetaFile), 0o755))
	locked := replica(t, d, "pvc-locked-r-00000008", disktest.Replica{})
	must(t, os.Chmod(locked, 0))
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	mkfifo(t, filepath.Join(rd, "pvc-fifo-r-00000009"))
	mknod(t, filepath.Join(rd, "pvc-sock-r-0000000a"), syscall.S_IFSOCK, 0)
	if l, err := net.Listen("unix", filepath.Join(rd, "pvc-live-sock-r-0000000b")); err == nil {
		t.Cleanup(func() { l.Close() })
	}
	must(t, os.WriteFile(filepath.Join(rd, "pvc-file-r-0000000c"), []byte("x"), 0o644))
	must(t, os.Symlink(filepath.Join(rd, "pvc-lost00-r-00000000"), filepath.Join(rd, "pvc-link-r-0000000d")))
	must(t, os.Symlink("/", filepath.Join(rd, "pvc-root-r-0000000e")))
	must(t, os.Mkdir(filepath.Join(rd, "nosuffixatall"), 0o755))
	must(t, os.Mkdir(filepath.Join(rd, tombstonePrefix+"pvc-gone-r-0000000f"+tombstoneSuffix), 0o755))
	must(t, os.Mkdir(filepath.Join(rd, "pvc-"+strings.Repeat("l", 220)+"-r-00000010"), 0o755))
	mounted := replica(t, d, "pvc-mounted-r-00000011", disktest.Replica{})
	if err := syscall.Mount("tmpfs", mounted, "tmpfs", 0, "size=1m"); err == nil {
		t.Cleanup(func() { syscall.Unmount(mounted, syscall.MNT_DETACH) })
		must(t, os.WriteFile(filepath.Join(mounted, MetaFile), disktest.Meta(1<<20), 0o644))
	} else {
		t.Logf("no mount point in the tree: %v", err)
	}
	return d, owned
}

// A scan that validates with any number of workers reports exactly what a
// sequential one does, on a tree with every kind of odd entry, and leaves
// the same cache behind (a rescan reads nothing more).
func TestConcurrentValidationMatchesSequential(t *testing.T) {
	// More processors than the machine may have, so that classification
	// really runs in several goroutines.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	d, owned := oddDisk(t)
	exp := NewStaticExpected()
	for _, n := range owned {
		exp.Add(ReplicaRef{Name: n, DiskID: d.UUID, DataDirectoryName: n})
	}
	scan := func(workers int) (Report, *Orphans) {
		o := newOrphans(t, exp, Options{Clock: settled.Clock, ScanWorkers: workers}, d)
		r := within(t, "scan", func() Report {
			r, err := o.Report(context.Background())
			if err != nil {
				t.Error(err)
			}
			return r
		})
		return r, o
	}
	want, seq := scan(1)
	rep := want.Disks[0]
	// The 40 orphans, and (as root) the unreadable one and the mount point.
	if len(rep.Orphans) < 40 || rep.Owned != len(owned) || len(rep.Skipped) < 15 {
		t.Fatalf("sequential scan: %d orphans, %d owned, skipped %v", len(rep.Orphans), rep.Owned, skippedReasons(rep))
	}
	for _, workers := range []int{2, 3, 8, 64} {
		got, o := scan(workers)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d workers: report differs from the sequential one:\n got %+v\nwant %+v", workers, got.Disks[0].Skipped, want.Disks[0].Skipped)
		}
		if !sameEntries(o.caches[d.Scope()].entries, seq.caches[d.Scope()].entries) {
			t.Errorf("%d workers: cached validations differ", workers)
		}
	}
	// And the caches left behind serve a rescan alike.
	for _, workers := range []int{1, 8} {
		_, o := scan(workers)
		reads := o.metaReads.Load()
		if again, err := o.Report(context.Background()); err != nil || !reflect.DeepEqual(again, want) {
			t.Errorf("%d workers: rescan %v differs", workers, err)
		}
		if extra := o.metaReads.Load() - reads; extra != 0 {
			t.Errorf("%d workers: a settled rescan read %d volume.meta files", workers, extra)
		}
	}
}

// sameEntries reports whether two caches of validations hold the same.
func sameEntries(a, b map[string]*cachedEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(*v, *w) {
			return false
		}
	}
	return true
}

// cancelAfterReads is a context cancelled once its scan has opened n
// volume.meta files: mid-validation, without timing.
type cancelAfterReads struct {
	context.Context
	o    *Orphans
	n    int64
	once sync.Once
	done chan struct{}
	hit  atomic.Bool
}

func (c *cancelAfterReads) Err() error {
	if c.o.metaReads.Load() >= c.n {
		c.once.Do(func() { close(c.done); c.hit.Store(true) })
		return context.Canceled
	}
	return nil
}

func (c *cancelAfterReads) Done() <-chan struct{} { return c.done }

// A scan cancelled while it validates returns the context's error with no
// report: LastReport keeps the last complete scan, the workers stop
// taking entries, and the next scan is complete and correct.
func TestCancelledScanReturnsNoPartialReport(t *testing.T) {
	d, owned := oddDisk(t)
	exp := NewStaticExpected()
	for _, n := range owned {
		exp.Add(ReplicaRef{Name: n, DiskID: d.UUID, DataDirectoryName: n})
	}
	want, err := newOrphans(t, exp, settled, d).Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 4, 16} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			o := newOrphans(t, exp, Options{Clock: settled.Clock, ScanWorkers: workers}, d)
			ctx := &cancelAfterReads{Context: context.Background(), o: o, n: 5, done: make(chan struct{})}
			start := time.Now()
			err := within(t, "cancelled scan", func() error { _, err := o.Report(ctx); return err })
			if !errors.Is(err, context.Canceled) || !ctx.hit.Load() {
				t.Fatalf("cancelled scan: %v", err)
			}
			// Each worker finishes at most the entry it holds.
			if reads := o.metaReads.Load(); reads > 5+int64(workers) {
				t.Errorf("%d volume.meta reads after the cancellation at 5", reads)
			}
			if last := o.LastReport(); len(last.Disks) != 0 {
				t.Errorf("a cancelled scan left a report: %+v", last)
			}
			if len(o.caches[d.Scope()].entries) != 0 {
				t.Errorf("a cancelled scan cached %d validations", len(o.caches[d.Scope()].entries))
			}
			t.Logf("returned in %v", time.Since(start))
			got, err := o.Report(context.Background())
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("scan after the cancelled one: %v, report differs", err)
			}
		})
	}
}
