package tokenring_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

var nts3 = tokenring.Replication{Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3}}

func racked(t *testing.T, n int) (*tokenringtest.Server, *tokenring.Client) {
	t.Helper()
	srv := tokenringtest.NewServer(tokenringtest.RackedCluster(n), tokenringtest.ServerOptions{})
	t.Cleanup(srv.Close)
	c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// The replication comes from the cluster: no -keyspace needed to plan.
func TestReadTopologyInfersReplicationFromDescribeRing(t *testing.T) {
	srv, c := racked(t, 9)
	ctx := context.Background()
	topo, err := tokenring.ReadTopology(ctx, c, c, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Keyspaces; !reflect.DeepEqual(got, map[string]tokenring.Replication{"shop": nts3}) {
		t.Fatalf("keyspaces = %v, want shop at NetworkTopologyStrategy dc1=3 (system is local)", got)
	}
	if loc := topo.Ring.Locations["10.0.0.5"]; loc != (tokenring.Location{Datacenter: "dc1", Rack: "r2"}) {
		t.Fatalf("location of 10.0.0.5 = %v", loc)
	}
	sched, err := tokenring.NewScheduler(topo, tokenring.ScheduleLimits{})
	if err != nil {
		t.Fatal(err)
	}
	waves, err := sched.Waves([]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.9"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"10.0.0.1", "10.0.0.4", "10.0.0.7"}, {"10.0.0.2", "10.0.0.5", "10.0.0.8"}, {"10.0.0.3", "10.0.0.6", "10.0.0.9"}}
	if !reflect.DeepEqual(waves, want) {
		t.Fatalf("waves = %v, want one rack per wave %v", waves, want)
	}
	var described int
	for _, call := range srv.Calls() {
		if call.Path == "/storage_service/describe_ring/shop" {
			described++
		}
		if call.Path == "/storage_service/describe_ring/system" {
			t.Fatal("described the local keyspace system")
		}
	}
	if described != 1 {
		t.Fatalf("describe_ring/shop called %d times, want 1", described)
	}
}

// A -keyspace override that disagrees with the cluster is refused; one that
// agrees passes.
func TestCheckReplicationAgainstTheCluster(t *testing.T) {
	node := tokenringtest.NewMemNode(tokenringtest.RackedCluster(9))
	ctx := context.Background()
	ring, err := tokenring.ReadRing(ctx, node, node)
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := node.DescribeRing(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if err := tokenring.CheckReplication(ring, nts3, ranges); err != nil {
		t.Fatalf("the cluster's own replication: %v", err)
	}
	for _, wrong := range []tokenring.Replication{
		{Strategy: tokenring.SimpleStrategy, ReplicationFactor: 3}, // ignores racks
		{Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 2}},
		{Strategy: tokenring.SimpleStrategy, ReplicationFactor: 1},
	} {
		err := tokenring.CheckReplication(ring, wrong, ranges)
		if !errors.Is(err, tokenring.ErrReplicationMismatch) {
			t.Errorf("%v: err = %v, want ErrReplicationMismatch", wrong, err)
		}
	}
}

// A placement caretaker cannot reproduce is an error, never a guess.
func TestInferReplicationRefusesAnUnknownPlacement(t *testing.T) {
	node := tokenringtest.NewMemNode(tokenringtest.RackedCluster(9))
	ctx := context.Background()
	ring, _ := tokenring.ReadRing(ctx, node, node)
	ranges, _ := node.DescribeRing(ctx, "shop")
	// Move one replica of one range to another node of the same rack: the
	// counts stay the same, the placement is no strategy's.
	r := &ranges[5]
	for i, d := range r.EndpointDetails {
		for _, other := range []string{"10.0.0.1", "10.0.0.4", "10.0.0.7"} {
			if d.Rack == "r1" && d.Host != other && !slices.Contains(r.Endpoints, other) {
				r.Endpoints[i], r.RPCEndpoints[i], r.EndpointDetails[i].Host = other, other, other
				goto moved
			}
		}
	}
	t.Fatal("no r1 replica to move")
moved:
	_, err := tokenring.InferReplication(ring, ranges)
	if !errors.Is(err, tokenring.ErrReplicationMismatch) {
		t.Fatalf("err = %v, want ErrReplicationMismatch", err)
	}
}

// The property: on random rings, the ring walk of Analyze and the Scheduler
// places every range exactly where the fake's describe_ring (an independent
// walk written as ScyllaDB documents it) does, ReadTopology finds a
// replication that does so, and the Scheduler's conflicts are exactly the
// pairs of nodes that describe_ring shows sharing a range.
func TestRingWalkAgreesWithDescribeRing(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 1))
	ctx := context.Background()
	for iter := range 300 {
		c, repl := randomCluster(r)
		node := tokenringtest.NewMemNode(c)
		ring, err := tokenring.ReadRing(ctx, node, node)
		if err != nil {
			t.Fatal(err)
		}
		ranges, err := node.DescribeRing(ctx, "ks")
		if err != nil {
			t.Fatal(err)
		}
		if err := tokenring.CheckReplication(ring, repl, ranges); err != nil {
			t.Fatalf("iteration %d, %v on %d nodes: %v", iter, repl, len(c.Nodes), err)
		}
		topo, err := tokenring.ReadTopology(ctx, node, node, node)
		if err != nil {
			t.Fatalf("iteration %d, %v: ReadTopology: %v", iter, repl, err)
		}
		sched, err := tokenring.NewScheduler(topo, tokenring.ScheduleLimits{})
		if err != nil {
			t.Fatal(err)
		}
		share := map[[2]string]bool{}
		for _, rg := range ranges {
			for _, a := range rg.Endpoints {
				for _, b := range rg.Endpoints {
					share[[2]string{a, b}] = a != b
				}
			}
		}
		for _, a := range c.Nodes {
			for _, b := range c.Nodes {
				if a.Endpoint == b.Endpoint {
					continue
				}
				got, err := sched.Conflicts(a.Endpoint, b.Endpoint)
				if err != nil {
					t.Fatal(err)
				}
				if want := share[[2]string{a.Endpoint, b.Endpoint}]; got != want {
					t.Fatalf("iteration %d, %v: Conflicts(%s, %s) = %v, describe_ring says %v", iter, repl, a.Endpoint, b.Endpoint, got, want)
				}
			}
		}
	}
}

// randomCluster is 1 to 3 datacenters of 1 to 6 nodes in 1 to 4 racks, 1
// to 8 tokens each, and keyspace ks with a random strategy and factors
// (sometimes above the number of nodes).
func randomCluster(r *rand.Rand) (tokenringtest.Cluster, tokenring.Replication) {
	c := tokenringtest.Cluster{Local: "10.0.0.1"}
	used := map[int64]bool{}
	dcs := 1 + r.IntN(3)
	n := 0
	factors := map[string]int{}
	for d := range dcs {
		dc := fmt.Sprintf("dc%d", d+1)
		racks := 1 + r.IntN(4)
		nodes := 1 + r.IntN(6)
		factors[dc] = r.IntN(5) // 0 sometimes: a datacenter being drained
		for range nodes {
			n++
			node := tokenringtest.Node{Endpoint: fmt.Sprintf("10.0.0.%d", n), HostID: fmt.Sprintf("h%d", n),
				Datacenter: dc, Rack: fmt.Sprintf("r%d", r.IntN(racks)+1)}
			for range 1 + r.IntN(8) {
				t := int64(r.Uint64())
				for used[t] || t == -1<<63 {
					t = int64(r.Uint64())
				}
				used[t] = true
				node.Tokens = append(node.Tokens, strconv.FormatInt(t, 10))
			}
			c.Nodes = append(c.Nodes, node)
		}
	}
	repl := tokenring.Replication{Strategy: tokenring.NetworkTopologyStrategy, Datacenters: factors}
	positive := false
	for _, f := range factors {
		positive = positive || f > 0
	}
	if !positive {
		factors["dc1"] = 1
	}
	if r.IntN(3) == 0 {
		repl = tokenring.Replication{Strategy: tokenring.SimpleStrategy, ReplicationFactor: 1 + r.IntN(5)}
	}
	c.Keyspaces = []tokenringtest.Keyspace{{Name: "ks", Replication: repl}, {Name: "system", Local: true}}
	return c, repl
}

// Bad describe_ring replies get typed errors, never a topology.
func TestDescribeRingRejectsBadReplies(t *testing.T) {
	ctx := context.Background()
	good := func(t *testing.T) []tokenring.DescribedRange {
		ranges, err := tokenringtest.RackedCluster(6).DescribeRing("shop")
		if err != nil {
			t.Fatal(err)
		}
		return ranges
	}
	for _, tc := range []struct {
		name   string
		status int
		body   func(t *testing.T) string
		want   error
	}{
		{"null", 200, func(*testing.T) string { return "null" }, tokenring.ErrMalformedReply},
		{"not a list", 200, func(*testing.T) string { return `{"start_token":"1"}` }, tokenring.ErrMalformedReply},
		{"trailing garbage", 200, func(t *testing.T) string { return mustJSON(t, good(t)) + "]" }, tokenring.ErrMalformedReply},
		{"a range missing", 200, func(t *testing.T) string { return mustJSON(t, good(t)[1:]) }, tokenring.ErrInconsistentRing},
		{"empty", 200, func(*testing.T) string { return "[]" }, tokenring.ErrInconsistentRing},
		{"a range twice", 200, func(t *testing.T) string { g := good(t); return mustJSON(t, append(g, g[3])) }, tokenring.ErrMalformedReply},
		{"bad token", 200, func(t *testing.T) string { g := good(t); g[2].EndToken = "12a"; return mustJSON(t, g) }, tokenring.ErrMalformedReply},
		{"wrong start", 200, func(t *testing.T) string { g := good(t); g[2].StartToken = g[2].EndToken; return mustJSON(t, g) }, tokenring.ErrInconsistentRing},
		{"no endpoints", 200, func(t *testing.T) string { g := good(t); g[0].Endpoints = nil; return mustJSON(t, g) }, tokenring.ErrMalformedReply},
		{"endpoint twice", 200, func(t *testing.T) string {
			g := good(t)
			g[0].Endpoints[1] = g[0].Endpoints[0]
			return mustJSON(t, g)
		}, tokenring.ErrMalformedReply},
		{"unknown endpoint", 200, func(t *testing.T) string {
			g := good(t)
			g[0].Endpoints[0], g[0].EndpointDetails[0].Host = "10.9.9.9", "10.9.9.9"
			return mustJSON(t, g)
		}, tokenring.ErrInconsistentRing},
		{"details of another endpoint", 200, func(t *testing.T) string {
			g := good(t)
			g[0].EndpointDetails[0].Host = g[1].EndpointDetails[0].Host + "x"
			return mustJSON(t, g)
		}, tokenring.ErrMalformedReply},
		{"one node in two racks", 200, func(t *testing.T) string {
			g := good(t)
			g[0].EndpointDetails[0].Rack = "elsewhere"
			return mustJSON(t, g)
		}, tokenring.ErrMalformedReply},
		{"keyspace dropped", 400, func(*testing.T) string { return `{"message":"Can't find a keyspace shop","code":400}` }, tokenring.ErrKeyspaceNotFound},
		{"path not served", 404, func(*testing.T) string { return `{"message":"Not found","code":404}` }, tokenring.ErrNotFound},
		{"too large", 200, func(t *testing.T) string { return "[" + string(make([]byte, 2<<10)) }, tokenring.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tokenringtest.NewServer(tokenringtest.RackedCluster(6), tokenringtest.ServerOptions{})
			defer srv.Close()
			srv.Override(http.MethodGet, "/storage_service/describe_ring/shop", tc.status, tc.body(t))
			c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{MaxReplyBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == tokenring.ErrTooLarge {
				srv.Override(http.MethodGet, "/storage_service/describe_ring/shop", tc.status, "["+string(make([]byte, 100<<10)))
			}
			topo, err := tokenring.ReadTopology(ctx, c, c, c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(topo.Keyspaces) != 0 || len(topo.Ring.Owners) != 0 {
				t.Fatalf("a topology came back with the error: %v", topo)
			}
		})
	}
}

// ScyllaDB splits the wrapping range at the ring's end when its two halves
// have different replicas; the reader takes that form too, and refuses
// halves that differ (one vnode range has one replica set).
func TestDescribeRingSplitWrappingRange(t *testing.T) {
	c := tokenringtest.RackedCluster(6)
	ranges, err := c.DescribeRing("shop")
	if err != nil {
		t.Fatal(err)
	}
	node := tokenringtest.NewMemNode(c)
	ring, _ := tokenring.ReadRing(context.Background(), node, node)
	w := slices.IndexFunc(ranges, func(r tokenring.DescribedRange) bool {
		s, _ := strconv.ParseInt(r.StartToken, 10, 64)
		e, _ := strconv.ParseInt(r.EndToken, 10, 64)
		return s > e
	})
	if w < 0 {
		t.Fatal("the fake reported no wrapping range")
	}
	head, tail := ranges[w], ranges[w]
	head.StartToken, tail.EndToken = "", ""
	split := append(slices.Delete(slices.Clone(ranges), w, w+1), head, tail)
	if _, err := tokenring.InferReplication(ring, split); err != nil {
		t.Fatalf("split wrapping range: %v", err)
	}
	tail.Endpoints = slices.Clone(tail.Endpoints)
	tail.Endpoints[0] = head.Endpoints[len(head.Endpoints)-1]
	for _, ep := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"} {
		if !slices.Contains(head.Endpoints, ep) {
			tail.Endpoints[0] = ep
			break
		}
	}
	tail.EndpointDetails = nil
	split = append(slices.Delete(slices.Clone(ranges), w, w+1), head, tail)
	if _, err := tokenring.InferReplication(ring, split); !errors.Is(err, tokenring.ErrMalformedReply) {
		t.Fatalf("halves with different replicas: err = %v, want ErrMalformedReply", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
