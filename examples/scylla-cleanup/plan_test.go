package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
	"github.com/caretaker-storage/caretaker/tokenring"
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
			if rec.intercept != nil && rec.intercept(ep, w, r) {
				return
			}
			if r.Method == http.MethodPost && r.URL.Path == "/compaction_manager/stop_compaction" {
				rec.stop(ep)
			}
			if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/storage_service/keyspace_cleanup/") {
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

// cleanRecorder notes which nodes clean at each moment (during the
// keyspace cleanup: shop is the only keyspace; a stop of running cleanups
// ends it too) and every start beside a node that shares a range.
type cleanRecorder struct {
	shares map[[2]string]bool
	apis   map[string]string
	fakes  map[string]*tokenringtest.Server
	// intercept, if set before the tool runs, sees every request first;
	// true means it answered.
	intercept func(ep string, w http.ResponseWriter, r *http.Request) bool

	mu         sync.Mutex
	cleaning   map[string]bool
	violations []string
	order      []string // "+ep" at each stop (an attempt's first call, or the stop after a failure), "-ep" at each end
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
	// Hold each cleanup a little, so that nodes of one wave overlap.
	r.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	r.mu.Lock()
}

func (r *cleanRecorder) stop(ep string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cleaning, ep)
	r.order = append(r.order, "+"+ep)
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

// TestPlanRunCleanupThroughTheDriver cleans the nine nodes through their
// own APIs with -state: each is cleaned once, never beside a node that
// shares a range; the state file records all nine done, and the same
// command again re-runs nothing.
func TestPlanRunCleanupThroughTheDriver(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	state := filepath.Join(t.TempDir(), "cleanup.json")
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-state", state}, shopRF3...), nodeAPIs...)

	code, stdout, stderr := runTool(args...)
	if code != 3 || !strings.Contains(stdout, "dry run: -run-cleanup would clean 9 nodes") || !strings.Contains(stderr, "add -yes") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for ep, fake := range rec.fakes {
		if fake.Node().StopCalls() != 0 || len(fake.Node().Cleaned()) != 0 {
			t.Fatalf("the dry run touched %s", ep)
		}
	}
	if _, err := os.Stat(state); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dry run wrote the state file: %v", err)
	}

	code, stdout, stderr = runTool(append(args, "-yes")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"wave 1: 10.0.0.1, 10.0.0.4, 10.0.0.7 (dc1/r1)", // the plan, as before
		"cleaning 9 nodes, each as soon as the rules above allow ...",
		"  10.0.0.9: cleaning ...",
		"  10.0.0.9: cleaned [shop]",
		"cleaned 9 nodes\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if len(rec.violations) > 0 {
		t.Fatalf("replicas of one range cleaned together: %v", rec.violations)
	}
	stops := map[string]int{}
	for ep, fake := range rec.fakes {
		if got := fake.Node().Cleaned(); !slices.Equal(got, []string{"shop"}) {
			t.Errorf("%s cleaned %v", ep, got)
		}
		stops[ep] = fake.Node().StopCalls()
	}
	recorded := readState(t, state)
	if len(recorded.Done) != 9 || len(recorded.Running) != 0 || recorded.TokenRingHash == "" {
		t.Fatalf("state file: %+v", recorded)
	}

	code, stdout, stderr = runTool(append(args, "-yes")...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"resuming from " + state + ": 9 nodes recorded done, 0 nodes recorded running", "cleaned 0 nodes (9 recorded done before this run)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("second run: stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, ": cleaning ...") {
		t.Errorf("second run started a cleanup:\n%s", stdout)
	}
	for ep, fake := range rec.fakes {
		if n := fake.Node().StopCalls(); n != stops[ep] || len(fake.Node().Cleaned()) != 1 {
			t.Errorf("second run touched %s: %d stop calls (was %d), cleaned %v", ep, n, stops[ep], fake.Node().Cleaned())
		}
	}
}

func readState(t *testing.T, path string) stateFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return st
}

