package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/kube/agent"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
)

// The scale test's cluster: scaleSmall nodes, then scaleLarge, each with
// one disk holding scaleReplicas replicas (each of its own volume) and
// one orphaned directory; one agent per node, as goroutines of this test.
const (
	scaleSmall    = 10
	scaleLarge    = 50
	scaleReplicas = 3
	scalePeriod   = time.Second
	// churnBound bounds a new orphan directory to its Orphan object, and
	// a deletion of an Orphan to its directory gone, on a loaded CI
	// machine with scalePeriod scans.
	churnBound = 20 * time.Second
)

// reqCounter counts one agent's requests to the API server by kind, and
// the bytes of the answers.
type reqCounter struct {
	mu     sync.Mutex
	counts map[string]int // list, watch, get, write
	bytes  atomic.Int64
}

func newReqCounter() *reqCounter { return &reqCounter{counts: map[string]int{}} }

func (c *reqCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

func (c *reqCounter) total() int {
	n := 0
	for _, v := range c.snapshot() {
		n += v
	}
	return n
}

type countingTransport struct {
	next http.RoundTripper
	c    *reqCounter
}

// RoundTrip counts the request: a GET with watch=true is a watch, a GET
// of a collection (a path ending in the resource's plural) a list, any
// other GET a get, and every other method a write.
func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := "write"
	if r.Method == http.MethodGet {
		last := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			kind = "watch"
		case slices.Contains([]string{"nodes", "replicas", "volumes", "orphans"}, last):
			kind = "list"
		default:
			kind = "get"
		}
	}
	t.c.mu.Lock()
	t.c.counts[kind]++
	t.c.mu.Unlock()
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = countingBody{resp.Body, &t.c.bytes}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// simAgent is one node's agent running as a goroutine of the test.
type simAgent struct {
	node   string
	a      *agent.Agent
	rc     *reqCounter
	cancel context.CancelFunc
	done   chan error
}

func (s *simAgent) stop(t *testing.T) {
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("agent %s: %v", s.node, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("agent %s did not stop within 30 s", s.node)
	}
}

// scaleEnv is the scale test's world.
type scaleEnv struct {
	*env
	agentCfg *rest.Config
	disks    map[string]disk
}

func (e *scaleEnv) startAgent(node string) *simAgent { return e.startAgentWith(node, nil) }

// startAgentWith starts node's agent with its Config changed by tweak.
func (e *scaleEnv) startAgentWith(node string, tweak func(*agent.Config)) *simAgent {
	e.t.Helper()
	rc := newReqCounter()
	cfg := rest.CopyConfig(e.agentCfg)
	cfg.UserAgent = "caretaker-orphan-agent/" + node
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, rc} })
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	acfg := agent.Config{Client: client, Namespace: e.ns, NodeID: node, Period: scalePeriod, Logger: log}
	if tweak != nil {
		tweak(&acfg)
	}
	a, err := agent.New(acfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &simAgent{node: node, a: a, rc: rc, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- a.Run(ctx) }()
	return s
}

// parallel runs f for each of n indexes on 8 goroutines and returns the
// first error.
func parallel(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				once.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	return first
}

func scaleNode(i int) string { return fmt.Sprintf("node-%03d", i) }

// dataName is a Longhorn data directory name of volume: <volume>-<8 hex>.
func dataName(volume string) string { return volume + "-" + uuid.NewString()[:8] }

