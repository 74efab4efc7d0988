package orphanctrl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// listPage is how many Replicas one page of the wide LIST carries: the
// most the cache decodes at once.
const listPage = 500

// firstListWait bounds how long the first LIST waits for the controller
// to set the selection.
const firstListWait = 2 * time.Second

// ErrWatchList is returned by the node-local Replica watch when the
// reflector asks for a streamed initial list (client-go's WatchListClient
// feature): the node-local cache needs the list, whose end it can tell.
// client-go falls back to LIST and WATCH on this error.
var ErrWatchList = errors.New("orphanctrl: the node-local replica watch does not stream initial events")

// LocalCache keeps a node's manager cache of Longhorn Replicas
// node-local: it holds only the replicas that can claim a directory on
// the node (spec.nodeID is the node or empty, or spec.diskID is one of
// the node's disk UUIDs), so the cache and the heap stay the size of the
// node's share whatever the size of the cluster.
//
// The watch stays wide (no label selector: see CacheOptions for why
// Longhorn's replica labels cannot be trusted to select them), and the
// filter sits between the API server and the informer, by
// cache.Options.NewInformer: the LIST is read in pages of 500 and only
// the node's replicas of each page kept; a watch event of a replica that
// is not the node's is dropped, one that moves a replica here is passed
// as an addition, one that moves it away as a deletion.
//
// Which replicas are the node's depends on the node's disk UUIDs, which
// the controller reads from the Longhorn Node. When they change, a
// replica on a new disk may have been dropped before (a replica whose
// spec.diskID names the disk while its spec.nodeID names another node),
// so the watch ends with an Expired error and the informer lists anew;
// until the cache holds that list, the controller answers "expected
// replicas unknown" for every disk, and nothing is judged an orphan or
// purged. The first LIST waits (up to 2 s) for the controller to set the
// disks, so a start lists once.
//
// Volumes are filtered the same way, by name: the cache holds only the
// volumes the node's sweep asks the last-copy guard about (those of its
// orphan candidates and records, a handful). A volume becomes wanted
// when its copy here is orphaned, which no selector knows in advance,
// and it may have been dropped before. Ending the watch for it would
// make client-go's reflector relist after its backoff (0.8 s doubling
// to 30 s, reset only after 2 minutes without one: volumes wanted one
// after another would leave the guard without volumes for tens of
// seconds), so the running watch reads each newly wanted name at the
// latest version (a LIST by the field selector metadata.name, a
// consistent read; when more than 16 names are gained at once, one
// paged list of the namespace reads them all, so that a sweep that
// suddenly wants hundreds of volumes costs that list's pages, not
// hundreds of LISTs) and passes the informer what it read: an addition,
// or the deletion of a cached volume that is gone; then a bookmark at
// the watch's own resource version, so that a watch restarted from the
// reflector's version misses nothing. Events of a name read so that are
// not newer than the read were queued before it and are dropped: passed,
// they would take the cache back to an older state (a volume faulted
// now shown healthy, as it was). This compares resource versions as
// numbers, which kube-apiserver's etcd3 storage makes them (etcd
// revisions, APIObjectVersioner in k8s.io/apiserver/pkg/storage/etcd3);
// one that is not a number, or a read that fails, ends the watch with
// Expired, and the informer lists anew. Until the cache holds the read,
// the sweep passes the guard an incomplete view, in which every volume
// is unknown, never deleted.
//
// Every LIST, a relist too, reads the latest version, never the version
// the reflector last synced: client-go's reflector relists "not older
// than" that version (Reflector.list in k8s.io/client-go/tools/cache),
// which kube-apiserver may serve from its watch cache at exactly that
// version, without the objects created since that the narrower selection
// dropped. Taken as complete, such a list would make a wanted volume
// deleted and a new disk's replica absent.
//
// One LocalCache serves one manager: create it with NewLocalCache, give
// Options() to manager.Options.Cache and the LocalCache to
// Config.LocalCache.
type LocalCache struct {
	namespace, nodeID string

	replicas *filter // selected by the node's disk UUIDs
	volumes  *filter // selected by the names of the volumes the node's orphans belong to
}

