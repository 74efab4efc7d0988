// Package agent is a per-node orphan agent for Longhorn v1 filesystem
// disks on Kubernetes: it keeps its node's Orphan custom resources in step
// with the replica directories on the node's disks, and purges a
// directory when its Orphan is deleted. It is the glue a host copies:
// informers, a Store, one adapter constructor and the loop.
//
// It watches its own Node (which disks to scan; node and disk eviction
// and readiness), the Orphans labelled with its node (deletion requests,
// dismissals, last-copy overrides), and through package nodecache its
// node's share of the Replicas (which directories the cluster expects:
// those its labels select, confirmed against a full list before anything
// is recorded or purged) and the Volumes its orphans belong to (for the
// last-copy guard). Sweeps plan from those caches; every step that acts re-reads its record from
// the API server. The diskscan adapter, wrapped by salvage.WithCopies so
// that each orphaned directory is inspected as a copy of its volume, runs
// under an orphan.Monitor; on every change, and on every event that is
// not the agent's own write, the agent runs one orphan.Sweeper cycle over
// the crstore Store. Everything else is the core's: Longhorn's deletion
// rule (the data of a deleted Orphan is purged only while DataCleanable is
// True), the mass-deletion guard, and the last-copy guard, fed with the
// states of the volumes orphan.VolumesAsked names and the overrides
// orphan.LastCopyOverrides reads from the label
// caretaker.io/last-copy-override=true.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage"
)

// Config configures an Agent.
type Config struct {
	// Client reaches the API server.
	Client dynamic.Interface
	// Namespace holds Longhorn's objects; empty means crstore.DefaultNamespace.
	Namespace string
	// NodeID is the Longhorn node this agent runs on. Required.
	NodeID string
	// Period is the disk scan period; zero means orphan.DefaultPeriod.
	Period time.Duration
	// Policy is the auto-deletion policy; the zero value deletes only
	// what users delete.
	Policy orphan.Policy
	// FieldManager names the agent's writes; empty means
	// "caretaker-orphan-agent-<NodeID>".
	FieldManager string
	// Logger receives the agent's log; nil means slog.Default().
	Logger *slog.Logger
	// Hooks, if set, observe every scan of the Monitor and every step of
	// the Sweeper (package metrics turns them into Prometheus metrics).
	Hooks orphan.Hooks
	// MaxCreates bounds the Orphans one sweep creates
	// (orphan.SweeperOptions.MaxCreates); zero means
	// hostkit.DefaultMaxCreates.
	MaxCreates int
	// FirstConfirmSpread spreads the agents' first full lists of the
	// Replicas when a whole cluster starts at once: the agent's first
	// confirmation (nodecache.Confirmer) waits FirstConfirmDelay(NodeID,
	// FirstConfirmSpread) after Run starts, and a sweep that would need
	// it before then records and purges nothing and runs again when the
	// wait is over. Zero: no wait.
	FirstConfirmSpread time.Duration
}

// ErrConfig is wrapped by errors about an incomplete Config.
var ErrConfig = errors.New("agent: invalid config")

// Agent is one node's orphan agent. Create it with New and run it with Run.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	orphans  *diskscan.Orphans
	expected *diskscan.StaticExpected
	monitor  *orphan.Monitor
	sweeper  *orphan.Sweeper
	store    *nodecache.Store
	records  *hostkit.Pinned      // store, as the Sweeper lists it
	replicas *nodecache.Replicas  // the node's share of the Replicas
	confirm  *nodecache.Confirmer // checks the share against a full list
	volumes  *nodecache.Volumes   // the volumes the guard asks about
	echo     *hostkit.Echoes
	trigger  chan struct{}
	sweeps   atomic.Int64
	// confirmAfter is when the first confirmation may run (Run's start
	// plus FirstConfirmDelay).
	confirmAfter time.Time

	// Node and replica changes mark the agent's view stale; Run rebuilds
	// it once per burst (the initial list is one event per object).
	nodeDirty, replicasDirty atomic.Bool
	refresh                  chan struct{}

	mu       sync.Mutex
	scopes   map[orphan.Scope]orphan.ScopeStatus // the host's view, from the Node object
	nodeView *longhorn.NodeView                  // the last one applied
	orphanc  cache.SharedIndexInformer           // the node's Orphans, once Run starts it
	nodec    cache.SharedIndexInformer           // the node's Node object, once Run starts it
}

