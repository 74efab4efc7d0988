package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// serve starts the command with args and waits until it is ready; see
// clitest.Serve.
func serve(t *testing.T, args ...string) (string, *clitest.Buffer, func() int) {
	t.Helper()
	return clitest.Serve(t, runCommand, args...)
}

// TestSixNodes serves the default scenario and reads it with the real
// client: the ring, the racks, the keyspaces a cleanup visits, a cleanup.
func TestSixNodes(t *testing.T) {
	u, out, stop := serve(t)
	if !strings.Contains(out.String(), "url: "+u) || !strings.Contains(out.String(), "fake-scylla ready: node 10.0.0.1 of 6 nodes, keyspaces shop, system") {
		t.Fatalf("printed:\n%s", out.String())
	}
	ctx := context.Background()
	c, err := tokenring.NewClient(u, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := tokenring.ReadTokenRingHash(ctx, c)
	if err != nil || m.Endpoint != "10.0.0.1" || m.OwnTokens != 8 {
		t.Fatalf("membership %+v, %v", m, err)
	}
	ring, err := tokenring.ReadRing(ctx, c, c)
	if err != nil {
		t.Fatal(err)
	}
	racks := map[string]int{}
	for _, loc := range ring.Locations {
		racks[loc.Datacenter+"/"+loc.Rack]++
	}
	if len(ring.Owners) != 48 || len(ring.Locations) != 6 || racks["dc1/r1"] != 2 || racks["dc1/r2"] != 2 || racks["dc1/r3"] != 2 {
		t.Fatalf("%d tokens, locations %v", len(ring.Owners), ring.Locations)
	}
	report, err := tokenring.RunCleanup(ctx, c)
	if err != nil || !slices.Equal(report.Cleaned, []string{"shop"}) {
		t.Fatalf("cleanup %+v, %v", report, err)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d after cancel", code)
	}
	if !strings.Contains(out.String(), "fake-scylla stopped") {
		t.Errorf("no stop line:\n%s", out.String())
	}
	if _, err := tokenring.ReadRing(ctx, c, c); err == nil {
		t.Error("still served after stop")
	}
}

// TestScaledOutLosesRanges: a baseline of six-nodes against scaled-out
// says which old nodes lost ranges to 10.0.0.7: those of its rack, not
// every node.
func TestScaledOutLosesRanges(t *testing.T) {
	ctx := context.Background()
	shop := map[string]tokenring.Replication{"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3}}}
	read := func(scenario string) tokenring.Topology {
		u, _, stop := serve(t, "-scenario", scenario)
		defer stop()
		c, err := tokenring.NewClient(u, tokenring.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ring, err := tokenring.ReadRing(ctx, c, c)
		if err != nil {
			t.Fatal(err)
		}
		return tokenring.Topology{Ring: ring, Keyspaces: shop}
	}
	a, err := tokenring.Analyze(read("six-nodes"), read("scaled-out"))
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for ep, n := range a.Nodes {
		if n.NeedsCleanup() {
			lost = append(lost, ep)
		}
	}
	// The README names them: the old nodes of rack r1, which 10.0.0.7
	// joined.
	slices.Sort(lost)
	if want := []string{"10.0.0.1", "10.0.0.4"}; !slices.Equal(lost, want) {
		t.Fatalf("nodes that need a cleanup: %v; want %v", lost, want)
	}
}

// TestSeedFile serves a cluster from a file.
func TestSeedFile(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "cluster.json")
	body := `{
  "local": "10.0.0.2",
  "nodes": [
    {"endpoint": "10.0.0.1", "hostID": "host-1", "datacenter": "dc1", "rack": "r1", "tokens": ["-9000", "100"]},
    {"endpoint": "10.0.0.2", "hostID": "host-2", "datacenter": "dc1", "rack": "r2", "tokens": ["-5", "4000"]}
  ],
  "keyspaces": [{"name": "shop"}, {"name": "system", "local": true}, {"name": "tabular", "tablets": true}]
}`
	if err := os.WriteFile(seed, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	u, _, stop := serve(t, "-seed", seed)
	defer stop()
	c, err := tokenring.NewClient(u, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, m, err := tokenring.ReadTokenRingHash(ctx, c)
	if err != nil || m.Endpoint != "10.0.0.2" || m.HostID != "host-2" || m.OwnTokens != 2 {
		t.Fatalf("membership %+v, %v", m, err)
	}
	ks, err := c.CleanupKeyspaces(ctx)
	if err != nil || !slices.Equal(ks, []string{"shop"}) {
		t.Fatalf("cleanup keyspaces %v, %v", ks, err)
	}
}

// TestSeedReplicationServesDescribeRing: a seed keyspace's replication
// places its replicas for describe_ring, and ReadTopology reads it back.
func TestSeedReplicationServesDescribeRing(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "cluster.json")
	body := `{
  "local": "10.0.0.1",
  "nodes": [
    {"endpoint": "10.0.0.1", "hostID": "host-1", "datacenter": "dc1", "rack": "r1", "tokens": ["-9000", "100"]},
    {"endpoint": "10.0.0.2", "hostID": "host-2", "datacenter": "dc1", "rack": "r2", "tokens": ["-5", "4000"]},
    {"endpoint": "10.0.0.3", "hostID": "host-3", "datacenter": "dc1", "rack": "r1", "tokens": ["7000"]}
  ],
  "keyspaces": [{"name": "shop", "replication": {"strategy": "NetworkTopologyStrategy", "datacenters": {"dc1": 2}}}, {"name": "system", "local": true}]
}`
	if err := os.WriteFile(seed, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	u, _, stop := serve(t, "-seed", seed)
	defer stop()
	c, err := tokenring.NewClient(u, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := tokenring.ReadTopology(context.Background(), c, c, c)
	if err != nil {
		t.Fatal(err)
	}
	want := tokenring.Replication{Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 2}}
	if got := topo.Keyspaces["shop"]; len(topo.Keyspaces) != 1 || got.Strategy != want.Strategy || got.Datacenters["dc1"] != 2 {
		t.Fatalf("keyspaces %v, want shop %v", topo.Keyspaces, want)
	}
}

func TestSeedReplicationRefusesWhatTheRingCannotPlace(t *testing.T) {
	for _, repl := range []string{
		`{"strategy": "NetworkTopologyStrategy", "datacenters": {"dc9": 2}}`,
		`{"strategy": "SimpleStrategy", "replication_factor": 0}`,
		`{"strategy": "EverywhereStrategy"}`,
	} {
		body := `{"local": "10.0.0.1", "nodes": [{"endpoint": "10.0.0.1", "hostID": "h", "datacenter": "dc1", "rack": "r1", "tokens": ["1"]}],
  "keyspaces": [{"name": "shop", "replication": ` + repl + `}]}`
		if _, err := parseSeed([]byte(body)); err == nil || !strings.Contains(err.Error(), "keyspace shop") {
			t.Errorf("%s: err = %v, want a refusal naming keyspace shop", repl, err)
		}
	}
}
