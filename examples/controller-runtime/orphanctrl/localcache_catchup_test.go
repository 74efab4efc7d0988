package orphanctrl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// volumeServer is a Volume API server for one namespace: LISTs (whole,
// or by the field selector metadata.name) answer at the latest version,
// and the watch gives what the test pushes.
type volumeServer struct {
	t  *testing.T
	ns string

	mu       sync.Mutex
	rv       int
	objs     map[string]unstructured.Unstructured
	reads    []string             // the field selector of each LIST
	onRead   func()               // called once (mu not held) before a LIST by name answers
	readErr  error                // returned by a LIST by name
	pageErr  error                // returned by a LIST that continues a paged one
	watchers []*watch.FakeWatcher // one per WATCH, the last one running
}

func newVolumeServer(t *testing.T, ns string) *volumeServer {
	return &volumeServer{t: t, ns: ns, objs: map[string]unstructured.Unstructured{}}
}

// set creates or updates the Volume name with robustness, at a new
// resource version, and returns it.
func (s *volumeServer) set(name, robustness string) *unstructured.Unstructured {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	u := object("Volume", s.ns, name, map[string]any{"numberOfReplicas": int64(3)})
	u.Object["status"] = map[string]any{"robustness": robustness}
	u.SetResourceVersion(strconv.Itoa(s.rv))
	s.objs[name] = u
	return u.DeepCopy()
}

// remove deletes the Volume name at a new resource version and returns
// its last state, at that version (what a watch's deletion carries).
func (s *volumeServer) remove(name string) *unstructured.Unstructured {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	u := s.objs[name]
	delete(s.objs, name)
	u.SetResourceVersion(strconv.Itoa(s.rv))
	return &u
}

// get returns the Volume name as it is.
func (s *volumeServer) get(name string) *unstructured.Unstructured {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.objs[name]
	return u.DeepCopy()
}

// whileReading sets the function called while a volume is read by name
// (once: it is cleared before it is called), and the error such reads
// return.
func (s *volumeServer) whileReading(f func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRead, s.readErr = f, err
}

func (s *volumeServer) lastRead() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[len(s.reads)-1]
}

func (s *volumeServer) ListWithContext(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.reads = append(s.reads, o.FieldSelector)
	onRead, readErr := s.onRead, s.readErr
	name, byName := strings.CutPrefix(o.FieldSelector, "metadata.name=")
	if byName {
		s.onRead = nil
	}
	s.mu.Unlock()
	if byName && onRead != nil {
		onRead()
	}
	if byName && readErr != nil {
		return nil, readErr
	}
	if o.ResourceVersion != "" {
		s.t.Errorf("a LIST asked for resourceVersion %q, not the latest", o.ResourceVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A paged LIST (Limit) answers in name order; its continue token is
	// "<version>/<offset>", and a continued page answers at the first
	// page's version, as kube-apiserver does (the objects are those of
	// now: the tests change none while a list is paged).
	rv, from := s.rv, 0
	if o.Continue != "" {
		if s.pageErr != nil {
			return nil, s.pageErr
		}
		v, off, _ := strings.Cut(o.Continue, "/")
		rv, _ = strconv.Atoi(v)
		from, _ = strconv.Atoi(off)
	}
	out := &unstructured.UnstructuredList{}
	out.SetAPIVersion("longhorn.io/v1beta2")
	out.SetKind("VolumeList")
	out.SetResourceVersion(strconv.Itoa(rv))
	for _, n := range slices.Sorted(maps.Keys(s.objs)) {
		if !byName || n == name {
			u := s.objs[n]
			out.Items = append(out.Items, *u.DeepCopy())
		}
	}
	out.Items = out.Items[from:]
	if o.Limit > 0 && int64(len(out.Items)) > o.Limit {
		out.Items = out.Items[:o.Limit]
		out.SetContinue(strconv.Itoa(rv) + "/" + strconv.Itoa(from+int(o.Limit)))
	}
	return out, nil
}

func (s *volumeServer) lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reads)
}

func (s *volumeServer) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := watch.NewFakeWithChanSize(16, false)
	s.watchers = append(s.watchers, w)
	return w, nil
}

// watcher is the running watch, which gives what the test pushes.
func (s *volumeServer) watcher() *watch.FakeWatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchers[len(s.watchers)-1]
}

// informer stands for the Volume informer: it lists, watches from the
// list's version, and applies each event the node-local watch passes to
// its store, as client-go's reflector does.
type informer struct {
	t      *testing.T
	f      *filter
	w      watch.Interface
	store  map[string]unstructured.Unstructured
	lastRV string
}