// addNodes creates nodes [from, to): each a disk with scaleReplicas
// owned replica directories (a Replica and a Volume object each) and one
// orphaned directory.
func (e *scaleEnv) addNodes(from, to int) {
	e.t.Helper()
	ctx := context.Background()
	nodes := e.dc.Resource(longhorn.NodeGVR).Namespace(e.ns)
	replicas := e.dc.Resource(longhorn.ReplicaGVR).Namespace(e.ns)
	volumes := e.dc.Resource(longhorn.VolumeGVR).Namespace(e.ns)
	var mu sync.Mutex
	err := parallel(to-from, func(k int) error {
		node := scaleNode(from + k)
		d := disk{node: node, name: "disk-1", path: filepath.Join(e.base, node, "disk-1"), uuid: uuid.NewString()}
		if err := diskscantest.NewDisk(d.path, d.name, d.uuid); err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Node",
			"metadata": map[string]any{"name": node, "namespace": e.ns},
			"spec": map[string]any{"name": node, "disks": map[string]any{d.name: map[string]any{
				"path": d.path, "diskType": "filesystem", "allowScheduling": true, "evictionRequested": false,
			}}},
		}}
		created, err := nodes.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Object["status"] = map[string]any{"diskStatus": map[string]any{d.name: map[string]any{"diskUUID": d.uuid}}}
		if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		for j := range scaleReplicasVar {
			vol := fmt.Sprintf("vol-%s-%02d", node, j)
			dn := dataName(vol)
			if err := diskscantest.MakeReplica(d.path, dn, diskscantest.Replica{Size: 1 << 20, Written: 4096}); err != nil {
				return err
			}
			v := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
				"metadata": map[string]any{"name": vol, "namespace": e.ns},
			}}
			if _, err := volumes.Create(ctx, v, metav1.CreateOptions{}); err != nil {
				return err
			}
			r := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
				"metadata": map[string]any{"name": "r-" + dn, "namespace": e.ns, "labels": map[string]any{"longhornnode": node}},
				"spec":     map[string]any{"nodeID": node, "diskID": d.uuid, "diskPath": d.path, "dataDirectoryName": dn, "volumeName": vol},
			}}
			if _, err := replicas.Create(ctx, r, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		if err := diskscantest.MakeReplica(d.path, dataName("lost-"+node), diskscantest.Replica{Size: 1 << 20, Written: 4096}); err != nil {
			return err
		}
		mu.Lock()
		e.disks[node] = d
		mu.Unlock()
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// waitAllOrphans waits until the namespace holds want Orphan objects,
// each DataCleanable=True.
func (e *scaleEnv) waitAllOrphans(want int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d cleanable orphans", want), func() error {
		list, err := e.orphans().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != want {
			return fmt.Errorf("have %d", len(list.Items))
		}
		for i := range list.Items {
			if c := condition(&list.Items[i], "DataCleanable"); c["status"] != "True" {
				return fmt.Errorf("%s: DataCleanable = %v", list.Items[i].GetName(), c)
			}
		}
		return nil
	})
}

