package nodecache

import (
	"context"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Volumes holds the state of the Volumes the last-copy guard asks
// about on this node: the volumes of the node's orphan candidates and
// records, a handful, not the cluster's, and nothing at all on a node
// without orphans. A volume that becomes wanted is read once with a GET,
// and then watched by name (a field selector on metadata.name), so that a
// change of its state wakes a sweep; a start lists no Volume. At most
// MaxVolumeWatches volumes are watched; the others are read again at
// every sweep (Ensure), so their state is never older than the sweep's
// start. A watch ends when its volume is no longer wanted.
//
// A sweep's reads are bounded whatever the node's orphans: up to
// MaxVolumeGets volumes to read are read with a GET each; past that, all
// of them with one paged list of the namespace's Volumes (ListPages), of
// which only the wanted ones are kept. A node with 500 orphan volumes
// thus costs a sweep the list's pages (PageSize Volumes each), not 436
// GETs. A volume missing from a list read at one resource version is
// known absent, as a GET's NotFound says; one missing from a list that
// had to be resumed at a later version (PageResult.Consistent is false)
// stays unresolved for the sweep, since a volume created among the keys
// already read would not show.
//
// A wanted volume is resolved once its state is known: present with its
// robustness, or known absent (NotFound, or a deletion seen). States
// reports complete only when every wanted volume is resolved; an
// unresolved one is simply missing, which the guard treats as unknown
// when complete is false, never as deleted.
//
// A detached volume, whose robustness Longhorn leaves unknown
// (longhorn.NeedsReplicas), is stated from its Replicas
// (orphan.LonghornVolumeState): Ensure lists them from the API server,
// by the label longhornvolume=<volume>, at every sweep; until a list
// succeeds the volume is unknown. Past MaxVolumeGets detached volumes,
// one list reads the Replicas of DetachedPerList of them at once.
type Volumes struct {
	ri      dynamic.ResourceInterface
	rri     dynamic.ResourceInterface // Replicas, listed for detached volumes
	ns      string
	changed func() // called when a wanted volume's state changed

	mu      sync.Mutex
	want    map[string]*volEntry // by volume name
	ctx     context.Context      // Run's; nil before Run
	watches int                  // volumes watched now
}

// MaxVolumeWatches bounds the volumes a Volumes watches by name; the
// others are read at every sweep.
const MaxVolumeWatches = 64

// MaxVolumeGets bounds the volumes Ensure reads with a GET each; when
// more are to be read, it reads them all with one paged list instead.
const MaxVolumeGets = 16

type volEntry struct {
	stop     context.CancelFunc // ends its watch; nil: not watched
	resolved bool               // an event or a GET said what it is
	fromWait bool               // an event came since it was wanted (a GET's answer is older)
	exists   bool
	state    orphan.VolumeState
	obj      *unstructured.Unstructured // the stripped Volume, when it exists

	// fromReplicas is the state counted from the Replicas at the last
	// sweep, for a volume that needs them; "" (unknown) until then.
	fromReplicas orphan.VolumeState
}

// NewVolumes returns an empty set of wanted volumes, read through ri (the
// Volumes of Longhorn's namespace ns) and rri (its Replicas, listed for
// detached volumes; nil: a detached volume stays unknown). changed is
// called when a wanted volume's state changed; it must not block.
func NewVolumes(ri, rri dynamic.ResourceInterface, ns string, changed func()) *Volumes {
	return &Volumes{ri: ri, rri: rri, ns: ns, changed: changed, want: map[string]*volEntry{}}
}

// Run lets Ensure watch the wanted volumes until ctx is done.
func (v *Volumes) Run(ctx context.Context) {
	v.mu.Lock()
	v.ctx = ctx
	v.mu.Unlock()
	<-ctx.Done()
}

// HasSynced is true once Run started: a start lists no Volume.
func (v *Volumes) HasSynced() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ctx != nil
}

// watchLocked starts the watch of the wanted volume name, if Run runs and
// fewer than MaxVolumeWatches are watched; v.mu is held.
func (v *Volumes) watchLocked(name string, e *volEntry) {
	if v.ctx == nil || v.watches >= MaxVolumeWatches {
		return
	}
	wctx, stop := context.WithCancel(v.ctx)
	e.stop = stop
	v.watches++
	sel := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	ctl := localWatch(v.ri, sel, volumeKey{v, name}, func(*unstructured.Unstructured) bool { return true }, longhorn.StripVolume, v.apply)
	go ctl.RunWithContext(wctx)
}

