package orphanctrl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/caretaker-storage/caretaker/examples/controller-runtime/orphanctrl"
	"github.com/caretaker-storage/caretaker/orphan"
)

// figuresEnv, when set to a list of node counts ("10,50"), runs
// TestScaleFigures: not part of the normal run (it creates thousands of
// objects).
const figuresEnv = "CARETAKER_CR_FIGURES"

// TestScaleFigures measures one node's controller on a cluster of N
// simulated nodes: each node a Longhorn Node with one disk, 100 Replicas
// (with a status and the labels and spec fields Longhorn writes), one
// Volume per three replicas, and 2 Orphans. Only node-0 runs a
// controller, with 100 replica directories of its own and 2 orphaned. It
// reports what node-0's manager caches (objects and their JSON bytes),
// the heap it grew by, the requests of its start, and the reconciles and
// requests that churn on other nodes causes (a replica deleted on each
// of 5 other nodes, and 20 replica status updates).
//
//	CARETAKER_CR_FIGURES=10,50 go test -run TestScaleFigures -v ./orphanctrl/
func TestScaleFigures(t *testing.T) {
	spec := os.Getenv(figuresEnv)
	if spec == "" {
		t.Skip(figuresEnv + " is not set")
	}
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 6 {
			t.Fatalf("%s=%q: want node counts of at least 6", figuresEnv, spec)
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) { scaleFigures(t, n) })
	}
}

func scaleFigures(t *testing.T, nodes int) {
	const perNode, orphansPerNode = 100, 2
	log := &requestLog{}
	e := newEnv(t)
	e.cfg = log.wrap(restCfg)
	ctx := context.Background()
	setup := setupClient(t)

	d := e.addNode("node-0", "disk-1")
	for i := range perNode {
		e.orphanDir(d, fmt.Sprintf("pvc-n0-%08d", i))
	}
	for i := range orphansPerNode {
		e.orphanDir(d, fmt.Sprintf("pvc-lost-%08d", i))
	}
	var g errgroup.Group
	g.SetLimit(16)
	uuids := make([]string, nodes)
	uuids[0] = d.UUID
	for n := 1; n < nodes; n++ {
		uuids[n] = e.addNode(fmt.Sprintf("node-%d", n), "disk-1").UUID
	}
	for n := range nodes {
		node := fmt.Sprintf("node-%d", n)
		for i := range perNode {
			g.Go(func() error {
				data := fmt.Sprintf("pvc-n%d-%08d", n, i)
				if n == 0 {
					data = fmt.Sprintf("pvc-n0-%08d", i)
				}
				vol := fmt.Sprintf("pvc-%d-%d", n, i/3)
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
					"metadata": map[string]any{
						"name": fmt.Sprintf("r-%d-%d", n, i), "namespace": e.ns,
						"labels": map[string]any{"longhornnode": node, "longhorndiskuuid": uuids[n], "longhornvolume": vol},
					},
					"spec": map[string]any{"nodeID": node, "diskID": uuids[n], "diskPath": "/var/lib/longhorn", "dataDirectoryName": data,
						"volumeName": vol, "engineName": vol + "-e-0", "image": "longhornio/longhorn-engine:v1.9.0",
						"active": true, "dataEngine": "v1", "volumeSize": "10737418240", "revisionCounterDisabled": false},
				}}
				if n == 0 {
					_ = unstructured.SetNestedField(u.Object, d.Path, "spec", "diskPath")
				}
				if err := setup.Create(ctx, u); err != nil {
					return err
				}
				u.Object["status"] = map[string]any{"currentState": "running", "ip": "10.0.0.1", "port": int64(10000),
					"instanceManagerName": "instance-manager-" + node, "storageIP": "10.0.0.1", "started": true}
				return setup.Status().Update(ctx, u)
			})
		}
		for i := range (perNode + 2) / 3 {
			g.Go(func() error {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
					"metadata": map[string]any{"name": fmt.Sprintf("pvc-%d-%d", n, i), "namespace": e.ns},
					"spec":     map[string]any{"size": "10737418240", "numberOfReplicas": int64(3), "dataEngine": "v1"},
				}}
				if err := setup.Create(ctx, u); err != nil {
					return err
				}
				u.Object["status"] = map[string]any{"robustness": "healthy", "state": "attached", "currentNodeID": node}
				return setup.Status().Update(ctx, u)
			})
		}
		if n == 0 {
			continue
		}
		for i := range orphansPerNode {
			g.Go(func() error {
				st := orphanctrl.NewStore(setup, setup, e.ns, node)
				_, err := st.Create(ctx, figureRecord(t, node, uuids[n], i))
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	started := time.Now()
	mgr := e.start("node-0", manager.Options{}, nil)
	names := make([]string, orphansPerNode)
	for i := range names {
		names[i] = longhornName(d, fmt.Sprintf("pvc-lost-%08d", i))
	}
	e.waitOrphans("node-0", names...)
	converged := time.Since(started)
	base := quiet(e)
	startCalls, startLists := log.len(), lists(log, 0) // the calls with the watches
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)

	counts, bytes := map[string]int{}, 0
	for _, kind := range []string{"Orphan", "Node", "Replica", "Volume"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(orphanctrl.GroupVersion.WithKind(kind + "List"))
		var items []any
		if kind == "Orphan" {
			var ol orphanctrl.OrphanList
			if err := mgr.GetCache().List(ctx, &ol); err != nil {
				t.Fatal(err)
			}
			for i := range ol.Items {
				items = append(items, &ol.Items[i])
			}
		} else {
			if err := mgr.GetCache().List(ctx, list); err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				items = append(items, list.Items[i].Object)
			}
		}
		counts[kind] = len(items)
		for _, it := range items {
			b, _ := json.Marshal(it)
			bytes += len(b)
		}
	}

	// Churn elsewhere: a replica deleted on each of nodes 1..5, and 20
	// replica status updates on other nodes.
	n0 := log.len()
	for n := 1; n <= 5; n++ {
		if err := setup.Delete(ctx, e.replicaObj(fmt.Sprintf("r-%d-0", n))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		u := e.replicaObj(fmt.Sprintf("r-%d-1", 1+i%(nodes-1)))
		patch := fmt.Sprintf(`{"status":{"port":%d}}`, 20000+i)
		if err := setup.Status().Patch(ctx, u, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	churn := quiet(e) - base
	churnCalls, churnLists := log.len()-n0, lists(log, n0)

	t.Logf("FIGURES nodes=%d cached{orphans=%d nodes=%d replicas=%d volumes=%d} cachedJSON=%dKiB heapGrowth=%dKiB "+
		"start{requests=%d lists=%d converged=%s} churnElsewhere{reconciles=%d requests=%d lists=%d}",
		nodes, counts["Orphan"], counts["Node"], counts["Replica"], counts["Volume"], bytes>>10,
		(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))>>10,
		startCalls, startLists, converged.Round(time.Millisecond), churn, churnCalls, churnLists)
}

func lists(l *requestLog, n int) int {
	_, lists := l.since(n)
	return lists
}

// setupClient is a direct client that creates a cluster's objects
// quickly.
func setupClient(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(restCfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// figureRecord is the i-th orphan record of another node's disk.
func figureRecord(t *testing.T, node, uuid string, i int) orphan.Record {
	t.Helper()
	it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: node, DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
		orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn", orphan.ParamDiskUUID: uuid,
		orphan.ParamDataName: fmt.Sprintf("pvc-lost-%08d", i)}}
	r, err := orphan.NewRecord(it, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue,
		Reason: orphan.ReasonCleanable, LastTransitionTime: metav1.Now()}}
	return r
}
