// Command fake-scylla serves a fake ScyllaDB REST API (package
// tokenring/tokenringtest) on 127.0.0.1, so that scylla-cleanup, or any
// client of ScyllaDB's API, can be tried without ScyllaDB. It answers the
// token ring, host ID, snitch, keyspace and cleanup endpoints as one node
// of a described cluster, until SIGINT, SIGTERM or the end of its context.
//
//	fake-scylla [-addr 127.0.0.1:PORT] [-scenario six-nodes | -seed FILE] [-every-node]
//
// -addr defaults to 127.0.0.1:0, a free port; the URL is printed. It must
// be a loopback address: the fake has no authentication.
//
// With -every-node it serves every node of the cluster, each as itself on
// a free port of -addr's host (whose port must then be 0), and prints a
// line "node ENDPOINT: url URL" per node, ready to pass to scylla-cleanup
// as -node-api ENDPOINT=URL. The "url:" line is the local node's.
//
// Scenarios:
//
//   - six-nodes (the default): datacenter dc1, six nodes 10.0.0.1 to
//     10.0.0.6 in racks r1, r2, r3 (two each), eight tokens each; the API
//     is 10.0.0.1's. Keyspaces: shop (NetworkTopologyStrategy dc1=3: clean it)
//     and system (local); GET /storage_service/describe_ring/shop places
//     its replicas.
//   - scaled-out: the same, after 10.0.0.7 joined rack r1 with eight tokens
//     of its own: save a baseline against six-nodes, then compare with it.
//   - joining: six-nodes while 10.0.0.7 joins rack r1 (listed by GET
//     /storage_service/nodes/joining, no tokens in the ring yet): the
//     ring hash is six-nodes', and scylla-cleanup -run-cleanup refuses.
//   - nine-nodes: nine nodes 10.0.0.1 to 10.0.0.9 in racks r1, r2, r3
//     (three each). With shop at NetworkTopologyStrategy dc1=3 each range
//     has a replica in every rack, so cleaning every node at once would
//     clean replicas of one range together: scylla-cleanup -plan runs one
//     rack at a time.
//
// A seed file is a tokenringtest.Cluster in JSON:
//
//	{
//	  "local": "10.0.0.1",
//	  "nodes": [
//	    {"endpoint": "10.0.0.1", "hostID": "host-1", "datacenter": "dc1", "rack": "r1", "tokens": ["-9000", "100"]},
//	    {"endpoint": "10.0.0.2", "hostID": "host-2", "datacenter": "dc1", "rack": "r2", "tokens": ["-5", "4000"]}
//	  ],
//	  "keyspaces": [{"name": "shop", "replication": {"strategy": "NetworkTopologyStrategy", "datacenters": {"dc1": 2}}},
//	                {"name": "system", "local": true}, {"name": "tabular", "tablets": true}]
//	}
//
// Tokens are decimal Murmur3 tokens; a node with none is joining. Unknown
// fields are an error, and so is a "local" that is not one of the nodes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

var command = cli.Command{
	Name:  "fake-scylla",
	Usage: "fake-scylla [-addr 127.0.0.1:PORT] [-scenario NAME | -seed FILE] [-every-node]",
	About: "fake-scylla serves a fake ScyllaDB REST API (tokenring/tokenringtest) on a loopback address, as one node " +
		"of a built-in or described cluster, until interrupted. Point scylla-cleanup -api at the URL it prints.",
}

// scenarios are the built-in clusters, by name.
var scenarios = map[string]func() tokenringtest.Cluster{
	"six-nodes":  func() tokenringtest.Cluster { return tokenringtest.RackedCluster(6) },
	"scaled-out": func() tokenringtest.Cluster { return tokenringtest.RackedCluster(7) },
	"nine-nodes": func() tokenringtest.Cluster { return tokenringtest.RackedCluster(9) },
	"joining": func() tokenringtest.Cluster {
		// scaled-out while 10.0.0.7 still joins: in gossip, no tokens yet.
		c := tokenringtest.RackedCluster(7)
		c.Nodes[6].Tokens = nil
		return c
	},
}

func scenarioNames() []string {
	var names []string
	for n := range scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runCommand(ctx, os.Args[1:], os.Stdout, os.Stderr, nil))
}

