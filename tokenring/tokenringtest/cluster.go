// Package tokenringtest holds conformance suites for the host interfaces
// of package tokenring, tokenring.RingSource and tokenring.Cleaner, and
// MemNode, an in-memory node that passes both.
//
// A suite describes a Cluster to a harness function, which makes the
// implementation under test present that cluster as the node Cluster.Local
// sees it, and returns the implementation. For the REST Client the harness
// starts a scyllatest.Server; a host with another path to the node (a
// sidecar, a CQL session) sets up whatever backs it. One line then runs
// the suite:
//
//	func TestMySource(t *testing.T) {
//		tokenringtest.RunRingSourceTests(t, func(t *testing.T, c tokenringtest.Cluster) tokenring.RingSource {
//			return newMySource(t, c)
//		})
//	}
package tokenringtest

import (
	"slices"
	"strconv"
	"strings"
)

// Cluster describes a ScyllaDB cluster as one node sees it.
type Cluster struct {
	// Local is the endpoint of the node the implementation speaks for.
	Local string
	// Nodes are the cluster's nodes, in no particular order.
	Nodes []Node
	// Keyspaces are the cluster's keyspaces, in no particular order.
	Keyspaces []Keyspace
}

// Node is one node of a Cluster.
type Node struct {
	Endpoint   string // IP address, as ScyllaDB names endpoints
	HostID     string
	Datacenter string
	Rack       string
	// Tokens are the node's normal tokens, canonical decimal strings; none
	// while it joins. ScyllaDB reports a ring's tokens sorted numerically.
	Tokens []string
}

// Keyspace is one keyspace of a Cluster.
type Keyspace struct {
	Name string
	// Local keyspaces (LocalStrategy) are never cleaned up.
	Local bool
	// Tablets keyspaces are never cleaned up by a node cleanup either.
	Tablets bool
}

// Clone returns a deep copy of c.
func (c Cluster) Clone() Cluster {
	out := Cluster{Local: c.Local, Nodes: make([]Node, len(c.Nodes)), Keyspaces: slices.Clone(c.Keyspaces)}
	for i, n := range c.Nodes {
		n.Tokens = slices.Clone(n.Tokens)
		out.Nodes[i] = n
	}
	return out
}

// Node returns the node with the given endpoint.
func (c Cluster) Node(endpoint string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Endpoint == endpoint {
			return n, true
		}
	}
	return Node{}, false
}

// Tokens returns every node's tokens in the order ScyllaDB reports them:
// sorted numerically.
func (c Cluster) Tokens() []string {
	all := []string{}
	for _, n := range c.Nodes {
		all = append(all, n.Tokens...)
	}
	slices.SortFunc(all, compareTokens)
	return all
}

// HostIDs maps the endpoint of every node that owns tokens to its host ID.
func (c Cluster) HostIDs() map[string]string {
	ids := map[string]string{}
	for _, n := range c.Nodes {
		if len(n.Tokens) > 0 {
			ids[n.Endpoint] = n.HostID
		}
	}
	return ids
}

// CleanupKeyspaces returns the names of the keyspaces a cleanup visits
// (neither local nor tablet-based), in the order of c.Keyspaces.
func (c Cluster) CleanupKeyspaces() []string {
	names := []string{}
	for _, ks := range c.Keyspaces {
		if !ks.Local && !ks.Tablets {
			names = append(names, ks.Name)
		}
	}
	return names
}

// compareTokens orders canonical tokens numerically; anything that does
// not parse sorts by text after them, so a bad description stays visible.
func compareTokens(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		return cmpInt(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
