package orphanctrl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage"
)

// Config configures the controller of one node.
type Config struct {
	// NodeID is the Longhorn node this controller runs on. Required.
	NodeID string
	// Namespace holds Longhorn's objects; empty means crstore.DefaultNamespace.
	Namespace string
	// Period is the disk scan period; zero means orphan.DefaultPeriod.
	Period time.Duration
	// Policy is the auto-deletion policy; the zero value deletes only what
	// users delete.
	Policy orphan.Policy
	// MaxConcurrentReconciles is passed to controller-runtime; zero means
	// 1. Every request is the node's one key, and the workqueue never hands
	// one key to two workers at once, so more workers never sweep the node
	// twice at the same time; they only sit idle.
	MaxConcurrentReconciles int
	// MaxCreates bounds the records one sweep creates
	// (orphan.SweeperOptions.MaxCreates); zero means
	// hostkit.DefaultMaxCreates. A node that finds thousands of orphans at
	// once creates their records over many short sweeps, and a deletion a
	// user asks for meanwhile is purged by the next one, not after all of
	// them.
	MaxCreates int
	// Store keeps the records; nil means NewStore(mgr.GetClient(),
	// mgr.GetAPIReader(), Namespace, NodeID), whose own writes do not wake
	// the controller again. A Store of your own must read Get from the API
	// server, not from a cache: it is the purge re-check. Its List is
	// called once per sweep and may read the manager's cache.
	Store orphan.Store
	// Logger receives the controller's decisions; nil means silent.
	Logger *slog.Logger
	// LocalCache, if set, is the node-local Replica filter the manager's
	// cache was built with (NewLocalCache(Namespace, NodeID).Options()):
	// the controller tells it the node's disks, and judges nothing while
	// the cache does not yet hold the replicas of the node's current
	// disks. Nil means a manager built with CacheOptions, whose Replica
	// cache is cluster-wide.
	LocalCache *LocalCache
}

// ErrConfig is wrapped by errors about an incomplete Config.
var ErrConfig = errors.New("orphanctrl: invalid config")

// Controller is one node's orphan controller on a controller-runtime
// manager. Setup creates it and adds it to the manager.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	key      reconcile.Request
	cache    client.Reader
	api      client.Reader // uncached: a detached volume's Replicas, read each sweep
	orphans  *diskscan.Orphans
	expected *diskscan.StaticExpected
	monitor  *orphan.Monitor
	sweeper  *orphan.Sweeper
	records  *hostkit.Pinned // cfg.Store, as the Sweeper lists it
	echo     *hostkit.Echoes // nil for a Store of the user's
	events   chan event.GenericEvent

	ready atomic.Bool // the expected set holds every replica of the node's current disks

	mu       sync.Mutex // guards the view below (the runnable's first refresh and Reconcile)
	disks    []diskscan.Disk
	replicas []diskscan.ReplicaRef
	scopes   map[orphan.Scope]orphan.ScopeStatus
}

var _ reconcile.Reconciler = (*Controller)(nil)