// runCommand is the tool's command line: it serves until ctx ends and
// returns the exit code. ready, if not nil, receives the URL once the fake
// answers.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	return command.Exit(run(ctx, args, stdout, stderr, ready), stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) error {
	fs := command.FlagSet()
	addr := fs.String("addr", "127.0.0.1:0", "loopback `host:port` to serve on (port 0: a free one)")
	scenarioName := fs.String("scenario", "", "built-in cluster to serve: "+strings.Join(scenarioNames(), ", ")+" (default six-nodes)")
	seedPath := fs.String("seed", "", "JSON `file` of the cluster to serve (the form is in the command doc)")
	everyNode := fs.Bool("every-node", false, "serve every node of the cluster, each on its own free port of -addr's host")
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *scenarioName != "" && *seedPath != "" {
		return cli.Usagef("-scenario and -seed both given: give one")
	}
	if err := checkLoopback(*addr); err != nil {
		return cli.Usagef("-addr %q: %v", *addr, err)
	}
	if _, port, _ := net.SplitHostPort(*addr); *everyNode && port != "0" {
		return cli.Usagef("-every-node serves each node on a free port: give -addr with port 0, not %q", *addr)
	}
	var cluster tokenringtest.Cluster
	if *seedPath != "" {
		var err error
		if cluster, err = readSeed(*seedPath); err != nil {
			return err
		}
	} else {
		name := *scenarioName
		if name == "" {
			name = "six-nodes"
		}
		build, ok := scenarios[name]
		if !ok {
			return cli.Usagef("-scenario: unknown scenario %q; the scenarios are %s", name, strings.Join(scenarioNames(), ", "))
		}
		cluster = build()
	}

	locals := []string{cluster.Local}
	if *everyNode {
		locals = locals[:0]
		for _, n := range cluster.Nodes {
			locals = append(locals, n.Endpoint)
		}
		slices.Sort(locals)
	}
	served := make(chan error, len(locals))
	var srvs []*http.Server
	defer func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range srvs {
			_ = srv.Shutdown(shutdown)
		}
	}()
	urls := map[string]string{}
	for _, local := range locals {
		view := cluster.Clone()
		view.Local = local
		u, srv, err := serveNode(*addr, view, served)
		if err != nil {
			return err
		}
		srvs = append(srvs, srv)
		urls[local] = u
		if *everyNode {
			fmt.Fprintf(stdout, "node %s: url %s\n", local, u)
		}
	}
	if *everyNode {
		// The flags scylla-cleanup -plan -run-cleanup takes, ready to paste.
		var flags []string
		for _, ep := range slices.Sorted(maps.Keys(urls)) {
			flags = append(flags, "-node-api "+ep+"="+urls[ep])
		}
		fmt.Fprintf(stdout, "flags: %s\n", strings.Join(flags, " "))
	}
	u := urls[cluster.Local]
	fmt.Fprintf(stdout, "url: %s\n", u)
	what := "node " + cluster.Local
	if *everyNode {
		what = "every node"
	}
	fmt.Fprintf(stdout, "fake-scylla ready: %s of %s, keyspaces %s; stop with Ctrl-C\n",
		what, cli.Count(len(cluster.Nodes), "node"), keyspaceNames(cluster))
	if ready != nil {
		ready <- u
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range srvs {
		if err := srv.Shutdown(shutdown); err != nil {
			return err
		}
	}
	srvs = nil
	fmt.Fprintln(stdout, "fake-scylla stopped")
	return nil
}

// serveNode serves cluster, as its Local node sees it, on a listener of
// addr; the fake server (tokenringtest.Server picks its own port) lives
// as long as the returned http.Server, which forwards to it.
func serveNode(addr string, cluster tokenringtest.Cluster, served chan<- error) (string, *http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("-addr %s: %w", addr, err)
	}
	fake := tokenringtest.NewServer(cluster, tokenringtest.ServerOptions{})
	target, err := url.Parse(fake.URL)
	if err != nil {
		fake.Close()
		ln.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(fake.Close)
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			served <- err
		}
	}()
	return "http://" + ln.Addr().String(), srv, nil
}

