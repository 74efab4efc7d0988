package orphanctrl_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
)

// reconciles is how many reconciles the controllers named
// caretaker-orphans have run in this process (controller-runtime's
// controller_runtime_reconcile_total). Tests run one manager at a time,
// so a difference is one node's sweeps.
func reconciles(t *testing.T) int {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "caretaker-orphans" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}

// quiet waits until no reconcile has run for a second and a half (three
// scan periods) and returns the count.
func quiet(e *env) int {
	e.t.Helper()
	last, since := reconciles(e.t), time.Now()
	e.waitFor("the controller to go quiet", func() error {
		if n := reconciles(e.t); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < 1500*time.Millisecond {
			return fmt.Errorf("reconciled %s ago", time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
	return last
}

// replica creates a Replica object of node on the disk of uuid for
// dataName, with the status and the extra spec, labels and annotations
// Longhorn's objects carry, but no directory.
func (e *env) replica(name, node, uuid, path, dataName string) {
	e.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{
			"name": name, "namespace": e.ns,
			"labels":      map[string]any{"longhornnode": node, "longhorndiskuuid": uuid, "longhornvolume": "pvc-x"},
			"annotations": map[string]any{"caretaker.test/bulk": strings.Repeat("x", 512)},
		},
		"spec": map[string]any{"nodeID": node, "diskID": uuid, "diskPath": path, "dataDirectoryName": dataName,
			"volumeName": "pvc-x", "engineName": "pvc-x-e-0", "image": "longhornio/longhorn-engine:v1.9.0"},
	}}
	ctx := context.Background()
	if err := e.c.Create(ctx, u); err != nil {
		e.t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"currentState": "running", "ip": "10.0.0.1", "port": int64(10000)}
	if err := e.c.Status().Update(ctx, u); err != nil {
		e.t.Fatal(err)
	}
}

// TestOtherNodesReplicaDoesNotWake: a Replica created, changed and
// deleted on another node does not make this node sweep; one that claims
// a directory on this node's disk still does, and its directory is no
// longer an orphan.
func TestOtherNodesReplicaDoesNotWake(t *testing.T) {
	e, d, _, nameB := newTwoOrphanNode(t, manager.Options{}, nil)
	other := e.addNode("node-2", "disk-1")
	before := quiet(e)

	e.replica("replica-elsewhere", "node-2", other.UUID, other.Path, "pvc-x-ccccccc1")
	e.patchReplica("replica-elsewhere", `{"spec":{"dataDirectoryName":"pvc-x-ccccccc2"}}`)
	if err := e.c.Delete(context.Background(), e.replicaObj("replica-elsewhere")); err != nil {
		t.Fatal(err)
	}
	if after := quiet(e); after != before {
		t.Errorf("a replica of node-2 made node-1 reconcile %d times; want 0", after-before)
	}

	// The same on this node's disk: it claims orphan A.
	e.replica("replica-here", "node-1", d.UUID, d.Path, orphanDirA)
	e.waitOrphans("node-1", nameB)
	if !exists(t, d.Dir(orphanDirA)) {
		t.Errorf("%s was removed", orphanDirA)
	}
}

func (e *env) replicaObj(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orphanctrl.ReplicaGVK)
	u.SetNamespace(e.ns)
	u.SetName(name)
	return u
}

func (e *env) patchReplica(name, patch string) {
	e.t.Helper()
	if err := e.c.Patch(context.Background(), e.replicaObj(name), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		e.t.Fatal(err)
	}
}

// TestOwnWritesDoNotWake: the node goes not ready, one reconcile marks
// both Orphans DataCleanable=False, and the echoes of those two status
// writes through the manager's cache do not make it sweep again.
func TestOwnWritesDoNotWake(t *testing.T) {
	e, _, nameA, nameB := newTwoOrphanNode(t, manager.Options{}, nil)
	before := quiet(e)
	e.patchNode("node-1", true, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"ManagerPodMissing","message":"manager pod missing"}]}}`)
	e.waitFor("both Orphans marked not cleanable", func() error {
		for _, name := range []string{nameA, nameB} {
			o, err := e.getOrphan(name)
			if err != nil {
				return err
			}
			if c := condition(o, "DataCleanable"); c != "False" {
				return fmt.Errorf("%s: DataCleanable=%q", name, c)
			}
		}
		return nil
	})
	if n := quiet(e) - before; n != 1 {
		t.Errorf("the node change and its two status writes made %d reconciles; want 1", n)
	}
}

// requestLog counts the requests a manager's REST config makes.
type requestLog struct {
	mu    sync.Mutex
	calls []string // "VERB path?query"
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.calls = append(l.calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// since returns the calls after the first n but the watches (an
// informer renews its watch now and then), and how many of them are
// LISTs (a GET that names no object and does not watch).
func (l *requestLog) since(n int) (calls []string, lists int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls[n:] {
		if strings.Contains(c, "watch=true") {
			continue
		}
		calls = append(calls, c)
		if strings.HasPrefix(c, "GET ") && isCollection(c) {
			lists++
		}
	}
	return calls, lists
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// isCollection: /apis/longhorn.io/v1beta2/namespaces/NS/orphans is a
// collection, .../orphans/NAME an object.
func isCollection(call string) bool {
	path := strings.SplitN(strings.TrimPrefix(call, "GET "), "?", 2)[0]
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			return len(parts) == i+3
		}
	}
	return true
}

// TestIdleSweepMakesNoRequest: a sweep that has nothing to do reads
// everything from the manager's cache: no LIST, and no other request.
func TestIdleSweepMakesNoRequest(t *testing.T) {
	log := &requestLog{}
	e := newEnv(t)
	e.cfg = log.wrap(restCfg)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.start("node-1", manager.Options{}, nil)
	nameA := longhornName(d, orphanDirA)
	e.waitOrphans("node-1", nameA)
	before := quiet(e)
	n := log.len()
	e.annotate(nameA, "idle") // a label: it wakes the node, and changes nothing to do
	after := quiet(e)
	if after == before {
		t.Fatalf("the label change did not wake the controller; the test proves nothing")
	}
	calls, lists := log.since(n)
	if lists != 0 {
		t.Errorf("%d idle reconciles made %d LIST requests: %v", after-before, lists, calls)
	}
	if len(calls) != 0 {
		t.Errorf("%d idle reconciles made requests: %v", after-before, calls)
	}
}

// TestCacheIsNodeLocal: the manager's cache holds node-1's Orphans,
// Longhorn Node and Replicas only, and only the Volume of node-1's
// orphan (not the 20 others), Replicas and Volumes stripped to the
// fields the controller reads.
func TestCacheIsNodeLocal(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	other := e.addNode("node-2", "disk-1")
	e.owned(d, ownedDir)
	e.orphanDir(d, orphanDirA)
	e.orphanDir(other, orphanDirB) // node-2's orphan; node-2 runs a controller of its own
	e.replica("replica-elsewhere", "node-2", other.UUID, other.Path, "pvc-x-ccccccc1")
	e.replica("replica-here", "node-1", d.UUID, d.Path, "pvc-x-ccccccc2")
	vol := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
		"metadata": map[string]any{"name": "pvc-lost", "namespace": e.ns, "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"size": "1073741824", "numberOfReplicas": int64(3)},
	}}
	if err := e.c.Create(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	vol.Object["status"] = map[string]any{"robustness": "healthy", "state": "attached"}
	if err := e.c.Status().Update(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		e.setVolume(fmt.Sprintf("pvc-other-%d", i), "healthy")
	}
	e.start("node-2", manager.Options{}, nil)
	e.waitOrphans("node-2", longhornName(other, orphanDirB))
	mgr := e.start("node-1", manager.Options{}, nil)
	e.waitOrphans("node-1", longhornName(d, orphanDirA))

	ctx := context.Background()
	c := mgr.GetCache()
	var orphans orphanctrl.OrphanList
	if err := c.List(ctx, &orphans); err != nil {
		t.Fatal(err)
	}
	for _, o := range orphans.Items {
		if o.Spec.NodeID != "node-1" {
			t.Errorf("node-1's cache holds %s of %s", o.Name, o.Spec.NodeID)
		}
		if len(o.ManagedFields) > 0 {
			t.Errorf("cached Orphan %s keeps its managed fields", o.Name)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "replica-elsewhere"}, e.replicaObj("replica-elsewhere")); !apierrors.IsNotFound(err) {
		t.Errorf("node-1's cache has node-2's replica-elsewhere: %v; want not found", err)
	}
	nodes := &unstructured.UnstructuredList{}
	nodes.SetGroupVersionKind(orphanctrl.NodeGVK.GroupVersion().WithKind("NodeList"))
	if err := c.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].GetName() != "node-1" {
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.GetName())
		}
		t.Errorf("node-1's cache holds the Longhorn nodes %v; want [node-1]", names)
	}
	e.waitFor("node-1's cache to hold only the volume of its orphan", func() error {
		vols := &unstructured.UnstructuredList{}
		vols.SetGroupVersionKind(orphanctrl.VolumeGVK.GroupVersion().WithKind("VolumeList"))
		if err := c.List(ctx, vols); err != nil {
			return err
		}
		var names []string
		for _, v := range vols.Items {
			names = append(names, v.GetName())
		}
		if len(names) != 1 || names[0] != "pvc-lost" {
			return fmt.Errorf("node-1's cache holds the volumes %v; want [pvc-lost]", names)
		}
		return nil
	})
	for _, tc := range []struct {
		gvkObj *unstructured.Unstructured
		name   string
		want   map[string]any
	}{
		{e.replicaObj("replica-here"), "replica-here", map[string]any{"spec": map[string]any{
			"nodeID": "node-1", "diskID": d.UUID, "diskPath": d.Path, "dataDirectoryName": "pvc-x-ccccccc2"}}},
		{e.volumeObj("pvc-lost"), "pvc-lost", map[string]any{"spec": map[string]any{"numberOfReplicas": 3},
			"status": map[string]any{"robustness": "healthy", "state": "attached"}}},
	} {
		u := tc.gvkObj
		if err := c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: tc.name}, u); err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		for k, v := range u.Object {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				got[k] = v
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("cached %s %s = %v; want only %v", u.GetKind(), tc.name, got, tc.want)
		}
		if len(u.GetLabels())+len(u.GetAnnotations())+len(u.GetManagedFields()) > 0 || u.GetName() != tc.name {
			t.Errorf("cached %s %s keeps metadata it does not need: %v", u.GetKind(), tc.name, u.Object["metadata"])
		}
	}
}

func (e *env) volumeObj(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(orphanctrl.VolumeGVK)
	u.SetNamespace(e.ns)
	u.SetName(name)
	return u
}

// TestDeletionDuringLargeFirstSweep: a node finds 2,000 orphans at once.
// While their records are still being created, a user deletes one that
// exists: its directory is purged within a bound far shorter than the
// creation of all 2,000 (4,000 writes at the client's 50 a second).
func TestDeletionDuringLargeFirstSweep(t *testing.T) {
	const n, bound = 2000, 15 * time.Second
	e := newEnv(t)
	d := e.addNode("node-1", "disk-1")
	e.owned(d, ownedDir)
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("pvc-many-%08d", i)
		if err := diskscantest.MakeReplica(d.Path, dirs[i], diskscantest.Replica{Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	e.start("node-1", manager.Options{}, nil)
	var victim, dir string
	e.waitFor("a first cleanable Orphan", func() error {
		for name, o := range e.nodeOrphans("node-1") {
			if condition(o, "DataCleanable") == "True" {
				victim, dir = name, o.Spec.Parameters["DataName"]
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	asked := time.Now()
	e.deleteOrphan(victim)
	for exists(t, d.Dir(dir)) {
		if time.Since(asked) > bound {
			t.Fatalf("the deletion of %s waited more than %s (%d of %d Orphans created)", victim, bound, len(e.nodeOrphans("node-1")), n)
		}
		time.Sleep(100 * time.Millisecond) // polling the directory with a deadline
	}
	t.Logf("purged %s after %s, with %d of %d Orphans created", dir, time.Since(asked).Round(time.Millisecond), len(e.nodeOrphans("node-1")), n)
}