// New returns an agent; it does nothing until Run.
func New(cfg Config) (*Agent, error) {
	if cfg.Client == nil || cfg.NodeID == "" {
		return nil, fmt.Errorf("%w: Client and NodeID are required", ErrConfig)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = crstore.DefaultNamespace
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = "caretaker-orphan-agent-" + cfg.NodeID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxCreates <= 0 {
		cfg.MaxCreates = hostkit.DefaultMaxCreates
	}
	a := &Agent{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.NodeID),
		expected: diskscan.NewStaticExpected(),
		trigger:  make(chan struct{}, 1),
		refresh:  make(chan struct{}, 1),
		// Until the Node object is read, nothing is known about the node.
		scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: cfg.NodeID}: {Health: orphan.HealthUnknown, Message: "the node object is not read yet"}},
	}
	a.echo = hostkit.NewEchoes(a.poke)
	ns := cfg.Namespace
	replicaRI := cfg.Client.Resource(longhorn.ReplicaGVR).Namespace(ns)
	a.replicas = nodecache.NewReplicas(replicaRI, cfg.NodeID, a.mark(&a.replicasDirty))
	// The share is what the node's labels select; what it misses (a label
	// stale or missing) the confirmation finds before anything is
	// recorded or purged.
	a.confirm = nodecache.NewConfirmer(replicaRI, a.replicas.Claims, a.replicas.Holds, a.claimsFound)
	// A volume that faults, heals or is deleted changes what the
	// last-copy guard lets through.
	a.volumes = nodecache.NewVolumes(cfg.Client.Resource(longhorn.VolumeGVR).Namespace(ns), cfg.Client.Resource(longhorn.ReplicaGVR).Namespace(ns), ns, a.poke)
	var err error
	// Until the node's share of the Replicas is listed whole, a directory's
	// replica may be missing from the set: the disk is undecided.
	if a.orphans, err = diskscan.NewOrphans(diskscan.WhenLoaded(a.expected, a.replicas.HasSynced), diskscan.Options{}); err != nil {
		return nil, err
	}
	// Each orphaned directory is inspected as a copy of its volume, so its
	// Orphan shows whether the data is recoverable and the last-copy
	// guard knows which volume it may be the last copy of.
	adapter, err := salvage.WithCopies(a.orphans, salvage.Options{})
	if err != nil {
		return nil, err
	}
	a.store = nodecache.NewStore(crstore.New(cfg.Client, crstore.Options{Namespace: ns, OwnerID: cfg.NodeID, FieldManager: cfg.FieldManager, OnWrite: a.echo.OnWrite, Logger: a.log}))
	// Every purge is confirmed against a full list of the Replicas first.
	swept, err := orphan.NewAdapter(adapter.Kinds(), adapter, adapter, nodecache.ConfirmingDeleter{Deleter: adapter, C: a.confirm})
	if err != nil {
		return nil, err
	}
	a.records = hostkit.NewPinned(a.store)
	if a.sweeper, err = orphan.NewSweeper(a.records, swept, orphan.SweeperOptions{Hooks: cfg.Hooks, MaxCreates: cfg.MaxCreates}); err != nil {
		return nil, err
	}
	if a.monitor, err = orphan.NewMonitor(adapter, orphan.MonitorOptions{Period: cfg.Period, Hooks: cfg.Hooks, OnChange: func(orphan.Observation) { a.poke() }}); err != nil {
		return nil, err
	}
	return a, nil
}

