package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caretaker-storage/caretaker/examples/kube/agent"
	"github.com/caretaker-storage/caretaker/examples/kube/kubetest"
	"github.com/caretaker-storage/caretaker/examples/kube/longhorn"
	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
)

// tally counts an agent's requests by what they read: every request
// that is not a watch, the GETs and list pages of Volumes, and the full
// lists (first pages) and pages of Replicas that select nothing.
type tally struct {
	next http.RoundTripper

	mu sync.Mutex
	n  map[string]int
}

const (
	tRequests    = "requests" // every request but watches
	tVolumeGets  = "volume GETs"
	tVolumePages = "volume list pages"  // lists of the namespace's Volumes
	tVolumeWatch = "volume watch lists" // a watched volume's own list (metadata.name)
	tFullLists   = "full replica lists"
	tFullPages   = "full replica list pages"
	tReplicaSel  = "selected replica list pages"
)

func (c *tally) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	last, prev := parts[len(parts)-1], ""
	if len(parts) > 1 {
		prev = parts[len(parts)-2]
	}
	c.mu.Lock()
	if q.Get("watch") == "" {
		c.n[tRequests]++
		if r.Method == http.MethodGet {
			switch {
			case prev == "volumes":
				c.n[tVolumeGets]++
			case last == "volumes" && q.Get("fieldSelector") != "":
				c.n[tVolumeWatch]++
			case last == "volumes":
				c.n[tVolumePages]++
			case last == "replicas" && q.Get("labelSelector")+q.Get("fieldSelector") == "":
				c.n[tFullPages]++
				if q.Get("continue") == "" {
					c.n[tFullLists]++
				}
			case last == "replicas":
				c.n[tReplicaSel]++
			}
		}
	}
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *tally) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// runTallied runs node's agent in the test's process, its requests
// tallied, its Config changed by extra (if not nil); the returned stop
// ends it.
func (e *env) runTallied(node string, extra ...func(*agent.Config)) (*agent.Agent, *tally, func()) {
	e.t.Helper()
	c := kubetest.Require(e.t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AgentKubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	tl := &tally{n: map[string]int{}}
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttle: the requests are what is measured
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { tl.next = rt; return tl })
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	acfg := agent.Config{Client: client, Namespace: e.ns, NodeID: node, Period: scanPeriod,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, f := range extra {
		f(&acfg)
	}
	a, err := agent.New(acfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("agent %s: %v", node, err)
			}
		})
	}
	e.t.Cleanup(stop)
	return a, tl, stop
}

