package tokenringtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/caretaker-storage/caretaker/tokenring"
)

var _ tokenring.ReplicaSource = (*MemNode)(nil)

// ErrNoReplication is what DescribeRing answers for a vnode keyspace the
// Cluster gives no Replication.
var ErrNoReplication = errors.New("tokenringtest: keyspace has no Replication")

// ErrTabletsKeyspace is what DescribeRing answers for a tablets keyspace:
// ScyllaDB wants a table there, and its ranges are not the ring's.
var ErrTabletsKeyspace = errors.New("tokenringtest: describe_ring of a tablets keyspace needs a table")

// ReplicatedKeyspaces implements tokenring.ReplicaSource.
func (n *MemNode) ReplicatedKeyspaces(ctx context.Context) ([]string, error) {
	return n.CleanupKeyspaces(ctx)
}

// DescribeRing implements tokenring.ReplicaSource with Cluster.DescribeRing.
func (n *MemNode) DescribeRing(ctx context.Context, keyspace string) ([]tokenring.DescribedRange, error) {
	c, err := n.view(ctx)
	if err != nil {
		return nil, err
	}
	return c.DescribeRing(keyspace)
}

// DescribeRing answers GET /storage_service/describe_ring/{keyspace} as
// ScyllaDB does (describe_ring in its locator/util.cc): one range per
// token, (previous token, token], the range past the largest token
// reported whole as (largest, smallest]; each with its replicas in the
// order the placement finds them, their RPC addresses (here the same) and
// their datacenter and rack. ScyllaDB lists the ranges in hash-map order;
// here they come from the largest end token down, so that a reader which
// assumes sorted input fails.
//
// Replicas are placed by a plain walk of the ring written for this fake,
// independent of tokenring's placement, so that tests can hold one to the
// other: SimpleStrategy takes the first ReplicationFactor distinct
// endpoints met walking clockwise from the range's end token;
// NetworkTopologyStrategy does so per datacenter, taking an endpoint of a
// rack not taken yet first, and endpoints of racks already taken (in the
// order met) only once every rack of the datacenter has one replica
// (network_topology_strategy.cc). A local keyspace is placed on the local
// node alone.
//
// Errors: tokenring.ErrKeyspaceNotFound, ErrTabletsKeyspace,
// ErrNoReplication.
func (c Cluster) DescribeRing(keyspace string) ([]tokenring.DescribedRange, error) {
	i := slices.IndexFunc(c.Keyspaces, func(k Keyspace) bool { return k.Name == keyspace })
	if i < 0 {
		return nil, fmt.Errorf("tokenringtest: keyspace %s does not exist: %w", keyspace, tokenring.ErrKeyspaceNotFound)
	}
	ks := c.Keyspaces[i]
	if ks.Tablets {
		return nil, fmt.Errorf("%w: %s", ErrTabletsKeyspace, keyspace)
	}
	type owned struct {
		token int64
		text  string
		node  Node
	}
	var ring []owned
	for _, n := range c.Nodes {
		for _, t := range n.Tokens {
			v, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("tokenringtest: node %s: token %q: %w", n.Endpoint, t, err)
			}
			ring = append(ring, owned{v, t, n})
		}
	}
	slices.SortFunc(ring, func(a, b owned) int { return cmpInt(a.token, b.token) })
	if len(ring) == 0 {
		return []tokenring.DescribedRange{}, nil
	}
	walk := func(start int) ([]Node, error) {
		seq := make([]Node, len(ring))
		for k := range ring {
			seq[k] = ring[(start+k)%len(ring)].node
		}
		switch {
		case ks.Local:
			local, _ := c.Node(c.Local)
			return []Node{local}, nil
		case ks.Replication.Strategy == tokenring.SimpleStrategy:
			return walkSimple(seq, ks.Replication.ReplicationFactor), nil
		case ks.Replication.Strategy == tokenring.NetworkTopologyStrategy:
			return walkNetworkTopology(seq, ks.Replication.Datacenters), nil
		}
		return nil, fmt.Errorf("%w: %s (strategy %q)", ErrNoReplication, keyspace, ks.Replication.Strategy)
	}
	out := make([]tokenring.DescribedRange, 0, len(ring))
	for k := len(ring) - 1; k >= 0; k-- {
		reps, err := walk(k)
		if err != nil {
			return nil, err
		}
		r := tokenring.DescribedRange{
			StartToken:      ring[(k+len(ring)-1)%len(ring)].text,
			EndToken:        ring[k].text,
			Endpoints:       []string{},
			RPCEndpoints:    []string{},
			EndpointDetails: []tokenring.EndpointDetail{},
		}
		for _, n := range reps {
			r.Endpoints = append(r.Endpoints, n.Endpoint)
			r.RPCEndpoints = append(r.RPCEndpoints, n.Endpoint)
			r.EndpointDetails = append(r.EndpointDetails, tokenring.EndpointDetail{Host: n.Endpoint, Datacenter: n.Datacenter, Rack: n.Rack})
		}
		out = append(out, r)
	}
	return out, nil
}

// walkSimple takes the first rf distinct endpoints of seq.
func walkSimple(seq []Node, rf int) []Node {
	var reps []Node
	taken := map[string]bool{}
	for _, n := range seq {
		if len(reps) == rf {
			break
		}
		if !taken[n.Endpoint] {
			taken[n.Endpoint] = true
			reps = append(reps, n)
		}
	}
	return reps
}

// walkNetworkTopology fills each datacenter's factor along seq, a rack not
// taken yet first.
func walkNetworkTopology(seq []Node, factors map[string]int) []Node {
	type dcState struct {
		want       int
		racks      map[string]bool // every rack of the datacenter
		seenRacks  map[string]bool
		skipped    []Node
		skippedSet map[string]bool
		got        int
	}
	dcs := map[string]*dcState{}
	nodes := map[string]map[string]bool{}
	for _, n := range seq {
		if nodes[n.Datacenter] == nil {
			nodes[n.Datacenter] = map[string]bool{}
		}
		nodes[n.Datacenter][n.Endpoint] = true
	}
	for _, dc := range slices.Sorted(maps.Keys(factors)) {
		if factors[dc] <= 0 || len(nodes[dc]) == 0 {
			continue
		}
		st := &dcState{want: min(factors[dc], len(nodes[dc])), racks: map[string]bool{}, seenRacks: map[string]bool{}, skippedSet: map[string]bool{}}
		for _, n := range seq {
			if n.Datacenter == dc {
				st.racks[n.Rack] = true
			}
		}
		dcs[dc] = st
	}
	var reps []Node
	taken := map[string]bool{}
	add := func(st *dcState, n Node) {
		taken[n.Endpoint] = true
		reps = append(reps, n)
		st.got++
	}
	for _, n := range seq {
		st := dcs[n.Datacenter]
		if st == nil || st.got == st.want || taken[n.Endpoint] {
			continue
		}
		switch {
		case len(st.seenRacks) == len(st.racks):
			add(st, n)
		case st.seenRacks[n.Rack]:
			if !st.skippedSet[n.Endpoint] {
				st.skippedSet[n.Endpoint] = true
				st.skipped = append(st.skipped, n)
			}
		default:
			st.seenRacks[n.Rack] = true
			add(st, n)
			if len(st.seenRacks) == len(st.racks) {
				for _, s := range st.skipped {
					if st.got == st.want {
						break
					}
					if !taken[s.Endpoint] {
						add(st, s)
					}
				}
			}
		}
	}
	return reps
}
