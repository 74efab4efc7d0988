package tokenringtest

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/caretaker-storage/caretaker/tokenring"
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
	// Leaving, Moving and Down say what every node reports of this one:
	// listed by GET /storage_service/nodes/leaving (being decommissioned
	// or removed), .../moving, or GET /gossiper/endpoint/down. A node
	// with a HostID and no Tokens is listed by .../nodes/joining.
	Leaving, Moving, Down bool
}

// Keyspace is one keyspace of a Cluster.
type Keyspace struct {
	Name string
	// Local keyspaces (LocalStrategy) are never cleaned up.
	Local bool
	// Tablets keyspaces are never cleaned up by a node cleanup either.
	Tablets bool
	// Replication places the keyspace's replicas for describe_ring
	// (SimpleStrategy or NetworkTopologyStrategy). A vnode keyspace that
	// is not local and has none answers describe_ring with HTTP 500.
	Replication tokenring.Replication
}

// Clone returns a deep copy of c.
func (c Cluster) Clone() Cluster {
	out := Cluster{Local: c.Local, Nodes: make([]Node, len(c.Nodes)), Keyspaces: slices.Clone(c.Keyspaces)}
	for i, k := range out.Keyspaces {
		if k.Replication.Datacenters != nil {
			out.Keyspaces[i].Replication.Datacenters = maps.Clone(k.Replication.Datacenters)
		}
	}
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
func (c Cluster) CleanupKeyspaces() []string { return c.keyspaceNames(true, "vnodes") }

// keyspaceNames filters keyspaces as GET /storage_service/keyspaces does:
// nonLocal leaves out LocalStrategy keyspaces, replication "vnodes" or
// "tablets" keeps only those ("" keeps both).
func (c Cluster) keyspaceNames(nonLocal bool, replication string) []string {
	names := []string{}
	for _, ks := range c.Keyspaces {
		if (nonLocal && ks.Local) || (replication == "vnodes" && ks.Tablets) || (replication == "tablets" && !ks.Tablets) {
			continue
		}
		names = append(names, ks.Name)
	}
	return names
}

// hasKeyspace reports whether the cluster has a keyspace of that name.
func (c Cluster) hasKeyspace(name string) bool {
	return slices.ContainsFunc(c.Keyspaces, func(k Keyspace) bool { return k.Name == name })
}

// GenerateTokens returns count distinct random Murmur3 tokens, the same for
// the same seed, formatted as ScyllaDB prints them and in no sorted order.
func GenerateTokens(seed uint64, count int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := make(map[int64]bool, count)
	out := make([]string, 0, count)
	for len(out) < count {
		t := int64(r.Uint64())
		if t == -1<<63 || seen[t] { // the minimum token is never a node's
			continue
		}
		seen[t] = true
		out = append(out, strconv.FormatInt(t, 10))
	}
	return out
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
