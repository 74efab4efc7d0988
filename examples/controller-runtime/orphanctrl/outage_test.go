package orphanctrl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
)

// patchNode merge-patches the Longhorn Node object (its status when
// status is true), as Longhorn's node controller or a user would.
func (e *env) patchNode(node string, status bool, patch string) {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orphanctrl.NodeGVK)
	u.SetNamespace(e.ns)
	u.SetName(node)
	p := client.RawPatch("application/merge-patch+json", []byte(patch))
	var err error
	if status {
		err = e.c.Status().Patch(context.Background(), u, p)
	} else {
		err = e.c.Patch(context.Background(), u, p)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// cleanableReason is an Orphan's DataCleanable status and reason.
func cleanableReason(o *orphanctrl.Orphan) string {
	for _, c := range o.Status.Conditions {
		if c.Type == "DataCleanable" {
			return c.Status + "/" + c.Reason
		}
	}
	return ""
}

// TestNodeDownKeepsOrphans follows longhorn/longhorn#7795: while the
// Longhorn Node is not ready (its manager pod missing), its Orphans stay,
// marked DataCleanable=False/NodeUnavailable, and no directory is purged;
// evicting the node still forgets them, their data kept; once the node is
// back and no longer evicted, they are recorded and cleanable again.
func TestNodeDownKeepsOrphans(t *testing.T) {
	e, d, nameA, nameB := newTwoOrphanNode(t, manager.Options{}, nil)
	before := e.nodeOrphans("node-1")

	e.patchNode("node-1", true, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"ManagerPodMissing","message":"manager pod missing"}]}}`)
	e.waitFor("both Orphans marked DataCleanable=False/NodeUnavailable", func() error {
		got := e.nodeOrphans("node-1")
		if len(got) != 2 {
			return fmt.Errorf("have %d Orphans", len(got))
		}
		for name, o := range got {
			if r := cleanableReason(o); r != "False/NodeUnavailable" {
				return fmt.Errorf("%s: DataCleanable %s", name, r)
			}
		}
		return nil
	})
	// They stay through several reconciles.
	events := e.watchOrphans(client.MatchingLabels{"longhornnode": "node-1"})
	deadline := time.After(3 * time.Second)
stay:
	for {
		select {
		case ev, open := <-events:
			if !open {
				break stay
			}
			failOnError(t, ev)
			if o, ok := ev.Object.(*orphanctrl.Orphan); ok && ev.Type == watch.Deleted {
				t.Fatalf("%s was deleted while its node was down", o.Name)
			}
		case <-deadline:
			break stay
		}
	}
	for name, o := range e.nodeOrphans("node-1") {
		if o.UID != before[name].UID {
			t.Fatalf("%s was replaced during the outage", name)
		}
	}

	// Node eviction still forgets them; the data stays.
	e.patchNode("node-1", false, `{"spec":{"evictionRequested":true}}`)
	e.waitGone(nameA)
	e.waitGone(nameB)
	for _, dir := range []string{ownedDir, orphanDirA, orphanDirB} {
		if !exists(t, d.Dir(dir)) {
			t.Fatalf("%s was removed while the node was down or evicted", dir)
		}
	}

	e.patchNode("node-1", false, `{"spec":{"evictionRequested":false}}`)
	e.patchNode("node-1", true, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"","message":""}]}}`)
	e.waitOrphans("node-1", nameA, nameB)
}
