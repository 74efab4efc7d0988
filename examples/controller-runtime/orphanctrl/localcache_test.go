package orphanctrl_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// cachedReplicas lists the names of the Replicas mgr's cache holds.
func cachedReplicas(t *testing.T, mgr manager.Manager) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(orphanctrl.ReplicaGVK.GroupVersion().WithKind("ReplicaList"))
	if err := mgr.GetCache().List(context.Background(), list); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, u := range list.Items {
		out = append(out, u.GetName())
	}
	slices.Sort(out)
	return out
}

// waitCached waits until mgr's cache holds exactly want.
func (e *env) waitCached(mgr manager.Manager, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	e.waitFor(fmt.Sprintf("cached replicas %v", want), func() error {
		if got := cachedReplicas(e.t, mgr); !slices.Equal(got, want) {
			return fmt.Errorf("cached replicas are %v", got)
		}
		return nil
	})
}

// TestLocalCacheHoldsOnlyTheNodesReplicas: node-1's cache holds node-1's
// replicas and no other node's, before and after other nodes gain
// replicas; a replica moved onto node-1 (by spec.nodeID, or by a
// spec.diskID of node-1's disk while its nodeID names another node)
// appears, and one moved away disappears.
func TestLocalCacheHoldsOnlyTheNodesReplicas(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	others := []disk{e.addNode("node-2", "disk-1"), e.addNode("node-3", "disk-1")}
	for i, o := range others {
		for j := range 5 {
			e.replica(fmt.Sprintf("r-%d-%d", i, j), o.Node, o.UUID, o.Path, fmt.Sprintf("pvc-o%d-%08d", i, j))
		}
	}
	mgr := e.start("node-1", manager.Options{}, nil)
	local := "replica-" + ownedDir
	e.waitCached(mgr, local)

	// More replicas elsewhere: the cache does not grow.
	for j := 5; j < 25; j++ {
		e.replica(fmt.Sprintf("r-0-%d", j), "node-2", others[0].UUID, others[0].Path, fmt.Sprintf("pvc-o0-%08d", j))
	}
	time.Sleep(time.Second)
	if got := cachedReplicas(t, mgr); !slices.Equal(got, []string{local}) {
		t.Fatalf("after 20 replicas created on node-2, node-1 caches %v; want [%s]", got, local)
	}

	// Moved here by nodeID.
	e.patchReplica("r-0-0", `{"spec":{"nodeID":"node-1"}}`)
	e.waitCached(mgr, local, "r-0-0")
	// Moved here by diskID: the replica still names node-3.
	e.patchReplica("r-1-0", fmt.Sprintf(`{"spec":{"diskID":%q}}`, d.UUID))
	e.waitCached(mgr, local, "r-0-0", "r-1-0")
	// Moved away, both.
	e.patchReplica("r-0-0", `{"spec":{"nodeID":"node-2"}}`)
	e.patchReplica("r-1-0", fmt.Sprintf(`{"spec":{"diskID":%q}}`, others[1].UUID))
	e.waitCached(mgr, local)
	// Deleted while here.
	e.patchReplica("r-0-1", `{"spec":{"nodeID":"node-1"}}`)
	e.waitCached(mgr, local, "r-0-1")
	if err := e.c.Delete(context.Background(), e.replicaObj("r-0-1")); err != nil {
		t.Fatal(err)
	}
	e.waitCached(mgr, local)
}

