package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// nineNodes serves fake-scylla's nine-nodes scenario as every node: one
// fake API per node, each seeing the cluster as itself, behind a recorder
// that watches when each node cleans. It returns the recorder and the
// -node-api flags.
func nineNodes(t *testing.T) (*cleanRecorder, []string) {
	t.Helper()
	cluster := tokenringtest.RackedCluster(9)
	rec := &cleanRecorder{shares: sharedRanges(cluster), cleaning: map[string]bool{}, apis: map[string]string{}, fakes: map[string]*tokenringtest.Server{}}
	var args []string
	for _, n := range cluster.Nodes {
		view := cluster.Clone()
		view.Local = n.Endpoint
		fake := tokenringtest.NewServer(view, tokenringtest.ServerOptions{})
		t.Cleanup(fake.Close)
		target, _ := url.Parse(fake.URL)
		proxy := httputil.NewSingleHostReverseProxy(target)
		ep := n.Endpoint
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/compaction_manager/stop_compaction" {
				rec.begin(ep)
			}
			proxy.ServeHTTP(w, r)
			if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/storage_service/keyspace_cleanup/") {
				rec.end(ep)
			}
		}))
		t.Cleanup(front.Close)
		rec.apis[ep], rec.fakes[ep] = front.URL, fake
		args = append(args, "-node-api", ep+"="+front.URL)
	}
	return rec, args
}

// cleanRecorder notes which nodes clean at each moment (from the stop of
// running cleanups to the end of the keyspace cleanup: shop is the only
// keyspace) and every start beside a node that shares a range.
type cleanRecorder struct {
	shares map[[2]string]bool
	apis   map[string]string
	fakes  map[string]*tokenringtest.Server

	mu         sync.Mutex
	cleaning   map[string]bool
	violations []string
	order      []string // "+ep" at each begin, "-ep" at each end
}

func (r *cleanRecorder) begin(ep string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for other := range r.cleaning {
		if r.shares[[2]string{ep, other}] {
			r.violations = append(r.violations, ep+" started beside "+other)
		}
	}
	r.cleaning[ep] = true
	r.order = append(r.order, "+"+ep)
	// Hold each cleanup a little, so that nodes of one wave overlap.
	r.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	r.mu.Lock()
}

func (r *cleanRecorder) end(ep string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cleaning, ep)
	r.order = append(r.order, "-"+ep)
}

// sharedRanges is the naive reference for shop at
// NetworkTopologyStrategy dc1=3 over three racks: the range ending at a
// token is replicated by the first node of each rack met walking
// clockwise from that token.
func sharedRanges(c tokenringtest.Cluster) map[[2]string]bool {
	type owned struct {
		tok        int64
		node, rack string
	}
	var ring []owned
	for _, n := range c.Nodes {
		for _, s := range n.Tokens {
			v, _ := strconv.ParseInt(s, 10, 64)
			ring = append(ring, owned{v, n.Endpoint, n.Rack})
		}
	}
	sort.Slice(ring, func(i, j int) bool { return ring[i].tok < ring[j].tok })
	shares := map[[2]string]bool{}
	for i := range ring {
		racks := map[string]string{}
		for k := 0; k < len(ring) && len(racks) < 3; k++ {
			o := ring[(i+k)%len(ring)]
			if _, seen := racks[o.rack]; !seen {
				racks[o.rack] = o.node
			}
		}
		for _, a := range racks {
			for _, b := range racks {
				if a != b {
					shares[[2]string{a, b}] = true
				}
			}
		}
	}
	return shares
}

