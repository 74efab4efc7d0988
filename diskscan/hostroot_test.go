//go:build linux

package diskscan

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// hostFixture is a fake host: a directory tree standing for the host's
// root, with a disk at /var/lib/longhorn/ inside it and a mount table
// written by the test, whose paths are relative to that root as the
// host's /proc/1/mountinfo's are.
type hostFixture struct {
	root      string // the host root as this process sees it
	mountInfo string // the host's mount table, as this process sees it
	disk      Disk   // the disk as the host names it
	f         *fixture
}

const hostDiskPath = "/var/lib/longhorn/"

// newHostFixture makes the host tree and an Orphans on it; extra options
// may add to the defaults (HostRoot and HostMountInfo are set here).
func newHostFixture(t *testing.T, opts Options) *hostFixture {
	t.Helper()
	h := &hostFixture{root: filepath.Join(t.TempDir(), "host")}
	h.mountInfo = filepath.Join(h.root, "proc-1-mountinfo")
	must(t, disktest.NewDisk(h.real(hostDiskPath), "disk-1", "uuid-host"))
	h.writeMounts(t)
	h.disk = Disk{NodeID: "n", Name: "disk-1", Path: hostDiskPath, UUID: "uuid-host"}
	opts.HostRoot, opts.HostMountInfo = h.root, h.mountInfo
	exp := NewStaticExpected()
	h.f = &fixture{t: t, o: newOrphans(t, exp, opts, h.disk), exp: exp}
	return h
}

// real is where host path p is in this process's tree.
func (h *hostFixture) real(p string) string { return filepath.Join(h.root, p) }