// TestPlanRunCleanupResumes: a state file left by a run that stopped
// with rack r1 done and 10.0.0.2 cleaning. The new run leaves r1 alone,
// re-runs 10.0.0.2 before anything else, and cleans the rest.
func TestPlanRunCleanupResumes(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	state := filepath.Join(t.TempDir(), "cleanup.json")
	writeState(t, state, stateFile{TokenRingHash: ringHash(t, rec.apis["10.0.0.1"]), Keyspaces: shopRF3Replication,
		Done: []string{"10.0.0.1", "10.0.0.4", "10.0.0.7"}, Running: []string{"10.0.0.2"}})
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes", "-state", state}, shopRF3...), nodeAPIs...)
	code, stdout, stderr := runTool(args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "resuming from "+state+": 3 nodes recorded done, 1 node recorded running") ||
		!strings.Contains(stdout, "cleaned 6 nodes (3 recorded done before this run)") {
		t.Fatalf("stdout:\n%s", stdout)
	}
	if len(rec.violations) > 0 {
		t.Fatalf("replicas of one range cleaned together: %v", rec.violations)
	}
	// The node recorded running may still be cleaning from the run before:
	// it holds every node that shares a range with it until it is re-run
	// and ends. Which node of a wave the fakes hear first is goroutine
	// scheduling, and each attempt first re-checks the cluster (several
	// requests), so a node of the same wave may start and end first.
	end := slices.Index(rec.order, "-10.0.0.2")
	if slices.Index(rec.order, "+10.0.0.2") < 0 || end < 0 {
		t.Fatalf("the node recorded running was not re-run: %v", rec.order)
	}
	for _, ev := range rec.order[:end] {
		if ep, ok := strings.CutPrefix(ev, "+"); ok && ep != "10.0.0.2" && rec.shares[[2]string{ep, "10.0.0.2"}] {
			t.Fatalf("%s shares a range with the node recorded running and started before it ended: %v", ep, rec.order)
		}
	}
	for ep, fake := range rec.fakes {
		done := ep == "10.0.0.1" || ep == "10.0.0.4" || ep == "10.0.0.7"
		if cleaned := len(fake.Node().Cleaned()) > 0; cleaned == done {
			t.Errorf("%s: recorded done %v, cleaned %v", ep, done, fake.Node().Cleaned())
		}
	}
	if st := readState(t, state); len(st.Done) != 9 || len(st.Running) != 0 {
		t.Fatalf("state file: %+v", st)
	}
}

// TestPlanRunCleanupRefusesAnotherRingsState: a state file recorded on
// another ring is refused (exit 4) before anything is cleaned: the nodes
// it records done may have lost ranges since.
func TestPlanRunCleanupRefusesAnotherRingsState(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	state := filepath.Join(t.TempDir(), "cleanup.json")
	writeState(t, state, stateFile{TokenRingHash: "another", Done: []string{"10.0.0.1"}})
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes", "-state", state}, shopRF3...), nodeAPIs...)
	code, stdout, stderr := runTool(args...)
	if code != 4 || !strings.Contains(stderr, "recorded on another token ring") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for ep, fake := range rec.fakes {
		if fake.Node().StopCalls() != 0 {
			t.Errorf("%s was touched", ep)
		}
	}
}