func runTool(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := runCommand(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

var shopRF3 = []string{"-keyspace", "shop=NetworkTopologyStrategy:dc1=3"}

// TestPlanJSONOnNineNodes: the plan of the nine-node scenario is one wave
// per rack, and no wave holds two nodes that share a range by the naive
// reference, while cleaning all nine at once would.
func TestPlanJSONOnNineNodes(t *testing.T) {
	rec, _ := nineNodes(t)
	if len(rec.shares) == 0 {
		t.Fatal("the reference sees no shared range: the scenario proves nothing")
	}
	code, stdout, stderr := runTool(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-json"}, shopRF3...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `{"waves":[["10.0.0.1","10.0.0.4","10.0.0.7"],["10.0.0.2","10.0.0.5","10.0.0.8"],["10.0.0.3","10.0.0.6","10.0.0.9"]]}` + "\n"
	if stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	var plan planJSON
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatal(err)
	}
	for i, wave := range plan.Waves {
		for _, a := range wave {
			for _, b := range wave {
				if rec.shares[[2]string{a, b}] {
					t.Errorf("wave %d: %s and %s share a range", i+1, a, b)
				}
			}
		}
	}

	for _, tc := range []struct {
		flags []string
		waves int
	}{
		{[]string{"-max-per-dc", "2"}, 6},
		{[]string{"-max-per-dc", "1"}, 9},
		{[]string{"-rack-at-a-time=false"}, 3}, // racks share ranges: no faster
	} {
		code, stdout, stderr := runTool(append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-json"}, tc.flags...), shopRF3...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.flags, code, stderr)
		}
		var p planJSON
		if err := json.Unmarshal([]byte(stdout), &p); err != nil || len(p.Waves) != tc.waves {
			t.Fatalf("%v: %s (%v), want %d waves", tc.flags, stdout, err, tc.waves)
		}
		var all []string
		for _, w := range p.Waves {
			all = append(all, w...)
		}
		slices.Sort(all)
		if len(all) != 9 || slices.Compact(all)[8] != "10.0.0.9" {
			t.Fatalf("%v: waves cover %v", tc.flags, all)
		}
	}
}

// TestPlanRunCleanupFollowsTheWaves cleans the nine nodes through their
// own APIs: each is cleaned once, wave after wave, never beside a node
// that shares a range.
func TestPlanRunCleanupFollowsTheWaves(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup"}, shopRF3...), nodeAPIs...)

	code, stdout, stderr := runTool(args...)
	if code != 3 || !strings.Contains(stdout, "dry run: -run-cleanup would clean 9 nodes") || !strings.Contains(stderr, "add -yes") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for ep, fake := range rec.fakes {
		if fake.Node().StopCalls() != 0 || len(fake.Node().Cleaned()) != 0 {
			t.Fatalf("the dry run touched %s", ep)
		}
	}

	code, stdout, stderr = runTool(append(args, "-yes")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"wave 1: 10.0.0.1, 10.0.0.4, 10.0.0.7 (dc1/r1)",
		"wave 3: cleaning 10.0.0.3, 10.0.0.6, 10.0.0.9 ...",
		"  10.0.0.9: cleaned [shop]",
		"cleaned 9 nodes in 3 waves",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if len(rec.violations) > 0 {
		t.Fatalf("replicas of one range cleaned together: %v", rec.violations)
	}
	for ep, fake := range rec.fakes {
		if got := fake.Node().Cleaned(); !slices.Equal(got, []string{"shop"}) {
			t.Errorf("%s cleaned %v", ep, got)
		}
	}
	// Waves follow each other: every node of a wave ends before the next
	// wave's first start.
	waveOf := map[string]int{}
	for i, w := range [][]string{{"10.0.0.1", "10.0.0.4", "10.0.0.7"}, {"10.0.0.2", "10.0.0.5", "10.0.0.8"}, {"10.0.0.3", "10.0.0.6", "10.0.0.9"}} {
		for _, ep := range w {
			waveOf[ep] = i
		}
	}
	ended := map[int]int{}
	for _, ev := range rec.order {
		ep := ev[1:]
		if ev[0] == '-' {
			ended[waveOf[ep]]++
			continue
		}
		if w := waveOf[ep]; w > 0 && ended[w-1] < 3 {
			t.Fatalf("%s (wave %d) started before wave %d ended: %v", ep, w+1, w, rec.order)
		}
	}
}

// TestPlanStopsAfterAFailedWave: a node that fails stops the plan after
// its wave; the later waves are not started.
func TestPlanStopsAfterAFailedWave(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	rec.fakes["10.0.0.4"].Override(http.MethodPost, "/storage_service/keyspace_cleanup/shop", http.StatusInternalServerError, "disk full")
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes"}, shopRF3...), nodeAPIs...)
	code, stdout, stderr := runTool(args...)
	if code != 1 || !strings.Contains(stdout, "10.0.0.4: failed") || !strings.Contains(stderr, "wave 1 failed; later waves not started") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, ep := range []string{"10.0.0.2", "10.0.0.3", "10.0.0.5", "10.0.0.6", "10.0.0.8", "10.0.0.9"} {
		if n := rec.fakes[ep].Node().StopCalls(); n != 0 {
			t.Errorf("%s of a later wave was started", ep)
		}
	}
}

func TestPlanFlags(t *testing.T) {
	rec, _ := nineNodes(t)
	api := rec.apis["10.0.0.1"]
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h lists the plan flags", Args: []string{"-h"}, Code: 0, Stdout: []string{"-plan", "-json", "-max-per-dc", "-rack-at-a-time", "-node-api"}},
		{Name: "-json without -plan", Args: []string{"-api", api, "-json"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "-max-per-dc without -plan", Args: []string{"-api", api, "-max-per-dc", "2"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "-rack-at-a-time=false without -plan", Args: []string{"-api", api, "-rack-at-a-time=false"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "negative -max-per-dc", Args: []string{"-api", api, "-plan", "-max-per-dc", "-1"}, Code: 2, Stderr: []string{"-max-per-dc -1"}},
		{Name: "-json with -run-cleanup", Args: []string{"-api", api, "-plan", "-json", "-run-cleanup"}, Code: 2, Stderr: []string{"-json prints the plan only"}},
		{Name: "-plan with -save", Args: []string{"-api", api, "-plan", "-save", "x.json", "-keyspace", "shop=SimpleStrategy:1"}, Code: 2, Stderr: []string{"-plan and -save conflict"}},
		{Name: "bad -node-api", Args: []string{"-api", api, "-plan", "-node-api", "10.0.0.2"}, Code: 2, Stderr: []string{"ENDPOINT=URL"}},
		{Name: "-node-api without a scheme", Args: []string{"-api", api, "-plan", "-node-api", "10.0.0.2=10.0.0.2:10000"}, Code: 2, Stderr: []string{"10.0.0.2"}},
		{Name: "-plan without replication", Args: []string{"-api", api, "-plan"}, Code: 1, Stderr: []string{"-plan needs the replication"}},
		{Name: "-plan with a datacenter typo", Args: []string{"-api", api, "-plan", "-keyspace", "shop=NetworkTopologyStrategy:dc9=3"}, Code: 1, Stderr: []string{"dc9"}},
		{Name: "human plan", Args: append([]string{"-api", api, "-plan"}, shopRF3...), Code: 0, Stdout: []string{
			"cleanup plan: 9 nodes in 3 waves (at most 6 at once per datacenter, one rack of a datacenter at a time, never two replicas of one range)",
			"wave 2: 10.0.0.2, 10.0.0.5, 10.0.0.8 (dc1/r2)"}},
	})
	for ep, fake := range rec.fakes {
		if fake.Node().StopCalls() != 0 {
			t.Errorf("a flag test touched %s", ep)
		}
	}
}

// TestPlanWithBaselineOnlyCleansWhoLostRanges: after a scale-out from six
// to seven nodes, the plan holds only the nodes that lost ranges.
func TestPlanWithBaselineOnlyCleansWhoLostRanges(t *testing.T) {
	six := tokenringtest.RackedCluster(6)
	srv := tokenringtest.NewServer(six, tokenringtest.ServerOptions{})
	defer srv.Close()
	file := t.TempDir() + "/before.json"
	if code, _, stderr := runTool(append([]string{"-api", srv.URL, "-save", file}, shopRF3...)...); code != 0 {
		t.Fatal(stderr)
	}
	srv.Node().SetCluster(tokenringtest.RackedCluster(7))
	code, stdout, stderr := runTool("-api", srv.URL, "-baseline", file, "-plan", "-json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var p planJSON
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("%s: %v", stdout, err)
	}
	var planned []string
	for _, w := range p.Waves {
		planned = append(planned, w...)
	}
	slices.Sort(planned)
	if slices.Contains(planned, "10.0.0.7") || len(planned) == 0 || len(planned) >= 7 {
		t.Fatalf("planned %v: want some of the six older nodes, never the newcomer", planned)
	}
}