// volumeKey is the KnownObjects of one volume's watch: that volume, if
// it exists, so a re-list that misses it reports it deleted.
type volumeKey struct {
	v    *Volumes
	name string
}

func (k volumeKey) ListKeys() []string {
	k.v.mu.Lock()
	defer k.v.mu.Unlock()
	if e, ok := k.v.want[k.name]; ok && e.exists {
		return []string{k.v.ns + "/" + k.name}
	}
	return nil
}

func (k volumeKey) GetByKey(key string) (any, bool, error) { return k.v.GetByKey(key) }

// apply is localWatch's apply.
func (v *Volumes) apply(d cache.Delta) {
	key, err := deltaKey(d)
	if err != nil {
		return
	}
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	exists, state := false, orphan.VolumeState("")
	var obj *unstructured.Unstructured
	if u, ok := d.Object.(*unstructured.Unstructured); ok && d.Type != cache.Deleted {
		exists, obj = true, u
		state = longhorn.VolumeStates([]*unstructured.Unstructured{u})[name]
	}
	v.mu.Lock()
	e, wanted := v.want[name]
	if !wanted {
		v.mu.Unlock()
		return
	}
	was := *e
	e.resolved, e.fromWait, e.exists, e.state, e.obj = true, true, exists, state, obj
	e.fromReplicas = "" // counted anew for this object at the next sweep
	needs := obj != nil && longhorn.NeedsReplicas(obj)
	wasNeeding := was.obj != nil && longhorn.NeedsReplicas(was.obj)
	v.mu.Unlock()
	if !was.resolved || was.exists != exists || was.state != state || needs != wasNeeding {
		v.changed()
	}
}

// Ensure makes names the wanted set, watching the new ones, and reads
// the volumes not resolved yet and those not watched: with a GET each up
// to MaxVolumeGets of them, past that with one paged list. A failed read
// leaves its volumes unresolved.
func (v *Volumes) Ensure(ctx context.Context, names map[string]bool) {
	var missing []string
	v.mu.Lock()
	for n, e := range v.want {
		if !names[n] {
			if e.stop != nil {
				e.stop()
				v.watches--
			}
			delete(v.want, n)
		}
	}
	for n := range names {
		e, ok := v.want[n]
		if !ok {
			e = &volEntry{}
			v.want[n] = e
		}
		if e.stop == nil {
			v.watchLocked(n, e)
			if e.stop == nil {
				e.resolved, e.fromWait = false, false // read again at every sweep
			}
		}
		if !e.resolved {
			missing = append(missing, n)
		}
	}
	v.mu.Unlock()
	if len(missing) > MaxVolumeGets {
		v.listMissing(ctx, missing)
	} else {
		for _, n := range missing {
			u, err := v.ri.Get(ctx, n, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				continue
			}
			v.resolve(n, u, err == nil)
		}
	}
	v.countReplicas(ctx)
}

