package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/orphan"
)

// setNodeReady writes the Ready condition Longhorn's node controller keeps
// in the Node's status: True, or False with a reason such as
// ManagerPodMissing.
func (e *env) setNodeReady(node string, ready bool, reason string) {
	e.t.Helper()
	ctx := context.Background()
	ri := e.dc.Resource(longhorn.NodeGVR).Namespace(e.ns)
	cur, err := ri.Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	status, msg := "True", ""
	if !ready {
		status, msg = "False", "manager pod missing: node "+node+" has no manager pod running on it"
	}
	conds := []any{map[string]any{"type": "Ready", "status": status, "reason": reason, "message": msg}}
	if err := unstructured.SetNestedSlice(cur.Object, conds, "status", "conditions"); err != nil {
		e.t.Fatal(err)
	}
	if _, err := ri.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) setNodeEviction(node string, evict bool) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"evictionRequested":%t}}`, evict)
	if _, err := e.dc.Resource(longhorn.NodeGVR).Namespace(e.ns).Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitMarked waits until node's Orphans are exactly names, each marked
// DataCleanable=False with reason.
func (e *env) waitMarked(node, reason string, names ...string) map[string]*unstructured.Unstructured {
	e.t.Helper()
	var got map[string]*unstructured.Unstructured
	e.waitFor(fmt.Sprintf("the orphans of %s to be %d objects marked DataCleanable=False/%s", node, len(names), reason), func() error {
		got = e.nodeOrphans(node)
		if len(got) != len(names) {
			return fmt.Errorf("have %d: %v", len(got), keys(got))
		}
		for _, n := range names {
			o, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing; have %v", n, keys(got))
			}
			if c := condition(o, "DataCleanable"); c["status"] != "False" || c["reason"] != reason {
				return fmt.Errorf("%s: DataCleanable = %v", n, c)
			}
		}
		return nil
	})
	return got
}

// noDeletionFor fails if any of node's Orphans is deleted within d.
func (e *env) noDeletionFor(node string, d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	w := e.watchOrphans(ctx, metav1.ListOptions{LabelSelector: "longhornnode=" + node})
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			e.t.Fatalf("%s was deleted", eventObject(e.t, ev).GetName())
		}
	}
}

// TestNodeDownKeepsOrphans follows longhorn/longhorn#7795: while the
// Longhorn Node is not ready (its manager pod missing), its Orphans stay,
// marked DataCleanable=False/NodeUnavailable, and no directory is purged;
// one a user deletes meanwhile is released with its data kept; evicting
// the node still forgets the rest, data kept; once the node is back and
// no longer evicted, every directory is recorded and cleanable again.
func TestNodeDownKeepsOrphans(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t)
	before := e.nodeOrphans("node-1")

	e.setNodeReady("node-1", false, "ManagerPodMissing")
	e.waitMarked("node-1", string(orphan.HealthNodeUnavailable), nameA, nameB)
	e.noDeletionFor("node-1", 6*scanPeriod)
	for name, o := range e.nodeOrphans("node-1") {
		if o.GetUID() != before[name].GetUID() {
			t.Fatalf("%s was replaced during the outage", name)
		}
	}

	// A user deletes A while the node is down: released, data kept.
	e.deleteOrphan(nameA)
	e.waitGone(nameA)

	// Node eviction still forgets: B goes, its data stays.
	e.setNodeEviction("node-1", true)
	e.waitGone(nameB)
	for _, dir := range []string{ownedDir, orphanDirA, orphanDirB} {
		if !exists(t, d.dir(dir)) {
			t.Fatalf("%s was removed while the node was down or evicted", dir)
		}
	}

	e.setNodeEviction("node-1", false)
	e.setNodeReady("node-1", true, "")
	e.waitOrphans("node-1", nameA, nameB)
}

// TestDismissedOrphanKeepsData follows longhorn/longhorn#11286: an Orphan
// labelled caretaker.io/dismissed=true is never purged, not by
// auto-deletion and not by a user's delete (it stays, terminating, with
// its data), and is not recorded anew; removing the label returns it to
// the normal rules, under which auto-deletion purges its directory.
func TestDismissedOrphanKeepsData(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir) // an empty expected list would hold every purge back (the Guard's NoneExpected)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(d, orphanDirB)
	first := e.startAgent("node-1")
	nameA, nameB := longhornName(d, orphanDirA), longhornName(d, orphanDirB)
	e.waitOrphans("node-1", nameA, nameB)
	// Written as a person might: any value but a clear no dismisses.
	e.label(nameA, orphan.LabelDismissed, "Yes")
	dismissed := e.waitFor1(nameA, "DataCleanable=False/Dismissed", func(o *unstructured.Unstructured) bool {
		c := condition(o, "DataCleanable")
		return c["status"] == "False" && c["reason"] == orphan.ReasonDismissed
	})
	first.stop()

	// Auto-deletion with no grace period purges B, never A.
	e.startAgent("node-1", "-auto-delete=replica-data", "-grace-period=0")
	e.waitGone(nameB)
	e.waitFor(orphanDirB+" to be purged", func() error {
		if exists(t, d.dir(orphanDirB)) {
			return fmt.Errorf("still there")
		}
		return nil
	})
	e.noDeletionFor("node-1", 6*scanPeriod)
	cur := e.nodeOrphans("node-1")[nameA]
	if cur == nil || cur.GetUID() != dismissed.GetUID() || !exists(t, d.dir(orphanDirA)) {
		t.Fatalf("the dismissed orphan was not kept as it was: %v", cur)
	}

	// A user deletes it: refused; it stays, terminating, and so does its data.
	e.deleteOrphan(nameA)
	e.noDeletionFor("node-1", 6*scanPeriod)
	if cur := e.nodeOrphans("node-1")[nameA]; cur == nil || cur.GetDeletionTimestamp() == nil || !exists(t, d.dir(orphanDirA)) {
		t.Fatalf("a deleted dismissed orphan: %v, data kept %v", cur, exists(t, d.dir(orphanDirA)))
	}

	// Un-dismissed: its deletion, requested while it was not cleanable,
	// releases it with the data kept (Longhorn's rule); the directory is
	// recorded anew as a normal orphan, and auto-deletion purges it.
	e.label(nameA, orphan.LabelDismissed, "")
	e.waitFor(orphanDirA+" to be purged once un-dismissed", func() error {
		if exists(t, d.dir(orphanDirA)) {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// label sets (value non-empty) or removes a label on an Orphan, as kubectl
// label does.
func (e *env) label(name, key, value string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	if _, err := e.orphans().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("kubectl label orphan %s %s: %v", name, key, err)
	}
}

// waitFor1 waits until Orphan name satisfies ok, and returns it.
func (e *env) waitFor1(name, what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	e.t.Helper()
	var got *unstructured.Unstructured
	e.waitFor(name+" to be "+what, func() error {
		o, err := e.orphans().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !ok(o) {
			return fmt.Errorf("conditions %v", o.Object["status"])
		}
		got = o
		return nil
	})
	return got
}
