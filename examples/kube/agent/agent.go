// Package agent is a per-node orphan agent for Longhorn v1 filesystem
// disks on Kubernetes: it keeps its node's Orphan custom resources in step
// with the replica directories on the node's disks, and purges a
// directory when its Orphan is deleted.
//
// It watches four kinds of Longhorn object through informers: its own
// Node (which disks to scan, and whether the node or a disk is being
// evicted), the Replicas (which directories the cluster expects), the
// Volumes (each one's robustness, for the last-copy guard), and the
// Orphans labelled with its node (deletion requests, and a person's
// last-copy override). The diskscan
// adapter, wrapped by salvage.WithCopies so that each orphaned directory
// is inspected as a copy of its volume, runs under an orphan.Monitor; on every change, and on every event, the
// agent runs one orphan.Sweeper cycle over the crstore Store. Everything
// else is the core's: the plan carries every condition (DataCleanable,
// Error, PurgeGuarded, Recoverable) and every release, and the Sweeper
// writes them.
//
// Deletion follows Longhorn's rule, which the orphan core applies: the
// data of a deleted Orphan is purged only when its DataCleanable condition
// is True (the core marks it while the node and disk are Ready);
// otherwise the finalizer is removed and the data stays. The core's
// mass-deletion guard is on, and so is its last-copy guard: the agent
// passes every Volume's robustness (Cycle.Volumes, complete once the
// informer has synced), so a recoverable orphan of a faulted volume is
// never purged unless a person confirms it, and one of a degraded or
// unknown (detached) volume is not auto-deleted; an orphan of a deleted
// volume is. A person confirms with the label
// caretaker.io/last-copy-override=true (orphan.LabelLastCopyOverride) on
// the Orphan: the agent passes the names of its Orphans that carry it in
// Cycle.LastCopyOverride, which lets the purge through once the Orphan is
// also deleted (never an automatic one).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
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
}

// retry is the delay after failed cycles in a row.
var retry = retryPolicy{Initial: 250 * time.Millisecond, Max: 30 * time.Second}

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
	trigger  chan struct{}

	mu      sync.Mutex
	scopes  map[orphan.Scope]orphan.ScopeStatus // the host's view, from the Node object
	volumes cache.SharedIndexInformer           // the Volumes, once Run starts it
	orphanc cache.SharedIndexInformer           // the node's Orphans, once Run starts it
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
	a := &Agent{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.NodeID),
		expected: diskscan.NewStaticExpected(),
		trigger:  make(chan struct{}, 1),
		// Until the Node object is read, nothing is known about the node.
		scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: cfg.NodeID}: {Health: orphan.HealthUnknown, Message: "the node object is not read yet"}},
	}
	var err error
	if a.orphans, err = diskscan.NewOrphans(a.expected, diskscan.Options{}); err != nil {
		return nil, err
	}
	// Each orphaned directory is inspected as a copy of its volume, so its
	// Orphan shows whether the data is recoverable and the last-copy
	// guard knows which volume it may be the last copy of.
	adapter, err := salvage.WithCopies(a.orphans, salvage.Options{})
	if err != nil {
		return nil, err
	}
	store := crstore.New(cfg.Client, crstore.Options{Namespace: cfg.Namespace, OwnerID: cfg.NodeID, FieldManager: cfg.FieldManager})
	if a.sweeper, err = orphan.NewSweeper(store, adapter, orphan.SweeperOptions{Hooks: cfg.Hooks}); err != nil {
		return nil, err
	}
	a.monitor = orphan.NewMonitor(adapter, orphan.MonitorOptions{Period: cfg.Period, Hooks: cfg.Hooks, OnChange: func(orphan.Observation) { a.poke() }})
	return a, nil
}

