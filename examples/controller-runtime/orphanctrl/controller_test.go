package orphanctrl_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// TestOrphansAppearAsLonghornWritesThem: one Orphan per unexpected
// directory, with Longhorn's name, labels, spec, finalizer and owner, and
// none for the directory a Replica expects.
func TestOrphansAppearAsLonghornWritesThem(t *testing.T) {
	e, d, nameA, _ := newTwoOrphanNode(t, manager.Options{}, nil)

	o := e.nodeOrphans("node-1")[nameA]
	wantLabels := map[string]string{
		"longhorn.io/component": "orphan", "longhorn.io/managed-by": "longhorn-manager",
		"longhorn.io/orphan-type": "replica", "longhornnode": "node-1",
	}
	for k, v := range wantLabels {
		if o.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, o.Labels[k], v)
		}
	}
	if fs := o.Finalizers; len(fs) != 1 || fs[0] != "longhorn.io" {
		t.Errorf("finalizers = %v, want [longhorn.io]", fs)
	}
	if o.Spec.NodeID != "node-1" || o.Spec.OrphanType != "replica" || o.Spec.DataEngine != "v1" {
		t.Errorf("spec = %+v", o.Spec)
	}
	wantParams := map[string]string{"DataName": orphanDirA, "DiskName": "disk-1", "DiskPath": d.Path, "DiskUUID": d.UUID, "DiskType": "filesystem"}
	if !maps.Equal(o.Spec.Parameters, wantParams) {
		t.Errorf("spec.parameters = %v, want %v", o.Spec.Parameters, wantParams)
	}
	if o.Status.OwnerID != "node-1" {
		t.Errorf("status.ownerID = %q, want node-1", o.Status.OwnerID)
	}
	for _, dir := range []string{ownedDir, orphanDirA, orphanDirB} {
		if !exists(t, d.Dir(dir)) {
			t.Errorf("%s was removed though nobody asked", dir)
		}
	}
}

// TestDeleteThroughTheAPIPurges: `kubectl delete orphan NAME` removes the
// directory, then the object; nothing else is touched.
func TestDeleteThroughTheAPIPurges(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t, manager.Options{}, nil)

	// Watch the object: when it goes, its directory must be gone already.
	events := e.watchOrphans(client.MatchingFields{"metadata.name": nameA})
	e.deleteOrphan(nameA)
	deleted := false
	for ev := range events {
		failOnError(t, ev)
		if ev.Type == watch.Deleted {
			if exists(t, d.Dir(orphanDirA)) {
				t.Fatalf("the Orphan was removed before its directory")
			}
			deleted = true
			break
		}
	}
	if !deleted {
		t.Fatalf("no DELETED event for %s within %s", nameA, waitTimeout)
	}
	e.waitGone(nameA)
	if exists(t, d.Dir(orphanDirA)) {
		t.Errorf("%s still exists after its Orphan was deleted", orphanDirA)
	}
	if ts := tombstones(t, d); len(ts) != 0 {
		t.Errorf("tombstones left: %v", ts)
	}
	if !exists(t, d.Dir(ownedDir)) || !exists(t, d.Dir(orphanDirB)) {
		t.Errorf("purging %s removed another directory", orphanDirA)
	}
	e.waitOrphans("node-1", nameB)
}

// TestDiskEvictionForgetsAndKeepsData: evicting the disk removes its
// Orphans without touching a directory; they come back after.
func TestDiskEvictionForgetsAndKeepsData(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t, manager.Options{}, nil)

	// Every object must be marked not cleanable before it goes, so that no
	// deletion path could purge it.
	events := e.watchOrphans(client.MatchingLabels{"longhornnode": "node-1"})
	e.setDiskEviction(d, true)
	e.waitOrphans("node-1")
	reasons := map[string]string{}
	for ev := range events {
		failOnError(t, ev)
		o, ok := ev.Object.(*orphanctrl.Orphan)
		if !ok || ev.Type != watch.Deleted {
			continue
		}
		for _, c := range o.Status.Conditions {
			if c.Type == "DataCleanable" {
				reasons[o.Name] = c.Status + "/" + c.Reason
			}
		}
		if len(reasons) == 2 {
			break
		}
	}
	for _, name := range []string{nameA, nameB} {
		if reasons[name] != "False/DiskEvicted" {
			t.Errorf("%s deleted with DataCleanable %q, want False/DiskEvicted", name, reasons[name])
		}
	}
	for _, dir := range []string{ownedDir, orphanDirA, orphanDirB} {
		if !exists(t, d.Dir(dir)) {
			t.Errorf("%s was removed by the eviction", dir)
		}
	}
	e.setDiskEviction(d, false)
	e.waitOrphans("node-1", nameA, nameB)
}