// listMissing reads the volumes names with one paged list of the
// namespace's Volumes. A name the list does not carry is absent only if
// the list was read at one resource version; a failed list resolves
// nothing.
func (v *Volumes) listMissing(ctx context.Context, names []string) {
	wanted := make(map[string]bool, len(names))
	for _, n := range names {
		wanted[n] = true
	}
	found := map[string]*unstructured.Unstructured{}
	res, err := ListPages(ctx, v.ri, metav1.ListOptions{}, func(page *unstructured.UnstructuredList) error {
		for i := range page.Items {
			if u := &page.Items[i]; wanted[u.GetName()] {
				o, _ := longhorn.StripVolume(u) // a copy: the page is not kept
				found[u.GetName()] = o.(*unstructured.Unstructured)
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	for _, n := range names {
		u, ok := found[n]
		if !ok && !res.Consistent() {
			continue // a volume created among the keys read before the resume would not show
		}
		v.resolve(n, u, ok)
	}
}

// resolve records what a read said of the wanted volume name: u when it
// exists, absent otherwise; unless an event came since it was wanted
// (the read's answer may be older than the event's).
func (v *Volumes) resolve(name string, u *unstructured.Unstructured, exists bool) {
	var state orphan.VolumeState
	var obj *unstructured.Unstructured
	if exists {
		state = longhorn.VolumeStates([]*unstructured.Unstructured{u})[name]
		o, _ := longhorn.StripVolume(u)
		obj = o.(*unstructured.Unstructured)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.want[name]; ok && !e.fromWait {
		e.resolved, e.exists, e.state, e.obj = true, exists, state, obj
	}
}

// countReplicas states each wanted detached volume from its Replicas,
// listed now: with a list by the label longhornvolume=<volume> each, up
// to MaxVolumeGets of them; past that, with one list per
// DetachedPerList volumes, by the set-based selector longhornvolume in
// (<volumes>). A failed list, or one resumed at a later version, leaves
// its volumes unknown for this sweep.
func (v *Volumes) countReplicas(ctx context.Context) {
	var todo []detached
	v.mu.Lock()
	for n, e := range v.want {
		if e.exists && e.obj != nil && longhorn.NeedsReplicas(e.obj) {
			todo = append(todo, detached{n, e.obj})
		}
	}
	v.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	slices.SortFunc(todo, func(a, b detached) int { return strings.Compare(a.name, b.name) })
	per := 1
	if len(todo) > MaxVolumeGets {
		per = DetachedPerList
	}
	for chunk := range slices.Chunk(todo, per) {
		v.countChunk(ctx, chunk)
	}
}

// DetachedPerList is how many detached volumes' Replicas one list reads
// when a sweep has more than MaxVolumeGets of them: the selector names
// each volume, up to 63 bytes a label value, so a list's URL stays under
// 8 KiB.
const DetachedPerList = 100

type detached struct {
	name string
	obj  *unstructured.Unstructured
}

// countChunk lists the Replicas of the detached volumes of chunk with
// one selector and states each volume from its own (VolumeStateOf keeps
// only the replicas labelled with the volume). A volume whose name is no
// label value stays unknown, as its own list would fail.
func (v *Volumes) countChunk(ctx context.Context, chunk []detached) {
	states := make(map[string]orphan.VolumeState, len(chunk)) // unknown, unless the list succeeds
	var names []string
	for _, d := range chunk {
		if len(validation.IsValidLabelValue(d.name)) == 0 {
			names = append(names, d.name)
		}
	}
	if v.rri != nil && len(names) > 0 {
		sel := longhorn.LabelVolume + "=" + names[0]
		if len(chunk) > 1 {
			sel = longhorn.LabelVolume + " in (" + strings.Join(names, ",") + ")"
		}
		var items []unstructured.Unstructured
		res, err := ListPages(ctx, v.rri, metav1.ListOptions{LabelSelector: sel}, func(page *unstructured.UnstructuredList) error {
			items = append(items, page.Items...)
			return nil
		})
		if err == nil && res.Consistent() {
			for _, d := range chunk {
				if slices.Contains(names, d.name) {
					states[d.name] = longhorn.VolumeStateOf(d.obj, items)
				}
			}
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range chunk {
		if e, ok := v.want[d.name]; ok && e.obj == d.obj {
			e.fromReplicas = states[d.name]
		}
	}
}

// States returns the wanted volumes' states (the existing ones) and
// whether every wanted volume is resolved (orphan.VolumeReads).
func (v *Volumes) States() (map[string]orphan.VolumeState, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	wanted := make(map[string]bool, len(v.want))
	for n := range v.want {
		wanted[n] = true
	}
	reads := orphan.NewVolumeReads(wanted)
	for n, e := range v.want {
		switch {
		case !e.resolved:
			// not read: States is incomplete
		case !e.exists:
			reads.Absent(n)
		case e.obj != nil && longhorn.NeedsReplicas(e.obj):
			reads.Read(n, e.fromReplicas)
		default:
			reads.Read(n, e.state)
		}
	}
	return reads.States()
}

// Len is the number of volumes held.
func (v *Volumes) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.want)
}

// ListKeys implements cache.KeyListerGetter: the wanted volumes that
// exist, so a re-list that misses one reports it deleted.
func (v *Volumes) ListKeys() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.want))
	for n, e := range v.want {
		if e.exists {
			out = append(out, v.ns+"/"+n)
		}
	}
	return out
}

// GetByKey implements cache.KeyListerGetter.
func (v *Volumes) GetByKey(key string) (any, bool, error) {
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.want[name]
	if !ok || !e.exists {
		return nil, false, nil
	}
	return e.state, true, nil
}