// Run watches, scans and sweeps until ctx is done. It returns nil when
// ctx ends, or an error if the informers cannot start.
func (a *Agent) Run(ctx context.Context) error {
	ns := a.cfg.Namespace
	factory := func(tweak dynamicinformer.TweakListOptionsFunc) dynamicinformer.DynamicSharedInformerFactory {
		return dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.cfg.Client, 0, ns, tweak)
	}
	nodeF := factory(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.cfg.NodeID).String()
	})
	replicaF := factory(nil)
	volumeF := factory(nil)
	orphanF := factory(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{orphan.LabelNode: a.cfg.NodeID}.String()
	})
	nodeInf := nodeF.ForResource(longhorn.NodeGVR).Informer()
	replicaInf := replicaF.ForResource(longhorn.ReplicaGVR).Informer()
	orphanInf := orphanF.ForResource(crstore.GVR).Informer()
	volumeInf := volumeF.ForResource(longhorn.VolumeGVR).Informer()
	a.mu.Lock()
	a.volumes = volumeInf
	a.orphanc = orphanInf
	a.mu.Unlock()

	onEvent := func(f func()) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { f() },
			UpdateFunc: func(any, any) { f() },
			DeleteFunc: func(any) { f() },
		}
	}
	// Node and replica events mark the agent's view stale; refresh
	// rebuilds it once per burst (the initial list is one event per object).
	nodeKey := ns + "/" + a.cfg.NodeID
	var nodeDirty, replicasDirty atomic.Bool
	refresh := make(chan struct{}, 1)
	mark := func(dirty *atomic.Bool) func() {
		return func() {
			dirty.Store(true)
			select {
			case refresh <- struct{}{}:
			default:
			}
		}
	}
	if _, err := nodeInf.AddEventHandler(onEvent(mark(&nodeDirty))); err != nil {
		return err
	}
	if _, err := replicaInf.AddEventHandler(onEvent(mark(&replicasDirty))); err != nil {
		return err
	}
	if _, err := orphanInf.AddEventHandler(onEvent(a.poke)); err != nil {
		return err
	}
	// A volume that faults, heals or is deleted changes what the
	// last-copy guard lets through.
	if _, err := volumeInf.AddEventHandler(onEvent(a.poke)); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, f := range []dynamicinformer.DynamicSharedInformerFactory{nodeF, replicaF, orphanF, volumeF} {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	for _, f := range []dynamicinformer.DynamicSharedInformerFactory{nodeF, replicaF, orphanF, volumeF} {
		for gvr, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("agent: informer for %s did not sync", gvr.Resource)
			}
		}
	}
	// Read the caches once so the disks and expected replicas are in
	// place before the first scan, then follow their changes.
	nodeDirty.Store(false)
	replicasDirty.Store(false)
	a.nodeChanged(nodeInf.GetStore(), nodeKey)
	a.replicasChanged(replicaInf.GetStore())
	a.log.Info("informers synced; starting the disk monitor", "period", a.cfg.Period)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-refresh:
			}
			if nodeDirty.Swap(false) {
				a.nodeChanged(nodeInf.GetStore(), nodeKey)
			}
			if replicasDirty.Swap(false) {
				a.replicasChanged(replicaInf.GetStore())
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

func (a *Agent) poke() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// nodeChanged applies the Node object to the disks scanned and the host
// scopes.
func (a *Agent) nodeChanged(store cache.Store, key string) {
	var u *unstructured.Unstructured
	if obj, ok, _ := store.GetByKey(key); ok {
		u, _ = obj.(*unstructured.Unstructured)
	}
	v := longhorn.ViewOfNode(a.cfg.NodeID, u)
	if err := a.orphans.SetDisks(v.Disks...); err != nil {
		// Two disks of one name cannot happen in a node map; be safe anyway.
		a.log.Error("node disks rejected; the node is not scanned", "err", err)
		v.Scopes = map[orphan.Scope]orphan.ScopeStatus{{NodeID: a.cfg.NodeID}: {Health: orphan.HealthUnknown, Message: err.Error()}}
		_ = a.orphans.SetDisks()
	}
	a.mu.Lock()
	a.scopes = v.Scopes
	a.mu.Unlock()
	a.monitor.Rescan()
	a.poke()
}

// replicasChanged rebuilds the expected set from the informer's cache.
func (a *Agent) replicasChanged(store cache.Store) {
	objs := store.List()
	refs := make([]diskscan.ReplicaRef, 0, len(objs))
	for _, obj := range objs {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			refs = append(refs, longhorn.ReplicaRefOf(u))
		}
	}
	a.expected.Replace(refs)
	a.monitor.Rescan()
	a.poke()
}

func (a *Agent) hostScopes() map[orphan.Scope]orphan.ScopeStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.scopes
}

// volumeStates is the robustness of every Volume in the namespace, and
// whether that list is complete: only once the informer has synced (its
// list was read whole). Before that the states are empty and incomplete,
// so every volume is unknown to the last-copy guard and no recoverable
// orphan is auto-deleted.
func (a *Agent) volumeStates() (map[string]orphan.VolumeState, bool) {
	a.mu.Lock()
	inf := a.volumes
	a.mu.Unlock()
	if inf == nil || !inf.HasSynced() {
		return nil, false
	}
	objs := inf.GetStore().List()
	vols := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, false // not a Volume as the API server serves it: trust none
		}
		vols = append(vols, u)
	}
	return longhorn.VolumeStates(vols), true
}

// lastCopyOverrides names the node's Orphans that carry a person's
// last-copy override (the label caretaker.io/last-copy-override=true),
// from the informer's cache. The override lets a requested purge of a
// faulted volume's copy through, so only an Orphan that is also deleted
// (kubectl delete orphan) is purged. Before the informer has synced, no
// Orphan has one.
func (a *Agent) lastCopyOverrides() map[string]bool {
	a.mu.Lock()
	inf := a.orphanc
	a.mu.Unlock()
	if inf == nil || !inf.HasSynced() {
		return nil
	}
	var out map[string]bool
	for _, obj := range inf.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || !crstore.LastCopyOverridden(u.GetLabels()) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[u.GetName()] = true
	}
	return out
}

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
			wait = retry.Delay(failures)
			a.log.Warn("cycle failed; retrying", "in", wait, "err", err)
		case !next.IsZero():
			failures = 0
			wait = max(time.Until(next), 0)
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
	host := a.hostScopes()
	volumes, complete := a.volumeStates()
	overrides := a.lastCopyOverrides()
	plan, res, err := a.sweeper.Run(ctx, obs.Snapshot, orphan.Cycle{
		Selector:         orphan.Selector{NodeID: a.cfg.NodeID},
		Scopes:           host,
		Policy:           a.cfg.Policy,
		ObservedAt:       obs.StartedAt,
		Volumes:          volumes,
		VolumesComplete:  complete,
		LastCopyOverride: overrides,
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
	return plan.RequeueAt, err
}