// TestInterruptedPurgeIsFinishedAfterRestart: the controller's process is
// SIGKILLed right after it renamed a directory to its tombstone; a new
// one removes the tombstone and the Orphan.
func TestInterruptedPurgeIsFinishedAfterRestart(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	// Enough files that removing them takes far longer than a SIGKILL.
	bulk := filepath.Join(d.Dir(orphanDirA), "bulk")
	if err := os.Mkdir(bulk, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		if err := os.WriteFile(filepath.Join(bulk, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first := e.startChild("node-1")
	nameA, nameB := longhornName(d, orphanDirA), longhornName(d, orphanDirB)
	e.waitOrphans("node-1", nameA, nameB)

	// Kill the controller the moment the tombstone appears.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(d.Path, "replicas"), unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	killed := make(chan string, 1)
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				killed <- "inotify: " + err.Error()
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if strings.HasPrefix(name, ".caretaker-purge.") {
					first.kill()
					killed <- ""
					return
				}
			}
		}
	}()
	e.deleteOrphan(nameA)
	if msg := <-killed; msg != "" {
		t.Fatal(msg)
	}

	if exists(t, d.Dir(orphanDirA)) {
		t.Fatalf("%s still has its name after the rename", orphanDirA)
	}
	if ts := tombstones(t, d); len(ts) != 1 {
		t.Fatalf("tombstones after the kill = %v, want one (the purge finished before the kill?)", ts)
	}
	o, err := e.getOrphan(nameA)
	if err != nil {
		t.Fatalf("the Orphan is gone though its purge was interrupted: %v", err)
	}
	if o.DeletionTimestamp == nil || len(o.Finalizers) == 0 {
		t.Fatalf("the Orphan after the kill: deletionTimestamp %v, finalizers %v", o.DeletionTimestamp, o.Finalizers)
	}

	e.start("node-1", manager.Options{}, nil)
	e.waitGone(nameA)
	e.waitFor("the tombstone to be removed", func() error {
		if ts := tombstones(t, d); len(ts) > 0 {
			return fmt.Errorf("tombstones %v", ts)
		}
		return nil
	})
	e.waitOrphans("node-1", nameB)
	if !exists(t, d.Dir(ownedDir)) || !exists(t, d.Dir(orphanDirB)) {
		t.Errorf("the restarted controller removed another directory")
	}
}

// child is a controller running in a child process (this test binary).
type child struct{ *kubetest.Child }

// startChild runs node's controller in a child process; it is stopped at
// the end of the test, and its log printed if the test failed.
func (e *env) startChild(node string) *child {
	e.t.Helper()
	return &child{kubetest.StartChild(e.t, "controller "+node, e.base,
		childEnv+"="+strings.Join([]string{kubeconfig, e.ns, node}, "\n"))}
}

func (c *child) kill() { c.Kill() }

// staleCache is a client whose reads answer what a stale cache would for
// an Orphan deleted and then created again under the same name: the old
// object, with its deletion timestamp and an old resourceVersion.
type staleCache struct {
	client.Client
	lists atomic.Int64
}

func stale(o *orphanctrl.Orphan) {
	o.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now().Add(-time.Minute)))
	o.ResourceVersion = "1"
}

func (c *staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*orphanctrl.OrphanList); ok {
		for i := range l.Items {
			if condition(&l.Items[i], "DataCleanable") == "True" {
				stale(&l.Items[i])
				c.lists.Add(1)
			}
		}
	}
	return nil
}

func (c *staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if o, ok := obj.(*orphanctrl.Orphan); ok && condition(o, "DataCleanable") == "True" {
		stale(o)
	}
	return nil
}

// TestStaleCacheCannotCausePurge is the cached re-read trap: the cache
// claims the user deleted both Orphans, but the API server says they are
// live objects. The Store lists through the cache, so the Sweeper plans
// the purges; its re-read goes through the API reader, which stops them.
// A Store that re-read through the cache would purge both directories.
func TestStaleCacheCannotCausePurge(t *testing.T) {
	var sc *staleCache
	e, d, nameA, nameB := newTwoOrphanNode(t, manager.Options{}, func(mgr manager.Manager, cfg *orphanctrl.Config) {
		sc = &staleCache{Client: mgr.GetClient()}
		cfg.Store = orphanctrl.NewStore(sc, mgr.GetAPIReader(), cfg.Namespace, cfg.NodeID)
	})
	// Make the controller sweep many times with the stale view: every
	// change of an Orphan is a reconcile.
	start := sc.lists.Load()
	for i := 0; sc.lists.Load()-start < 20; i++ {
		if i == 200 {
			t.Fatalf("%d stale records listed after %d changes; the controller does not sweep", sc.lists.Load()-start, i)
		}
		e.annotate(nameA, fmt.Sprint(i))
	}
	for _, dir := range []string{ownedDir, orphanDirA, orphanDirB} {
		if !exists(t, d.Dir(dir)) {
			t.Errorf("%s was purged on the cache's word", dir)
		}
	}
	for _, name := range []string{nameA, nameB} {
		o, err := e.getOrphan(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if o.DeletionTimestamp != nil {
			t.Errorf("%s was deleted on the cache's word", name)
		}
	}
}

// TestRunsWithoutLeadership is the leader election trap: the manager has
// leader election on, and another node's manager holds the lease. The
// monitor and the controller still run (each node must sweep its own
// disks), and this manager is never elected.
func TestRunsWithoutLeadership(t *testing.T) {
	e := newEnv(t)
	const leaseName = "caretaker-orphans"
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: e.ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("node-0"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &now, RenewTime: &now,
		},
	}
	if err := e.c.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir) // without it the mass-deletion guard refuses the purge
	e.orphanDir(d, orphanDirA)
	mgr := e.start("node-1", manager.Options{
		LeaderElection: true, LeaderElectionID: leaseName, LeaderElectionNamespace: e.ns,
		LeaderElectionReleaseOnCancel: true,
	}, nil)
	nameA := longhornName(d, orphanDirA)
	e.waitOrphans("node-1", nameA)
	e.deleteOrphan(nameA)
	e.waitGone(nameA)
	if exists(t, d.Dir(orphanDirA)) {
		t.Errorf("%s was not purged", orphanDirA)
	}
	select {
	case <-mgr.Elected():
		t.Fatalf("the manager was elected though node-0 holds the lease; the test proves nothing")
	default:
	}
}

