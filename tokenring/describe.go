package tokenring

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// ErrReplicationMismatch: a replication (given by the host, or the only
// ones caretaker can model) does not place the replicas where ScyllaDB
// says they are (GET /storage_service/describe_ring/{keyspace}). The
// error names the keyspace and the first range that differs. Planning or
// analysing with such a replication would let two replicas of a range be
// cleaned together, or miss a node that lost ranges: nothing is guessed.
var ErrReplicationMismatch = errors.New("tokenring: replication does not match the cluster's replica placement")

// DescribedRange is one entry of GET /storage_service/describe_ring/{keyspace}
// (the "token_range" model of ScyllaDB's api/api-doc/storage_service.json):
// a range (StartToken, EndToken] and the endpoints that replicate it.
// ScyllaDB lists one range per ring token, in no particular order, and
// reports the range that wraps past the largest token as one range
// (StartToken the largest token, EndToken the smallest); an empty token
// means the ring's end (describe_ring in ScyllaDB's locator/util.cc
// merges the two ends into one range when both have the same replicas).
type DescribedRange struct {
	StartToken      string           `json:"start_token"`
	EndToken        string           `json:"end_token"`
	Endpoints       []string         `json:"endpoints"`
	RPCEndpoints    []string         `json:"rpc_endpoints"`
	EndpointDetails []EndpointDetail `json:"endpoint_details"`
}

// EndpointDetail is the "endpoint_detail" model: where one replica sits.
type EndpointDetail struct {
	Host       string `json:"host"`
	Datacenter string `json:"datacenter"`
	Rack       string `json:"rack"`
}

// ReplicaSource reads where ScyllaDB places each keyspace's replicas, so
// that a host need not be told the replication. *Client implements it;
// tokenringtest.MemNode too. Same contract as RingSource.
type ReplicaSource interface {
	// ReplicatedKeyspaces lists the keyspaces whose replicas the token
	// ring places: not local, not tablet-based (GET /storage_service/keyspaces
	// ?type=non_local_strategy&replication=vnodes).
	ReplicatedKeyspaces(ctx context.Context) ([]string, error)
	// DescribeRing returns each range of the keyspace with its replicas
	// (GET /storage_service/describe_ring/{keyspace}). A keyspace that
	// does not exist is an error wrapping ErrKeyspaceNotFound.
	DescribeRing(ctx context.Context, keyspace string) ([]DescribedRange, error)
}

var _ ReplicaSource = (*Client)(nil)

// ReplicatedKeyspaces implements ReplicaSource.
func (c *Client) ReplicatedKeyspaces(ctx context.Context) ([]string, error) {
	return c.CleanupKeyspaces(ctx)
}

// DescribeRing implements ReplicaSource. ScyllaDB answers a keyspace that
// does not exist with HTTP 400 and its validate_keyspace message; that
// error wraps ErrKeyspaceNotFound. The reply's shape is checked by
// ReadTopology, InferReplication and CheckReplication, which know the ring.
func (c *Client) DescribeRing(ctx context.Context, keyspace string) ([]DescribedRange, error) {
	if keyspace == "" {
		return nil, errors.New("tokenring: DescribeRing: empty keyspace")
	}
	path := "/storage_service/describe_ring/" + url.PathEscape(keyspace)
	var ranges []DescribedRange
	err := c.call(ctx, http.MethodGet, path, nil, &ranges)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest && keyspaceMissing(apiErr.Message, keyspace) {
		return nil, fmt.Errorf("%w: keyspace %q: %w", ErrKeyspaceNotFound, keyspace, apiErr)
	}
	return ranges, err
}

