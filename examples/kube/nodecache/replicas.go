package nodecache

import (
	"context"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// Replicas is a node's share of the cluster's Replicas: those that can
// claim a directory on one of the node's disks (see the package doc). It
// lists them anew whenever the node's disk UUIDs change (a replica that
// names a new disk's UUID was dropped while the disk was not the node's);
// until that list is whole, HasSynced is false, and a host judges no disk.
type Replicas struct {
	ri      dynamic.ResourceInterface
	nodeID  string
	changed func()
	moved   chan struct{} // the disk UUIDs changed: list again

	mu    sync.Mutex
	disks map[string]bool // the node's disk UUIDs, from SetDisks
	share *replicaShare   // the share of the current watch
	ctl   cache.Controller
}

// NewReplicas returns the share of nodeID's replicas read through ri (the
// Replicas of Longhorn's namespace). changed is called after every change
// of the share, and once each list is whole; it must not block.
func NewReplicas(ri dynamic.ResourceInterface, nodeID string, changed func()) *Replicas {
	return &Replicas{ri: ri, nodeID: nodeID, changed: changed, moved: make(chan struct{}, 1)}
}

// SetDisks sets the node's disk UUIDs (from its Node object). A change
// starts a new list; the share is not ready until it is whole.
func (r *Replicas) SetDisks(uuids map[string]bool) {
	r.mu.Lock()
	same := maps.Equal(r.disks, uuids)
	r.disks = maps.Clone(uuids)
	r.mu.Unlock()
	if !same {
		select {
		case r.moved <- struct{}{}:
		default:
		}
	}
}

// Run watches the Replicas until ctx is done, listing them anew whenever
// the node's disks change.
func (r *Replicas) Run(ctx context.Context) {
	for {
		r.mu.Lock()
		s := &replicaShare{nodeID: r.nodeID, disks: maps.Clone(r.disks), changed: r.changed, refs: map[string]diskscan.ReplicaRef{}}
		r.mu.Unlock()
		wctx, stop := context.WithCancel(ctx)
		ctl := localWatch(r.ri, s, s.keep, longhorn.StripReplica, s.apply)
		r.mu.Lock()
		r.share, r.ctl = s, ctl
		r.mu.Unlock()
		go ctl.RunWithContext(wctx)
		go func() {
			if cache.WaitForCacheSync(wctx.Done(), ctl.HasSynced) {
				r.changed() // ready now: judge the disks with the whole share
			}
		}()
		moved := r.waitDisksChanged(ctx, s)
		stop()
		if !moved {
			return
		}
	}
}

// waitDisksChanged waits until the node's disk UUIDs differ from those
// s was started for (true), or ctx is done (false). A signal of the
// change s started from is no change.
func (r *Replicas) waitDisksChanged(ctx context.Context, s *replicaShare) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-r.moved:
		}
		r.mu.Lock()
		same := maps.Equal(s.disks, r.disks)
		r.mu.Unlock()
		if !same {
			return true
		}
	}
}

// HasSynced says whether the share is listed whole for the node's
// current disks.
func (r *Replicas) HasSynced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctl != nil && r.ctl.HasSynced() && maps.Equal(r.share.disks, r.disks)
}

// Refs returns the share's replicas, in no order.
func (r *Replicas) Refs() []diskscan.ReplicaRef {
	r.mu.Lock()
	s := r.share
	r.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Refs()
}

// Len is the number of replicas held.
func (r *Replicas) Len() int {
	r.mu.Lock()
	s := r.share
	r.mu.Unlock()
	if s == nil {
		return 0
	}
	return s.Len()
}

// replicaShare is one watch's share of the Replicas: a store for
// localWatch, and the KnownObjects of its queue.
type replicaShare struct {
	nodeID  string
	disks   map[string]bool // the node's disk UUIDs when the watch started
	changed func()          // called after a change of the node's share

	mu   sync.Mutex
	refs map[string]diskscan.ReplicaRef // by namespace/name
}

// claimsHere says whether r can claim a directory on one of the node's
// disks by diskscan.StaticExpected's rule; a replica with no data
// directory yet claims nothing anywhere.
func (s *replicaShare) claimsHere(r diskscan.ReplicaRef) bool {
	if r.DataDirectoryName == "" {
		return false
	}
	return r.NodeID == s.nodeID || (r.DiskID != "" && s.disks[r.DiskID]) || (r.DiskID == "" && r.NodeID == "")
}

// keep is localWatch's keep: whether a listed replica is the node's.
func (s *replicaShare) keep(u *unstructured.Unstructured) bool {
	return s.claimsHere(longhorn.ReplicaRefOf(u))
}

// apply is localWatch's apply: it keeps, replaces or drops the delta's
// replica, and calls changed only when the node's share changed.
func (s *replicaShare) apply(d cache.Delta) {
	key, err := deltaKey(d)
	if err != nil {
		return
	}
	var ref diskscan.ReplicaRef
	keep := false
	if u, ok := d.Object.(*unstructured.Unstructured); ok && d.Type != cache.Deleted {
		ref = longhorn.ReplicaRefOf(u)
		keep = s.claimsHere(ref)
	}
	s.mu.Lock()
	old, had := s.refs[key]
	switch {
	case keep && (!had || old != ref):
		s.refs[key] = ref
	case !keep && had:
		delete(s.refs, key)
	default:
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.changed()
}

// Refs returns the node's share.
func (s *replicaShare) Refs() []diskscan.ReplicaRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.refs))
}

// Len is the number of replicas held.
func (s *replicaShare) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refs)
}

// ListKeys implements cache.KeyListerGetter.
func (s *replicaShare) ListKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.refs))
}

// GetByKey implements cache.KeyListerGetter.
func (s *replicaShare) GetByKey(key string) (any, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refs[key]
	return r, ok, nil
}