// TestPlanRunCleanupRefusesAnotherReplicationsState: a state recorded
// while shop had replication factor 4, before an ALTER KEYSPACE lowered it
// to the 3 the cluster places now. The ring, and so its hash, is the
// same, but nodes recorded done under RF 4 may have lost ranges since:
// the state is refused (exit 4) before anything is cleaned, and so is a
// state file that records no replication at all.
func TestPlanRunCleanupRefusesAnotherReplicationsState(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	hash := ringHash(t, rec.apis["10.0.0.1"])
	for _, tc := range []struct {
		name string
		file stateFile
		says string
	}{
		{"RF decrease", stateFile{TokenRingHash: hash, Keyspaces: map[string]tokenring.Replication{
			"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 4}}}, Done: []string{"10.0.0.1", "10.0.0.4", "10.0.0.7"}},
			"keyspace shop was NetworkTopologyStrategy:dc1=4, now NetworkTopologyStrategy:dc1=3"},
		{"no replication recorded", stateFile{TokenRingHash: hash, Done: []string{"10.0.0.1"}}, "the file records no replication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "cleanup.json")
			writeState(t, state, tc.file)
			// The replication is read from the cluster: shop at dc1=3.
			args := append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes", "-state", state}, nodeAPIs...)
			code, stdout, stderr := runTool(args...)
			if code != 4 || !strings.Contains(stderr, "planned under another replication") || !strings.Contains(stderr, tc.says) {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			for ep, fake := range rec.fakes {
				if fake.Node().StopCalls() != 0 || len(fake.Node().Cleaned()) != 0 {
					t.Errorf("%s was touched", ep)
				}
			}
		})
	}
}

// shopRF3Replication is shopRF3 as the state file records it.
var shopRF3Replication = map[string]tokenring.Replication{
	"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3}},
}

func writeState(t *testing.T, path string, st stateFile) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func ringHash(t *testing.T, api string) string {
	t.Helper()
	c, err := tokenring.NewClient(api, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hash, _, err := tokenring.ReadTokenRingHash(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return hash
}

// TestPlanRunCleanupGivesUpAFailingNode: with -attempts 1 a node that
// fails is given up (exit 1), the others are cleaned, never beside a
// node sharing a range, and the state leaves it not done, so that a new
// run cleans it alone.
func TestPlanRunCleanupGivesUpAFailingNode(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	rec.fakes["10.0.0.4"].Override(http.MethodPost, "/storage_service/keyspace_cleanup/shop", http.StatusInternalServerError, "disk full")
	state := filepath.Join(t.TempDir(), "cleanup.json")
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes", "-attempts", "1", "-state", state}, shopRF3...), nodeAPIs...)
	code, stdout, stderr := runTool(args...)
	if code != 1 || !strings.Contains(stdout, "10.0.0.4: failed, given up after 1 attempt: ") ||
		!strings.Contains(stdout, "stopped: 8 nodes done (0 before this run), 1 node failed") || !strings.Contains(stderr, "node 10.0.0.4") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("the error is not one line:\n%s", stderr)
	}
	if len(rec.violations) > 0 {
		t.Fatalf("replicas of one range cleaned together: %v", rec.violations)
	}
	if st := readState(t, state); len(st.Done) != 8 || slices.Contains(st.Done, "10.0.0.4") || len(st.Running) != 0 {
		t.Fatalf("state file: %+v", st)
	}

	rec.fakes["10.0.0.4"].Override(http.MethodPost, "/storage_service/keyspace_cleanup/shop", 0, "")
	stops := map[string]int{}
	for ep, fake := range rec.fakes {
		stops[ep] = fake.Node().StopCalls()
	}
	code, stdout, stderr = runTool(args...)
	if code != 0 || !strings.Contains(stdout, "cleaned 1 node (8 recorded done before this run)") {
		t.Fatalf("second run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for ep, fake := range rec.fakes {
		if want := stops[ep] + map[bool]int{true: 1}[ep == "10.0.0.4"]; fake.Node().StopCalls() != want {
			t.Errorf("second run: %s has %d stop calls, want %d", ep, fake.Node().StopCalls(), want)
		}
	}
}

// TestPlanConflictScope: two datacenters of six nodes, shop at factor 3
// in each. By default (-conflicts cluster) a node shares ranges with
// nodes of the other datacenter and no wave mixes them; with -conflicts
// dc both datacenters clean in every wave, never two replicas of a range
// in one datacenter, in half the waves.
func TestPlanConflictScope(t *testing.T) {
	cluster := tokenringtest.RackedCluster(12)
	for i := range cluster.Nodes {
		if i >= 6 {
			cluster.Nodes[i].Datacenter = "dc2"
		}
	}
	cluster.Keyspaces[0].Replication.Datacenters = map[string]int{"dc1": 3, "dc2": 3}
	srv := tokenringtest.NewServer(cluster, tokenringtest.ServerOptions{})
	defer srv.Close()
	topo := tokenring.Topology{Ring: tokenring.Ring{Locations: map[string]tokenring.Location{}}, Keyspaces: map[string]tokenring.Replication{
		"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3, "dc2": 3}}}}
	for _, n := range cluster.Nodes {
		topo.Ring.Locations[n.Endpoint] = tokenring.Location{Datacenter: n.Datacenter, Rack: n.Rack}
		for _, s := range n.Tokens {
			tok, _ := tokenring.ParseToken(s)
			topo.Ring.Owners = append(topo.Ring.Owners, tokenring.TokenOwner{Token: tok, Endpoint: n.Endpoint})
		}
	}
	across, err := tokenring.NewScheduler(topo, tokenring.ScheduleLimits{})
	if err != nil {
		t.Fatal(err)
	}
	dcOf := func(ep string) string { return topo.Ring.Locations[ep].Datacenter }
	keyspace := []string{"-keyspace", "shop=NetworkTopologyStrategy:dc1=3,dc2=3"}
	plans := map[string]planJSON{}
	for _, scope := range []string{"", "cluster", "dc"} {
		args := append([]string{"-api", srv.URL, "-plan", "-json"}, keyspace...)
		if scope != "" {
			args = append(args, "-conflicts", scope)
		}
		code, stdout, stderr := runTool(args...)
		if code != 0 {
			t.Fatalf("-conflicts %q: exit %d: %s", scope, code, stderr)
		}
		var p planJSON
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatal(err)
		}
		var all []string
		for i, wave := range p.Waves {
			dcs := map[string]bool{}
			for _, a := range wave {
				dcs[dcOf(a)] = true
				for _, b := range wave {
					shared, _ := across.Conflicts(a, b)
					if shared && (scope != "dc" || dcOf(a) == dcOf(b)) {
						t.Errorf("-conflicts %q: wave %d: %s and %s share a range", scope, i+1, a, b)
					}
				}
			}
			if want := map[bool]int{true: 2, false: 1}[scope == "dc"]; len(dcs) != want {
				t.Errorf("-conflicts %q: wave %d %v spans %d datacenters, want %d", scope, i+1, wave, len(dcs), want)
			}
			all = append(all, wave...)
		}
		if len(all) != 12 {
			t.Errorf("-conflicts %q: waves cover %v", scope, all)
		}
		plans[scope] = p
	}
	if !slices.EqualFunc(plans[""].Waves, plans["cluster"].Waves, slices.Equal) {
		t.Errorf("the default is not -conflicts cluster: %v vs %v", plans[""].Waves, plans["cluster"].Waves)
	}
	if got, want := len(plans["dc"].Waves), len(plans["cluster"].Waves)/2; got != want {
		t.Errorf("-conflicts dc: %d waves, want %d (half of cluster's %d)", got, want, len(plans["cluster"].Waves))
	}
	code, stdout, _ := runTool(append([]string{"-api", srv.URL, "-plan", "-conflicts", "dc"}, keyspace...)...)
	if code != 0 || !strings.Contains(stdout, "never two replicas of one range in one datacenter)") {
		t.Errorf("human plan with -conflicts dc: exit %d\n%s", code, stdout)
	}
}

func TestPlanFlags(t *testing.T) {
	rec, _ := nineNodes(t)
	api := rec.apis["10.0.0.1"]
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h lists the plan flags", Args: []string{"-h"}, Code: 0, Stdout: []string{"-plan", "-json", "-max-per-dc", "-rack-at-a-time", "-node-api"}},
		{Name: "-h lists the run flags", Args: []string{"-h"}, Code: 0, Stdout: []string{"-conflicts", "-state", "-attempts"}},
		{Name: "-conflicts without -plan", Args: []string{"-api", api, "-conflicts", "dc"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "bad -conflicts", Args: []string{"-api", api, "-plan", "-conflicts", "rack"}, Code: 2, Stderr: []string{`-conflicts "rack"`, "cluster", "dc"}},
		{Name: "-state without -run-cleanup", Args: []string{"-api", api, "-plan", "-state", "x.json"}, Code: 2, Stderr: []string{"only change -plan -run-cleanup"}},
		{Name: "-attempts without -plan", Args: []string{"-api", api, "-run-cleanup", "-attempts", "2"}, Code: 2, Stderr: []string{"only change -plan -run-cleanup"}},
		{Name: "negative -attempts", Args: []string{"-api", api, "-plan", "-run-cleanup", "-attempts", "-1"}, Code: 2, Stderr: []string{"-attempts -1"}},
		{Name: "-json without -plan", Args: []string{"-api", api, "-json"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "-max-per-dc without -plan", Args: []string{"-api", api, "-max-per-dc", "2"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "-rack-at-a-time=false without -plan", Args: []string{"-api", api, "-rack-at-a-time=false"}, Code: 2, Stderr: []string{"only change -plan"}},
		{Name: "negative -max-per-dc", Args: []string{"-api", api, "-plan", "-max-per-dc", "-1"}, Code: 2, Stderr: []string{"-max-per-dc -1"}},
		{Name: "-json with -run-cleanup", Args: []string{"-api", api, "-plan", "-json", "-run-cleanup"}, Code: 2, Stderr: []string{"-json prints the plan only"}},
		{Name: "-plan with -save", Args: []string{"-api", api, "-plan", "-save", "x.json", "-keyspace", "shop=SimpleStrategy:1"}, Code: 2, Stderr: []string{"-plan and -save conflict"}},
		{Name: "bad -node-api", Args: []string{"-api", api, "-plan", "-node-api", "10.0.0.2"}, Code: 2, Stderr: []string{"ENDPOINT=URL"}},
		{Name: "-node-api without a scheme", Args: []string{"-api", api, "-plan", "-node-api", "10.0.0.2=10.0.0.2:10000"}, Code: 2, Stderr: []string{"10.0.0.2"}},
		{Name: "-plan reads the replication from the cluster", Args: []string{"-api", api, "-plan"}, Code: 0, Stdout: []string{
			"cleanup plan: 9 nodes in 3 waves", "wave 1: 10.0.0.1, 10.0.0.4, 10.0.0.7 (dc1/r1)"}},
		{Name: "-keyspace that disagrees with the cluster", Args: []string{"-api", api, "-plan", "-keyspace", "shop=SimpleStrategy:3"}, Code: 1,
			Stderr: []string{"-keyspace shop disagrees with the cluster", "SimpleStrategy:3 places the range ending at", "the cluster on"}},
		{Name: "-keyspace with a lower factor than the cluster's", Args: []string{"-api", api, "-plan", "-keyspace", "shop=NetworkTopologyStrategy:dc1=2"}, Code: 1,
			Stderr: []string{"-keyspace shop disagrees with the cluster"}},
		{Name: "-keyspace the cluster does not have", Args: []string{"-api", api, "-plan", "-keyspace", "shoes=SimpleStrategy:1"}, Code: 1,
			Stderr: []string{"-keyspace shoes: the cluster has no such keyspace", "it has shop"}},
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

// TestPlanWithBaselineCatchesAReplicationDecrease: the ring does not change,
// shop goes from factor 3 to 2 in dc1; without -keyspace the plan reads the
// new replication from the cluster and cleans the nodes that lost replicas.
func TestPlanWithBaselineCatchesAReplicationDecrease(t *testing.T) {
	nine := tokenringtest.RackedCluster(9)
	srv := tokenringtest.NewServer(nine, tokenringtest.ServerOptions{})
	defer srv.Close()
	file := t.TempDir() + "/before.json"
	if code, _, stderr := runTool(append([]string{"-api", srv.URL, "-save", file}, shopRF3...)...); code != 0 {
		t.Fatal(stderr)
	}
	srv.Node().Update(func(c *tokenringtest.Cluster) { c.Keyspaces[0].Replication.Datacenters["dc1"] = 2 })
	code, stdout, stderr := runTool("-api", srv.URL, "-baseline", file, "-plan", "-json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var p planJSON
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("%s: %v", stdout, err)
	}
	planned := 0
	for _, w := range p.Waves {
		planned += len(w)
	}
	if planned == 0 {
		t.Fatalf("planned nothing after a replication decrease: %s", stdout)
	}
}

// TestPlanRunCleanupFailsFastOnAnUnreachableNode: a node whose API does
// not answer (here a closed port on 127.0.0.1) fails the run before any
// cleanup starts, naming the node, the address tried and -node-api,
// instead of retrying it with backoff for minutes.
func TestPlanRunCleanupFailsFastOnAnUnreachableNode(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + closed.Addr().String()
	closed.Close()
	for i, a := range nodeAPIs {
		if strings.HasPrefix(a, "10.0.0.5=") {
			nodeAPIs[i] = "10.0.0.5=" + dead
		}
	}
	args := append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes"}, nodeAPIs...)
	start := time.Now()
	code, stdout, stderr := runTool(args...)
	if code != 1 || !strings.Contains(stderr, "cannot reach the REST API of 1 node: 10.0.0.5 at "+dead) ||
		!strings.Contains(stderr, "-node-api ENDPOINT=URL") || !strings.Contains(stderr, "nothing was cleaned") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if took := time.Since(start); took > 2*reachTimeout {
		t.Errorf("took %v to fail", took)
	}
	for ep, fake := range rec.fakes {
		if len(fake.Node().Cleaned()) != 0 || fake.Node().StopCalls() != 0 {
			t.Errorf("%s was touched", ep)
		}
	}
}

// TestReachNodesAsksEveryNodeAtOnce holds the preflight to asking the nodes
// concurrently: each fake node answers only once every node has asked, so
// asking one after another would leave the first waiting for the others
// until reachTimeout and report it unreachable.
func TestReachNodesAsksEveryNodeAtOnce(t *testing.T) {
	const n = 12
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	c := config{nodeAPIs: nodeAPIFlags{}}
	var needed []string
	for i := range n {
		ep := fmt.Sprintf("10.0.0.%d", i+1)
		var once sync.Once
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(arrived.Done)
			select {
			case <-all:
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "%q", "host-"+ep)
		}))
		t.Cleanup(srv.Close)
		c.nodeAPIs[ep] = srv.URL
		needed = append(needed, ep)
	}
	if err := reachNodes(c, tokenring.ClientOptions{}, needed, ""); err != nil {
		t.Fatalf("reachNodes: %v", err)
	}
}

// TestPlanRunCleanupHoldsWhileANodeIsDown: 10.0.0.5 answers the
// preflight, then is down (its API answers 503) for its next three
// host-ID requests, the checks made right before cleanups. No cleanup
// request reaches any node until it answers again; then the run goes on
// and cleans all nine.
func TestPlanRunCleanupHoldsWhileANodeIsDown(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	const downEp, downChecks = "10.0.0.5", 3
	var mu sync.Mutex
	asked, down := 0, false
	var early []string
	rec.intercept = func(ep string, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if ep == downEp && r.URL.Path == "/storage_service/hostid/local" {
			asked++
			// First the preflight; then down for downChecks requests;
			// then up for good.
			down = asked > 1 && asked <= 1+downChecks
		}
		if strings.HasPrefix(r.URL.Path, "/storage_service/keyspace_cleanup/") && (down || asked <= 1+downChecks) {
			early = append(early, ep)
		}
		if ep == downEp && down {
			http.Error(w, `{"message": "node down", "code": 503}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	out, err := runPlanFast(t, rec, nodeAPIs, 20, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Errorf("cleanup requests reached %v while %s was down (or before it answered again)", early, downEp)
	}
	if asked <= 1+downChecks {
		t.Fatalf("%s was asked %d times: the run never checked it while down", downEp, asked)
	}
	for _, want := range []string{"not started, the cluster is not stable: ", "10.0.0.5 (", "cleaned 9 nodes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for ep, fake := range rec.fakes {
		if got := fake.Node().Cleaned(); !slices.Equal(got, []string{"shop"}) {
			t.Errorf("%s cleaned %v", ep, got)
		}
	}
	if len(rec.violations) > 0 {
		t.Fatalf("replicas of one range cleaned together: %v", rec.violations)
	}
}

// TestPlanRunCleanupRefusesAfterTheRingChanged: a node joins (its tokens
// enter the ring) after the plan was made: the plan is for the old ring,
// so no node starts; with -attempts 2 every node is given up, and the
// message says to plan again.
func TestPlanRunCleanupRefusesAfterTheRingChanged(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	var cleanups []string
	var mu sync.Mutex
	asked := 0
	rec.intercept = func(ep string, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/storage_service/hostid/local" {
			// The first request reads -api's ring hash; the next nine
			// reach the nodes (the preflight) after the plan. The ring
			// changes with the last of them.
			if asked++; asked == 10 {
				rec.fakes["10.0.0.1"].Node().Update(func(c *tokenringtest.Cluster) {
					c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: "10.0.0.10", HostID: "h10", Datacenter: "dc1", Rack: "r1", Tokens: []string{"12345"}})
				})
			}
		}
		if strings.HasPrefix(r.URL.Path, "/storage_service/keyspace_cleanup/") {
			cleanups = append(cleanups, ep)
		}
		return false
	}
	out, err := runPlanFast(t, rec, nodeAPIs, 2, time.Millisecond)
	if !errors.Is(err, tokenring.ErrPreconditionUnmet) {
		t.Fatalf("run: %v, want ErrPreconditionUnmet\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cleanups) > 0 {
		t.Errorf("cleanup requests reached %v after the ring changed", cleanups)
	}
	for _, want := range []string{"the token ring changed since the plan (a node joined, left or moved): plan again", "stopped: 0 nodes done, 9 nodes failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanRunCleanupHoldsWhileANodeJoins: a node starts joining (-api
// lists it in /storage_service/nodes/joining; its tokens are not in the
// ring yet) after the plan was made: no node starts, and with -attempts 2
// each is given up, saying which node joins.
func TestPlanRunCleanupHoldsWhileANodeJoins(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	var cleanups []string
	var mu sync.Mutex
	asked := 0
	rec.intercept = func(ep string, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/storage_service/hostid/local" {
			// As in TestPlanRunCleanupRefusesAfterTheRingChanged: the
			// tenth request is the preflight's last.
			if asked++; asked == 10 {
				rec.fakes["10.0.0.1"].Node().Update(func(c *tokenringtest.Cluster) {
					c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: "10.0.0.10", HostID: "h10", Datacenter: "dc1", Rack: "r1"})
				})
			}
		}
		if strings.HasPrefix(r.URL.Path, "/storage_service/keyspace_cleanup/") {
			cleanups = append(cleanups, ep)
		}
		return false
	}
	out, err := runPlanFast(t, rec, nodeAPIs, 2, time.Millisecond)
	if !errors.Is(err, tokenring.ErrPreconditionUnmet) {
		t.Fatalf("run: %v, want ErrPreconditionUnmet\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cleanups) > 0 {
		t.Errorf("cleanup requests reached %v while 10.0.0.10 was joining", cleanups)
	}
	for _, want := range []string{"the ring is changing: joining 10.0.0.10", "stopped: 0 nodes done, 9 nodes failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanRunCleanupHoldsWhileGossipSeesANodeDown: after the preflight,
// -api's gossip lists 10.0.0.5 down (its API still answers) for three
// reads: no cleanup request reaches any node meanwhile; then it is up
// and the run cleans all nine.
func TestPlanRunCleanupHoldsWhileGossipSeesANodeDown(t *testing.T) {
	rec, nodeAPIs := nineNodes(t)
	const downReads = 3
	var mu sync.Mutex
	asked, reads := 0, 0
	var early []string
	setDown := func(down bool) {
		rec.fakes["10.0.0.1"].Node().Update(func(c *tokenringtest.Cluster) {
			for i := range c.Nodes {
				if c.Nodes[i].Endpoint == "10.0.0.5" {
					c.Nodes[i].Down = down
				}
			}
		})
	}
	rec.intercept = func(ep string, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/storage_service/hostid/local":
			if asked++; asked == 10 {
				setDown(true) // after the preflight's last request
			}
		case ep == "10.0.0.1" && r.URL.Path == "/gossiper/endpoint/down":
			if reads++; reads > downReads {
				setDown(false)
			}
		case strings.HasPrefix(r.URL.Path, "/storage_service/keyspace_cleanup/") && reads <= downReads:
			early = append(early, ep)
		}
		return false
	}
	out, err := runPlanFast(t, rec, nodeAPIs, 20, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Errorf("cleanup requests reached %v while gossip saw 10.0.0.5 down", early)
	}
	for _, want := range []string{"10.0.0.5 (down for gossip)", "cleaned 9 nodes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for ep, fake := range rec.fakes {
		if got := fake.Node().Cleaned(); !slices.Equal(got, []string{"shop"}) {
			t.Errorf("%s cleaned %v", ep, got)
		}
	}
}

// runPlanFast runs -plan -run-cleanup -yes over the nine nodes with the
// given -attempts and a backoff of a millisecond up to maxBackoff, so that
// a node held by the cluster's state is tried again at once. It returns
// what the run printed and its error.
func runPlanFast(t *testing.T, rec *cleanRecorder, nodeAPIs []string, attempts int, maxBackoff time.Duration) (string, error) {
	t.Helper()
	args := append(append([]string{"-api", rec.apis["10.0.0.1"], "-plan", "-run-cleanup", "-yes", "-attempts", strconv.Itoa(attempts)}, shopRF3...), nodeAPIs...)
	c, err := parseArgs(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.backoff = tokenring.CleanupBackoff{Initial: time.Millisecond, Max: maxBackoff}
	var out bytes.Buffer
	err = run(&out, c)
	return out.String(), err
}