// ReadTopology reads the ring (src) and, for every keyspace the ring
// places (replicas.ReplicatedKeyspaces), the replicas ScyllaDB gives each
// range (replicas.DescribeRing), and returns the Topology that places
// them so: the replication of each keyspace is InferReplication's, and
// each endpoint's location is the one describe_ring reports (locs, which
// may be nil, is asked only for endpoints that replicate nothing, such as
// those of a datacenter whose factor is 0).
//
// Every reply is checked: a describe_ring reply that is not one range per
// ring token, or that names an endpoint the ring does not have, is
// ErrInconsistentRing (the ring changed between the calls: ask again); a
// reply with missing or contradictory fields is ErrMalformedReply; a
// placement no SimpleStrategy or NetworkTopologyStrategy replication
// reproduces is ErrReplicationMismatch.
func ReadTopology(ctx context.Context, src RingSource, replicas ReplicaSource, locs LocationSource) (Topology, error) {
	ring, err := ReadRing(ctx, src, nil)
	if err != nil {
		return Topology{}, err
	}
	names, err := replicas.ReplicatedKeyspaces(ctx)
	if err != nil {
		return Topology{}, errclass.Wrapf("tokenring", err, "keyspaces")
	}
	seen := map[string]bool{}
	for i, ks := range names {
		if ks == "" {
			return Topology{}, fmt.Errorf("%w: keyspaces: entry %d is empty", ErrMalformedReply, i)
		}
		seen[ks] = true
	}
	described := make(map[string][]DescribedRange, len(seen))
	ring.Locations = map[string]Location{}
	for _, ks := range slices.Sorted(maps.Keys(seen)) {
		ranges, err := replicas.DescribeRing(ctx, ks)
		if err != nil {
			return Topology{}, errclass.Wrapf("tokenring", err, "keyspace %q", ks)
		}
		if err := collectLocations(ring.Locations, ranges); err != nil {
			return Topology{}, errclass.Wrapf("tokenring", err, "keyspace %q: describe_ring", ks)
		}
		described[ks] = ranges
	}
	for _, ep := range ringMembers(ring) {
		if _, ok := ring.Locations[ep]; ok {
			continue
		}
		if locs == nil {
			return Topology{}, fmt.Errorf("%w: %q replicates no range of any keyspace and no LocationSource was given", ErrMissingLocation, ep)
		}
		loc, err := locs.Location(ctx, ep)
		if err != nil {
			return Topology{}, errclass.Wrapf("tokenring", err, "location of %s", ep)
		}
		ring.Locations[ep] = loc
	}
	topo := Topology{Ring: ring, Keyspaces: make(map[string]Replication, len(described))}
	for _, ks := range slices.Sorted(maps.Keys(described)) {
		r, err := InferReplication(ring, described[ks])
		if err != nil {
			return Topology{}, errclass.Wrapf("tokenring", err, "keyspace %q", ks)
		}
		topo.Keyspaces[ks] = r
	}
	if err := topo.Validate(); err != nil {
		return Topology{}, err
	}
	return topo, nil
}

// collectLocations adds the locations describe_ring reports, refusing one
// endpoint in two places.
func collectLocations(into map[string]Location, ranges []DescribedRange) error {
	for i, r := range ranges {
		for _, d := range r.EndpointDetails {
			if d.Host == "" || d.Datacenter == "" {
				return fmt.Errorf("%w: range %d has an endpoint detail without host or datacenter", ErrMalformedReply, i)
			}
			loc := Location{Datacenter: d.Datacenter, Rack: d.Rack}
			if prev, ok := into[d.Host]; ok && prev != loc {
				return fmt.Errorf("%w: endpoint %s is in %s/%s and in %s/%s", ErrMalformedReply, d.Host, prev.Datacenter, prev.Rack, loc.Datacenter, loc.Rack)
			}
			into[d.Host] = loc
		}
	}
	return nil
}

// InferReplication returns a replication that places every range of ring
// on exactly the endpoints ScyllaDB's describe_ring reply lists for it.
// ring.Locations must hold every endpoint of the ring.
//
// It tries NetworkTopologyStrategy with, for each datacenter, the largest
// number of replicas a range has there, then SimpleStrategy with the
// largest number of replicas of a range, and keeps the first whose
// placement (the same walk Analyze and the Scheduler use) equals the
// reply on every range. Factors are as ScyllaDB applies them: a factor
// above the number of endpoints in a datacenter places like that number,
// and is inferred as that number. No candidate matching is
// ErrReplicationMismatch, naming the first range that differs; a reply
// that does not fit the ring is ErrInconsistentRing or ErrMalformedReply
// (see ReadTopology).
func InferReplication(ring Ring, ranges []DescribedRange) (Replication, error) {
	want, err := describedReplicas(ring, ranges)
	if err != nil {
		return Replication{}, err
	}
	perDC := map[string]int{}
	total := 0
	for _, reps := range want.byEnd {
		counts := map[string]int{}
		for _, ep := range reps {
			loc, ok := ring.Locations[ep]
			if !ok || loc.Datacenter == "" {
				return Replication{}, fmt.Errorf("%w: %q", ErrMissingLocation, ep)
			}
			counts[loc.Datacenter]++
		}
		for dc, n := range counts {
			perDC[dc] = max(perDC[dc], n)
		}
		total = max(total, len(reps))
	}
	candidates := []Replication{
		{Strategy: NetworkTopologyStrategy, Datacenters: perDC},
		{Strategy: SimpleStrategy, ReplicationFactor: total},
	}
	var first error
	for _, cand := range candidates {
		err := want.compare(ring, cand)
		if err == nil {
			return cand, nil
		}
		if !errors.Is(err, ErrReplicationMismatch) {
			return Replication{}, err
		}
		if first == nil {
			first = err
		}
	}
	return Replication{}, fmt.Errorf("%w (tried NetworkTopologyStrategy %v and SimpleStrategy %d)", first, perDC, total)
}

