package tokenring

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// placement holds the replicas of every range of one ring under one
// replication, one part per datacenter that holds replicas (a single part
// for SimpleStrategy). A range's replicas are the concatenation, in part
// order, of each part's replicas at that range.
//
// A part is the datacenter's own sub-ring: its tokens in ring order. The
// range ending at a token gets, from each part, the replicas of the first
// of that part's tokens at or after it (wrapping to the part's first), so
// a walk over the ring finds them with one cursor per part, advanced
// whenever it passes a token of that part (partOf).
type placement struct {
	// everyone marks EverywhereStrategy: every member replicates every
	// range, kept symbolic instead of members × tokens entries.
	everyone bool
	parts    []part
	// partOf is the part of each endpoint id, or -1 for endpoints that
	// hold no replica (a datacenter with factor 0, or no member of ring).
	partOf []int32
}

// part is one datacenter's replicas: perTok endpoint ids for each of its
// tokens, in its sub-ring's order. Every range has exactly perTok
// replicas in a part, because each walk can always complete.
type part struct {
	tokens int
	perTok int
	reps   []int32
}

// at returns the replicas of the part's token s.
func (p *part) at(s int) []int32 { return p.reps[s*p.perTok : (s+1)*p.perTok] }

// placeCached computes a placement once per distinct replication setting:
// clusters often have many keyspaces with identical settings.
func placeCached(cache map[string]placement, c compiledRing, r Replication) (placement, error) {
	key := replicationKey(r)
	if p, ok := cache[key]; ok {
		return p, nil
	}
	var p placement
	var err error
	switch r.Strategy {
	case SimpleStrategy:
		p, err = placeSimple(c, r.ReplicationFactor)
	case NetworkTopologyStrategy:
		p, err = placeNetworkTopology(c, r.Datacenters)
	case EverywhereStrategy:
		p = placement{everyone: true}
	}
	if err != nil {
		return placement{}, err
	}
	cache[key] = p
	return p, nil
}

func replicationKey(r Replication) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", r.Strategy, r.ReplicationFactor)
	dcs := make([]string, 0, len(r.Datacenters))
	for dc := range r.Datacenters {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs)
	for _, dc := range dcs {
		fmt.Fprintf(&b, "/%q=%d", dc, r.Datacenters[dc])
	}
	return b.String()
}

// placeSimple takes the next rf distinct endpoints clockwise. That is the
// datacenter walk with every endpoint in a rack of its own: a new rack is
// a new endpoint, and the walk stops at min(rf, members) of them.
func placeSimple(c compiledRing, rf int) (placement, error) {
	p := placement{partOf: make([]int32, len(c.names.list))}
	for id := range p.partOf {
		p.partOf[id] = -1
	}
	if len(c.members) == 0 {
		return p, nil
	}
	for _, id := range c.members {
		p.partOf[id] = 0
	}
	rackOf := make([]int32, len(c.names.list))
	for id := range rackOf {
		rackOf[id] = int32(id)
	}
	perTok := min(rf, len(c.members))
	reps, err := fillPart(c.owner, rackOf, len(c.names.list), perTok, rf-len(c.members), len(c.names.list))
	if err != nil {
		return placement{}, err
	}
	p.parts = []part{{tokens: len(c.owner), perTok: perTok, reps: reps}}
	return p, nil
}

// placeNetworkTopology fills each datacenter separately. That equals
// ScyllaDB's single walk over the whole ring: a datacenter's choice depends
// only on its own endpoints in ring order, and racks and endpoints never
// span datacenters. Walking each datacenter's own sub-ring is what keeps
// this cheap: the walk stops after a handful of that datacenter's tokens
// instead of crossing every other datacenter's.
func placeNetworkTopology(c compiledRing, factors map[string]int) (placement, error) {
	dcs := make([]string, 0, len(factors))
	for dc, rf := range factors {
		if rf > 0 {
			dcs = append(dcs, dc)
		}
	}
	sort.Strings(dcs)
	// partOf first numbers each endpoint's datacenter by its place in
	// dcs (-1 for datacenters the keyspace does not replicate to), and
	// rackOf numbers racks within each datacenter.
	p := placement{partOf: make([]int32, len(c.names.list))}
	for id := range p.partOf {
		p.partOf[id] = -1
	}
	rackOf := make([]int32, len(c.names.list))
	type dcCount struct {
		nodes int
		racks map[string]int32
	}
	counts := make([]dcCount, len(dcs))
	for _, id := range c.members {
		name := c.names.list[id]
		loc, ok := c.locations[name]
		if !ok || loc.Datacenter == "" {
			return placement{}, fmt.Errorf("%w: %q", ErrMissingLocation, name)
		}
		k, found := slices.BinarySearch(dcs, loc.Datacenter)
		if !found {
			continue
		}
		dc := &counts[k]
		dc.nodes++
		if dc.racks == nil {
			dc.racks = map[string]int32{}
		}
		r, ok := dc.racks[loc.Rack]
		if !ok {
			r = int32(len(dc.racks))
			dc.racks[loc.Rack] = r
		}
		p.partOf[id], rackOf[id] = int32(k), r
	}
	// Datacenters without members in this ring hold nothing here (a
	// topology that asks for replicas there fails Validate first).
	partIndex := make([]int32, len(dcs))
	for k := range dcs {
		partIndex[k] = -1
		if counts[k].nodes > 0 {
			partIndex[k] = int32(len(p.parts))
			p.parts = append(p.parts, part{})
		}
	}
	for _, id := range c.members {
		if k := p.partOf[id]; k >= 0 {
			p.partOf[id] = partIndex[k]
		}
	}
	// Each datacenter's sub-ring: its owners in ring order.
	subs := make([][]int32, len(p.parts))
	sizes := make([]int, len(p.parts))
	for _, ep := range c.owner {
		if k := p.partOf[ep]; k >= 0 {
			sizes[k]++
		}
	}
	for k := range subs {
		subs[k] = make([]int32, 0, sizes[k])
	}
	for _, ep := range c.owner {
		if k := p.partOf[ep]; k >= 0 {
			subs[k] = append(subs[k], ep)
		}
	}
	for k, dc := range dcs {
		pi := partIndex[k]
		if pi < 0 {
			continue
		}
		rf, cnt := factors[dc], counts[k]
		perTok := min(rf, cnt.nodes)
		reps, err := fillPart(subs[pi], rackOf, len(cnt.racks), perTok, rf-len(cnt.racks), len(c.names.list))
		if err != nil {
			return placement{}, fmt.Errorf("datacenter %q: %w", dc, err)
		}
		p.parts[pi] = part{tokens: len(subs[pi]), perTok: perTok, reps: reps}
	}
	return p, nil
}