// countingStore records how many sweeps of each node run at once: the
// Sweeper lists the node's records once per sweep, at its start, and
// holds the list for a moment so that a concurrent sweep would overlap.
type countingStore struct {
	orphan.Store
	mu       sync.Mutex
	inFlight map[string]int
	maxSeen  int
	sweeps   int
}

func (s *countingStore) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	s.mu.Lock()
	s.inFlight[sel.NodeID]++
	s.maxSeen = max(s.maxSeen, s.inFlight[sel.NodeID])
	s.sweeps++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight[sel.NodeID]--
		s.mu.Unlock()
	}()
	// Widens the window in which a second sweep of the node would be
	// seen; no decision waits on it.
	time.Sleep(20 * time.Millisecond)
	return s.Store.List(ctx, sel)
}

// TestOneReconcilePerNode is the third trap: with four workers and a
// storm of events on the node's Orphans, Node and Replicas, the node is
// never swept twice at once, because every event maps to the node's key.
func TestOneReconcilePerNode(t *testing.T) {
	cs := &countingStore{inFlight: map[string]int{}}
	e, d, nameA, nameB := newTwoOrphanNode(t, manager.Options{}, func(mgr manager.Manager, cfg *orphanctrl.Config) {
		cfg.MaxConcurrentReconciles = 4
		cs.Store = orphanctrl.NewStore(mgr.GetClient(), mgr.GetAPIReader(), cfg.Namespace, cfg.NodeID)
		cfg.Store = cs
	})
	for i := range 30 {
		e.annotate(nameA, fmt.Sprint(i))
		e.annotate(nameB, fmt.Sprint(i))
		e.setDiskEviction(d, false) // a Node event that changes nothing
	}
	e.waitFor("sweeps", func() error {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.sweeps < 10 {
			return fmt.Errorf("%d sweeps", cs.sweeps)
		}
		return nil
	})
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.maxSeen != 1 {
		t.Errorf("%d sweeps of node-1 ran at once; want 1", cs.maxSeen)
	}
}

// annotate changes an Orphan without changing what it means: an event
// that wakes the controller (a label, which a person may set; an
// annotation alone does not wake it).
func (e *env) annotate(name, value string) {
	e.t.Helper()
	o := &orphanctrl.Orphan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"caretaker.test/event":%q}}}`, value)
	if err := e.c.Patch(context.Background(), o, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		e.t.Fatal(err)
	}
}

// watchOrphans watches the test namespace's Orphans from now on until the
// test ends or waitTimeout passes (the channel is then closed). It resumes
// from the last event it delivered when the API server drops or breaks
// the stream (a loaded server does), so a test waiting for DELETED events
// never misses one; what it cannot resume past (410 Gone) arrives as an
// ERROR event.
func (e *env) watchOrphans(opts ...client.ListOption) <-chan watch.Event {
	e.t.Helper()
	wc, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		e.t.Fatal(err)
	}
	opts = append(opts, client.InNamespace(e.ns))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	var list orphanctrl.OrphanList
	if err := wc.List(ctx, &list, opts...); err != nil {
		cancel()
		e.t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return wc.Watch(ctx, &orphanctrl.OrphanList{}, append([]client.ListOption{&client.ListOptions{Raw: &o}}, opts...)...)
		},
	})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { w.Stop(); cancel() })
	return w.ResultChan()
}

// failOnError fails the test with the API server's status on an ERROR
// event of a watch.
func failOnError(t *testing.T, ev watch.Event) {
	t.Helper()
	if ev.Type == watch.Error {
		t.Fatalf("watch event %v: %v", ev.Type, apierrors.FromObject(ev.Object))
	}
}