// filter is the state of one kind's node-local filter: the selection it
// keeps by (disk UUIDs for Replicas, volume names for Volumes), the
// generation of that selection, and what the informer was given.
type filter struct {
	kind string
	ns   string // the namespace watched
	// keep says whether an object is kept under the selection sel; it
	// is called with mu held.
	keep func(u *unstructured.Unstructured, sel map[string]bool) bool
	// byName: the selection is a set of object names, and a name it
	// gains is read by the running watch (catchUp), which goes on,
	// instead of a new LIST.
	byName bool

	mu       sync.Mutex
	sel      map[string]bool   // the selection
	gen      int               // bumped by every change of sel that must re-list; 0: not set yet
	set      chan struct{}     // closed once sel is first set
	expire   chan struct{}     // closed when gen moves past the watch's list
	grown    chan struct{}     // byName: closed when sel gains a name
	listed   int               // the gen the informer was last given a consistent read of; 0: none
	known    map[string]string // namespace/name → resourceVersion the informer was given
	readyGen int               // the gen whose list the cache was seen to hold
	epoch    int               // bumped by every LIST: a watch of an older one changes nothing

	// byName: the names of sel the informer was given a consistent read
	// of (a LIST, or catchUp's read by name) and every event since; and,
	// per name read by catchUp, the resource version it was read at:
	// events of it not newer were queued before the read and are
	// dropped, so the cache never goes back to an older state.
	covered map[string]bool
	floor   map[string]uint64
	// floorMax is the highest of floor: once an event newer than it
	// passes, every later one is newer than each floor, which are
	// dropped.
	floorMax uint64
}

func newFilter(kind, ns string, keep func(*unstructured.Unstructured, map[string]bool) bool) *filter {
	return &filter{kind: kind, ns: ns, keep: keep, set: make(chan struct{}), expire: make(chan struct{}), grown: make(chan struct{}),
		known: map[string]string{}, covered: map[string]bool{}, floor: map[string]uint64{}}
}

// NewLocalCache returns the node-local cache filter of nodeID's
// controller, watching namespace (empty means the kube example's
// default namespace).
func NewLocalCache(namespace, nodeID string) *LocalCache {
	if namespace == "" {
		namespace = crstore.DefaultNamespace
	}
	l := &LocalCache{namespace: namespace, nodeID: nodeID}
	l.replicas = newFilter("replica", namespace, l.keep)
	l.volumes = newFilter("volume", namespace, func(u *unstructured.Unstructured, names map[string]bool) bool { return names[u.GetName()] })
	l.volumes.byName = true
	// No volume is wanted before the first sweep: the Volume informer's
	// first LIST keeps none, and the first sweep that wants one lists
	// anew (setVolumes).
	l.volumes.setSel(map[string]bool{}, true)
	return l
}

// Options returns CacheOptions(namespace, nodeID) with the node-local
// Replica filter installed (cache.Options.NewInformer): what the
// manager of Config.LocalCache's controller must be built with. A
// manager that sets its own NewInformer must call the one returned here
// for the objects it does not handle itself.
func (l *LocalCache) Options() cache.Options {
	o := CacheOptions(l.namespace, l.nodeID)
	o.NewInformer = l.newInformer
	return o
}

// newInformer is cache.Options.NewInformer: the Replica informer gets
// the node-local ListerWatcher, every other informer controller-runtime's.
func (l *LocalCache) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		switch obj.GetObjectKind().GroupVersionKind() {
		case ReplicaGVK:
			lw = &localLW{f: l.replicas, gvk: ReplicaGVK, inner: toolscache.ToListerWatcherWithContext(lw)}
		case VolumeGVK:
			lw = &localLW{f: l.volumes, gvk: VolumeGVK, inner: toolscache.ToListerWatcherWithContext(lw)}
		}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
}

// keep is the filter: whether a replica can claim a directory on the
// node. It is wider than the controller's own rule (diskscan.ReplicaRef.ClaimsOn),
// never narrower: a replica naming the node is kept whatever its disk.
func (l *LocalCache) keep(u *unstructured.Unstructured, disks map[string]bool) bool {
	r := longhorn.ReplicaRefOf(u)
	return r.NodeID == l.nodeID || r.NodeID == "" || (r.DiskID != "" && disks[r.DiskID])
}