// writeMounts writes the host's mount table: its root, and points (host
// paths) as tmpfs mounts.
func (h *hostFixture) writeMounts(t *testing.T, points ...string) {
	t.Helper()
	lines := []string{"21 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"}
	for i, p := range points {
		lines = append(lines, strconv.Itoa(100+i)+" 21 0:"+strconv.Itoa(90+i)+" / "+strings.ReplaceAll(p, " ", `\040`)+" rw,relatime - tmpfs tmpfs rw")
	}
	must(t, os.WriteFile(h.mountInfo, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

// replica makes replica directory name on the host's disk.
func (h *hostFixture) replica(t *testing.T, name string) string {
	t.Helper()
	must(t, disktest.MakeReplica(h.real(hostDiskPath), name, disktest.Replica{}))
	return h.real(filepath.Join(hostDiskPath, ReplicasDir, name))
}

// A disk given as a host path is found inside the host root: an
// interrupted purge is finished there, and an orphan judged and purged,
// with the host's mount table consulted.
func TestHostRootScanAndPurge(t *testing.T) {
	h := newHostFixture(t, settled)
	lost := h.replica(t, "pvc-lost-r-deadbeef")
	live := h.replica(t, "pvc-live-r-00000001")
	h.replica(t, "pvc-cut-r-00000002")
	here := Disk{Path: h.real(hostDiskPath)} // the disk as this process sees it
	tomb, _ := plantTombstone(t, here, "pvc-cut-r-00000002")
	h.f.expect(h.disk, "pvc-live-r-00000001")

	rep := h.f.scan() // pins the filesystem ID FinishInterrupted checks
	must(t, h.f.o.FinishInterrupted(context.Background()))
	if exists(t, tomb) || len(tombstonesIn(t, here)) != 0 {
		t.Fatalf("FinishInterrupted through the host root left %v", tombstonesIn(t, here))
	}
	if st := rep.Disks[0].Status; st.Health != orphan.HealthReady {
		t.Fatalf("disk %s: %s", st.Health, st.Message)
	}
	if got := orphanNames(rep.Disks[0]); !equalStrings(got, []string{"pvc-lost-r-deadbeef"}) {
		t.Fatalf("orphans %v", got)
	}
	if v, err := h.f.o.Judge(context.Background(), dataItem(h.disk, "pvc-lost-r-deadbeef")); err != nil || v.Outcome != orphan.OutcomeOrphan {
		t.Fatalf("Judge = %v, %v", v, err)
	}
	must(t, h.f.o.Delete(context.Background(), record(t, h.disk, "pvc-lost-r-deadbeef")))
	if exists(t, lost) || !exists(t, live) {
		t.Fatalf("after the purge: lost there %v, live there %v", exists(t, lost), exists(t, live))
	}
}

// A mount point inside an orphan stops its purge whether the host's mount
// table shows it (its path relative to the host root) or only the
// directory walk meets it; the data inside survives.
func TestHostRootMountStopsPurge(t *testing.T) {
	const name = "pvc-lost-r-deadbeef"
	mp := filepath.Join(hostDiskPath, ReplicasDir, name, "mnt point")
	for _, c := range []struct {
		name      string
		mount     bool // a real tmpfs at mp
		listed    bool // the host's table lists mp
		wantTable bool // refused by the table, naming mp as the host does
	}{
		{"real mount, listed", true, true, true},
		{"listed only", false, true, true},
		{"real mount, not listed", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHostFixture(t, settled)
			lost := h.replica(t, name)
			h.f.expect(h.disk, "pvc-live-r-00000001")
			h.f.scan()
			if c.mount {
				mountTmpfs(t, h.real(mp))
			} else {
				must(t, os.MkdirAll(h.real(mp), 0o755))
			}
			if c.listed {
				h.writeMounts(t, mp)
			}
			precious := filepath.Join(h.real(mp), "precious")
			writeFile(t, precious, "do not lose me")

			err := h.f.o.Delete(context.Background(), record(t, h.disk, name))
			if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) {
				t.Fatalf("Delete: %v, want ErrMountPoint", err)
			}
			if c.wantTable && !strings.Contains(err.Error(), "holds mount point "+mp) {
				t.Errorf("refusal does not name the host's mount point %s: %v", mp, err)
			}
			if !exists(t, precious) || !exists(t, filepath.Join(lost, MetaFile)) {
				t.Fatal("data lost")
			}
			if ts := tombstonesIn(t, Disk{Path: h.real(hostDiskPath)}); len(ts) != 0 {
				t.Fatalf("left %v", ts)
			}
		})
	}
}

// Symbolic links in the host tree resolve inside the host root, as they
// do on the host: an absolute link to "/" and a relative one climbing
// above the root both land on the host root, never on this process's
// "/" or on the directory holding the host root. Past the disk path
// nothing is followed at all.
func TestHostRootConfinement(t *testing.T) {
	const name = "pvc-lost-r-deadbeef"
	for _, target := range []string{"/", "../../../../../../../../..", "/var/../../.."} {
		t.Run(target, func(t *testing.T) {
			base := t.TempDir()
			host := filepath.Join(base, "host")
			// The host's disk is its root directory itself; the disk path
			// is a link that leads there on the host.
			must(t, disktest.NewDisk(host, "disk-1", "uuid-host"))
			must(t, disktest.MakeReplica(host, name, disktest.Replica{}))
			must(t, os.MkdirAll(filepath.Join(host, "var", "lib"), 0o755))
			must(t, os.Symlink(target, filepath.Join(host, "var", "lib", "longhorn")))
			// A decoy disk with the same UUID and replica just outside
			// the host root: a link that escaped would find it.
			must(t, disktest.NewDisk(base, "disk-1", "uuid-host"))
			must(t, disktest.MakeReplica(base, name, disktest.Replica{}))
			mi := filepath.Join(base, "mountinfo")
			must(t, os.WriteFile(mi, []byte("21 1 8:1 / / rw - ext4 /dev/sda1 rw\n"), 0o644))

			d := Disk{NodeID: "n", Name: "disk-1", Path: hostDiskPath, UUID: "uuid-host"}
			opts := settled
			opts.HostRoot, opts.HostMountInfo = host, mi
			f := newFixtureWith(t, opts, d)
			f.expect(d, "pvc-live-r-00000001")
			rep := f.scan()
			if st := rep.Disks[0].Status; st.Health != orphan.HealthReady {
				t.Fatalf("disk %s: %s", st.Health, st.Message)
			}
			must(t, f.o.Delete(context.Background(), record(t, d, name)))
			if exists(t, filepath.Join(host, ReplicasDir, name)) {
				t.Fatal("the host's orphan is still there")
			}
			if !exists(t, filepath.Join(base, ReplicasDir, name, MetaFile)) {
				t.Fatal("the purge reached outside the host root")
			}
		})
	}

	t.Run("links past the disk path", func(t *testing.T) {
		h := newHostFixture(t, settled)
		outside := filepath.Join(filepath.Dir(h.root), "outside")
		must(t, os.MkdirAll(filepath.Join(outside, name), 0o755))
		must(t, disktest.WriteMeta(filepath.Join(outside, name), disktest.Meta(1<<20)))
		// An orphan's name as a link to "/" and to the outside.
		must(t, os.Symlink("/", h.real(filepath.Join(hostDiskPath, ReplicasDir, name))))
		must(t, os.Symlink(outside, h.real(filepath.Join(hostDiskPath, ReplicasDir, "pvc-out-r-00000002"))))
		h.f.expect(h.disk, "pvc-live-r-00000001")
		rep := h.f.scan()
		if n := orphanNames(rep.Disks[0]); len(n) != 0 {
			t.Fatalf("links reported as orphans: %v", n)
		}
		for _, n := range []string{name, "pvc-out-r-00000002"} {
			if err := h.f.o.Delete(context.Background(), record(t, h.disk, n)); !errorsIs(err, orphan.ErrPreconditionFailed, ErrNotReplica) {
				t.Errorf("Delete(%s): %v, want ErrNotReplica", n, err)
			}
		}
		if !exists(t, filepath.Join(outside, name, MetaFile)) {
			t.Fatal("a link was followed")
		}
		// The replicas directory itself as a link to "/".
		must(t, os.RemoveAll(h.real(filepath.Join(hostDiskPath, ReplicasDir))))
		must(t, os.Symlink("/", h.real(filepath.Join(hostDiskPath, ReplicasDir))))
		rep = h.f.scan()
		if st := rep.Disks[0].Status; st.Health != orphan.HealthDiskInvalid {
			t.Fatalf("replicas as a link: disk %s (%s), want DiskInvalid", st.Health, st.Message)
		}
	})
}

// A host that passes the filesystem ID its disk monitor computed
// (Longhorn's DiskStat.DiskID) purges at once with a new Orphans, as a
// finalizer reconciling one record does: no scan first. The ID is still
// checked: another filesystem's refuses, and touches nothing.
func TestHostGivenFSIDNeedsNoScan(t *testing.T) {
	const name = "pvc-lost-r-deadbeef"
	for _, c := range []struct {
		name string
		fsid func(real string) string
		want error
	}{
		{"matches", func(real string) string { id, _ := FSID(real); return id }, nil},
		{"another filesystem", func(string) string { return "00000000beef" }, ErrDiskChanged},
		{"none", func(string) string { return "" }, ErrDiskChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHostFixture(t, settled)
			lost := h.replica(t, name)
			h.disk.FSID = c.fsid(h.real(hostDiskPath))
			exp := NewStaticExpected(ReplicaRef{Name: "r", NodeID: "n", DiskID: "uuid-host", DataDirectoryName: "pvc-live-r-00000001"})
			o := newOrphans(t, exp, Options{HostRoot: h.root, HostMountInfo: h.mountInfo}, h.disk)
			err := o.Delete(context.Background(), record(t, h.disk, name))
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("Delete: %v", err)
			case c.want == nil && exists(t, lost):
				t.Fatal("not purged")
			case c.want != nil && !errorsIs(err, orphan.ErrPreconditionFailed, c.want):
				t.Fatalf("Delete: %v, want %v", err, c.want)
			case c.want != nil && !exists(t, filepath.Join(lost, MetaFile)):
				t.Fatal("refused, yet data lost")
			}
		})
	}
}

