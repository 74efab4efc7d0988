package diskscan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// settled scans as if an hour had passed since the test made its
// directories, so that their validation is cached at once.
var settled = Options{Clock: clocktesting.NewFakeClock(time.Now().Add(time.Hour))}

// fixture is a node with real disks in a temporary directory.
type fixture struct {
	t   *testing.T
	o   *Orphans
	exp *StaticExpected
}

func newFixture(t *testing.T, disks ...Disk) *fixture {
	t.Helper()
	return newFixtureWith(t, settled, disks...)
}

// newFixtureWith is newFixture with opts (its Disks replaced by disks).
func newFixtureWith(t *testing.T, opts Options, disks ...Disk) *fixture {
	t.Helper()
	exp := NewStaticExpected()
	return &fixture{t: t, o: newOrphans(t, exp, opts, disks...), exp: exp}
}

// newOrphans returns an Orphans on disks.
func newOrphans(t testing.TB, exp ExpectedSource, opts Options, disks ...Disk) *Orphans {
	t.Helper()
	opts.Disks = disks
	o, err := NewOrphans(exp, opts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// makeDisk creates a disk directory under base and returns its Disk.
func makeDisk(t *testing.T, base, node, name, uuid string) Disk {
	t.Helper()
	p := filepath.Join(base, node+"-"+name)
	if err := disktest.NewDisk(p, name, uuid); err != nil {
		t.Fatal(err)
	}
	return Disk{NodeID: node, Name: name, Path: p, UUID: uuid}
}

func replica(t *testing.T, d Disk, name string, r disktest.Replica) string {
	t.Helper()
	if err := disktest.MakeReplica(d.Path, name, r); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d.Path, ReplicasDir, name)
}

func (f *fixture) scan() Report {
	f.t.Helper()
	r, err := f.o.Report(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) expect(d Disk, names ...string) {
	for _, n := range names {
		f.exp.Add(ReplicaRef{Name: n, NodeID: d.NodeID, DiskID: d.UUID, DiskPath: d.Path, DataDirectoryName: n})
	}
}

// record is the orphan record of directory name on d.
func record(t *testing.T, d Disk, name string) orphan.Record {
	t.Helper()
	r, err := orphan.NewRecord(dataItem(d, name), testTime)
	if err != nil {
		t.Fatal(err)
	}
	r.DeletionRequested = true
	return r
}

func orphanNames(r DiskReport) []string {
	var ns []string
	for _, o := range r.Orphans {
		ns = append(ns, o.Name)
	}
	return ns
}

func skippedReasons(r DiskReport) map[string]string {
	m := map[string]string{}
	for _, s := range r.Skipped {
		m[s.Name] = s.Reason
	}
	return m
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }

// mountTmpfs mounts a fresh tmpfs at dir for the test, or skips the test
// if this process may not mount. It returns the unmount, which also runs
// at cleanup unless called before.
func mountTmpfs(t *testing.T, dir string) (unmount func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("skipped: mounting a tmpfs needs CAP_SYS_ADMIN, which this process lacks (%v)", err)
		}
		t.Fatalf("mount tmpfs at %s: %v", dir, err)
	}
	var once sync.Once
	unmount = func() {
		once.Do(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	t.Cleanup(unmount)
	return unmount
}

// errorsIs reports whether err matches every target.
func errorsIs(err error, targets ...error) bool {
	for _, t := range targets {
		if !errors.Is(err, t) {
			return false
		}
	}
	return err != nil
}

// plantTombstone leaves what a purge interrupted after its rename leaves:
// the durable marker, then the directory renamed to its tombstone. It
// returns the tombstone's path.
func plantTombstone(t *testing.T, d Disk, name string) (string, purge) {
	t.Helper()
	rr, err := os.OpenRoot(filepath.Join(d.fsPath(), ReplicasDir))
	must(t, err)
	defer rr.Close()
	fi, err := rr.Lstat(name)
	must(t, err)
	p, err := newPurge(name)
	must(t, err)
	must(t, writeMarker(rr, p, fi))
	must(t, rr.Rename(name, p.tombstone()))
	return filepath.Join(d.fsPath(), ReplicasDir, p.tombstone()), p
}

// mountBind bind-mounts src at dir for the test, or skips the test if this
// process may not mount. It returns the unmount, which also runs at
// cleanup unless called before.
func mountBind(t *testing.T, src, dir string) (unmount func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, dir, "", syscall.MS_BIND, ""); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("skipped: a bind mount needs CAP_SYS_ADMIN, which this process lacks (%v)", err)
		}
		t.Fatalf("bind mount %s at %s: %v", src, dir, err)
	}
	var once sync.Once
	unmount = func() {
		once.Do(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	t.Cleanup(unmount)
	return unmount
}

// tombstonesIn lists the tombstones and markers in d's replicas directory.
func tombstonesIn(t *testing.T, d Disk) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.Path, ReplicasDir))
	must(t, err)
	var out []string
	for _, e := range entries {
		if isTombstone(e.Name()) || isMarker(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func syscallUnmount(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }

// nestChain makes a chain of n nested directories named d inside dir, with
// a 4 KiB file f in every every-th of them (none if every is 0), through
// descriptors (a path 60,000 levels deep is far longer than PATH_MAX).
func nestChain(t testing.TB, dir string, n, every int) {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Close(fd) }()
	for i := range n {
		if err := syscall.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := syscall.Openat(fd, "d", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Close(fd)
		fd = next
		if every > 0 && (i+1)%every == 0 {
			f, err := syscall.Openat(fd, "f", syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			_, err = syscall.Write(f, make([]byte, 4096))
			syscall.Close(f)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