// fillPart runs ScyllaDB's per-datacenter replica selection
// (natural_endpoints_tracker::data_center_endpoints in
// locator/network_topology_strategy.cc) from every token of a sub-ring:
// walking clockwise, an endpoint of a rack not seen yet is taken; one of a
// rack already seen is taken only while rack repeats are left (factor
// minus racks) and it was not taken already; the walk stops at perTok
// replicas.
//
// Without rack repeats (at least as many racks as the factor, the usual
// case, and always SimpleStrategy's) the replicas are the first endpoint
// met of each of the first perTok racks met. The walk from token s meets
// s's own rack first and then, in order, the racks the walk from s+1
// meets, less s's rack. So the replicas at s are sub[s] followed by the
// replicas at s+1 that are not in sub[s]'s rack, cut to perTok: one walk
// from token 0, then each token from its successor, backwards round the
// ring, in O(perTok) each. (The walk from s+1 goes round to s itself at
// its very end, but sub[s] is in the rack dropped.)
func fillPart(sub, rackOf []int32, racks, perTok, repeats, endpoints int) ([]int32, error) {
	m := len(sub)
	reps := make([]int32, m*perTok)
	if repeats > 0 || m == 0 {
		return reps, walkPart(reps, sub, rackOf, racks, perTok, repeats, endpoints, 0, m)
	}
	if err := walkPart(reps, sub, rackOf, racks, perTok, repeats, endpoints, 0, 1); err != nil {
		return nil, err
	}
	next := reps[:perTok] // the replicas at s+1, and at m ≡ 0 to begin
	for s := m - 1; s >= 1; s-- {
		out := reps[s*perTok : (s+1)*perTok]
		ep := sub[s]
		rack := rackOf[ep]
		out[0] = ep
		k := 1
		for _, x := range next {
			if k == perTok {
				break
			}
			if rackOf[x] != rack {
				out[k] = x
				k++
			}
		}
		if k < perTok {
			return nil, errShortWalk(k, perTok)
		}
		next = out
	}
	return reps, nil
}

// walkPart walks from each token s in [from, to) of the sub-ring, at most
// one full turn. The seen-sets are stamps (the walk's start + 1), so no
// walk clears anything.
func walkPart(reps, sub, rackOf []int32, racks, perTok, repeats, endpoints, from, to int) error {
	m := len(sub)
	rackSeen := make([]int, racks)
	var taken []int // only needed with rack repeats
	if repeats > 0 {
		taken = make([]int, endpoints)
	}
	for s := from; s < to; s++ {
		stamp := s + 1
		out := reps[s*perTok : (s+1)*perTok]
		k, repeatsLeft, idx := 0, repeats, s
		for step := 0; step < m && k < perTok; step++ {
			ep := sub[idx]
			if idx++; idx == m {
				idx = 0
			}
			switch rack := rackOf[ep]; {
			case rackSeen[rack] != stamp:
				rackSeen[rack] = stamp
				out[k] = ep
				k++
				if taken != nil {
					taken[ep] = stamp
				}
			case repeatsLeft > 0 && taken[ep] != stamp:
				taken[ep] = stamp
				out[k] = ep
				k++
				repeatsLeft--
			}
		}
		if k < perTok {
			return errShortWalk(k, perTok)
		}
	}
	return nil
}

// errShortWalk: a full turn meets every endpoint of the datacenter, so a
// walk always finds min(factor, endpoints) replicas, and the racks met
// are at least the factor when no repeat is allowed. A short walk would
// leave made-up replicas behind, so it is an error, never a placement.
func errShortWalk(found, want int) error {
	return fmt.Errorf("tokenring: internal error: a walk found %d of %d replicas", found, want)
}
