package agent

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// localVolumes holds the state of the Volumes the last-copy guard asks
// about on this node: the volumes of the node's orphan candidates and
// records, a handful, not the cluster's. Like the Replicas, they come
// through a wide watch (a volume becomes interesting when its copy here
// is orphaned, which no selector can know in advance), stripped by
// longhorn.StripVolume and dropped unless wanted. A volume that becomes
// wanted is read once with a GET, unless a watch event brought it first.
//
// A wanted volume is resolved once its state is known: present with its
// robustness, or known absent (NotFound, or a deletion seen). States
// reports complete only when every wanted volume is resolved; an
// unresolved one is simply missing, which the guard treats as unknown
// when complete is false, never as deleted.
type localVolumes struct {
	ri      dynamic.ResourceInterface
	ns      string
	changed func() // called when a wanted volume's state changed

	mu   sync.Mutex
	want map[string]*volEntry // by volume name
}

type volEntry struct {
	resolved bool // an event or a GET said what it is
	fromWait bool // an event came since it was wanted (a GET's answer is older)
	exists   bool
	state    orphan.VolumeState
}

func newLocalVolumes(ri dynamic.ResourceInterface, ns string, changed func()) *localVolumes {
	return &localVolumes{ri: ri, ns: ns, changed: changed, want: map[string]*volEntry{}}
}

// keep is localWatch's keep: whether a listed volume is wanted.
func (v *localVolumes) keep(u *unstructured.Unstructured) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.want[u.GetName()]
	return ok
}

// apply is localWatch's apply.
func (v *localVolumes) apply(d cache.Delta) {
	key, err := deltaKey(d)
	if err != nil {
		return
	}
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	exists, state := false, orphan.VolumeState("")
	if u, ok := d.Object.(*unstructured.Unstructured); ok && d.Type != cache.Deleted {
		exists = true
		state = longhorn.VolumeStates([]*unstructured.Unstructured{u})[name]
	}
	v.mu.Lock()
	e, wanted := v.want[name]
	if !wanted {
		v.mu.Unlock()
		return
	}
	was := *e
	e.resolved, e.fromWait, e.exists, e.state = true, true, exists, state
	v.mu.Unlock()
	if !was.resolved || was.exists != exists || was.state != state {
		v.changed()
	}
}

// ensure makes names the wanted set and reads the volumes not resolved
// yet with a GET each. A failed GET leaves its volume unresolved.
func (v *localVolumes) ensure(ctx context.Context, names map[string]bool) {
	var missing []string
	v.mu.Lock()
	for n := range v.want {
		if !names[n] {
			delete(v.want, n)
		}
	}
	for n := range names {
		e, ok := v.want[n]
		if !ok {
			e = &volEntry{}
			v.want[n] = e
		}
		if !e.resolved {
			missing = append(missing, n)
		}
	}
	v.mu.Unlock()
	for _, n := range missing {
		u, err := v.ri.Get(ctx, n, metav1.GetOptions{})
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			continue
		}
		var state orphan.VolumeState
		if exists {
			state = longhorn.VolumeStates([]*unstructured.Unstructured{u})[n]
		}
		v.mu.Lock()
		if e, ok := v.want[n]; ok && !e.fromWait {
			e.resolved, e.exists, e.state = true, exists, state
		}
		v.mu.Unlock()
	}
}

// states returns the wanted volumes' states (the existing ones) and
// whether every wanted volume is resolved.
func (v *localVolumes) states() (map[string]orphan.VolumeState, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]orphan.VolumeState, len(v.want))
	complete := true
	for n, e := range v.want {
		switch {
		case !e.resolved:
			complete = false
		case e.exists:
			out[n] = e.state
		}
	}
	return out, complete
}

// Len is the number of volumes held.
func (v *localVolumes) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.want)
}

// ListKeys implements cache.KeyListerGetter: the wanted volumes that
// exist, so a re-list that misses one reports it deleted.
func (v *localVolumes) ListKeys() []string {
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
func (v *localVolumes) GetByKey(key string) (any, bool, error) {
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.want[name]
	if !ok || !e.exists {
		return nil, false, nil
	}
	return e.state, true, nil
}