// Stats is what an agent holds and has done, for tests and benchmarks of
// its cost.
type Stats struct {
	// Sweeps is the number of sweeps (orphan.Sweeper.Reconcile calls) so far.
	Sweeps int64
	// Nodes, Replicas, Volumes and Orphans are the objects of each kind
	// the agent holds in memory now.
	Nodes, Replicas, Volumes, Orphans int
}

// Stats returns what the agent holds and has done. It is safe to call
// at any time, also while Run runs.
func (a *Agent) Stats() Stats {
	st := Stats{Sweeps: a.sweeps.Load()}
	a.mu.Lock()
	defer a.mu.Unlock()
	st.Replicas, st.Volumes = a.replicas.Len(), a.volumes.Len()
	if a.nodec != nil {
		st.Nodes = len(a.nodec.GetStore().ListKeys())
	}
	if a.orphanc != nil {
		st.Orphans = len(a.orphanc.GetStore().ListKeys())
	}
	return st
}

// Run watches, scans and sweeps until ctx is done. It returns nil when
// ctx ends, or an error if the informers cannot start. Its own Node object
// (a field selector on its name) and its node's Orphans (a label selector
// on longhornnode) come through informers stripped to what caretaker
// reads, the Replicas and Volumes through package nodecache: the
// Replicas its labels select, and the Volumes its orphans belong to, by
// name. What the labels miss, a full list finds before anything is
// recorded or purged (nodecache.Confirmer).
func (a *Agent) Run(ctx context.Context) error {
	ns := a.cfg.Namespace
	a.confirmAfter = time.Now().Add(FirstConfirmDelay(a.cfg.NodeID, a.cfg.FirstConfirmSpread))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nodeF := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.cfg.Client, 0, ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.cfg.NodeID).String()
	})
	orphanF := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.cfg.Client, 0, ns, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{orphan.LabelNode: a.cfg.NodeID}.String()
	})
	nodeInf := nodeF.ForResource(longhorn.NodeGVR).Informer()
	orphanInf := orphanF.ForResource(crstore.GVR).Informer()
	if err := nodeInf.SetTransform(longhorn.StripNode); err != nil {
		return err
	}
	if err := orphanInf.SetTransform(crstore.StripOrphan); err != nil {
		return err
	}

	nodeKey := ns + "/" + a.cfg.NodeID
	dirty := a.mark(&a.nodeDirty)
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { dirty() }, UpdateFunc: func(any, any) { dirty() }, DeleteFunc: func(any) { dirty() },
	}); err != nil {
		return err
	}
	// An Orphan event wakes a sweep unless it is the agent's own write.
	if _, err := orphanInf.AddEventHandler(a.echo.Handler(a.poke)); err != nil {
		return err
	}
	a.mu.Lock()
	a.orphanc, a.nodec = orphanInf, nodeInf
	a.mu.Unlock()
	a.store.SetInformer(orphanInf)
	for _, f := range []dynamicinformer.DynamicSharedInformerFactory{nodeF, orphanF} {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	for _, f := range []dynamicinformer.DynamicSharedInformerFactory{nodeF, orphanF} {
		for gvr, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("agent: informer for %s did not sync", gvr.Resource)
			}
		}
	}
	// The disks first: they say which replicas the node's share holds.
	a.nodeDirty.Store(false)
	a.nodeChanged(nodeInf.GetStore(), nodeKey)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); a.volumes.Run(ctx) }()
	go func() { defer wg.Done(); a.replicas.Run(ctx) }()
	if !cache.WaitForCacheSync(ctx.Done(), a.volumes.HasSynced, a.replicas.HasSynced) {
		return nil // ctx ended
	}
	a.replicasDirty.Store(false)
	a.replicasChanged()
	// The first lists were decoded a page at a time, and only the node's
	// objects kept: give the pages' memory back now rather than whenever
	// the runtime's scavenger gets to it, so the agent's resident memory
	// is its node's from the start.
	debug.FreeOSMemory()
	a.log.Info("informers synced; starting the disk monitor", "period", a.cfg.Period)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.refresh:
			}
			if a.nodeDirty.Swap(false) {
				a.nodeChanged(nodeInf.GetStore(), nodeKey)
			}
			if a.replicasDirty.Swap(false) {
				a.replicasChanged()
			}
		}
	}()

	if err := a.monitor.Start(ctx); err != nil {
		return err
	}
	defer a.monitor.Stop()
	a.loop(ctx)
	return nil
}

