package orphanctrl

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// wake maps the events of one kind to the node's key when changed says
// the event changes what this node's sweep reads: old is nil for a
// creation, new for a deletion.
func (c *Controller) wake(changed func(old, new client.Object) bool) handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], ok bool) {
		if ok {
			q.Add(c.key)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, changed(nil, e.Object))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, changed(e.ObjectOld, e.ObjectNew))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, changed(e.Object, nil))
		},
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, true)
		},
	}
}

// either returns whichever of old and new is set, new first.
func either(old, new client.Object) client.Object {
	if new != nil {
		return new
	}
	return old
}

// orphanChanged: an Orphan of this node changed in a way the controller
// did not write itself. A user's deletion request, a label a person sets
// (dismissal, last-copy override), another writer's spec or status: yes.
// The echo of the Store's own create, status update, finalizer change or
// deletion, or a change of annotations only: no.
func (c *Controller) orphanChanged(old, new client.Object) bool {
	o := either(old, new)
	if o.GetNamespace() != c.cfg.Namespace || o.GetLabels()[orphan.LabelNode] != c.cfg.NodeID &&
		(old == nil || old.GetLabels()[orphan.LabelNode] != c.cfg.NodeID) {
		return false
	}
	switch {
	case old == nil: // created
		if c.echo.Echo(new.GetName(), new.GetResourceVersion()) {
			return false
		}
		// Someone else's object of a name we once deleted: its deletion
		// will not be ours.
		c.echo.Deleting(new.GetName(), false)
		return true
	case new == nil: // deleted
		return !c.echo.Gone(old.GetName())
	}
	if c.echo.Echo(new.GetName(), new.GetResourceVersion()) {
		return false
	}
	if old.GetDeletionTimestamp() == nil && new.GetDeletionTimestamp() != nil && c.echo.DeletedByUs(new.GetName()) {
		return false
	}
	return !onlyAnnotations(old, new)
}

// onlyAnnotations reports whether two versions of an Orphan differ in
// nothing but annotations, managed fields and resourceVersion: nothing a
// sweep reads.
func onlyAnnotations(old, new client.Object) bool {
	a, ok1 := old.(*Orphan)
	b, ok2 := new.(*Orphan)
	if !ok1 || !ok2 {
		return false
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, o := range []*Orphan{a, b} {
		o.Annotations, o.ManagedFields, o.ResourceVersion = nil, nil, ""
	}
	return equality.Semantic.DeepEqual(a, b)
}

// nodeChanged: this node's Longhorn Node appeared, went, or changed what
// the controller reads of it (its disks, their UUIDs and eviction, the
// node's eviction and readiness). The many status updates Longhorn makes
// to a node (storage figures, other conditions) do not wake it.
func (c *Controller) nodeChanged(old, new client.Object) bool {
	o := either(old, new)
	if o.GetNamespace() != c.cfg.Namespace || o.GetName() != c.cfg.NodeID {
		return false
	}
	if old == nil || new == nil {
		return true
	}
	ou, ok1 := old.(*unstructured.Unstructured)
	nu, ok2 := new.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(longhorn.ViewOfNode(c.cfg.NodeID, ou), longhorn.ViewOfNode(c.cfg.NodeID, nu))
}

// replicaChanged: a replica that claims, or claimed, a directory on this
// node's disks appeared, went, or changed what it claims. A replica of
// another node, or a status change, does not wake this node.
func (c *Controller) replicaChanged(old, new client.Object) bool {
	o := either(old, new)
	if o.GetNamespace() != c.cfg.Namespace {
		return false
	}
	ref := func(o client.Object) (diskscan.ReplicaRef, bool) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return diskscan.ReplicaRef{}, false
		}
		return longhorn.ReplicaRefOf(u), true
	}
	uuids := c.diskUUIDs()
	if old == nil || new == nil {
		r, ok := ref(o)
		return !ok || r.ClaimsOn(c.cfg.NodeID, uuids)
	}
	ro, ok1 := ref(old)
	rn, ok2 := ref(new)
	if !ok1 || !ok2 {
		return true
	}
	return ro != rn && (ro.ClaimsOn(c.cfg.NodeID, uuids) || rn.ClaimsOn(c.cfg.NodeID, uuids))
}

// diskUUIDs are the UUIDs of the disks the node scans.
func (c *Controller) diskUUIDs() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.disks))
	for _, d := range c.disks {
		out[d.UUID] = true
	}
	return out
}

// volumeChanged: a volume whose robustness changed, or that appeared or
// went, has an orphan on this node (an Orphan in the manager's cache whose
// data directory is named after it, or one whose name does not tell).
// Other volumes do not wake this node. A missed wake could only delay a
// decision, never make an unsafe one: every sweep reads every volume's
// state afresh.
func (c *Controller) volumeChanged(old, new client.Object) bool {
	o := either(old, new)
	if o.GetNamespace() != c.cfg.Namespace {
		return false
	}
	if old != nil && new != nil {
		ou, ok1 := old.(*unstructured.Unstructured)
		nu, ok2 := new.(*unstructured.Unstructured)
		if ok1 && ok2 && reflect.DeepEqual(longhorn.VolumeStates([]*unstructured.Unstructured{ou}), longhorn.VolumeStates([]*unstructured.Unstructured{nu})) {
			return false
		}
	}
	var list OrphanList
	if err := c.cache.List(context.Background(), &list, client.InNamespace(c.cfg.Namespace),
		client.MatchingLabels{orphan.LabelNode: c.cfg.NodeID}); err != nil {
		return true
	}
	for i := range list.Items {
		if v := orphan.VolumeOfDataName(list.Items[i].Spec.Parameters[orphan.ParamDataName]); v == "" || v == o.GetName() {
			return true
		}
	}
	return false
}
