package diskscan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// A tmpfs or a bind mount inside an orphan directory, at its top, deeper
// down, or at the directory itself, stops the purge before the rename: the
// mount and the file in it survive, the directory keeps its name, and
// FinishInterrupted has nothing to do. The bind mount is of the same
// filesystem (same st_dev), so only the mount table and mount IDs see it;
// its mount point has a space in its name, which the mount table escapes.
func TestPurgeNeverCrossesAMount(t *testing.T) {
	for _, kind := range []string{"tmpfs", "bind"} {
		for _, where := range []string{"top", "nested", "itself"} {
			t.Run(kind+"/"+where, func(t *testing.T) {
				d := makeDisk(t, t.TempDir(), "n", "d", "u")
				lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
				f := newFixture(t, d)
				f.expect(d, "pvc-live-r-00000001")
				f.scan()

				mp := map[string]string{
					"top":    filepath.Join(lost, "mnt point"),
					"nested": filepath.Join(lost, "a", "b", "mnt point"),
					"itself": lost,
				}[where]
				var src string
				switch kind {
				case "tmpfs":
					mountTmpfs(t, mp)
				case "bind":
					src = filepath.Join(t.TempDir(), "precious-dir")
					must(t, os.Mkdir(src, 0o755))
					mountBind(t, src, mp)
				}
				precious := filepath.Join(mp, "precious")
				writeFile(t, precious, "do not lose me")
				if where == "itself" {
					must(t, disktest.WriteMeta(lost, disktest.Meta(1<<20)))
				}

				err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
				if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) {
					t.Fatalf("Delete: %v, want ErrMountPoint", err)
				}
				if !strings.Contains(err.Error(), "mnt point") && where != "itself" {
					t.Errorf("refusal does not name the mount point: %v", err)
				}
				if !exists(t, precious) || !exists(t, filepath.Join(lost, MetaFile)) {
					t.Fatal("data lost")
				}
				if ts := tombstonesIn(t, d); len(ts) != 0 {
					t.Fatalf("left %v", ts)
				}
				must(t, f.o.FinishInterrupted(context.Background()))
				if !exists(t, precious) {
					t.Fatal("FinishInterrupted lost data")
				}
			})
		}
	}
}

// A mount that appears after the rename is caught by the mount table check
// on the tombstone, and the directory is renamed back.
func TestPurgeMountAfterRename(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000001")
	f.scan()
	src := filepath.Join(t.TempDir(), "src")
	must(t, os.Mkdir(src, 0o755))
	writeFile(t, filepath.Join(src, "precious"), "x")
	mounted := false
	f.o.hooks.afterTombstone = func(replicas, tomb string) {
		mp := filepath.Join(replicas, tomb, "late")
		must(t, os.Mkdir(mp, 0o755))
		if err := syscall.Mount(src, mp, "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("skipped: a bind mount needs CAP_SYS_ADMIN (%v)", err)
		}
		mounted = true
	}
	t.Cleanup(func() { // the mount moves with its directory: unmount where it ends up
		if mounted {
			if err := syscallUnmount(filepath.Join(lost, "late")); err != nil {
				t.Errorf("unmount: %v", err)
			}
		}
	})
	err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) {
		t.Fatalf("Delete: %v", err)
	}
	// The mount moved with the directory when it was renamed back.
	if !exists(t, filepath.Join(lost, "late", "precious")) || !exists(t, filepath.Join(src, "precious")) {
		t.Fatal("not renamed back, or data lost")
	}
}

// A mount that appears while the tombstone is being removed (past both
// mount table checks) is caught when the walk reaches its directory: the
// walk compares the device and mount ID of every directory it enters. The
// marked tombstone is left; FinishInterrupted refuses while the mount is
// there and finishes once it is gone.
func TestPurgeMountDuringRemoval(t *testing.T) {
	for _, kind := range []string{"tmpfs", "bind"} {
		t.Run(kind, func(t *testing.T) {
			d := makeDisk(t, t.TempDir(), "n", "d", "u")
			lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
			must(t, os.MkdirAll(filepath.Join(lost, "zz-later"), 0o755))
			f := newFixture(t, d)
			f.expect(d, "pvc-live-r-00000001")
			f.scan()
			var mp string
			f.o.hooks.afterTombstone = func(replicas, tomb string) { mp = filepath.Join(replicas, tomb, "zz-later") }
			src := filepath.Join(t.TempDir(), "src")
			must(t, os.Mkdir(src, 0o755))
			var unmount func()
			f.o.hooks.afterRemove = func(string) {
				if unmount == nil {
					if kind == "tmpfs" {
						unmount = mountTmpfs(t, mp)
					} else {
						unmount = mountBind(t, src, mp)
					}
					writeFile(t, filepath.Join(mp, "precious"), "x")
				}
			}
			err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
			f.o.hooks.afterRemove = nil
			if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) || !strings.Contains(err.Error(), "zz-later") {
				t.Fatalf("Delete: %v", err)
			}
			if !exists(t, filepath.Join(mp, "precious")) {
				t.Fatal("data in the mount lost")
			}
			err = f.o.FinishInterrupted(context.Background())
			if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) || !exists(t, filepath.Join(mp, "precious")) {
				t.Fatalf("FinishInterrupted with the mount there: %v", err)
			}
			unmount()
			must(t, f.o.FinishInterrupted(context.Background()))
			if ts := tombstonesIn(t, d); len(ts) != 0 {
				t.Fatalf("after unmount, left %v", ts)
			}
		})
	}
}

func TestParseMountInfo(t *testing.T) {
	data := []byte("22 27 0:21 / /proc rw,relatime - proc proc rw\n" +
		`36 35 98:0 /mnt1 /var/lib/longhorn/replicas/a\040b\011c\134d rw,noatime master:1 - ext3 /dev/root rw` + "\n\n")
	got, err := parseMountInfo(data)
	if err != nil || !equalStrings(got, []string{"/proc", "/var/lib/longhorn/replicas/a b\tc\\d"}) {
		t.Fatalf("parseMountInfo = %q, %v", got, err)
	}
	for _, bad := range []string{"1 2 3 4\n", `1 2 0:1 / /a\04 rw - x x rw`, `1 2 0:1 / /a\09x rw - x x rw`, `1 2 0:1 / /a\777 rw - x x rw`} {
		if _, err := parseMountInfo([]byte(bad)); err == nil {
			t.Errorf("parseMountInfo(%q) accepted", bad)
		}
	}
	if _, err := mountPointsUnder(ownMountInfo, true, "/"); err != nil {
		t.Fatalf("reading this process's mount table: %v", err)
	}
}
