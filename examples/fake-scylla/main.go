// Command fake-scylla serves a fake ScyllaDB REST API (package
// tokenring/tokenringtest) on 127.0.0.1, so that scylla-cleanup, or any
// client of ScyllaDB's API, can be tried without ScyllaDB. It answers the
// token ring, host ID, snitch, keyspace and cleanup endpoints as one node
// of a described cluster, until SIGINT, SIGTERM or the end of its context.
//
//	fake-scylla [-addr 127.0.0.1:PORT] [-scenario six-nodes | -seed FILE]
//
// -addr defaults to 127.0.0.1:0, a free port; the URL is printed. It must
// be a loopback address: the fake has no authentication.
//
// Scenarios:
//
//   - six-nodes (the default): datacenter dc1, six nodes 10.0.0.1 to
//     10.0.0.6 in racks r1, r2, r3 (two each), eight tokens each; the API
//     is 10.0.0.1's. Keyspaces: shop (clean it) and system (local).
//   - scaled-out: the same, after 10.0.0.7 joined rack r1 with eight tokens
//     of its own: save a baseline against six-nodes, then compare with it.
//
// A seed file is a tokenringtest.Cluster in JSON:
//
//	{
//	  "local": "10.0.0.1",
//	  "nodes": [
//	    {"endpoint": "10.0.0.1", "hostID": "host-1", "datacenter": "dc1", "rack": "r1", "tokens": ["-9000", "100"]},
//	    {"endpoint": "10.0.0.2", "hostID": "host-2", "datacenter": "dc1", "rack": "r2", "tokens": ["-5", "4000"]}
//	  ],
//	  "keyspaces": [{"name": "shop"}, {"name": "system", "local": true}, {"name": "tabular", "tablets": true}]
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
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

var command = cli.Command{
	Name:  "fake-scylla",
	Usage: "fake-scylla [-addr 127.0.0.1:PORT] [-scenario NAME | -seed FILE]",
	About: "fake-scylla serves a fake ScyllaDB REST API (tokenring/tokenringtest) on a loopback address, as one node " +
		"of a built-in or described cluster, until interrupted. Point scylla-cleanup -api at the URL it prints.",
}

// scenarios are the built-in clusters, by name.
var scenarios = map[string]func() tokenringtest.Cluster{
	"six-nodes":  func() tokenringtest.Cluster { return rackedCluster(6) },
	"scaled-out": func() tokenringtest.Cluster { return rackedCluster(7) },
}

// rackedCluster is n nodes 10.0.0.1.. of dc1, in racks r1, r2, r3 in turn
// (the seventh joins r1), eight tokens each, seen from 10.0.0.1, with
// keyspace shop to clean and a local system keyspace. The tokens are the
// same on every run.
func rackedCluster(n int) tokenringtest.Cluster {
	c := tokenringtest.Cluster{Local: "10.0.0.1",
		Keyspaces: []tokenringtest.Keyspace{{Name: "shop"}, {Name: "system", Local: true}}}
	for i := range n {
		c.Nodes = append(c.Nodes, tokenringtest.Node{
			Endpoint: fmt.Sprintf("10.0.0.%d", i+1), HostID: fmt.Sprintf("host-%d", i+1),
			Datacenter: "dc1", Rack: fmt.Sprintf("r%d", i%3+1), Tokens: tokenringtest.GenerateTokens(uint64(i+1), 8),
		})
	}
	return c
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
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *scenarioName != "" && *seedPath != "" {
		return cli.Usagef("-scenario and -seed both given: give one")
	}
	if err := checkLoopback(*addr); err != nil {
		return cli.Usagef("-addr %q: %v", *addr, err)
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
			return fmt.Errorf("-scenario: unknown scenario %q; the scenarios are %s", name, strings.Join(scenarioNames(), ", "))
		}
		cluster = build()
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", *addr, err)
	}
	// tokenringtest.Server picks its own port; -addr forwards to it.
	fake := tokenringtest.NewServer(cluster, tokenringtest.ServerOptions{})
	defer fake.Close()
	target, err := url.Parse(fake.URL)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	u := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "url: %s\n", u)
	fmt.Fprintf(stdout, "fake-scylla ready: node %s of %s, keyspaces %s; stop with Ctrl-C\n",
		cluster.Local, cli.Count(len(cluster.Nodes), "node"), keyspaceNames(cluster))
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
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "fake-scylla stopped")
	return nil
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
		c.Nodes = append(c.Nodes, tokenringtest.Node(n))
	}
	if !seen[s.Local] {
		return c, fmt.Errorf("local %q is not one of the nodes", s.Local)
	}
	for i, k := range s.Keyspaces {
		if k.Name == "" {
			return c, fmt.Errorf("keyspaces[%d] has no name", i)
		}
		c.Keyspaces = append(c.Keyspaces, tokenringtest.Keyspace(k))
	}
	return c, nil
}