func startInformer(t *testing.T, f *filter, srv *volumeServer) *informer {
	t.Helper()
	lw := &localLW{f: f, gvk: VolumeGVK, inner: srv}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	list := obj.(*unstructured.UnstructuredList)
	in := &informer{t: t, f: f, store: map[string]unstructured.Unstructured{}, lastRV: list.GetResourceVersion()}
	for _, u := range list.Items {
		in.store[u.GetName()] = u
	}
	if in.w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: in.lastRV}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.w.Stop)
	return in
}

// next applies the next event the watch passes, and returns it.
func (in *informer) next() watch.Event {
	in.t.Helper()
	select {
	case ev, ok := <-in.w.ResultChan():
		if !ok {
			in.t.Fatal("the watch ended")
		}
		if ev.Type == watch.Error {
			in.t.Fatalf("the watch ended with %v", ev.Object)
		}
		u := ev.Object.(*unstructured.Unstructured)
		switch ev.Type {
		case watch.Added, watch.Modified:
			in.store[u.GetName()] = *u
		case watch.Deleted:
			delete(in.store, u.GetName())
		}
		in.lastRV = u.GetResourceVersion()
		return ev
	case <-time.After(10 * time.Second):
		in.t.Fatal("no event from the watch in 10 s")
	}
	return watch.Event{}
}

func (in *informer) cached() []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, u := range in.store {
		out = append(out, u)
	}
	return out
}

func (in *informer) robustness(name string) string {
	u, ok := in.store[name]
	if !ok {
		return "absent"
	}
	r, _, _ := unstructured.NestedString(u.Object, "status", "robustness")
	return r + "@" + u.GetResourceVersion()
}

// TestNewlyWantedVolumeIsReadWithoutEndingTheWatch: a volume the sweep
// comes to want is read by name at the latest version and passed to the
// informer on the running watch, which goes on: no relist, so no
// reflector backoff. The cache is not ready until it holds the read,
// then ready; the reflector's resource version is put back where the
// watch is.
func TestNewlyWantedVolumeIsReadWithoutEndingTheWatch(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	srv.set("pvc-a", "faulted")
	srv.set("pvc-b", "healthy")
	in := startInformer(t, lc.volumes, srv)
	if len(in.store) != 0 || !lc.volumesReady(in.cached()) {
		t.Fatalf("before any volume is wanted: %d cached, ready %v", len(in.store), lc.volumesReady(in.cached()))
	}
	watchedFrom := in.lastRV

	lc.setVolumes(map[string]bool{"pvc-a": true})
	if lc.volumesReady(in.cached()) {
		t.Fatal("ready before the newly wanted volume is read")
	}
	if ev := in.next(); ev.Type != watch.Added || in.robustness("pvc-a") != "faulted@1" {
		t.Fatalf("first event %s, pvc-a %s; want the read volume added, faulted@1", ev.Type, in.robustness("pvc-a"))
	}
	if ev := in.next(); ev.Type != watch.Bookmark || in.lastRV != watchedFrom {
		t.Fatalf("then %s at %s; want a bookmark at %s, where the watch is", ev.Type, in.lastRV, watchedFrom)
	}
	if !lc.volumesReady(in.cached()) {
		t.Fatal("not ready once the cache holds the read volume")
	}
	if got := srv.lastRead(); got != "metadata.name=pvc-a" {
		t.Errorf("the last read was by %q, not the volume's name", got)
	}
	if _, ok := in.store["pvc-b"]; ok {
		t.Error("a volume not wanted is cached")
	}

	// The watch goes on: a later change of the volume passes.
	srv.watcher().Modify(srv.set("pvc-a", "healthy"))
	if ev := in.next(); ev.Type != watch.Modified || in.robustness("pvc-a") != "healthy@3" {
		t.Fatalf("%s, pvc-a %s; want the change, healthy@3", ev.Type, in.robustness("pvc-a"))
	}
}

// TestEventsQueuedBeforeTheReadAreDropped: events of a newly wanted
// volume the watch had not passed on when it was read are older than
// the read, and are dropped: passed, they would take the cache back to
// an older state (a volume faulted now shown healthy, as it was, lets
// its last copy be purged). Events newer than the read pass.
func TestEventsQueuedBeforeTheReadAreDropped(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	srv.set("pvc-a", "healthy") // 1
	in := startInformer(t, lc.volumes, srv)
	srv.whileReading(func() {
		// While the volume is read, two changes are made: the watch
		// gives the first only after the read.
		srv.watcher().Modify(srv.set("pvc-a", "healthy")) // 2, queued
		srv.set("pvc-a", "faulted")                       // 3, read
	}, nil)
	lc.setVolumes(map[string]bool{"pvc-a": true})
	if ev := in.next(); ev.Type != watch.Added || in.robustness("pvc-a") != "faulted@3" {
		t.Fatalf("%s, pvc-a %s; want the read, faulted@3", ev.Type, in.robustness("pvc-a"))
	}
	in.next() // the bookmark
	if !lc.volumesReady(in.cached()) {
		t.Fatal("not ready once the cache holds the read volume")
	}
	srv.watcher().Modify(srv.get("pvc-a"))             // 3, the read itself
	srv.watcher().Modify(srv.set("pvc-a", "degraded")) // 4
	ev := in.next()
	if ev.Type != watch.Modified || in.robustness("pvc-a") != "degraded@4" {
		t.Fatalf("%s, pvc-a %s; want the older events dropped and degraded@4 passed", ev.Type, in.robustness("pvc-a"))
	}
	if !lc.volumesReady(in.cached()) {
		t.Fatal("not ready once the cache holds the newer event")
	}
}