// FirstConfirmDelay is how long node's agent waits after its start
// before its first full list of the Replicas (Config.FirstConfirmSpread):
// a share of spread drawn from a hash (SHA-256) of the node's name, so the
// nodes of a cluster are spread evenly over it and each node keeps its
// place at every start. It is zero when spread is not positive.
func FirstConfirmDelay(node string, spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	sum := sha256.Sum256([]byte(node))
	return time.Duration(binary.BigEndian.Uint64(sum[:8]) % uint64(spread))
}

// mark returns a function that marks dirty and wakes Run's refresh.
func (a *Agent) mark(dirty *atomic.Bool) func() {
	return func() {
		dirty.Store(true)
		select {
		case a.refresh <- struct{}{}:
		default:
		}
	}
}

func (a *Agent) poke() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// nodeChanged applies the Node object to the disks scanned and the host
// scopes, when what caretaker reads of it changed (Longhorn rewrites a
// Node's status often: sizes, scheduled replicas, heartbeats).
func (a *Agent) nodeChanged(store cache.Store, key string) {
	var u *unstructured.Unstructured
	if obj, ok, _ := store.GetByKey(key); ok {
		u, _ = obj.(*unstructured.Unstructured)
	}
	v := longhorn.ViewOfNode(a.cfg.NodeID, u)
	a.mu.Lock()
	same := a.nodeView != nil && reflect.DeepEqual(*a.nodeView, v)
	a.mu.Unlock()
	if same {
		return
	}
	applied := v
	if err := a.orphans.SetDisks(v.Disks...); err != nil {
		// Two disks of one name cannot happen in a node map; be safe anyway.
		a.log.Error("node disks rejected; the node is not scanned", "err", err)
		v.Scopes = map[orphan.Scope]orphan.ScopeStatus{{NodeID: a.cfg.NodeID}: {Health: orphan.HealthUnknown, Message: err.Error()}}
		v.Disks = nil
		_ = a.orphans.SetDisks()
	}
	uuids := make(map[string]bool, len(v.Disks))
	for _, d := range v.Disks {
		uuids[d.UUID] = true
	}
	a.mu.Lock()
	a.scopes = v.Scopes
	a.nodeView = &applied
	a.mu.Unlock()
	a.replicas.SetDisks(uuids)
	a.monitor.Rescan()
	a.poke()
}

// replicasChanged rebuilds the expected set from the node's share of the
// Replicas.
func (a *Agent) replicasChanged() {
	a.expected.Replace(append(a.replicas.Refs(), a.confirm.Claims()...))
	a.monitor.Rescan()
	a.poke()
}

// claimsFound is the Confirmer's onClaims: the replicas a full list found
// claiming directories on the node, which the node's labels do not
// select, join the expected set at once (the sweep that confirmed judges
// its items with it), and are logged, since their labels need fixing.
func (a *Agent) claimsFound(refs []diskscan.ReplicaRef) {
	a.expected.Replace(append(a.replicas.Refs(), refs...))
	a.monitor.Rescan()
	var hidden []string
	for _, r := range refs {
		hidden = append(hidden, r.Name)
	}
	if len(hidden) > 0 {
		slices.Sort(hidden)
		a.log.Warn("replicas that expect directories on this node are not labelled with it; kept by the full list's confirmation",
			"replicas", hidden, "labels", nodecache.LabelNode+", "+nodecache.LabelDiskUUID)
	}
}

// echoSettle bounds how long a sweep that follows a batch of creates waits
// for the batch to come back through the watch.
const echoSettle = 2 * time.Second