// orphanVolumes makes n orphaned directories on d, each of its own
// volume, with the Volume objects (healthy), and returns the Orphans'
// names.
func (e *env) orphanVolumes(d disk, prefix string, n int) []string {
	e.t.Helper()
	ctx := context.Background()
	ri := e.dc.Resource(longhorn.VolumeGVR).Namespace(e.ns)
	names := make([]string, n)
	err := parallel(n, func(i int) error {
		vol := fmt.Sprintf("%s-%03d", prefix, i)
		dn := dataName(vol)
		e.orphanDir(d, dn)
		names[i] = longhornName(d, dn)
		obj, err := ri.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
			"metadata": map[string]any{"name": vol, "namespace": e.ns},
			"spec":     map[string]any{"numberOfReplicas": int64(3), "size": "1048576"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		obj.Object["status"] = map[string]any{"robustness": "healthy", "state": "attached"}
		_, err = ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// waitRecorded waits until node has n Orphans.
func (e *env) waitRecorded(node string, n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d Orphans of %s", n, node), func() error {
		if got := len(e.nodeOrphans(node)); got != n {
			return fmt.Errorf("have %d", got)
		}
		return nil
	})
}

// waitQuiet waits until a's sweeps stop for a second.
func (e *env) waitQuiet(a *agent.Agent) {
	e.t.Helper()
	last, since := a.Stats().Sweeps, time.Now()
	e.waitFor("the sweeps to settle", func() error {
		if s := a.Stats().Sweeps; s != last {
			last, since = s, time.Now()
		}
		if time.Since(since) < time.Second {
			return fmt.Errorf("sweeps still running (%d)", last)
		}
		return nil
	})
}

// sweepsCost wakes k sweeps of a (an Orphan touched by someone else wakes
// one each) and returns the requests they made, per sweep.
func (e *env) sweepsCost(a *agent.Agent, tl *tally, orphanName string, k int) map[string]float64 {
	e.t.Helper()
	e.waitQuiet(a)
	before, sweeps := tl.snapshot(), a.Stats().Sweeps
	for i := range k {
		want := a.Stats().Sweeps + 1
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/touched":"%d-%d"}}}`, time.Now().UnixNano(), i)
		if _, err := e.orphans().Patch(context.Background(), orphanName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.waitFor("a sweep", func() error {
			if a.Stats().Sweeps < want {
				return fmt.Errorf("no new sweep")
			}
			return nil
		})
	}
	e.waitQuiet(a)
	after, n := tl.snapshot(), float64(a.Stats().Sweeps-sweeps)
	out := map[string]float64{"sweeps": n}
	for key, v := range after {
		out[key] = float64(v-before[key]) / n
	}
	return out
}

// orphanVolumeCounts is the numbers of orphan volumes
// TestSweepReadsOfManyOrphanVolumesAreBounded runs at: 200 (136 GETs per
// sweep before), or the comma-separated list CARETAKER_ORPHAN_VOLUMES
// gives (the README's figures are from 10,64,65,500).
func orphanVolumeCounts(t *testing.T) []int {
	s := os.Getenv("CARETAKER_ORPHAN_VOLUMES")
	if s == "" {
		return []int{200}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("CARETAKER_ORPHAN_VOLUMES=%q: %q is not a count", s, f)
		}
		out = append(out, n)
	}
	return out
}

// TestSweepReadsOfManyOrphanVolumesAreBounded (issue 37's edge): a node
// with n orphaned directories, each of its own (healthy) volume, all
// recorded. The last-copy guard asks about every one of those volumes at
// every sweep; the agent watches MaxVolumeWatches of them and reads the
// rest at each sweep, with at most MaxVolumeGets GETs or else one paged
// list. So a steady sweep's Volume reads are bounded by MaxVolumeGets
// plus the list's pages, whatever n (it made n-64 GETs per sweep before).
func TestSweepReadsOfManyOrphanVolumesAreBounded(t *testing.T) {
	for _, n := range orphanVolumeCounts(t) {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			e := newEnv(t)
			d := e.addNode("node-a", "disk-1")
			names := e.orphanVolumes(d, "vol", n)
			start := time.Now()
			a, tl, _ := e.runTallied("node-a")
			e.waitRecorded("node-a", n)
			recorded := time.Since(start)
			e.waitQuiet(a)
			atStart := tl.snapshot()
			cost := e.sweepsCost(a, tl, names[0], 3)
			pages := (n + nodecache.PageSize - 1) / nodecache.PageSize
			reads := cost[tVolumeGets] + cost[tVolumePages]
			t.Logf("%d orphan volumes: recorded in %s with %d requests (%d volume GETs, %d volume list pages, %d watched volumes' lists, %d full replica lists); a steady sweep (mean of %.0f): %.1f requests, %.1f volume GETs, %.1f volume list pages, %.1f full replica lists",
				n, recorded.Round(100*time.Millisecond), atStart[tRequests], atStart[tVolumeGets], atStart[tVolumePages], atStart[tVolumeWatch], atStart[tFullLists],
				cost["sweeps"], cost[tRequests], cost[tVolumeGets], cost[tVolumePages], cost[tFullLists])
			if bound := float64(nodecache.MaxVolumeGets + pages); reads > bound {
				t.Fatalf("a sweep read %d orphan volumes with %.1f requests (%.1f GETs, %.1f list pages); want at most %.0f", n, reads, cost[tVolumeGets], cost[tVolumePages], bound)
			}
			if cost[tFullLists] != 0 {
				t.Fatalf("a steady sweep listed every Replica %.1f times", cost[tFullLists])
			}
		})
	}
}