// CheckReplication reports whether repl places every range of ring on
// exactly the endpoints the describe_ring reply lists: nil if so, an error
// wrapping ErrReplicationMismatch naming the first range that differs if
// not (for a host's -keyspace override that disagrees with the cluster).
func CheckReplication(ring Ring, repl Replication, ranges []DescribedRange) error {
	want, err := describedReplicas(ring, ranges)
	if err != nil {
		return err
	}
	return want.compare(ring, repl)
}

// described is a describe_ring reply checked against the ring: the sorted
// replicas of the range ending at each ring token.
type described struct {
	byEnd map[Token][]string
}

// describedReplicas checks a reply against the ring: one range per ring
// token, each (previous token, token], the wrapping range (largest,
// smallest] either whole or split at the ring's end as ScyllaDB does when
// its two halves differ; endpoints non-empty, distinct, members of the
// ring, and their details, when given, about those endpoints.
func describedReplicas(ring Ring, ranges []DescribedRange) (described, error) {
	members := map[string]bool{}
	for _, o := range ring.Owners {
		members[o.Endpoint] = true
	}
	tokens := make([]Token, 0, len(ring.Owners))
	for _, o := range ring.Owners {
		tokens = append(tokens, o.Token)
	}
	slices.Sort(tokens)
	if len(tokens) == 0 {
		return described{}, fmt.Errorf("%w: the ring has no tokens", ErrInconsistentRing)
	}
	prev := make(map[Token]Token, len(tokens))
	for i, t := range tokens {
		if i > 0 && tokens[i-1] == t {
			return described{}, fmt.Errorf("%w: token %v owned twice", ErrInvalidRing, t)
		}
		prev[t] = tokens[(i+len(tokens)-1)%len(tokens)]
	}
	smallest, largest := tokens[0], tokens[len(tokens)-1]

	d := described{byEnd: make(map[Token][]string, len(tokens))}
	var tail []string // replicas of (largest, ring's end], when split
	tailSeen := false
	for i, r := range ranges {
		reps, err := checkEndpoints(i, r, members)
		if err != nil {
			return described{}, err
		}
		var start, end Token
		startEmpty, endEmpty := r.StartToken == "", r.EndToken == ""
		if !startEmpty {
			if start, err = ParseToken(r.StartToken); err != nil {
				return described{}, fmt.Errorf("%w: range %d: start token: %v", ErrMalformedReply, i, err)
			}
		}
		if !endEmpty {
			if end, err = ParseToken(r.EndToken); err != nil {
				return described{}, fmt.Errorf("%w: range %d: end token: %v", ErrMalformedReply, i, err)
			}
		}
		switch {
		case startEmpty && endEmpty:
			return described{}, fmt.Errorf("%w: range %d has neither start nor end token", ErrMalformedReply, i)
		case endEmpty: // (largest, ring's end]
			if start != largest || tailSeen {
				return described{}, fmt.Errorf("%w: range %d (%s, end of ring] does not start at the ring's largest token %v", ErrInconsistentRing, i, r.StartToken, largest)
			}
			tail, tailSeen = reps, true
			continue
		case startEmpty: // (ring's start, smallest]
			if end != smallest {
				return described{}, fmt.Errorf("%w: range %d (start of ring, %s] does not end at the ring's smallest token %v", ErrInconsistentRing, i, r.EndToken, smallest)
			}
		default:
			p, ok := prev[end]
			if !ok {
				return described{}, fmt.Errorf("%w: range %d ends at %s, which is not a token of the ring", ErrInconsistentRing, i, r.EndToken)
			}
			if p != start {
				return described{}, fmt.Errorf("%w: range %d (%s, %s] does not start at the ring's previous token %v", ErrInconsistentRing, i, r.StartToken, r.EndToken, p)
			}
		}
		if _, dup := d.byEnd[end]; dup {
			return described{}, fmt.Errorf("%w: two ranges end at %s", ErrMalformedReply, r.EndToken)
		}
		d.byEnd[end] = reps
	}
	if tailSeen && !slices.Equal(tail, d.byEnd[smallest]) {
		// Both halves of the wrapping range are one vnode range: the same
		// replicas own them.
		return described{}, fmt.Errorf("%w: the two halves of the range (%v, %v] have replicas %v and %v", ErrMalformedReply, largest, smallest, tail, d.byEnd[smallest])
	}
	if len(d.byEnd) != len(tokens) {
		return described{}, fmt.Errorf("%w: describe_ring has %d ranges, the ring %d tokens", ErrInconsistentRing, len(d.byEnd), len(tokens))
	}
	return d, nil
}