// setDisks sets the node's disk UUIDs. If they changed, the running
// Replica watch ends so that the informer lists anew, and ready is false
// until the cache holds that list.
func (l *LocalCache) setDisks(uuids map[string]bool) {
	l.replicas.setSel(uuids, true)
}

// ready says whether the replicas the cache lists (cached) hold the
// Replica informer's last LIST for the node's current disks, and every
// change the watch passed since. Once true for a set of disks, it stays
// true until they change.
func (l *LocalCache) ready(cached []unstructured.Unstructured) bool {
	return l.replicas.ready(cached)
}

// setVolumes sets the names of the volumes the node's sweep asks about.
// A name that was not wanted before may have been dropped by the Volume
// watch, so the running watch ends, the informer lists anew, and
// volumesReady is false until the cache holds that list. A smaller set
// lists nothing anew: the volumes no longer wanted leave the cache with
// their next event.
func (l *LocalCache) setVolumes(names map[string]bool) {
	l.volumes.mu.Lock()
	grows := false
	for n := range names {
		if !l.volumes.sel[n] {
			grows = true
			break
		}
	}
	l.volumes.mu.Unlock()
	l.volumes.setSel(names, grows)
}

// volumesReady is ready for the Volume informer: whether the cache
// (cached) holds the LIST made for the wanted volumes set last, and
// every change since. Only then does a wanted volume missing from the
// cache not exist.
func (l *LocalCache) volumesReady(cached []unstructured.Unstructured) bool {
	return l.volumes.ready(cached)
}

// setSel sets the selection. With relist (and on the first call), the
// informer must be given a consistent read of the new selection, and
// ready is false until the cache holds it: a byName filter's running
// watch reads the names gained (catchUp) and goes on; any other's ends,
// so that the informer lists anew. Without relist, the selection changes
// for the events to come only.
func (f *filter) setSel(sel map[string]bool, relist bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen > 0 && maps.Equal(f.sel, sel) {
		return
	}
	f.sel = maps.Clone(sel)
	// A name that leaves the selection is no longer followed: its events
	// are dropped from now on, so it must be read again if it comes back.
	maps.DeleteFunc(f.covered, func(n string, _ bool) bool { return !sel[n] })
	if f.gen > 0 && !relist {
		return
	}
	f.gen++
	if f.gen == 1 {
		close(f.set)
		// A watch that follows a LIST made before the first selection
		// (see firstListWait) ends.
		close(f.expire)
		f.expire = make(chan struct{})
		return
	}
	if f.byName {
		close(f.grown)
		f.grown = make(chan struct{})
		return
	}
	close(f.expire)
	f.expire = make(chan struct{})
}

// ready says whether the objects the cache lists (cached) hold the
// informer's last LIST for the current selection, and every change the
// watch passed since: each object given to the informer is there at the
// version it was given. Once true for a generation, it stays true until
// the next.
func (f *filter) ready(cached []unstructured.Unstructured) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen == 0 || f.listed != f.gen {
		return false
	}
	if f.readyGen == f.gen {
		return true
	}
	have := make(map[string]string, len(cached))
	for i := range cached {
		have[cached[i].GetNamespace()+"/"+cached[i].GetName()] = cached[i].GetResourceVersion()
	}
	for k, rv := range f.known {
		if have[k] != rv {
			return false
		}
	}
	f.readyGen = f.gen
	return true
}

// localLW is the ListerWatcher of a filtered informer.
type localLW struct {
	f     *filter
	gvk   schema.GroupVersionKind // of the objects listed
	inner toolscache.ListerWatcherWithContext
}

// List waits for the selection, lists every object in pages, and
// returns those it keeps, at the first page's resource version (every page
// of a paged list is read at it).
func (w *localLW) List(o metav1.ListOptions) (runtime.Object, error) {
	return w.ListWithContext(context.Background(), o)
}