// A filesystem ID that FSID could never print is refused when the disk is
// set, not by every purge later.
func TestDiskFSIDFormat(t *testing.T) {
	o := newOrphans(t, NewStaticExpected(), Options{})
	for _, bad := range []string{"0xdeadbeef", "DEADBEEF0000", "beef", "00000000000000000", " 0000deadbeef"} {
		if err := o.SetDisks(Disk{NodeID: "n", Name: "d", Path: "/x", UUID: "u", FSID: bad}); err == nil {
			t.Errorf("SetDisks accepted FSID %q", bad)
		}
	}
	for _, good := range []string{"0000deadbeef", "fd01000000000001"} {
		must(t, o.SetDisks(Disk{NodeID: "n", Name: "d", Path: "/x", UUID: "u", FSID: good}))
	}
}

// NewOrphans refuses half a host root, and relative paths.
func TestHostRootOptions(t *testing.T) {
	for _, o := range []Options{
		{HostRoot: "/host/proc/1/root"},
		{HostMountInfo: "/host/proc/1/mountinfo"},
		{HostRoot: "host/proc/1/root", HostMountInfo: "/host/proc/1/mountinfo"},
		{HostRoot: "/host/proc/1/root", HostMountInfo: "proc/1/mountinfo"},
	} {
		if _, err := NewOrphans(NewStaticExpected(), o); !errors.Is(err, ErrHostRoot) {
			t.Errorf("NewOrphans(%+v) = %v, want ErrHostRoot", o, err)
		}
	}
}