// TestNewDiskReplicaOfAnotherNodeIsExpected: node-1 runs with auto-deletion
// of replica data at once. A disk then becomes node-1's that already
// holds three replica directories: one of a replica naming node-1, one
// of a replica created earlier that names node-2 but this disk's UUID
// (the node-local cache dropped it while the disk was not node-1's), and
// one that no replica claims. The last is found and purged; the second
// is never recorded as an orphan and stays, and its replica is in the
// cache: the node's disks changing made the cache list anew, and nothing
// was judged before it had.
func TestNewDiskReplicaOfAnotherNodeIsExpected(t *testing.T) {
	e := newEnv(t)
	d1 := e.addNode("node-1", "disk-1")
	e.owned(d1, ownedDir)
	other := e.addNode("node-2", "disk-1")
	e.replica("r-elsewhere", "node-2", other.UUID, other.Path, "pvc-x-ccccccc1")

	// The new disk's directories exist before the disk is node-1's; the
	// replica of node-2 that claims one is created before too.
	newUUID := uuid.NewString()
	path2 := filepath.Join(e.base, "node-1", "disk-2")
	if err := diskscantest.NewDisk(path2, "disk-2", newUUID); err != nil {
		t.Fatal(err)
	}
	d2 := disk{Node: "node-1", Name: "disk-2", Path: path2, UUID: newUUID}
	const claimedElsewhere, ownedHere, lost = "pvc-moved-ddddddd1", "pvc-here-eeeeeee1", "pvc-lost-fffffff1"
	for _, n := range []string{claimedElsewhere, ownedHere, lost} {
		e.orphanDir(d2, n)
	}
	e.replica("r-moved", "node-2", newUUID, path2, claimedElsewhere)
	e.replica("r-here", "node-1", newUUID, path2, ownedHere)

	mgr := e.start("node-1", manager.Options{}, func(_ manager.Manager, cfg *orphanctrl.Config) {
		cfg.Policy = orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}
	})
	// Before the disk is node-1's, node-1 caches only the replicas naming it.
	e.waitCached(mgr, "replica-"+ownedDir, "r-here")

	// The disk becomes node-1's, in place of disk-1 (two disks of one
	// filesystem are refused, and the test's disks share one): the Node
	// object names it.
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orphanctrl.NodeGVK)
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "node-1"}, u); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, map[string]any{"disk-2": map[string]any{
		"path": path2, "diskType": "filesystem", "allowScheduling": true, "evictionRequested": false,
	}}, "spec", "disks")
	if err := e.c.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, map[string]any{"disk-2": map[string]any{"diskUUID": newUUID}}, "status", "diskStatus")
	if err := e.c.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}

	// The unclaimed directory is purged; meanwhile the claimed one never
	// gets an Orphan.
	elsewhere := longhornName(d2, claimedElsewhere)
	e.waitFor(lost+" purged", func() error {
		if _, ok := e.nodeOrphans("node-1")[elsewhere]; ok {
			t.Fatalf("%s, claimed by r-moved (node-2, disk %s), was recorded as an orphan", claimedElsewhere, newUUID)
		}
		if exists(t, d2.Dir(lost)) {
			return fmt.Errorf("%s still exists", lost)
		}
		return nil
	})
	for _, n := range []string{claimedElsewhere, ownedHere} {
		if !exists(t, d2.Dir(n)) {
			t.Errorf("%s was removed", n)
		}
	}
	if _, ok := e.nodeOrphans("node-1")[elsewhere]; ok {
		t.Errorf("%s was recorded as an orphan", claimedElsewhere)
	}
	if got := cachedReplicas(t, mgr); !slices.Contains(got, "r-moved") || slices.Contains(got, "r-elsewhere") {
		t.Errorf("node-1 caches %v; want r-moved and not r-elsewhere", got)
	}
}

// TestLocalCacheConfigMismatch: a LocalCache of another node is a
// configuration error.
func TestLocalCacheConfigMismatch(t *testing.T) {
	kubetest.Require(t)
	mgr, _, err := newManager(restCfg, "ns", "node-1", manager.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = orphanctrl.Setup(mgr, orphanctrl.Config{NodeID: "node-1", Namespace: "ns", LocalCache: orphanctrl.NewLocalCache("ns", "node-2")})
	if !errors.Is(err, orphanctrl.ErrConfig) {
		t.Fatalf("Setup with node-2's LocalCache: %v; want ErrConfig", err)
	}
}