// ListWithContext is List.
func (w *localLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	f := w.f
	select {
	case <-f.set:
	case <-time.After(firstListWait):
		// Something read the cache before the controller set the
		// selection (the manager waits for every informer created
		// before it started to sync before it starts the controller):
		// list with none, and list anew once it is set.
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f.mu.Lock()
	gen, sel := f.gen, f.sel
	f.mu.Unlock()

	// Every LIST reads the latest version (a consistent read), whatever
	// version the reflector asks for. "Any version" ("0") is served whole
	// from the API server's cache, without pages. And a relist asks for
	// "not older than" the last version the reflector synced, which the
	// API server may answer from its watch cache at exactly that version:
	// a view from before the selection grew, lacking every object created
	// since that the watch dropped, not kept then. ready would then find
	// the cache holding that list while it lacks the object: a newly
	// wanted volume would be absent, taken as deleted, and its last copy
	// purged; a replica on a newly added disk would be missing, and its
	// directory judged orphaned. (Seen in TestLateWantedVolumeIsNotDeleted
	// under load: the relist answered at the old version without the
	// faulted volume, and its copy was purged before the watch passed the
	// volume on.) A list at the latest version holds every object that
	// existed when the selection changed: one it lacks is gone.
	o.ResourceVersion, o.ResourceVersionMatch = "", ""
	o.Limit, o.Continue = listPage, ""
	out := &unstructured.UnstructuredList{}
	known := map[string]string{}
	for page := 0; ; page++ {
		obj, err := w.inner.ListWithContext(ctx, o)
		if err != nil {
			return nil, err
		}
		list, ok := obj.(*unstructured.UnstructuredList)
		if !ok {
			return nil, fmt.Errorf("orphanctrl: %s list is a %T, not an unstructured list", f.kind, obj)
		}
		if page == 0 {
			out.SetAPIVersion(list.GetAPIVersion())
			out.SetKind(list.GetKind())
			out.SetResourceVersion(list.GetResourceVersion())
		}
		f.mu.Lock()
		for i := range list.Items {
			if u := &list.Items[i]; f.keep(u, sel) {
				out.Items = append(out.Items, *u)
				known[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
			}
		}
		f.mu.Unlock()
		if list.GetContinue() == "" {
			break
		}
		o.Continue = list.GetContinue()
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
	f.mu.Lock()
	f.listed, f.known = gen, known
	f.epoch++
	if f.byName {
		// The list read every name of sel at the latest version; the
		// names the selection lost since are not followed.
		f.covered = maps.Clone(sel)
		maps.DeleteFunc(f.covered, func(n string, _ bool) bool { return !f.sel[n] })
		f.floor, f.floorMax = map[string]uint64{}, 0
	}
	f.mu.Unlock()
	return out, nil
}

// Watch is WatchWithContext.
func (w *localLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return w.WatchWithContext(context.Background(), o)
}

// WatchWithContext watches every object and passes the informer the
// changes of those it keeps. When the selection changes after the list
// it follows (so that an object it now keeps may have been dropped), a
// byName filter's watch reads the names gained and passes them on
// (catchUp); any other's ends with an Expired error, so that the
// informer lists anew.
func (w *localLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		return nil, ErrWatchList
	}
	f := w.f
	f.mu.Lock()
	expire, grown, epoch := f.expire, f.grown, f.epoch
	switch {
	case f.listed == 0 || (f.listed != f.gen && !f.byName):
		expire = closed
	case f.listed != f.gen:
		grown = closed
	}
	f.mu.Unlock()
	inner, err := w.inner.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	lw := &localWatch{lw: w, f: f, inner: inner, out: make(chan watch.Event), stop: make(chan struct{}),
		epoch: epoch, rv: o.ResourceVersion}
	go lw.run(ctx, cancel, expire, grown)
	return lw, nil
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// localWatch translates a wide watch into the node's.
type localWatch struct {
	lw    *localLW
	f     *filter
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
	epoch int    // the filter's epoch when the watch started
	rv    string // the resource version of the last event the inner watch gave
}

// Stop implements watch.Interface.
func (w *localWatch) Stop() { w.once.Do(func() { close(w.stop) }) }

// ResultChan implements watch.Interface.
func (w *localWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *localWatch) run(ctx context.Context, cancel context.CancelFunc, expire, grown <-chan struct{}) {
	defer close(w.out)
	defer w.inner.Stop()
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-w.stop:
			return
		case <-expire:
			// The selection grew (new disks): an object it now keeps
			// may have been dropped. Expired makes the reflector list
			// anew.
			w.expired("the node's " + w.f.kind + " selection changed: listing anew")
			return
		case <-grown:
			var err error
			if grown, err = w.catchUp(ctx); err != nil {
				w.expired(fmt.Sprintf("reading the %ss newly selected: %v: listing anew", w.f.kind, err))
				return
			}
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			ev, pass, err := w.translate(ev)
			if err != nil {
				w.expired(err.Error() + ": listing anew")
				return
			}
			if pass && !w.send(ev) {
				return
			}
		}
	}
}

// expired ends the watch with an Expired error, which makes the
// reflector list anew.
func (w *localWatch) expired(msg string) {
	w.send(watch.Event{Type: watch.Error, Object: &metav1.Status{
		Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: msg,
	}})
}

func (w *localWatch) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stop:
		return false
	}
}

