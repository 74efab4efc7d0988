package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/examples/kube/agent"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
)

// listLog records an agent's LISTs of Replicas and Volumes (not its
// watches): which selected the node's objects and which read the whole
// namespace, and how many objects each page carried.
type listLog struct {
	next http.RoundTripper

	mu    sync.Mutex
	lists []string // "<resource> <selector or FULL>", first pages only
}

func (l *listLog) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	res := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	if r.Method == http.MethodGet && q.Get("watch") == "" && q.Get("continue") == "" && (res == "replicas" || res == "volumes") {
		sel := q.Get("labelSelector") + q.Get("fieldSelector")
		if sel == "" {
			sel = "FULL"
		}
		l.mu.Lock()
		l.lists = append(l.lists, res+" "+sel)
		l.mu.Unlock()
	}
	return l.next.RoundTrip(r)
}

// full is the number of full LISTs of res so far.
func (l *listLog) full(res string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lists {
		if s == res+" FULL" {
			n++
		}
	}
	return n
}

func (l *listLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lists, "; ")
}

// startLoggedAgent runs node's agent in the test's process, its LISTs
// logged.
func (e *env) startLoggedAgent(node string, extra func(*agent.Config)) (*agent.Agent, *listLog) {
	e.t.Helper()
	c := kubetest.Require(e.t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	ll := &listLog{}
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ll.next = rt; return ll })
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	acfg := agent.Config{Client: client, Namespace: e.ns, NodeID: node, Period: scanPeriod,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if extra != nil {
		extra(&acfg)
	}
	a, err := agent.New(acfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("agent %s: %v", node, err)
		}
	})
	return a, ll
}

// replicaWithLabels creates a Replica expecting dataName on d, with the
// labels given (nil: none at all) whatever its spec says.
func (e *env) replicaWithLabels(d disk, name, dataName string, labels map[string]any) {
	e.t.Helper()
	meta := map[string]any{"name": name, "namespace": e.ns}
	if labels != nil {
		meta["labels"] = labels
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": meta,
		"spec": map[string]any{"nodeID": d.node, "diskID": d.uuid, "diskPath": d.path, "dataDirectoryName": dataName},
	}}
	if _, err := e.dc.Resource(longhorn.ReplicaGVR).Namespace(e.ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestStartListsCarryTheNodesObjects (issue 37 point 1): a starting
// agent lists the Replicas its labels select and no Volume it does not
// need, never the namespace's: with two nodes of owned replicas and no
// orphan, node-a's agent syncs and sweeps without one full LIST of
// Replicas or Volumes.
func TestStartListsCarryTheNodesObjects(t *testing.T) {
	e := newEnv(t)
	da, db := e.addNode("node-a", "disk-1"), e.addNode("node-b", "disk-1")
	for i := range 5 {
		e.owned(da, dataName(fmt.Sprintf("vol-a%d", i)))
		e.owned(db, dataName(fmt.Sprintf("vol-b%d", i)))
	}
	a, ll := e.startLoggedAgent("node-a", nil)
	e.waitFor("the agent's first sweep", func() error {
		if a.Stats().Sweeps == 0 {
			return fmt.Errorf("no sweep yet")
		}
		return nil
	})
	if got := a.Stats().Replicas; got != 5 {
		t.Fatalf("the agent holds %d replicas, want node-a's 5", got)
	}
	if ll.full("replicas")+ll.full("volumes") != 0 {
		t.Fatalf("the agent's start read a whole namespace: %s", ll)
	}
	if len(e.nodeOrphans("node-a")) != 0 {
		t.Fatal("an owned directory got an Orphan")
	}
}

// TestStaleLabelsNeverMakeOrphans (issue 37 point 2): a Replica whose
// longhornnode label names another node, and one with no labels, expect
// directories on node-a's disk. The node's selector misses both, so its
// scan finds them unexpected beside a real orphan; the confirmation
// against a full list (one, for the sweep with new candidates) finds
// their replicas, and only the real orphan gets an Orphan. Sweeps whose
// candidates were confirmed list nothing more; a purge asked for later
// lists once, at its sweep, and removes only the real orphan's data.
func TestStaleLabelsNeverMakeOrphans(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-a", "disk-1")
	e.owned(d, dataName("vol-ok"))
	staleDir, bareDir, lostDir := dataName("vol-stale"), dataName("vol-bare"), dataName("vol-lost")
	for _, dir := range []string{staleDir, bareDir, lostDir} {
		e.orphanDir(d, dir)
	}
	e.replicaWithLabels(d, "r-stale", staleDir, map[string]any{"longhornnode": "node-b", "longhorndiskuuid": "another-disk"})
	e.replicaWithLabels(d, "r-bare", bareDir, nil)
	a, ll := e.startLoggedAgent("node-a", nil)
	lost := longhornName(d, lostDir)
	e.waitOrphans("node-a", lost)
	confirmations := ll.full("replicas")
	if confirmations < 1 {
		t.Fatalf("an Orphan was recorded without a full list: %s", ll)
	}

	// Steady state: sweeps run (an Orphan changed by someone else wakes
	// one) with the same candidates, and list nothing.
	sweeps := a.Stats().Sweeps
	for i := range 3 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/touched":"%d"}}}`, i)
		if _, err := e.orphans().Patch(context.Background(), lost, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("a sweep", func() error {
			if a.Stats().Sweeps <= sweeps {
				return fmt.Errorf("no new sweep")
			}
			sweeps = a.Stats().Sweeps
			return nil
		})
	}
	if got := ll.full("replicas"); got != confirmations {
		t.Fatalf("sweeps with confirmed candidates listed every Replica: %d full lists, were %d (%s)", got, confirmations, ll)
	}
	for _, dir := range []string{staleDir, bareDir} {
		if _, ok := e.nodeOrphans("node-a")[longhornName(d, dir)]; ok {
			t.Fatalf("%s, expected by a replica whose labels are wrong, got an Orphan", dir)
		}
	}

	e.deleteOrphan(lost)
	e.waitGone(lost)
	if exists(t, d.dir(lostDir)) {
		t.Fatal("the orphan's data was not purged")
	}
	if got := ll.full("replicas"); got != confirmations+1 {
		t.Fatalf("the purge's sweep made %d full lists, want one (%s)", got-confirmations, ll)
	}
	for _, dir := range []string{staleDir, bareDir} {
		if !exists(t, d.dir(dir)) {
			t.Fatalf("%s was removed", dir)
		}
	}
}

// TestPurgeConfirmsAgainstAFullList (issue 37 point 2): an Orphan is
// recorded, then a Replica comes to claim its directory with labels that
// name another node, so the node's selected view never sees it. Deleting
// the Orphan asks for a purge; the purge's confirmation lists every
// Replica, finds the claim, and the directory stays (the Orphan is then
// forgotten, its data kept).
func TestPurgeConfirmsAgainstAFullList(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-a", "disk-1")
	e.owned(d, dataName("vol-ok"))
	dir := dataName("vol-late")
	e.orphanDir(d, dir)
	_, ll := e.startLoggedAgent("node-a", nil)
	name := longhornName(d, dir)
	e.waitOrphans("node-a", name)
	before := ll.full("replicas")
	e.replicaWithLabels(d, "r-late", dir, map[string]any{"longhornnode": "node-b"})
	e.deleteOrphan(name)
	e.waitGone(name)
	if !exists(t, d.dir(dir)) {
		t.Fatal("the directory a mislabelled replica claims was purged")
	}
	if ll.full("replicas") == before {
		t.Fatalf("the purge was refused without a full list: %s", ll)
	}
}