// heapPerAgent is the live heap the agents add to the test process,
// divided among them.
func heapPerAgent(base uint64, agents int) float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(int64(ms.HeapAlloc)-int64(base)) / float64(agents)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestScale runs one agent per simulated node, as goroutines, against the
// real API server: first scaleSmall nodes, then scaleLarge, and checks
// that what an agent holds and asks for depends on its own node, not on
// the cluster (see the README's "Scale").
func TestScale(t *testing.T) {
	c := kubetest.Require(t)
	started := time.Now()
	e := &scaleEnv{env: newEnv(t), disks: map[string]disk{}}
	var err error
	if e.agentCfg, err = clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig); err != nil {
		t.Fatal(err)
	}
	agents := map[string]*simAgent{}
	stopAll := func() {
		var wg sync.WaitGroup
		for _, s := range agents {
			wg.Add(1)
			go func() { defer wg.Done(); s.stop(t) }()
		}
		wg.Wait()
	}
	t.Cleanup(stopAll)

	// N = scaleSmall.
	e.addNodes(0, scaleSmall)
	base := liveHeap()
	for i := range scaleSmall {
		agents[scaleNode(i)] = e.startAgent(scaleNode(i))
	}
	e.waitAllOrphans(scaleSmall)
	heapSmall := heapPerAgent(base, scaleSmall)
	cachedSmall := map[string]int{}
	for i := range scaleSmall {
		cachedSmall[scaleNode(i)] = cachedObjects(agents[scaleNode(i)])
	}
	t.Logf("N=%d: ready after %s; live heap per agent %.0f KiB", scaleSmall, time.Since(started).Round(time.Millisecond), heapSmall/1024)

	// N = scaleLarge.
	e.addNodes(scaleSmall, scaleLarge)
	for i := scaleSmall; i < scaleLarge; i++ {
		agents[scaleNode(i)] = e.startAgent(scaleNode(i))
	}
	e.waitAllOrphans(scaleLarge)
	heapLarge := heapPerAgent(base, scaleLarge)
	t.Logf("N=%d: ready after %s; live heap per agent %.0f KiB", scaleLarge, time.Since(started).Round(time.Millisecond), heapLarge/1024)

	t.Run("cache independent of N", func(t *testing.T) {
		for i := range scaleSmall {
			n := scaleNode(i)
			if small, large := cachedSmall[n], cachedObjects(agents[n]); small >= 0 && large != small {
				t.Errorf("agent %s holds %d objects at N=%d and %d at N=%d", n, small, scaleSmall, large, scaleLarge)
			}
		}
		for n, s := range agents {
			if got := cachedObjects(s); got >= 0 && got > scaleReplicas+4 {
				t.Errorf("agent %s holds %d objects; its node has %d replicas and 1 orphan", n, got, scaleReplicas)
			}
		}
		// The heap is the check that does not trust the agent's own count.
		if heapLarge > 1.5*heapSmall {
			t.Errorf("live heap per agent: %.0f KiB at N=%d, %.0f KiB at N=%d: it grows with the cluster",
				heapSmall/1024, scaleSmall, heapLarge/1024, scaleLarge)
		}
	})

	// Steady state: nothing written, nothing listed.
	time.Sleep(2 * scalePeriod)
	before := map[string]map[string]int{}
	for n, s := range agents {
		before[n] = s.rc.snapshot()
	}
	time.Sleep(3 * scalePeriod)
	t.Run("steady state", func(t *testing.T) {
		for n, s := range agents {
			now := s.rc.snapshot()
			if d := now["write"] - before[n]["write"]; d != 0 {
				t.Errorf("agent %s wrote %d times in steady state", n, d)
			}
			if d := now["list"] - before[n]["list"]; d != 0 {
				t.Errorf("agent %s listed %d times in steady state", n, d)
			}
		}
	})

	// One replica on one node goes away: its directory is an orphan now.
	t.Run("a replica change wakes only its node", func(t *testing.T) {
		target := scaleNode(7)
		d := e.disks[target]
		list, err := e.dc.Resource(longhorn.ReplicaGVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "longhornnode=" + target})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("replicas of %s: %d, %v", target, len(list.Items), err)
		}
		victim := list.Items[0]
		dn, _, _ := unstructured.NestedString(victim.Object, "spec", "dataDirectoryName")
		sweeps, lists := map[string]int64{}, map[string]int{}
		for n, s := range agents {
			sweeps[n], lists[n] = sweepsOf(s), s.rc.snapshot()["list"]
		}
		if err := e.dc.Resource(longhorn.ReplicaGVR).Namespace(e.ns).Delete(context.Background(), victim.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the orphan of the deleted replica's directory", func() error {
			_, err := e.orphans().Get(context.Background(), longhornName(d, dn), metav1.GetOptions{})
			return err
		})
		time.Sleep(2 * scalePeriod) // what else would wake, wakes now
		woken := 0
		for n, s := range agents {
			ds, dl := sweepsOf(s)-sweeps[n], s.rc.snapshot()["list"]-lists[n]
			if n == target {
				if ds < 1 && sweeps[n] >= 0 {
					t.Errorf("agent %s of the changed node did not sweep", n)
				}
				// The new candidate is confirmed against one full list of
				// the Replicas (its pages), and its volume is watched by
				// name (one list of that name); nothing else is listed: a
				// sweep reads its own cache.
				if pages := (scaleLarge*scaleReplicasVar + nodecache.PageSize - 1) / nodecache.PageSize; dl != pages+1 {
					t.Errorf("agent %s listed %d times in its sweeps, want the %d pages of one confirmation and its volume's list", n, dl, pages)
				}
				continue
			}
			if ds != 0 || dl != 0 {
				woken++
				t.Logf("agent %s woke: %d sweeps, %d lists", n, ds, dl)
			}
		}
		if woken > 0 {
			t.Errorf("a replica change on %s woke %d other agents", target, woken)
		}
	})

	t.Run("churn latency", func(t *testing.T) {
		d := e.disks[scaleNode(3)]
		dn := dataName("churn")
		startNew := time.Now()
		e.orphanDir(d, dn)
		name := longhornName(d, dn)
		waitBound(t, churnBound, "the new directory's Orphan", func() error {
			o, err := e.orphans().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c := condition(o, "DataCleanable"); c["status"] != "True" {
				return fmt.Errorf("DataCleanable = %v", c)
			}
			return nil
		})
		created := time.Since(startNew)
		startDel := time.Now()
		e.deleteOrphan(name)
		waitBound(t, churnBound, "the deleted Orphan's directory to be gone", func() error {
			if _, err := os.Stat(d.dir(dn)); !os.IsNotExist(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			if _, err := e.orphans().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the Orphan is still there (%v)", err)
			}
			return nil
		})
		t.Logf("churn at N=%d: new directory to Orphan %s; delete to directory gone %s", scaleLarge,
			created.Round(time.Millisecond), time.Since(startDel).Round(time.Millisecond))
	})

	t.Run("restart", func(t *testing.T) {
		stopAll()
		for i := range scaleLarge {
			agents[scaleNode(i)] = e.startAgent(scaleNode(i))
		}
		// Converged: every agent has swept (where it counts its sweeps),
		// and no agent's requests grew for two scan periods.
		e.waitFor("every restarted agent to converge", func() error {
			before := map[string]int{}
			for n, s := range agents {
				if sw := sweepsOf(s); sw == 0 {
					return fmt.Errorf("%s has not swept", n)
				}
				before[n] = s.rc.total()
			}
			time.Sleep(2 * scalePeriod)
			for n, s := range agents {
				if got := s.rc.total(); got != before[n] || got < 8 {
					return fmt.Errorf("%s: %d requests, %d two periods ago", n, got, before[n])
				}
			}
			return nil
		})
		var maxReq, maxList, sumReq int
		var maxBytes int64
		for n, s := range agents {
			got := s.rc.snapshot()
			if got["write"] != 0 {
				t.Errorf("restarted agent %s wrote %d times; its orphans were all in place", n, got["write"])
			}
			// Its Node, its Orphans, its Replicas by node and by disk label: one
			// list and one watch each; no Volume list, but per orphan's
			// volume a GET and a watch by name (its list and its watch).
			// No full list: its orphans were recorded (and confirmed)
			// before the restart.
			orphans := len(e.nodeOrphans(n))
			if got["list"] > 4+orphans {
				t.Errorf("restarted agent %s listed %d times: %v", n, got["list"], got)
			}
			if s.rc.total() > 8+3*orphans {
				t.Errorf("restarted agent %s made %d requests to converge; its node has %d orphans", n, s.rc.total(), orphans)
			}
			maxReq, maxList, sumReq = max(maxReq, s.rc.total()), max(maxList, got["list"]), sumReq+s.rc.total()
			maxBytes = max(maxBytes, s.rc.bytes.Load())
		}
		t.Logf("restart of %d agents: requests per agent max %d (lists %d), mean %.1f; bytes received per agent max %d KiB (its node's lists)",
			scaleLarge, maxReq, maxList, float64(sumReq)/float64(len(agents)), maxBytes/1024)
	})
	t.Logf("scale test took %s", time.Since(started).Round(time.Millisecond))
}