// TestStartWithUnrecordedCandidatesConfirmsOnce (issue 37's edge: a
// candidate not yet recorded is confirmed again after a restart): an
// agent starts with 250 unrecorded orphans, more than one sweep records
// (MaxCreates, 100); it is stopped, 250 more appear, and it starts again.
// Each start confirms its candidates with one full list of the Replicas,
// not one per candidate nor one per sweep that records: the candidates
// the first sweep confirmed stay covered while they are recorded.
func TestStartWithUnrecordedCandidatesConfirmsOnce(t *testing.T) {
	e := newEnv(t)
	d := e.addNode("node-a", "disk-1")
	for i := range 20 {
		e.owned(d, dataName(fmt.Sprintf("vol-ok%02d", i)))
	}
	total := 0
	for run, prefix := range []string{"first", "second"} {
		total += len(e.orphanVolumes(d, prefix, 250))
		start := time.Now()
		a, tl, stop := e.runTallied("node-a")
		e.waitRecorded("node-a", total)
		e.waitQuiet(a)
		got := tl.snapshot()
		t.Logf("start %d, 250 unrecorded candidates: recorded in %s, %d sweeps, %d requests, %d full replica lists (%d pages)",
			run+1, time.Since(start).Round(100*time.Millisecond), a.Stats().Sweeps, got[tRequests], got[tFullLists], got[tFullPages])
		if got[tFullLists] != 1 {
			t.Fatalf("start %d with 250 unrecorded candidates made %d full lists of the Replicas over %d sweeps; want one", run+1, got[tFullLists], a.Stats().Sweeps)
		}
		stop()
	}
}

// TestFirstConfirmDelaySpreadsNodes: the delays of 60 nodes' first
// confirmations are each within the spread, and cover it: every sixth of
// it holds some node's. Without a spread there is no delay.
func TestFirstConfirmDelaySpreadsNodes(t *testing.T) {
	const spread = time.Minute
	var buckets [6]int
	for i := range 60 {
		d := agent.FirstConfirmDelay(scaleNode(i), spread)
		if d < 0 || d >= spread {
			t.Fatalf("%s waits %s, outside [0, %s)", scaleNode(i), d, spread)
		}
		if d != agent.FirstConfirmDelay(scaleNode(i), spread) {
			t.Fatalf("%s waits a different time at each start", scaleNode(i))
		}
		buckets[d*6/spread]++
	}
	for i, n := range buckets {
		if n == 0 {
			t.Fatalf("no node of 60 waits %s to %s: %v", time.Duration(i)*spread/6, time.Duration(i+1)*spread/6, buckets)
		}
	}
	if d := agent.FirstConfirmDelay("node-a", 0); d != 0 {
		t.Fatalf("without a spread the first confirmation waits %s", d)
	}
}

// TestFirstConfirmationWaitsItsShareOfTheSpread (issue 37's edge: a cold
// start of a whole cluster): with Config.FirstConfirmSpread, an agent
// that starts with an unrecorded orphan takes no full list and records
// nothing until its FirstConfirmDelay has passed; then it confirms once
// and records the orphan.
func TestFirstConfirmationWaitsItsShareOfTheSpread(t *testing.T) {
	const spread = 10 * time.Second
	node := ""
	for i := 0; node == ""; i++ {
		if d := agent.FirstConfirmDelay(fmt.Sprintf("node-%d", i), spread); d >= 5*time.Second && d < 7*time.Second {
			node = fmt.Sprintf("node-%d", i)
		}
	}
	delay := agent.FirstConfirmDelay(node, spread)
	e := newEnv(t)
	d := e.addNode(node, "disk-1")
	e.owned(d, dataName("vol-ok"))
	dir := dataName("vol-lost")
	e.orphanDir(d, dir)
	start := time.Now()
	_, tl, _ := e.runTallied(node, func(c *agent.Config) { c.FirstConfirmSpread = spread })
	for time.Since(start) < delay-time.Second {
		if n := tl.snapshot()[tFullLists]; n != 0 {
			t.Fatalf("a full list %s after the start, before the node's delay of %s", time.Since(start), delay)
		}
		if got := len(e.nodeOrphans(node)); got != 0 {
			t.Fatalf("an Orphan recorded %s after the start, before the node's delay of %s", time.Since(start), delay)
		}
		time.Sleep(100 * time.Millisecond) // watching for a list too early, until the delay
	}
	e.waitOrphans(node, longhornName(d, dir))
	if took := time.Since(start); took < delay {
		t.Fatalf("the Orphan was recorded %s after the start, before the node's delay of %s", took, delay)
	}
	if n := tl.snapshot()[tFullLists]; n != 1 {
		t.Fatalf("%d full lists, want the one that confirmed the orphan", n)
	}
}
