package nodecache

import (
	"context"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// LabelNode and LabelDiskUUID are the labels longhorn-manager sets on
// each Replica from its spec.nodeID and spec.diskID
// (types.LonghornNodeKey and types.LonghornDiskUUIDKey in its
// types/types.go, set by CreateReplica and UpdateReplica in
// datastore/longhorn.go, and read by datastore.ListReplicasByDiskUUID).
const (
	LabelNode     = "longhornnode"
	LabelDiskUUID = "longhorndiskuuid"
)

// Replicas is a node's share of the cluster's Replicas: those that can
// claim a directory on one of the node's disks (see the package doc). It
// reads them through two selected watches, so that a start lists the
// node's objects, not the cluster's: the Replicas labelled with the node
// (LabelNode), and those labelled with one of its disks' UUIDs
// (LabelDiskUUID; a reconnected disk's replicas can still name their old
// node). What the labels miss (a label stale or missing) a Confirmer
// finds before anything is recorded or purged.
//
// It lists the disks' replicas anew whenever the node's disk UUIDs change;
// until both lists are whole, HasSynced is false, and a host judges no
// disk.
type Replicas struct {
	ri      dynamic.ResourceInterface
	nodeID  string
	changed func()
	moved   chan struct{} // the disk UUIDs changed: list again

	mu     sync.Mutex
	disks  map[string]bool // the node's disk UUIDs, from SetDisks
	shares []*replicaShare // the current watches' shares: by node, by disk
	ctls   []cache.Controller
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

// Claims says whether ref can claim a directory on one of the node's
// current disks by diskscan.StaticExpected's rule (a Confirmer's claims
// rule).
func (r *Replicas) Claims(ref diskscan.ReplicaRef) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return claims(r.nodeID, r.disks, ref)
}

// Run watches the node's replicas until ctx is done, listing them anew
// whenever the node's disk UUIDs change.
func (r *Replicas) Run(ctx context.Context) {
	for {
		r.mu.Lock()
		disks := maps.Clone(r.disks)
		r.mu.Unlock()
		wctx, stop := context.WithCancel(ctx)
		selectors := []func(*metav1.ListOptions){func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{LabelNode: r.nodeID}.String()
		}}
		if len(disks) > 0 {
			req, err := labels.NewRequirement(LabelDiskUUID, selection.In, slices.Sorted(maps.Keys(disks)))
			if err == nil {
				selectors = append(selectors, func(o *metav1.ListOptions) { o.LabelSelector = labels.NewSelector().Add(*req).String() })
			}
			// A disk UUID that is no label value cannot be selected; the
			// node's selector and the Confirmer still cover its replicas.
		}
		var shares []*replicaShare
		var ctls []cache.Controller
		for _, sel := range selectors {
			s := &replicaShare{nodeID: r.nodeID, disks: disks, changed: r.changed, refs: map[string]diskscan.ReplicaRef{}}
			ctl := localWatch(r.ri, sel, s, s.keep, longhorn.StripReplica, s.apply)
			shares, ctls = append(shares, s), append(ctls, ctl)
			go ctl.RunWithContext(wctx)
		}
		r.mu.Lock()
		r.shares, r.ctls = shares, ctls
		r.mu.Unlock()
		go func() {
			synced := make([]cache.InformerSynced, len(ctls))
			for i, c := range ctls {
				synced[i] = c.HasSynced
			}
			if cache.WaitForCacheSync(wctx.Done(), synced...) {
				r.changed() // ready now: judge the disks with the whole share
			}
		}()
		moved := r.waitDisksChanged(ctx, disks)
		stop()
		if !moved {
			return
		}
	}
}

// waitDisksChanged waits until the node's disk UUIDs differ from disks,
// those the watches were started for (true), or ctx is done (false). A
// signal of the change they started from is no change.
func (r *Replicas) waitDisksChanged(ctx context.Context, disks map[string]bool) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-r.moved:
		}
		r.mu.Lock()
		same := maps.Equal(disks, r.disks)
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
	if len(r.ctls) == 0 || !maps.Equal(r.shares[0].disks, r.disks) {
		return false
	}
	for _, c := range r.ctls {
		if !c.HasSynced() {
			return false
		}
	}
	return true
}

// Refs returns the share's replicas, in no order; a replica both watches
// hold is returned once.
func (r *Replicas) Refs() []diskscan.ReplicaRef {
	r.mu.Lock()
	shares := r.shares
	r.mu.Unlock()
	if len(shares) == 1 {
		return shares[0].Refs()
	}
	all := map[string]diskscan.ReplicaRef{}
	for _, s := range shares {
		s.mu.Lock()
		maps.Copy(all, s.refs)
		s.mu.Unlock()
	}
	return slices.Collect(maps.Values(all))
}

// Len is the number of replicas held.
func (r *Replicas) Len() int { return len(r.Refs()) }

// Holds says whether the share holds ref now (by name), as it is: a
// Confirmer's held.
func (r *Replicas) Holds(ref diskscan.ReplicaRef) bool {
	r.mu.Lock()
	shares := r.shares
	r.mu.Unlock()
	for _, s := range shares {
		s.mu.Lock()
		held := false
		for _, h := range s.refs {
			if h == ref {
				held = true
				break
			}
		}
		s.mu.Unlock()
		if held {
			return true
		}
	}
	return false
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

// claimsHere says whether the share keeps r (claims).
func (s *replicaShare) claimsHere(r diskscan.ReplicaRef) bool { return claims(s.nodeID, s.disks, r) }

// claims says whether a share of nodeID with disks keeps r: it can claim
// a directory on one of the node's disks (diskscan's ReplicaRef.ClaimsOn),
// or it names the node and has a data directory (wider, never narrower: a
// replica of the node whose disk is not the node's now is kept).
func claims(nodeID string, disks map[string]bool, r diskscan.ReplicaRef) bool {
	return r.ClaimsOn(nodeID, disks) || (r.NodeID == nodeID && r.DataDirectoryName != "")
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