// Setup builds the controller of cfg.NodeID and adds to mgr its two
// parts: the disk monitor (a Runnable) and the reconciler, neither of
// which needs leader election. mgr's scheme must hold the Orphan types
// (NewScheme), and its cache must see cfg.Namespace: give the manager
// NewLocalCache(cfg.Namespace, cfg.NodeID).Options() and the LocalCache
// to cfg.LocalCache, which keeps it node-local (CacheOptions alone keeps
// every Replica, stripped).
func Setup(mgr manager.Manager, cfg Config) (*Controller, error) {
	if cfg.NodeID == "" {
		return nil, fmt.Errorf("%w: NodeID is required", ErrConfig)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = crstore.DefaultNamespace
	}
	if cfg.MaxConcurrentReconciles <= 0 {
		cfg.MaxConcurrentReconciles = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxCreates <= 0 {
		cfg.MaxCreates = hostkit.DefaultMaxCreates
	}
	if lc := cfg.LocalCache; lc != nil && (lc.nodeID != cfg.NodeID || lc.namespace != cfg.Namespace) {
		return nil, fmt.Errorf("%w: LocalCache is node %s in namespace %s, the controller node %s in namespace %s",
			ErrConfig, lc.nodeID, lc.namespace, cfg.NodeID, cfg.Namespace)
	}
	var c *Controller
	var echo *hostkit.Echoes
	if cfg.Store == nil {
		echo = hostkit.NewEchoes(func() { c.poke() })
		st := NewStore(echoClient{mgr.GetClient(), echo}, mgr.GetAPIReader(), cfg.Namespace, cfg.NodeID)
		st.echo = echo
		st.spellings = &crstore.DismissalLog{Logger: cfg.Logger}
		cfg.Store = st
	}
	c = &Controller{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.NodeID),
		key:      reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.NodeID}},
		cache:    mgr.GetCache(),
		api:      mgr.GetAPIReader(),
		records:  hostkit.NewPinned(cfg.Store),
		echo:     echo,
		expected: diskscan.NewStaticExpected(),
		// One pending event is enough: every event is the same key.
		events: make(chan event.GenericEvent, 1),
		scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: cfg.NodeID}: {Health: orphan.HealthUnknown, Message: "the node object is not read yet"}},
	}
	var err error
	// The scan's expected set answers only once it holds every replica of
	// the node's current disks: until then the disk is undecided.
	if c.orphans, err = diskscan.NewOrphans(diskscan.WhenLoaded(c.expected, c.ready.Load), diskscan.Options{}); err != nil {
		return nil, err
	}
	// Each orphaned directory is inspected as a copy of its volume: its
	// Orphan shows the verdict, and the last-copy guard knows its volume.
	adapter, err := salvage.WithCopies(c.orphans, salvage.Options{})
	if err != nil {
		return nil, err
	}
	if c.sweeper, err = orphan.NewSweeper(c.records, adapter, orphan.SweeperOptions{Logger: cfg.Logger, MaxCreates: cfg.MaxCreates}); err != nil {
		return nil, err
	}
	if c.monitor, err = orphan.NewMonitor(adapter, orphan.MonitorOptions{Period: cfg.Period, OnChange: func(orphan.Observation) { c.poke() }}); err != nil {
		return nil, err
	}
	if err := mgr.Add(monitorRunnable{c}); err != nil {
		return nil, err
	}
	ctrl, err := controller.New("caretaker-orphans", mgr, controller.Options{
		Reconciler:              c,
		MaxConcurrentReconciles: cfg.MaxConcurrentReconciles,
		// A per-node agent: every node's controller must run, not one
		// elected leader's.
		NeedLeaderElection: ptr.To(false),
	})
	if err != nil {
		return nil, err
	}
	cache := mgr.GetCache()
	sources := []source.Source{
		// Monitor changes, as events of the node.
		source.Channel(c.events, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{c.key}
		})),
		// Deletion requests and changes of this node's Orphans, but not
		// the echoes of the controller's own writes.
		source.Kind(cache, client.Object(&Orphan{}), c.wake(c.orphanChanged)),
		// The node's disks, eviction and readiness.
		source.Kind(cache, client.Object(newUnstructured(NodeGVK)), c.wake(c.nodeChanged)),
		// What the replicas that claim this node's disks expect.
		source.Kind(cache, client.Object(newUnstructured(ReplicaGVK)), c.wake(c.replicaChanged)),
		// Volumes of this node's orphans that fault, heal or go change what
		// the last-copy guard lets through.
		source.Kind(cache, client.Object(newUnstructured(VolumeGVK)), c.wake(c.volumeChanged)),
	}
	for _, src := range sources {
		if err := ctrl.Watch(src); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// poke enqueues the node, without blocking: one pending event is enough.
func (c *Controller) poke() {
	select {
	case c.events <- event.GenericEvent{Object: newUnstructured(NodeGVK)}:
	default:
	}
}

// monitorRunnable runs the disk monitor under the manager. A per-node
// agent needs no leader: each node's monitor scans its own disks.
type monitorRunnable struct{ c *Controller }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (monitorRunnable) NeedLeaderElection() bool { return false }

// Start reads the node's view from the cache (waiting for its informers to
// sync: an expected set that is not loaded looks like "no replica
// expects anything"), then scans until ctx ends.
func (r monitorRunnable) Start(ctx context.Context) error {
	for failures := 0; ; {
		err := r.c.refresh(ctx)
		if err == nil {
			break
		}
		failures++
		wait := hostkit.DefaultRetry.Delay(failures)
		r.c.log.Warn("reading the node's view failed; retrying", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	r.c.log.Info("node view read; starting the disk monitor", "period", r.c.cfg.Period)
	r.c.monitor.Run(ctx)
	return nil
}

// refresh reads the Node and the Replicas from the manager's cache into
// the scanned disks, the expected set and the host scopes; it asks for a
// new scan when the disks or the expected set changed.
func (c *Controller) refresh(ctx context.Context) error {
	node := newUnstructured(NodeGVK)
	err := c.cache.Get(ctx, client.ObjectKey{Namespace: c.cfg.Namespace, Name: c.cfg.NodeID}, node)
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return fmt.Errorf("orphanctrl: reading node %s: %w", c.cfg.NodeID, err)
	}
	v := longhorn.ViewOfNode(c.cfg.NodeID, node)
	// The expected set holds the replicas that can claim a directory on
	// the disks this node scans, and nothing else: a replica of another
	// node changes neither it nor the scan.
	uuids := make(map[string]bool, len(v.Disks))
	for _, d := range v.Disks {
		uuids[d.UUID] = true
	}
	if c.cfg.LocalCache != nil {
		// Before the replicas are read: a change of the disks (the first
		// setting included) makes their informer list anew, and ready is
		// false until that list is in the cache.
		c.cfg.LocalCache.setDisks(uuids)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ReplicaGVK.GroupVersion().WithKind(ReplicaGVK.Kind + "List"))
	if err := c.cache.List(ctx, list, client.InNamespace(c.cfg.Namespace)); err != nil {
		return fmt.Errorf("orphanctrl: listing replicas: %w", err)
	}
	ready := c.cfg.LocalCache == nil || c.cfg.LocalCache.ready(list.Items)
	refs := make([]diskscan.ReplicaRef, 0)
	for i := range list.Items {
		if r := longhorn.ReplicaRefOf(&list.Items[i]); r.ClaimsOn(c.cfg.NodeID, uuids) {
			refs = append(refs, r)
		}
	}
	slices.SortFunc(refs, func(a, b diskscan.ReplicaRef) int { return strings.Compare(a.Name, b.Name) })

	c.mu.Lock()
	defer c.mu.Unlock()
	if !ready {
		// Before the disks and the expected set change: a judgement of a
		// new disk's directory then finds the set not ready.
		c.ready.Store(false)
	}
	changed := false
	if !reflect.DeepEqual(v.Disks, c.disks) {
		if err := c.orphans.SetDisks(v.Disks...); err != nil {
			// Two disks of one name cannot happen in a node map; be safe anyway.
			c.log.Error("node disks rejected; the node is not scanned", "err", err)
			v.Scopes = map[orphan.Scope]orphan.ScopeStatus{{NodeID: c.cfg.NodeID}: {Health: orphan.HealthUnknown, Message: err.Error()}}
			v.Disks = nil
			_ = c.orphans.SetDisks()
		}
		c.disks, changed = v.Disks, true
	}
	if !slices.Equal(refs, c.replicas) {
		c.expected.Replace(refs)
		c.replicas, changed = refs, true
	}
	c.scopes = v.Scopes
	if ready && !c.ready.Load() {
		c.ready.Store(true)
		changed = true
	}
	if changed {
		c.monitor.Rescan()
	}
	return nil
}

// volumeStates lists the Volumes from the manager's cache: their
// robustness, and whether the list is complete. The cache answers only
// once its informer has synced; any error (the context ending first, an
// informer that cannot list) leaves the list incomplete, so every volume
// is unknown to the last-copy guard and no recoverable orphan is
// auto-deleted.
//
// With a LocalCache, the cache holds only the volumes the sweep asks
// about (orphan.VolumesAsked of snap and recs): they are set as the Volume
// filter's selection first, and the list is complete only once the cache
// holds a consistent read of every one of them (the informer's LIST, or
// the read by name of a newly wanted one). Until then a wanted
// volume the cache lacks may only have been filtered out, so the list is
// incomplete (every volume unknown, never deleted), and pending asks the
// caller to sweep again shortly.
func (c *Controller) volumeStates(ctx context.Context, snap orphan.Snapshot, recs []orphan.Record) (states map[string]orphan.VolumeState, complete, pending bool) {
	wanted := orphan.VolumesAsked(snap, recs)
	lc := c.cfg.LocalCache
	if lc != nil {
		lc.setVolumes(wanted)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(VolumeGVK.GroupVersion().WithKind(VolumeGVK.Kind + "List"))
	if err := c.cache.List(ctx, list, client.InNamespace(c.cfg.Namespace)); err != nil {
		c.log.Warn("volumes not listed: every volume is unknown to the last-copy guard", "err", err)
		return nil, false, false
	}
	if lc != nil && !lc.volumesReady(list.Items) {
		c.log.Info("the newly wanted volumes are being read: every volume is unknown to the last-copy guard this sweep")
		return nil, false, true
	}
	// The cache holds every Volume that exists (synced; with a LocalCache,
	// ready for this selection): a wanted volume it lacks is absent.
	reads := orphan.NewVolumeReads(wanted)
	listed := make(map[string]bool, len(list.Items))
	var detached []*unstructured.Unstructured
	for i := range list.Items {
		u := &list.Items[i]
		listed[u.GetName()] = true
		if wanted[u.GetName()] && longhorn.NeedsReplicas(u) {
			detached = append(detached, u)
			continue
		}
		reads.Read(u.GetName(), longhorn.VolumeStates([]*unstructured.Unstructured{u})[u.GetName()])
	}
	// A wanted detached volume is stated from its Replicas
	// (orphan.LonghornVolumeState): Longhorn reports such a volume's
	// robustness as unknown, which would hold its orphans for ever. The
	// Replicas are listed from the API server each sweep, not from the
	// node-local cache, which holds only this node's; a volume whose list
	// fails keeps the state of its robustness (unknown).
	counted := c.countDetached(ctx, detached)
	for _, u := range detached {
		state, ok := counted[u.GetName()]
		if !ok {
			state = longhorn.VolumeStates([]*unstructured.Unstructured{u})[u.GetName()]
		}
		reads.Read(u.GetName(), state)
	}
	for n := range wanted {
		if !listed[n] {
			reads.Absent(n)
		}
	}
	states, complete = reads.States()
	return states, complete, false
}

// notReadyRequeue is the pause before the node's view is read again
// while the cache lists the replicas of the node's new disks.
const notReadyRequeue = 250 * time.Millisecond

// batchRequeue is the pause before the sweep that goes on with the new
// orphans a sweep left for later (MaxCreates): long enough for the
// manager's cache to show the batch just created, so the next sweep does
// not plan it again.
const batchRequeue = 100 * time.Millisecond

func (c *Controller) hostScopes() map[orphan.Scope]orphan.ScopeStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scopes
}

// Reconcile implements reconcile.Reconciler: one sweep of the node's
// latest scan. Every event maps to the node's one key, so this never runs
// twice at once for a node.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req != c.key {
		return reconcile.Result{}, nil
	}
	if err := c.refresh(ctx); err != nil {
		return reconcile.Result{}, err
	}
	if !c.ready.Load() {
		// The node's disks changed and the cache lists their replicas
		// anew: nothing is judged until it holds them.
		c.log.Info("the node's replicas are being listed anew; sweep deferred")
		return reconcile.Result{RequeueAfter: notReadyRequeue}, nil
	}
	obs, ok := c.monitor.Latest()
	if !ok {
		return reconcile.Result{}, nil // the first scan's OnChange enqueues again
	}
	if obs.Err != nil {
		return reconcile.Result{}, fmt.Errorf("orphanctrl: scan %d: %w", obs.Seq, obs.Err)
	}
	// The records, from the Store's List (the manager's cache for the
	// default Store): the Sweeper plans from this very list, so the
	// volumes and overrides read are those of exactly these records.
	sel := orphan.Selector{NodeID: c.cfg.NodeID}
	recs, err := c.records.Pin(ctx, sel)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("orphanctrl: listing records: %w", err)
	}
	volumes, complete, volumesPending := c.volumeStates(ctx, obs.Snapshot, recs)
	plan, res, err := c.sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
		Selector:         sel,
		Scopes:           c.hostScopes(),
		Policy:           c.cfg.Policy,
		ObservedAt:       obs.StartedAt,
		Volumes:          volumes,
		VolumesComplete:  complete,
		LastCopyOverride: orphan.LastCopyOverrides(recs),
	})
	c.records.Unpin()
	if len(res.Created)+len(res.Forgotten)+len(res.Purged)+len(res.Refused)+len(res.Failed) > 0 {
		c.log.Info("swept", "scan", obs.Seq, "created", res.Created, "forgotten", res.Forgotten,
			"purged", res.Purged, "refused", res.Refused, "failed", len(res.Failed))
	}
	if err != nil {
		// controller-runtime requeues the key with its per-item backoff.
		return reconcile.Result{}, err
	}
	if len(res.Created) > 0 && !plan.RequeueAt.IsZero() && time.Until(plan.RequeueAt) <= 0 {
		// The sweep created a batch of MaxCreates and more new orphans
		// wait: the next sweep comes shortly, after any deletion request
		// that arrived during this one, once the cache shows the batch.
		return reconcile.Result{RequeueAfter: batchRequeue}, nil
	}
	if volumesPending && (plan.RequeueAt.IsZero() || time.Until(plan.RequeueAt) > notReadyRequeue) {
		// The cache lists the newly wanted volumes: the guard judges
		// them once it holds them.
		return reconcile.Result{RequeueAfter: notReadyRequeue}, nil
	}
	if !plan.RequeueAt.IsZero() {
		return reconcile.Result{RequeueAfter: max(time.Until(plan.RequeueAt), time.Millisecond)}, nil
	}
	return reconcile.Result{}, nil
}
