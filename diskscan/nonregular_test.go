package diskscan

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// blockGuard bounds how long a test waits for a call that must not block
// on a FIFO. It is a safety net that turns a hang into a failure, not a
// timing assertion: the calls under test never wait for anything.
const blockGuard = 20 * time.Second

// mkfifo makes a FIFO at p and, at cleanup, opens its write side so a
// reader the code under test may have left blocked on it is released.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	must(t, os.RemoveAll(p))
	must(t, syscall.Mkfifo(p, 0o644))
	t.Cleanup(func() {
		if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
}

// mknod makes a socket or device file at p.
func mknod(t *testing.T, p string, mode uint32, dev int) {
	t.Helper()
	must(t, os.RemoveAll(p))
	must(t, syscall.Mknod(p, mode|0o644, dev))
}

// within runs fn and fails the test if it has not returned within
// blockGuard.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(blockGuard):
		t.Fatalf("%s blocked", what)
		panic("unreachable")
	}
}

// A FIFO, a socket or a device named volume.meta or longhorn-disk.cfg
// never blocks a scan, a purge or a Monitor's Stop: the entry is not a
// replica, the disk is DiskInvalid, and the other disks are scanned.
func TestNonRegularFilesNeverBlock(t *testing.T) {
	base := t.TempDir()
	// One disk per node: disks of one node on one filesystem distrust
	// each other.
	a := makeDisk(t, base, "na", "a", "ua")
	b := makeDisk(t, base, "nb", "b", "ub")
	c := makeDisk(t, base, "nc", "c", "uc")
	s := makeDisk(t, base, "ns", "s", "us")

	bad := map[string]func(p string){
		"pvc-fifo-r-00000001": func(p string) { mkfifo(t, p) },
		"pvc-sock-r-00000002": func(p string) { mknod(t, p, syscall.S_IFSOCK, 0) },
		"pvc-zero-r-00000003": func(p string) { mknod(t, p, syscall.S_IFCHR, 1<<8|5) }, // like /dev/zero
		"pvc-link-r-00000004": func(p string) {
			other := replica(t, c, "pvc-real-r-00000009", disktest.Replica{})
			must(t, os.Remove(p))
			must(t, os.Symlink(filepath.Join(other, MetaFile), p))
		},
	}
	for name, make := range bad {
		dir := replica(t, a, name, disktest.Replica{})
		make(filepath.Join(dir, MetaFile))
	}
	replica(t, a, "pvc-live-r-0000000a", disktest.Replica{})
	lostA := replica(t, a, "pvc-lost-r-0000000b", disktest.Replica{})
	mkfifo(t, filepath.Join(b.Path, ConfigFile))
	replica(t, b, "pvc-onb-r-0000000c", disktest.Replica{})
	replica(t, c, "pvc-onc-r-0000000d", disktest.Replica{})
	// A unix socket bound by a real listener, as the config.
	must(t, os.Remove(filepath.Join(s.Path, ConfigFile)))
	l, err := net.Listen("unix", filepath.Join(s.Path, ConfigFile))
	if err != nil {
		t.Fatalf("listen on a unix socket: %v", err)
	}
	defer l.Close()

	for _, d := range []*Disk{&a, &b, &c, &s} {
		d.FSID, _ = FSID(d.Path) // so purges are judged on the disk, not on an unknown filesystem
	}
	f := newFixture(t, a, b, c, s)
	f.expect(a, "pvc-live-r-0000000a")
	f.expect(c, "pvc-real-r-00000009")
	ctx, cancel := context.WithTimeout(context.Background(), blockGuard)
	defer cancel()
	type result struct {
		r   Report
		err error
	}
	res := within(t, "scan", func() result { r, err := f.o.Report(ctx); return result{r, err} })
	if res.err != nil {
		t.Fatalf("scan: %v (it must not run into its context's deadline)", res.err)
	}
	ra, rb, rc, rs := res.r.Disks[0], res.r.Disks[1], res.r.Disks[2], res.r.Disks[3]
	if ra.Status.Health != orphan.HealthReady || !equalStrings(orphanNames(ra), []string{"pvc-lost-r-0000000b"}) {
		t.Fatalf("disk a: %+v orphans %v", ra.Status, orphanNames(ra))
	}
	reasons := skippedReasons(ra)
	for name, want := range map[string]string{
		"pvc-fifo-r-00000001": "FIFO",
		"pvc-sock-r-00000002": "socket",
		"pvc-zero-r-00000003": "character device",
		"pvc-link-r-00000004": "symbolic link",
	} {
		if r := reasons[name]; !strings.Contains(r, "not a replica") || !strings.Contains(r, want) {
			t.Errorf("%s skipped with %q, want a reason naming a %s", name, r, want)
		}
	}
	for _, r := range []DiskReport{rb, rs} {
		if r.Status.Health != orphan.HealthDiskInvalid || !strings.Contains(r.Status.Message, "not a regular file") {
			t.Errorf("disk %s with a non-regular config: %+v", r.Disk.Name, r.Status)
		}
	}
	if rc.Status.Health != orphan.HealthReady || !equalStrings(orphanNames(rc), []string{"pvc-onc-r-0000000d"}) {
		t.Errorf("the other disk: %+v orphans %v", rc.Status, orphanNames(rc))
	}

	// Purges refuse and never block.
	for name := range bad {
		err := within(t, "purge", func() error { return f.o.Delete(ctx, record(t, a, name)) })
		if !errorsIs(err, orphan.ErrPreconditionFailed, ErrNotReplica) {
			t.Errorf("purge of %s: %v", name, err)
		}
		if !exists(t, filepath.Join(a.Path, ReplicasDir, name, MetaFile)) {
			t.Errorf("%s touched", name)
		}
	}
	err = within(t, "purge", func() error { return f.o.Delete(ctx, record(t, b, "pvc-onb-r-0000000c")) })
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrDiskInvalid) {
		t.Errorf("purge on the disk with a FIFO config: %v", err)
	}
	if err := within(t, "FinishInterrupted", func() error { return f.o.FinishInterrupted(ctx) }); err != nil {
		t.Errorf("FinishInterrupted: %v", err)
	}
	// The healthy orphan on the same disk still purges.
	if err := within(t, "purge", func() error { return f.o.Delete(ctx, record(t, a, "pvc-lost-r-0000000b")) }); err != nil || exists(t, lostA) {
		t.Errorf("purge of the real orphan: %v", err)
	}

	// A Monitor over the Inventory scans and stops.
	scanned := make(chan orphan.Observation, 1)
	mon, err := orphan.NewMonitor(f.o, orphan.MonitorOptions{
		Clock: clocktesting.NewFakeClock(time.Now()),
		OnScan: func(o orphan.Observation) {
			select {
			case scanned <- o:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	must(t, mon.Start(ctx))
	obs := within(t, "Monitor's first scan", func() orphan.Observation { return <-scanned })
	within(t, "Monitor.Stop", func() struct{} { mon.Stop(); return struct{}{} })
	if obs.Err != nil || obs.Snapshot.Scopes[c.Scope()].Health != orphan.HealthReady {
		t.Errorf("Monitor's scan: %+v", obs)
	}
}