// loop runs a cycle on every poke, after a failure with a growing delay,
// and when the plan says time alone will change it.
func (a *Agent) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.trigger:
		case <-timer.C:
		}
		next, err := a.cycle(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		switch {
		case err != nil:
			failures++
			wait = hostkit.DefaultRetry.Delay(failures)
			a.log.Warn("cycle failed; retrying", "in", wait, "err", err)
		case !next.IsZero():
			failures = 0
			wait = max(time.Until(next), 0)
			if wait == 0 {
				// A batch of creates: the next sweep plans from the cache,
				// so let the batch's own writes reach it first.
				a.echo.Settle(ctx, echoSettle)
			}
		default:
			failures = 0
			continue
		}
		timer.Stop()
		timer.Reset(wait)
	}
}

// cycle is one sweep of the latest scan. It returns when the plan changes
// by time alone.
func (a *Agent) cycle(ctx context.Context) (time.Time, error) {
	start := time.Now()
	obs, ok := a.monitor.Latest()
	if !ok {
		return time.Time{}, nil // the first scan's OnChange pokes again
	}
	if obs.Err != nil {
		return time.Time{}, fmt.Errorf("scan %d: %w", obs.Seq, obs.Err)
	}
	a.mu.Lock()
	host := a.scopes
	a.mu.Unlock()
	// The records this sweep plans with, read once from the cache, so
	// that the volumes looked up are those of exactly these records.
	recs, err := a.records.Pin(ctx, orphan.Selector{NodeID: a.cfg.NodeID})
	if err != nil {
		return time.Time{}, err
	}
	defer a.records.Unpin()
	// What the node's labels alone call orphans is confirmed against a
	// full list before it is recorded, once per new candidate.
	cands := nodecache.Unrecorded(obs.Snapshot, recs)
	if len(cands) > 0 && a.confirm.FullLists() == 0 && time.Now().Before(a.confirmAfter) {
		// The first full list waits its turn (FirstConfirmSpread); the
		// sweep, which could record the candidates, waits with it.
		return a.confirmAfter, nil
	}
	a.confirm.BeginSweep()
	if _, err := a.confirm.Candidates(ctx, cands); err != nil {
		return time.Time{}, err
	}
	// The robustness of the volumes of these records and this scan's
	// candidates, complete only once each is read (a volume not read is
	// left out and unknown to the last-copy guard, never deleted).
	a.volumes.Ensure(ctx, orphan.VolumesAsked(obs.Snapshot, recs))
	volumes, complete := a.volumes.States()
	a.sweeps.Add(1)
	plan, res, err := a.sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
		Selector:         orphan.Selector{NodeID: a.cfg.NodeID},
		Scopes:           host,
		Policy:           a.cfg.Policy,
		ObservedAt:       obs.StartedAt,
		Volumes:          volumes,
		VolumesComplete:  complete,
		LastCopyOverride: orphan.LastCopyOverrides(recs),
	})
	if a.log.Enabled(ctx, slog.LevelDebug) {
		for _, k := range plan.Keep {
			a.log.Debug("keep", "orphan", k.Record.Name, "why", k.Reason)
		}
		a.log.Debug("cycle", "scan", obs.Seq, "took", time.Since(start), "requeueAt", plan.RequeueAt, "err", err)
	}
	if len(res.Created)+len(res.Forgotten)+len(res.Purged)+len(res.Refused)+len(res.Failed) > 0 {
		a.log.Info("swept", "scan", obs.Seq, "created", res.Created, "forgotten", res.Forgotten,
			"purged", res.Purged, "refused", res.Refused, "failed", len(res.Failed))
	}
	next := plan.RequeueAt
	if len(res.Forgotten)+len(res.Purged) > 0 && (next.IsZero() || next.After(time.Now())) {
		// Own writes wake no sweep (echoes): one that forgot or purged asks
		// for one more, to record anew what is still there.
		next = time.Now()
	}
	return next, err
}
