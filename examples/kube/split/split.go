// Package split is a caretaker host of Longhorn's own shape, with the
// orphan lifecycle split between controllers as longhorn-manager splits
// it: a node controller creates, marks and forgets Orphans
// (controller/node_controller.go), and the Orphan's finalizer in an
// orphan controller deletes the data when the object is deleted
// (controller/orphan_controller.go). A user's kubectl delete orphan runs
// the finalizer at once, not the node's cycle.
//
// The finalizer purges only through orphan.Sweeper.PurgeRecord, never the
// Deleter directly, so each deletion is re-read, re-scanned, re-judged
// and weighed by both guards exactly as the cycle's own purges are. A
// refused deletion keeps its finalizer: the Orphan stays terminating,
// marked Error=True (reason PurgeRefused, with the rule and why), and the
// finalizer tries again after RetryAfter.
//
// The host reads the Longhorn Node, Replica and Volume objects anew on
// every pass (no informers): it is the shape that matters here, not the
// cost; examples/kube/agent shows the informers a node agent keeps.
package split

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/crstore"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Config configures a Host.
type Config struct {
	// Client reaches the API server.
	Client dynamic.Interface
	// Namespace holds Longhorn's objects; empty means crstore.DefaultNamespace.
	Namespace string
	// NodeID is the node the host runs on. Required.
	NodeID string
	// Period is how often the node controller syncs; zero means 30 s.
	Period time.Duration
	// RetryAfter is how long a refused finalizer waits before trying
	// again; zero means 10 s.
	RetryAfter time.Duration
	// Logger receives the host's log; nil means none.
	Logger *slog.Logger
}

// Host is one node's two controllers over one Sweeper.
type Host struct {
	cfg      Config
	log      *slog.Logger
	orphans  *diskscan.Orphans
	expected *diskscan.StaticExpected
	store    *crstore.Store
	sweeper  *orphan.Sweeper

	viewMu sync.Mutex // one reading of the Longhorn objects into the adapter at a time
}

// New returns a Host; it does nothing until Run.
func New(cfg Config) (*Host, error) {
	if cfg.Client == nil || cfg.NodeID == "" {
		return nil, errors.New("split: Client and NodeID are required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = crstore.DefaultNamespace
	}
	if cfg.Period <= 0 {
		cfg.Period = 30 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), expected: diskscan.NewStaticExpected()}
	var err error
	if h.orphans, err = diskscan.NewOrphans(h.expected, diskscan.Options{}); err != nil {
		return nil, err
	}
	h.store = crstore.New(cfg.Client, crstore.Options{Namespace: cfg.Namespace, OwnerID: cfg.NodeID,
		FieldManager: "caretaker-split-" + cfg.NodeID})
	// One Sweeper for both controllers: it never runs two purges of one
	// record at once.
	if h.sweeper, err = orphan.NewSweeper(h.store, h.orphans, orphan.SweeperOptions{Logger: h.log}); err != nil {
		return nil, err
	}
	return h, nil
}

// view reads the Longhorn objects now: the node's disks and health go to
// the adapter and the cycle, the replicas to the expected set, the
// volumes' robustness to the last-copy guard. Any read that fails fails
// the pass: nothing is decided on a partial view.
func (h *Host) view(ctx context.Context) (orphan.Cycle, error) {
	h.viewMu.Lock()
	defer h.viewMu.Unlock()
	ns := h.cfg.Namespace
	var node *unstructured.Unstructured
	switch u, err := h.cfg.Client.Resource(longhorn.NodeGVR).Namespace(ns).Get(ctx, h.cfg.NodeID, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return orphan.Cycle{}, fmt.Errorf("reading node %s: %w", h.cfg.NodeID, err)
	default:
		node = u
	}
	nv := longhorn.ViewOfNode(h.cfg.NodeID, node)
	replicas, err := h.cfg.Client.Resource(longhorn.ReplicaGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return orphan.Cycle{}, fmt.Errorf("listing replicas: %w", err)
	}
	volumes, err := h.cfg.Client.Resource(longhorn.VolumeGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return orphan.Cycle{}, fmt.Errorf("listing volumes: %w", err)
	}
	refs := make([]diskscan.ReplicaRef, 0, len(replicas.Items))
	for i := range replicas.Items {
		refs = append(refs, longhorn.ReplicaRefOf(&replicas.Items[i]))
	}
	vols := make([]*unstructured.Unstructured, 0, len(volumes.Items))
	for i := range volumes.Items {
		vols = append(vols, &volumes.Items[i])
	}
	h.expected.Replace(refs)
	if err := h.orphans.SetDisks(nv.Disks...); err != nil {
		return orphan.Cycle{}, err
	}
	overrides, err := h.overrides(ctx)
	if err != nil {
		return orphan.Cycle{}, err
	}
	return orphan.Cycle{
		Selector:         orphan.Selector{NodeID: h.cfg.NodeID},
		Scopes:           nv.Scopes,
		Volumes:          longhorn.VolumeStates(vols),
		VolumesComplete:  true, // every Volume was listed: one not listed is deleted
		LastCopyOverride: overrides,
	}, nil
}