// catchUp reads, at the latest version, each name the selection gained
// that the informer was not given a consistent read of, and passes the
// informer what it read: an addition, an update, or the deletion of an
// object it holds that is gone. The informer then holds every selected
// name as it was at or after the selection changed, and ready can be
// true without a new LIST. It returns the channel that tells the next
// growth. Events of a name read here that are not newer than the read
// (queued before it) are dropped (translate), so the informer never goes
// back to an older state of it.
func (w *localWatch) catchUp(ctx context.Context) (<-chan struct{}, error) {
	f := w.f
	if w.rv == "" {
		return nil, errors.New("the watch's resource version is not known")
	}
	f.mu.Lock()
	if w.epoch != f.epoch {
		f.mu.Unlock()
		return nil, errors.New("the informer listed since this watch started")
	}
	grown := f.grown
	var need []string
	for n := range f.sel {
		if !f.covered[n] {
			need = append(need, n)
		}
	}
	f.mu.Unlock()
	slices.Sort(need)

	type read struct {
		obj *unstructured.Unstructured // nil: there is none
		at  uint64
	}
	reads := make(map[string]read, len(need))
	if len(need) > maxNameReads {
		// Many names at once (a sweep that suddenly wants hundreds of
		// volumes): one paged list of the namespace, not a LIST each.
		objs, at, err := w.lw.readNames(ctx, need)
		if err != nil {
			return nil, err
		}
		for _, n := range need {
			reads[n] = read{objs[n], at}
		}
	} else {
		for _, n := range need {
			obj, at, err := w.lw.readName(ctx, n)
			if err != nil {
				return nil, err
			}
			reads[n] = read{obj, at}
		}
	}

	var evs []watch.Event
	f.mu.Lock()
	if w.epoch != f.epoch {
		f.mu.Unlock()
		return nil, errors.New("the informer listed since this watch started")
	}
	for _, n := range need {
		if !f.sel[n] {
			continue // no longer wanted: followed by its events, if at all
		}
		r, key := reads[n], f.ns+"/"+n
		_, had := f.known[key]
		switch {
		case r.obj != nil:
			f.known[key] = r.obj.GetResourceVersion()
			typ := watch.Added
			if had {
				typ = watch.Modified
			}
			evs = append(evs, watch.Event{Type: typ, Object: r.obj})
		case had:
			delete(f.known, key)
			gone := &unstructured.Unstructured{}
			gone.SetGroupVersionKind(w.lw.gvk)
			gone.SetNamespace(f.ns)
			gone.SetName(n)
			gone.SetResourceVersion(w.rv)
			evs = append(evs, watch.Event{Type: watch.Deleted, Object: gone})
		}
		f.covered[n] = true
		f.floor[n] = r.at
		f.floorMax = max(f.floorMax, r.at)
	}
	if len(evs) > 0 {
		// An object read here carries its own resource version, older
		// than where the watch is: the bookmark puts the reflector back
		// there, so that a watch restarted from it misses nothing.
		bm := &unstructured.Unstructured{}
		bm.SetGroupVersionKind(w.lw.gvk)
		bm.SetResourceVersion(w.rv)
		evs = append(evs, watch.Event{Type: watch.Bookmark, Object: bm})
	}
	complete := true
	for n := range f.sel {
		complete = complete && f.covered[n]
	}
	if complete {
		f.listed = f.gen
	}
	f.mu.Unlock()
	for _, ev := range evs {
		if !w.send(ev) {
			return nil, errors.New("the watch stopped")
		}
	}
	return grown, nil
}

// maxNameReads bounds the names catchUp reads with a LIST by name each;
// when more are to be read at once, it reads them all with one paged
// list of the namespace (readNames) instead.
const maxNameReads = 16