// checkEndpoints checks one range's endpoints and details and returns the
// endpoints sorted.
func checkEndpoints(i int, r DescribedRange, members map[string]bool) ([]string, error) {
	if len(r.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: range %d (%s, %s] has no endpoints", ErrMalformedReply, i, r.StartToken, r.EndToken)
	}
	reps := slices.Clone(r.Endpoints)
	slices.Sort(reps)
	for k, ep := range reps {
		switch {
		case ep == "":
			return nil, fmt.Errorf("%w: range %d has an empty endpoint", ErrMalformedReply, i)
		case k > 0 && reps[k-1] == ep:
			return nil, fmt.Errorf("%w: range %d lists endpoint %s twice", ErrMalformedReply, i, ep)
		case !members[ep]:
			return nil, fmt.Errorf("%w: range %d is replicated on %s, which owns no token of the ring", ErrInconsistentRing, i, ep)
		}
	}
	if len(r.EndpointDetails) > 0 {
		hosts := make([]string, 0, len(r.EndpointDetails))
		for _, dt := range r.EndpointDetails {
			hosts = append(hosts, dt.Host)
		}
		slices.Sort(hosts)
		if !slices.Equal(hosts, reps) {
			return nil, fmt.Errorf("%w: range %d: endpoint details %v are not about its endpoints %v", ErrMalformedReply, i, hosts, reps)
		}
	}
	return reps, nil
}

// compare places repl on ring and compares every range with the reply.
func (d described) compare(ring Ring, repl Replication) error {
	got, err := placedReplicas(ring, repl)
	if err != nil {
		return err
	}
	for _, t := range slices.Sorted(maps.Keys(d.byEnd)) {
		if want := d.byEnd[t]; !slices.Equal(got[t], want) {
			return fmt.Errorf("%w: %s places the range ending at %v on %s, the cluster on %s",
				ErrReplicationMismatch, describeReplication(repl), t, strings.Join(got[t], ", "), strings.Join(want, ", "))
		}
	}
	return nil
}

// describeReplication spells a replication as -keyspace takes it.
func describeReplication(r Replication) string {
	switch r.Strategy {
	case SimpleStrategy:
		return fmt.Sprintf("SimpleStrategy:%d", r.ReplicationFactor)
	case NetworkTopologyStrategy:
		parts := make([]string, 0, len(r.Datacenters))
		for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
			parts = append(parts, fmt.Sprintf("%s=%d", dc, r.Datacenters[dc]))
		}
		return "NetworkTopologyStrategy:" + strings.Join(parts, ",")
	}
	return string(r.Strategy)
}

// placedReplicas places repl on ring with the walk Analyze and the
// Scheduler use, and returns the sorted replicas of the range ending at
// each token.
func placedReplicas(ring Ring, repl Replication) (map[Token][]string, error) {
	topo := Topology{Ring: ring, Keyspaces: map[string]Replication{"k": repl}}
	names := endpointNames{ids: map[string]int32{}}
	c, err := topo.compile(&names)
	if err != nil {
		return nil, err
	}
	c.finish()
	out := make(map[Token][]string, len(c.tokens))
	if repl.Strategy == EverywhereStrategy || repl.Strategy == LocalStrategy {
		all := ringMembers(ring)
		for _, t := range c.tokens {
			out[t] = all
		}
		return out, nil
	}
	p, err := placeCached(map[string]placement{}, c, repl)
	if err != nil {
		return nil, err
	}
	cur := newCursors(c, p)
	for i := len(c.owner) - 1; i >= 0; i-- {
		ep := c.owner[i]
		if k := p.partOf[ep]; k >= 0 {
			if err := cur[k].back(p, &p.parts[k], ep); err != nil {
				return nil, err
			}
		}
		var reps []string
		for k := range cur {
			for _, id := range cur[k].reps {
				reps = append(reps, names.list[id])
			}
		}
		slices.Sort(reps)
		out[c.tokens[i]] = reps
	}
	return out, nil
}
