package orphanctrl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// listPage is how many Replicas one page of the wide LIST carries: the
// most the cache decodes at once.
const listPage = 500

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
// purged. The first LIST waits for the controller to set the disks once,
// so a start lists once.
//
// One LocalCache serves one manager: create it with NewLocalCache, give
// Options() to manager.Options.Cache and the LocalCache to
// Config.LocalCache.
type LocalCache struct {
	namespace, nodeID string

	mu       sync.Mutex
	disks    map[string]bool   // the node's disk UUIDs
	gen      int               // bumped by every change of disks; 0: not set yet
	expire   chan struct{}     // closed when gen moves past the watch's list
	listed   int               // the gen of the informer's last LIST; 0: none
	known    map[string]string // namespace/name → resourceVersion the informer was given
	readyGen int               // the gen whose list the cache was seen to hold
}

// NewLocalCache returns the node-local cache filter of nodeID's
// controller, watching namespace (empty means the kube example's
// default namespace).
func NewLocalCache(namespace, nodeID string) *LocalCache {
	if namespace == "" {
		namespace = crstore.DefaultNamespace
	}
	return &LocalCache{namespace: namespace, nodeID: nodeID, expire: make(chan struct{}),
		known: map[string]string{}}
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
	if _, ok := obj.(*unstructured.Unstructured); ok && obj.GetObjectKind().GroupVersionKind() == ReplicaGVK {
		lw = &localLW{l: l, inner: toolscache.ToListerWatcherWithContext(lw)}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
}

// keep is the filter: whether a replica can claim a directory on the
// node. It is wider than the controller's own rule (Controller.claimsHere),
// never narrower: a replica naming the node is kept whatever its disk.
func (l *LocalCache) keep(u *unstructured.Unstructured, disks map[string]bool) bool {
	r := longhorn.ReplicaRefOf(u)
	return r.NodeID == l.nodeID || r.NodeID == "" || (r.DiskID != "" && disks[r.DiskID])
}

// setDisks sets the node's disk UUIDs. If they changed, the running
// watch ends so that the informer lists anew, and ready is false until
// the cache holds that list.
func (l *LocalCache) setDisks(uuids map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen > 0 && maps.Equal(l.disks, uuids) {
		return
	}
	l.disks = maps.Clone(uuids)
	l.gen++
	// The first setting too: the informer may have listed before it
	// (with no disks: only the replicas naming the node), and must list
	// again now.
	close(l.expire)
	l.expire = make(chan struct{})
}

// ready says whether the replicas the cache lists (cached) hold the
// informer's last LIST for the node's current disks, and every change
// the watch passed since: each replica given to the informer is there at
// the version it was given. Once true for a set of disks, it stays true
// until they change.
func (l *LocalCache) ready(cached []unstructured.Unstructured) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == 0 || l.listed != l.gen {
		return false
	}
	if l.readyGen == l.gen {
		return true
	}
	have := make(map[string]string, len(cached))
	for i := range cached {
		have[cached[i].GetNamespace()+"/"+cached[i].GetName()] = cached[i].GetResourceVersion()
	}
	for k, rv := range l.known {
		if have[k] != rv {
			return false
		}
	}
	l.readyGen = l.gen
	return true
}

// localLW is the Replica informer's ListerWatcher.
type localLW struct {
	l     *LocalCache
	inner toolscache.ListerWatcherWithContext
}

// List lists every replica in pages and returns the node's (by the disks
// set so far), at the first page's resource version (every page of a
// paged list is read at it).
func (w *localLW) List(o metav1.ListOptions) (runtime.Object, error) {
	return w.ListWithContext(context.Background(), o)
}

// ListWithContext is List.
func (w *localLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	l := w.l
	// It does not wait for the node's disks: the manager syncs this
	// informer before it starts the runnable that reads them, so a list
	// that waited would never come. Before the disks are set (gen 0) it
	// keeps the replicas naming the node; setDisks then makes it list
	// again, and ready is false until that list is in the cache.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	gen, disks := l.gen, l.disks
	l.mu.Unlock()

	if o.ResourceVersion == "0" {
		// "Any version" is served whole from the API server's cache,
		// without pages: ask for the latest, which pages.
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
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
			return nil, fmt.Errorf("orphanctrl: replica list is a %T, not an unstructured list", obj)
		}
		if page == 0 {
			out.SetAPIVersion(list.GetAPIVersion())
			out.SetKind(list.GetKind())
			out.SetResourceVersion(list.GetResourceVersion())
		}
		for i := range list.Items {
			if u := &list.Items[i]; l.keep(u, disks) {
				out.Items = append(out.Items, *u)
				known[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
			}
		}
		if list.GetContinue() == "" {
			break
		}
		o.Continue = list.GetContinue()
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
	l.mu.Lock()
	l.listed, l.known = gen, known
	l.mu.Unlock()
	return out, nil
}

// Watch is WatchWithContext.
func (w *localLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return w.WatchWithContext(context.Background(), o)
}

// WatchWithContext watches every replica and passes the informer the
// node's changes; it ends with an Expired error when the node's disks
// change after the list it follows.
func (w *localLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		return nil, ErrWatchList
	}
	l := w.l
	l.mu.Lock()
	expire := l.expire
	if l.listed != l.gen {
		expire = closed
	}
	l.mu.Unlock()
	inner, err := w.inner.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	lw := &localWatch{l: l, inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go lw.run(expire)
	return lw, nil
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// localWatch translates a wide Replica watch into the node's.
type localWatch struct {
	l     *LocalCache
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

// Stop implements watch.Interface.
func (w *localWatch) Stop() { w.once.Do(func() { close(w.stop) }) }

// ResultChan implements watch.Interface.
func (w *localWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *localWatch) run(expire <-chan struct{}) {
	defer close(w.out)
	defer w.inner.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-expire:
			// The disks changed: a replica of a new disk may have been
			// dropped. Expired makes the reflector list anew.
			w.send(watch.Event{Type: watch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
				Message: "the node's disks changed: listing the node's replicas anew",
			}})
			return
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			if ev, pass := w.translate(ev); pass && !w.send(ev) {
				return
			}
		}
	}
}

func (w *localWatch) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stop:
		return false
	}
}

// translate maps a wide event to the node's: an event of a replica that
// is not the node's and was not is dropped; one that makes a replica the
// node's is an addition; one that makes it another's is a deletion.
func (w *localWatch) translate(ev watch.Event) (watch.Event, bool) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted) {
		return ev, true // bookmarks and errors
	}
	key := u.GetNamespace() + "/" + u.GetName()
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	_, had := l.known[key]
	local := ev.Type != watch.Deleted && l.keep(u, l.disks)
	switch {
	case local:
		l.known[key] = u.GetResourceVersion()
		if !had {
			ev.Type = watch.Added
		} else {
			ev.Type = watch.Modified
		}
		return ev, true
	case had:
		delete(l.known, key)
		return watch.Event{Type: watch.Deleted, Object: u}, true
	default:
		return ev, false
	}
}