// TestVolumeWantedAgainIsReadAgain: a volume no longer wanted is not
// followed; wanted again, it is read again, and one deleted meanwhile
// (its deletion not yet passed on by the watch) leaves the cache at
// once.
func TestVolumeWantedAgainIsReadAgain(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	srv.set("pvc-a", "faulted") // 1
	in := startInformer(t, lc.volumes, srv)
	lc.setVolumes(map[string]bool{"pvc-a": true})
	in.next()
	in.next()
	lc.setVolumes(map[string]bool{})
	if !lc.volumesReady(in.cached()) {
		t.Fatal("not ready after the wanted set shrank")
	}
	gone := srv.remove("pvc-a") // 2, the watch has not given it yet
	srv.whileReading(func() { srv.watcher().Delete(gone) }, nil)
	lc.setVolumes(map[string]bool{"pvc-a": true})
	if lc.volumesReady(in.cached()) {
		t.Fatal("ready when wanted again before it is read again")
	}
	if ev := in.next(); ev.Type != watch.Deleted || in.robustness("pvc-a") != "absent" {
		t.Fatalf("%s, pvc-a %s; want the volume read as gone deleted from the cache", ev.Type, in.robustness("pvc-a"))
	}
	in.next() // the bookmark
	if !lc.volumesReady(in.cached()) {
		t.Fatal("not ready once the cache lacks the deleted volume")
	}
	srv.watcher().Modify(srv.set("pvc-c", "healthy")) // 3: not wanted, dropped; clears the floors
	srv.watcher().Add(srv.set("pvc-a", "degraded"))   // 4: created again
	if ev := in.next(); ev.Type != watch.Added || in.robustness("pvc-a") != "degraded@4" {
		t.Fatalf("%s, pvc-a %s; want the new volume added, degraded@4", ev.Type, in.robustness("pvc-a"))
	}
}

// TestFailedReadRelists: a volume that cannot be read ends the watch
// with Expired, so that the informer lists anew, and the cache is not
// ready until it holds that list.
func TestFailedReadRelists(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	srv.set("pvc-a", "faulted")
	in := startInformer(t, lc.volumes, srv)
	srv.whileReading(nil, errors.New("the API server is away"))
	lc.setVolumes(map[string]bool{"pvc-a": true})
	select {
	case ev := <-in.w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Reason != metav1.StatusReasonExpired {
			t.Fatalf("event %s %v; want Expired", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
	}
	if lc.volumesReady(in.cached()) {
		t.Fatal("ready though the wanted volume was not read")
	}
	lw := &localLW{f: lc.volumes, gvk: VolumeGVK, inner: srv}
	obj, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: in.lastRV})
	if err != nil {
		t.Fatal(err)
	}
	if items := obj.(*unstructured.UnstructuredList).Items; len(items) != 1 || !lc.volumesReady(items) {
		t.Fatalf("after the relist: %d items, ready %v", len(items), lc.volumesReady(items))
	}
}

// TestRestartedWatchDropsReplayedOlderEvents: the informer's resource
// version is put back where the watch was when the volume was read (the
// bookmark), so a watch restarted from it replays the events queued
// before the read; they are dropped there too.
func TestRestartedWatchDropsReplayedOlderEvents(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	srv.set("pvc-a", "healthy") // 1
	in := startInformer(t, lc.volumes, srv)
	stale := srv.set("pvc-a", "healthy") // 2, not given by the watch yet
	srv.set("pvc-a", "faulted")          // 3
	lc.setVolumes(map[string]bool{"pvc-a": true})
	in.next()
	if ev := in.next(); ev.Type != watch.Bookmark || in.lastRV != "1" || in.robustness("pvc-a") != "faulted@3" {
		t.Fatalf("%s at %s, pvc-a %s; want a bookmark at 1, faulted@3", ev.Type, in.lastRV, in.robustness("pvc-a"))
	}
	// The watch ends (a server timeout); the reflector watches again
	// from its resource version, without a LIST.
	in.w.Stop()
	lw := &localLW{f: lc.volumes, gvk: VolumeGVK, inner: srv}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: in.lastRV})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	in.w = w
	srv.watcher().Modify(stale)                       // 2, replayed
	srv.watcher().Modify(srv.set("pvc-a", "faulted")) // 4
	if ev := in.next(); ev.Type != watch.Modified || in.robustness("pvc-a") != "faulted@4" {
		t.Fatalf("%s, pvc-a %s; want the replayed older event dropped and faulted@4 passed", ev.Type, in.robustness("pvc-a"))
	}
}