// waitBound polls cond until it returns nil, failing the test if that
// takes longer than bound.
func waitBound(t *testing.T, bound time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, bound, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the API server and the disk with a deadline
	}
}

// TestBacklogDoesNotHoldADeletion: a node that suddenly has hundreds of
// orphaned directories creates their Orphans in batches
// (Config.MaxCreates), and a user's deletion of one of the first is
// carried out before the backlog is done.
func TestBacklogDoesNotHoldADeletion(t *testing.T) {
	c := kubetest.Require(t)
	e := &scaleEnv{env: newEnv(t), disks: map[string]disk{}}
	var err error
	if e.agentCfg, err = clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig); err != nil {
		t.Fatal(err)
	}
	const backlog = 120
	d := e.addNode("node-backlog", "disk-1")
	e.owned(d, dataName("live")) // one owned replica: the disk is not all orphans
	var names []string
	for i := range backlog {
		dn := dataName(fmt.Sprintf("gone-%03d", i))
		e.orphanDir(d, dn)
		names = append(names, dn)
	}
	s := e.startAgentWith(d.node, func(cfg *agent.Config) { cfg.MaxCreates = 20 })
	t.Cleanup(func() { s.stop(t) })
	var victim string
	e.waitFor("the first Orphans", func() error {
		list, err := e.orphans().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if condition(&list.Items[i], "DataCleanable")["status"] == "True" {
				victim = list.Items[i].GetName()
				return nil
			}
		}
		return fmt.Errorf("%d Orphans, none cleanable yet", len(list.Items))
	})
	var victimDir string
	for _, dn := range names {
		if longhornName(d, dn) == victim {
			victimDir = d.dir(dn)
		}
	}
	e.deleteOrphan(victim)
	e.waitFor("the deleted Orphan's directory to be gone", func() error {
		if _, err := os.Stat(victimDir); !os.IsNotExist(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	list, err := e.orphans().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := len(list.Items) + 1 // and the victim's, gone now
	if created >= backlog {
		t.Errorf("the deletion was carried out only after all %d Orphans were created", created)
	}
	t.Logf("the deletion was carried out with %d of %d Orphans created", created, backlog)
	e.waitAllOrphans(backlog - 1)
}