// overrides names the node's Orphans that carry a person's last-copy
// override label.
func (h *Host) overrides(ctx context.Context) (map[string]bool, error) {
	sel := labels.Set{orphan.LabelNode: h.cfg.NodeID, orphan.LabelLastCopyOverride: orphan.LabelValueLastCopyOverride}.String()
	list, err := h.cfg.Client.Resource(crstore.GVR).Namespace(h.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing overridden orphans: %w", err)
	}
	out := map[string]bool{}
	for _, u := range list.Items {
		out[u.GetName()] = true
	}
	return out, nil
}

// SyncNode is the node controller's pass: scan the node's disks, decide,
// and create, mark and forget Orphans. The purges a user requested are
// left to the finalizer (Finalize), as in Longhorn; this host sets no
// auto-deletion policy, so the plan has no others.
func (h *Host) SyncNode(ctx context.Context) (orphan.Plan, orphan.Result, error) {
	c, err := h.view(ctx)
	if err != nil {
		return orphan.Plan{}, orphan.Result{}, err
	}
	snap, err := h.orphans.Scan(ctx)
	if err != nil {
		return orphan.Plan{}, orphan.Result{}, err
	}
	cands, err := orphan.JudgeAll(ctx, h.orphans, snap.Items)
	if err != nil {
		return orphan.Plan{}, orphan.Result{}, err
	}
	recs, err := h.store.List(ctx, c.Selector)
	if err != nil {
		return orphan.Plan{}, orphan.Result{}, err
	}
	scopes := orphan.MergeScopes(snap.Scopes, c.Scopes)
	plan := orphan.Decide(orphan.Input{Now: time.Now(), Scopes: scopes, Candidates: cands, Records: recs,
		Guard: c.Guard, Volumes: c.Volumes, VolumesComplete: c.VolumesComplete, LastCopyOverride: c.LastCopyOverride})
	plan.Purge = slices.DeleteFunc(plan.Purge, func(p orphan.Purge) bool { return !p.Auto })
	res, err := h.sweeper.Sync(ctx, plan)
	return plan, res, err
}

// Finalize is the orphan controller's finalizer for the Orphan name,
// whose deletion was requested: it purges through PurgeRecord with the
// view read now. A *orphan.Refusal means: keep the finalizer, try again
// later; PurgeRecord has marked the Orphan Error=True with why.
func (h *Host) Finalize(ctx context.Context, name string) (orphan.PurgeOutcome, error) {
	c, err := h.view(ctx)
	if err != nil {
		return "", err
	}
	return h.sweeper.PurgeRecord(ctx, name, c, orphan.PurgeRecordOptions{})
}

// Run runs both controllers until ctx ends: the node controller every
// Period, and the finalizer for each of the node's Orphans that is being
// deleted, from an informer, retried after RetryAfter while refused.
func (h *Host) Run(ctx context.Context) error {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, h.cfg.RetryAfter))
	defer q.ShutDown()
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(h.cfg.Client, 0, h.cfg.Namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{orphan.LabelNode: h.cfg.NodeID}.String()
	})
	inf := f.ForResource(crstore.GVR).Informer()
	enqueue := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetDeletionTimestamp() != nil && slices.Contains(u.GetFinalizers(), crstore.Finalizer) {
			q.Add(u.GetName())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { // the node controller
		defer wg.Done()
		t := time.NewTicker(h.cfg.Period)
		defer t.Stop()
		for {
			if _, res, err := h.SyncNode(ctx); err != nil {
				h.log.Warn("node sync failed", "err", err)
			} else if len(res.Created)+len(res.Forgotten) > 0 {
				h.log.Info("node synced", "created", res.Created, "forgotten", res.Forgotten, "refused", res.Refused)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	go func() { <-ctx.Done(); q.ShutDown() }()
	for { // the orphan controller's finalizer
		name, quit := q.Get()
		if quit {
			return nil
		}
		out, err := h.Finalize(ctx, name)
		var ref *orphan.Refusal
		switch {
		case errors.As(err, &ref):
			h.log.Info("deletion refused; the finalizer stays", "orphan", name, "rule", ref.Rule, "reason", ref.Reason)
			q.AddAfter(name, h.cfg.RetryAfter)
			q.Forget(name)
		case err != nil:
			h.log.Warn("finalizer failed", "orphan", name, "err", err)
			q.AddRateLimited(name)
		default:
			h.log.Info("finalized", "orphan", name, "outcome", out)
			q.Forget(name)
		}
		q.Done(name)
	}
}