// The real shape: the host is another mount namespace (here a child
// process's, made with unshare), reached through /proc/<pid>/root and
// /proc/<pid>/mountinfo as longhorn-manager reaches the host through
// /host/proc/1. A tmpfs mounted inside an orphan in that namespace only is
// invisible to this process's own view; through the host root the purge
// sees it in the host's table and refuses, and the data in it survives.
func TestHostRootOtherMountNamespace(t *testing.T) {
	const name = "pvc-lost-r-deadbeef"
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: no unshare(1) to make a mount namespace")
	}
	base := t.TempDir()
	must(t, disktest.NewDisk(base, "disk-1", "uuid-host"))
	must(t, disktest.MakeReplica(base, name, disktest.Replica{}))
	mp := filepath.Join(base, ReplicasDir, name, "mnt")
	must(t, os.Mkdir(mp, 0o755))
	ready := filepath.Join(base, "ready")
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs hostonly "$1" && echo precious > "$1/precious" && : > "$2" && exec sleep 600`, "sh", mp, ready)
	if err := cmd.Start(); err != nil {
		t.Skipf("skipped: unshare: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; !exists(t, filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "root", ready)); i++ {
		if i == 500 {
			t.Skip("skipped: the child could not mount a tmpfs in its own namespace")
		}
		time.Sleep(10 * time.Millisecond) // waiting for a child process, not for correctness
	}
	proc := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid))
	if exists(t, filepath.Join(mp, "precious")) {
		t.Fatal("the mount propagated to this namespace: the test proves nothing")
	}
	d := Disk{NodeID: "n", Name: "disk-1", Path: base + "/", UUID: "uuid-host"}
	d.FSID, _ = FSID(base)
	opts := settled
	opts.HostRoot, opts.HostMountInfo = filepath.Join(proc, "root"), filepath.Join(proc, "mountinfo")
	f := newFixtureWith(t, opts, d)
	f.expect(d, "pvc-live-r-00000001")
	err := f.o.Delete(context.Background(), record(t, d, name))
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) || !strings.Contains(err.Error(), "holds mount point "+mp) {
		t.Fatalf("Delete through the host root: %v, want ErrMountPoint naming %s", err, mp)
	}
	if data, err := os.ReadFile(filepath.Join(proc, "root", mp, "precious")); err != nil || string(data) != "precious\n" {
		t.Fatalf("the host's data: %q, %v", data, err)
	}
	if !exists(t, filepath.Join(mp)) {
		t.Fatal("directory gone")
	}
}
