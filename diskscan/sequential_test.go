//go:build linux

package diskscan

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Every go statement of the package is spawn's: otherwise a goroutine
// could start without the seam the Sequential tests watch.
func TestEveryGoroutineIsSpawned(t *testing.T) {
	files, err := filepath.Glob("*.go")
	must(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		must(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok && name != "spawn.go" {
				t.Errorf("%s: a go statement outside spawn", fset.Position(g.Pos()))
			}
			return true
		})
	}
}

// sequentialDisk is a disk with enough directories that a scan spreads
// its classification over goroutines (more than one chunk) and validates
// its orphans with several workers.
func sequentialDisk(t *testing.T, opts Options) (*fixture, Disk) {
	t.Helper()
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	d.FSID, _ = FSID(d.Path)
	var owned []ReplicaRef
	for i := range chunkSize + 10 {
		n := fmt.Sprintf("pvc-own-r-%08x", i)
		must(t, os.MkdirAll(filepath.Join(d.Path, ReplicasDir, n), 0o755))
		owned = append(owned, ReplicaRef{Name: n, NodeID: d.NodeID, DiskID: d.UUID, DiskPath: d.Path, DataDirectoryName: n})
	}
	for i := range 24 {
		replica(t, d, fmt.Sprintf("pvc-lost-r-%08x", i), disktest.Replica{})
	}
	// An interrupted purge, for FinishInterrupted to finish.
	plantTombstone(t, d, "pvc-lost-r-00000001")
	f := newFixtureWith(t, opts, d)
	f.exp.Replace(owned)
	return f, d
}

// exercise runs every method that touches the disk: a scan (cold and
// warm), Judge, Delete, and FinishInterrupted on the purge that
// sequentialDisk left interrupted.
func exercise(t *testing.T, f *fixture, d Disk) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		rep := f.scan()
		if st := rep.Disks[0].Status; st.Health != orphan.HealthReady || len(rep.Disks[0].Orphans) == 0 {
			t.Fatalf("scan: %s %s, %d orphans", st.Health, st.Message, len(rep.Disks[0].Orphans))
		}
	}
	if v, err := f.o.Judge(ctx, dataItem(d, "pvc-lost-r-00000000")); err != nil || v.Outcome != orphan.OutcomeOrphan {
		t.Fatalf("Judge: %v, %v", v, err)
	}
	must(t, f.o.Delete(ctx, record(t, d, "pvc-lost-r-00000000")))
	must(t, f.o.FinishInterrupted(ctx))
	if ts := tombstonesIn(t, d); len(ts) != 0 {
		t.Fatalf("left %v", ts)
	}
}

// Options.Sequential starts no goroutine in any method, however many
// workers and processors there are, and a caller locked to its OS thread
// has every validation and every removal of a purge done on that very
// thread, which is what a thread moved into the host's mount namespace
// needs. Without it the same calls start goroutines and run steps on
// other threads (so the seam is live and the test could fail).
func TestSequential(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	old := spawn
	defer func() { spawn = old }()
	var spawned atomic.Int64
	spawn = func(f func()) {
		spawned.Add(1)
		old(f)
	}
	for _, seq := range []bool{true, false} {
		t.Run(fmt.Sprintf("Sequential=%v", seq), func(t *testing.T) {
			opts := settled
			opts.Sequential, opts.ScanWorkers = seq, 8
			f, d := sequentialDisk(t, opts)
			var (
				mu   sync.Mutex
				tids = map[int]int{}
			)
			seen := func(string) {
				mu.Lock()
				tids[syscall.Gettid()]++
				mu.Unlock()
			}
			f.o.hooks.validated, f.o.hooks.afterRemove = seen, seen
			spawned.Store(0)
			var me int
			done := make(chan struct{})
			go func() {
				defer close(done)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				me = syscall.Gettid()
				exercise(t, f, d)
			}()
			<-done
			if len(tids) == 0 {
				t.Fatal("no hook ran")
			}
			others := 0
			for tid, n := range tids {
				if tid != me {
					others += n
				}
			}
			n := spawned.Load()
			switch {
			case seq && n != 0:
				t.Errorf("%d goroutines started", n)
			case !seq && n == 0:
				t.Error("no goroutine started without Sequential: the seam is not watched")
			}
			switch {
			case seq && others != 0:
				t.Errorf("%d steps ran on threads other than the caller's %d: %v", others, me, tids)
			case !seq && others == 0:
				t.Error("every step ran on the caller's thread without Sequential: the test proves nothing")
			}
		})
	}
}

// The shape longhorn-manager's namespace joiner has: a locked thread
// moved into another mount namespace, where a tmpfs is mounted inside an
// orphan that the process's other threads do not see. With Sequential the
// purge reads that thread's own mount table and refuses before touching
// anything; the data survives.
func TestSequentialInAJoinedMountNamespace(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	d.FSID, _ = FSID(d.Path)
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	mp := filepath.Join(lost, "mnt")
	must(t, os.Mkdir(mp, 0o755))
	opts := settled
	opts.Sequential = true
	f := newFixtureWith(t, opts, d)
	f.expect(d, "pvc-live-r-00000001")

	var (
		err      error
		skip     string
		survived bool
	)
	onOtherThread(func() {
		// Never unlocked: the thread leaves with its namespace when this
		// goroutine ends, and no other goroutine ever runs on it.
		if e := syscall.Unshare(syscall.CLONE_FS | syscall.CLONE_NEWNS); e != nil {
			skip = fmt.Sprintf("unshare: %v", e)
			return
		}
		if e := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); e != nil {
			skip = fmt.Sprintf("make / private: %v", e)
			return
		}
		if e := syscall.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); e != nil {
			skip = fmt.Sprintf("mount tmpfs: %v", e)
			return
		}
		if e := os.WriteFile(filepath.Join(mp, "precious"), []byte("x"), 0o644); e != nil {
			skip = e.Error()
			return
		}
		err = f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
		_, statErr := os.Stat(filepath.Join(mp, "precious"))
		survived = statErr == nil
	})
	if skip != "" {
		t.Skipf("skipped: cannot make a mount namespace on a thread here (%s)", skip)
	}
	if exists(t, filepath.Join(mp, "precious")) {
		t.Fatal("the thread's mount is visible to the process: the test proves nothing")
	}
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrMountPoint) || !strings.Contains(err.Error(), "holds mount point "+mp) {
		t.Fatalf("Delete: %v, want ErrMountPoint from the thread's own mount table naming %s", err, mp)
	}
	if !survived || !exists(t, filepath.Join(lost, MetaFile)) {
		t.Fatal("data lost")
	}
}

// onOtherThread runs fn in a goroutine locked to an OS thread that is not
// the process's main thread, and never unlocks it, so the thread ends with
// the goroutine. /proc/self names the main thread's view; a test of what
// one thread sees must not run there.
func onOtherThread(fn func()) {
	release := make(chan struct{})
	defer close(release)
	for {
		ran := make(chan bool)
		go func() {
			runtime.LockOSThread()
			if syscall.Gettid() == syscall.Getpid() {
				ran <- false
				<-release // hold the main thread until fn has run elsewhere
				runtime.UnlockOSThread()
				return
			}
			fn()
			ran <- true
		}()
		if <-ran {
			return
		}
	}
}