// checkLoopback accepts host:port with a loopback IP host (or localhost).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("not a loopback address; the fake has no authentication, serve it on 127.0.0.1")
	}
	return nil
}

func keyspaceNames(c tokenringtest.Cluster) string {
	var names []string
	for _, k := range c.Keyspaces {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

// maxSeedSize bounds the -seed file.
const maxSeedSize = 16 << 20

// seedCluster, seedNode and seedKeyspace spell tokenringtest's types in the seed's
// JSON; decoding into them checks for unknown fields.
type seedCluster struct {
	Local     string         `json:"local"`
	Nodes     []seedNode     `json:"nodes"`
	Keyspaces []seedKeyspace `json:"keyspaces"`
}

type seedNode struct {
	Endpoint   string   `json:"endpoint"`
	HostID     string   `json:"hostID"`
	Datacenter string   `json:"datacenter"`
	Rack       string   `json:"rack"`
	Tokens     []string `json:"tokens"`
}

type seedKeyspace struct {
	Name    string `json:"name"`
	Local   bool   `json:"local"`
	Tablets bool   `json:"tablets"`
	// Replication places the keyspace's replicas for describe_ring, as
	// {"strategy": "NetworkTopologyStrategy", "datacenters": {"dc1": 3}}
	// or {"strategy": "SimpleStrategy", "replication_factor": 2}.
	Replication *tokenring.Replication `json:"replication,omitempty"`
}

func readSeed(path string) (tokenringtest.Cluster, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return tokenringtest.Cluster{}, fmt.Errorf("-seed: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxSeedSize {
		return tokenringtest.Cluster{}, fmt.Errorf("-seed %s: not a regular file of at most %d bytes", path, maxSeedSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return tokenringtest.Cluster{}, fmt.Errorf("-seed: %w", err)
	}
	c, err := parseSeed(data)
	if err != nil {
		return tokenringtest.Cluster{}, fmt.Errorf("-seed %s: %w", path, err)
	}
	return c, nil
}

func parseSeed(data []byte) (tokenringtest.Cluster, error) {
	var s seedCluster
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return tokenringtest.Cluster{}, err
	}
	c := tokenringtest.Cluster{Local: s.Local}
	seen := map[string]bool{}
	for i, n := range s.Nodes {
		if n.Endpoint == "" {
			return c, fmt.Errorf("nodes[%d] has no endpoint", i)
		}
		if seen[n.Endpoint] {
			return c, fmt.Errorf("node %s is given twice", n.Endpoint)
		}
		seen[n.Endpoint] = true
		c.Nodes = append(c.Nodes, tokenringtest.Node{Endpoint: n.Endpoint, HostID: n.HostID, Datacenter: n.Datacenter, Rack: n.Rack, Tokens: n.Tokens})
	}
	if !seen[s.Local] {
		return c, fmt.Errorf("local %q is not one of the nodes", s.Local)
	}
	for i, k := range s.Keyspaces {
		if k.Name == "" {
			return c, fmt.Errorf("keyspaces[%d] has no name", i)
		}
		ks := tokenringtest.Keyspace{Name: k.Name, Local: k.Local, Tablets: k.Tablets}
		if k.Replication != nil {
			ks.Replication = *k.Replication
			if err := checkSeedReplication(c, ks); err != nil {
				return c, fmt.Errorf("keyspace %s: %w", k.Name, err)
			}
		}
		c.Keyspaces = append(c.Keyspaces, ks)
	}
	return c, nil
}

// checkSeedReplication refuses a replication the seed's ring cannot place
// (an unknown strategy, no replicas, a datacenter without nodes).
func checkSeedReplication(c tokenringtest.Cluster, k tokenringtest.Keyspace) error {
	switch k.Replication.Strategy {
	case tokenring.SimpleStrategy, tokenring.NetworkTopologyStrategy:
	default:
		return fmt.Errorf("replication strategy %q: want SimpleStrategy or NetworkTopologyStrategy", k.Replication.Strategy)
	}
	node := tokenringtest.NewMemNode(c)
	ring, err := tokenring.ReadRing(context.Background(), node, node)
	if err != nil {
		return err
	}
	return tokenring.Topology{Ring: ring, Keyspaces: map[string]tokenring.Replication{k.Name: k.Replication}}.Validate()
}