// readNames reads the objects called names at the latest version with
// one paged list of the namespace (listPage objects a page): those that
// exist, by name, and the list's resource version. Every page is read at
// the first page's version (a continue token carries it); a page that
// cannot be (its token expired) fails the read, and is never resumed at
// a later version: a name created among the keys already read would not
// show, and would be taken as absent.
func (w *localLW) readNames(ctx context.Context, names []string) (map[string]*unstructured.Unstructured, uint64, error) {
	wanted := make(map[string]bool, len(names))
	for _, n := range names {
		wanted[n] = true
	}
	found := make(map[string]*unstructured.Unstructured, len(names))
	o := metav1.ListOptions{Limit: listPage}
	var at uint64
	for page := 0; ; page++ {
		obj, err := w.inner.ListWithContext(ctx, o)
		if err != nil {
			return nil, 0, err
		}
		list, ok := obj.(*unstructured.UnstructuredList)
		if !ok {
			return nil, 0, fmt.Errorf("orphanctrl: %s list is a %T, not an unstructured list", w.f.kind, obj)
		}
		rv, err := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("orphanctrl: %s list at resource version %q, not a number", w.f.kind, list.GetResourceVersion())
		}
		if page == 0 {
			at = rv
		} else if rv != at {
			return nil, 0, fmt.Errorf("orphanctrl: %s list page %d at resource version %d, the first at %d", w.f.kind, page, rv, at)
		}
		for i := range list.Items {
			if u := &list.Items[i]; wanted[u.GetName()] && u.GetNamespace() == w.f.ns {
				found[u.GetName()] = u
			}
		}
		if list.GetContinue() == "" {
			return found, at, nil
		}
		o.Continue = list.GetContinue()
	}
}

// readName reads the object called name at the latest version (a LIST
// by the field selector metadata.name, a consistent read): the object,
// or nil if there is none, and the list's resource version.
func (w *localLW) readName(ctx context.Context, name string) (*unstructured.Unstructured, uint64, error) {
	obj, err := w.inner.ListWithContext(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return nil, 0, err
	}
	list, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return nil, 0, fmt.Errorf("orphanctrl: %s list is a %T, not an unstructured list", w.f.kind, obj)
	}
	at, err := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("orphanctrl: %s list at resource version %q, not a number", w.f.kind, list.GetResourceVersion())
	}
	var found *unstructured.Unstructured
	for i := range list.Items {
		if u := &list.Items[i]; u.GetName() == name && u.GetNamespace() == w.f.ns {
			found = u
		}
	}
	return found, at, nil
}

// translate maps a wide event to the node's: an event of an object that
// is not kept and was not is dropped; one that makes an object kept is
// an addition; one that makes it not kept is a deletion. An event of a
// name catchUp read that is not newer than the read is dropped. An error
// says the event cannot be placed: the watch must end.
func (w *localWatch) translate(ev watch.Event) (watch.Event, bool, error) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return ev, true, nil // errors
	}
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.epoch != f.epoch {
		return ev, false, errors.New("the informer listed since this watch started")
	}
	rv := u.GetResourceVersion()
	if len(f.floor) > 0 {
		at, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return ev, false, fmt.Errorf("a %s event at resource version %q, not a number", f.kind, rv)
		}
		if at > f.floorMax {
			f.floor, f.floorMax = map[string]uint64{}, 0
		} else if fl, read := f.floor[u.GetName()]; read && at <= fl && u.GetNamespace() == f.ns && ev.Type != watch.Bookmark {
			w.rv = rv
			return ev, false, nil
		}
	}
	if rv != "" {
		w.rv = rv
	}
	if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
		return ev, true, nil // bookmarks
	}
	key := u.GetNamespace() + "/" + u.GetName()
	_, had := f.known[key]
	local := ev.Type != watch.Deleted && f.keep(u, f.sel)
	switch {
	case local:
		f.known[key] = rv
		if !had {
			ev.Type = watch.Added
		} else {
			ev.Type = watch.Modified
		}
		return ev, true, nil
	case had:
		delete(f.known, key)
		return watch.Event{Type: watch.Deleted, Object: u}, true, nil
	default:
		return ev, false, nil
	}
}