// TestManyNewlyWantedVolumesAreReadWithOnePagedList: a sweep that
// suddenly wants 300 volumes (five of them gone) among 600 reads them
// with one paged list of the namespace (two pages of 500), not 305 LISTs
// by name, and the cache is ready once it holds exactly the wanted ones
// that exist; the gone ones are absent. A sweep that wants a few more
// reads each by name.
func TestManyNewlyWantedVolumesAreReadWithOnePagedList(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	for i := range 600 {
		srv.set(fmt.Sprintf("pvc-%03d", i), "healthy")
	}
	srv.set("pvc-040", "faulted")
	in := startInformer(t, lc.volumes, srv)
	before := srv.lists()
	wanted := map[string]bool{}
	for i := 0; i < 600; i += 2 {
		wanted[fmt.Sprintf("pvc-%03d", i)] = true
	}
	for i := range 5 {
		wanted[fmt.Sprintf("pvc-gone-%d", i)] = true
	}
	lc.setVolumes(wanted)
	for range 300 {
		if ev := in.next(); ev.Type != watch.Added {
			t.Fatalf("event %s; want the read volumes added", ev.Type)
		}
	}
	if ev := in.next(); ev.Type != watch.Bookmark {
		t.Fatalf("then %s; want a bookmark", ev.Type)
	}
	lists := srv.lists() - before
	t.Logf("305 volumes newly wanted at once: %d Volume LISTs", lists)
	if lists != 2 {
		t.Errorf("305 newly wanted volumes took %d LISTs; want one paged list of 2 pages", lists)
	}
	if !lc.volumesReady(in.cached()) || len(in.store) != 300 {
		t.Fatalf("ready %v with %d cached; want ready with the 300 wanted that exist", lc.volumesReady(in.cached()), len(in.store))
	}
	if got := in.robustness("pvc-040"); got != "faulted@601" {
		t.Errorf("pvc-040 is %s; want faulted@601", got)
	}
	if _, ok := in.store["pvc-001"]; ok {
		t.Error("a volume not wanted is cached")
	}

	// A few more: a LIST by name each.
	before = srv.lists()
	wanted["pvc-001"], wanted["pvc-003"] = true, true
	lc.setVolumes(wanted)
	in.next()
	in.next()
	in.next() // the bookmark
	if lists := srv.lists() - before; lists != 2 || !strings.HasPrefix(srv.lastRead(), "metadata.name=") {
		t.Errorf("2 newly wanted volumes took %d LISTs, the last by %q; want 2 by name", lists, srv.lastRead())
	}
	if !lc.volumesReady(in.cached()) || len(in.store) != 302 {
		t.Errorf("ready %v with %d cached; want ready with 302", lc.volumesReady(in.cached()), len(in.store))
	}
}

// TestManyNewlyWantedVolumesFailedPageRelists: the paged list of many
// newly wanted volumes whose second page fails is not resumed at a later
// version (a volume created among the keys already read would not show,
// and be taken as deleted): the watch ends with Expired, the informer
// lists anew, and the cache is not ready meanwhile.
func TestManyNewlyWantedVolumesFailedPageRelists(t *testing.T) {
	const ns = "longhorn-system"
	lc := NewLocalCache(ns, "node-1")
	srv := newVolumeServer(t, ns)
	wanted := map[string]bool{}
	for i := range 600 {
		n := fmt.Sprintf("pvc-%03d", i)
		srv.set(n, "faulted")
		if i%20 == 0 {
			wanted[n] = true
		}
	}
	in := startInformer(t, lc.volumes, srv)
	srv.mu.Lock()
	srv.pageErr = errors.New("the resource version of the continue token is too old")
	srv.mu.Unlock()
	lc.setVolumes(wanted)
	select {
	case ev := <-in.w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Reason != metav1.StatusReasonExpired {
			t.Fatalf("event %s %v; want Expired", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
	}
	if lc.volumesReady(in.cached()) {
		t.Fatal("ready though the wanted volumes were not read")
	}
}
