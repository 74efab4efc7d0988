package tokenring

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// placement holds the replicas of every token's range: perToken endpoint
// ids for token i at reps[i*perToken:]. Every range of a ring has the same
// number of replicas, because each walk can always complete.
type placement struct {
	perToken int
	reps     []int32
	// everyone marks EverywhereStrategy: every member replicates every
	// range, kept symbolic instead of members × tokens entries.
	everyone bool
}

func (p placement) of(i int) []int32 { return p.reps[i*p.perToken : (i+1)*p.perToken] }

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
		p = placeSimple(c, r.ReplicationFactor)
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

// placeSimple walks clockwise from each token collecting distinct endpoints.
func placeSimple(c compiledRing, rf int) placement {
	k := min(rf, len(c.members))
	p := placement{perToken: k, reps: make([]int32, 0, len(c.tokens)*k)}
	if k == 0 {
		return p
	}
	n := len(c.tokens)
	for i := range n {
		start := len(p.reps)
		for step := 0; step < n && len(p.reps)-start < k; step++ {
			ep := c.owner[(i+step)%n]
			if !slices.Contains(p.reps[start:], ep) {
				p.reps = append(p.reps, ep)
			}
		}
	}
	return p
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
	// dcOf numbers each endpoint's datacenter by its place in dcs, or -1
	// for datacenters the keyspace does not replicate to.
	dcOf := make([]int, len(c.names.list))
	for _, id := range c.members {
		name := c.names.list[id]
		loc, ok := c.locations[name]
		if !ok || loc.Datacenter == "" {
			return placement{}, fmt.Errorf("%w: %q", ErrMissingLocation, name)
		}
		dcOf[id] = -1
		if k, found := slices.BinarySearch(dcs, loc.Datacenter); found {
			dcOf[id] = k
		}
	}

	type dcPlan struct {
		sub     []int   // global token indexes of this datacenter's tokens
		rackOf  []int32 // rack number per endpoint id (only this dc's)
		nodes   int
		racks   int
		perTok  int
		repeats int
		reps    []int32 // perTok per sub position
	}
	plans := make([]dcPlan, 0, len(dcs))
	perToken := 0
	for dcIndex, dc := range dcs {
		pl := dcPlan{rackOf: make([]int32, len(c.names.list))}
		rackIDs := map[string]int32{}
		for _, id := range c.members {
			if dcOf[id] != dcIndex {
				continue
			}
			pl.nodes++
			rack := c.locations[c.names.list[id]].Rack
			r, ok := rackIDs[rack]
			if !ok {
				r = int32(len(rackIDs))
				rackIDs[rack] = r
			}
			pl.rackOf[id] = r
		}
		if pl.nodes == 0 {
			continue
		}
		// Tokens per node are roughly even: size sub once instead of growing it.
		pl.sub = make([]int, 0, len(c.owner)/len(c.members)*pl.nodes+pl.nodes)
		for i, ep := range c.owner {
			if dcOf[ep] == dcIndex {
				pl.sub = append(pl.sub, i)
			}
		}
		pl.racks = len(rackIDs)
		rf := factors[dc]
		pl.perTok = min(rf, pl.nodes)
		pl.repeats = rf - pl.racks
		pl.reps = fillDatacenter(c.owner, pl.sub, pl.rackOf, pl.perTok, pl.repeats)
		perToken += pl.perTok
		plans = append(plans, pl)
	}

	n := len(c.tokens)
	p := placement{perToken: perToken, reps: make([]int32, n*perToken)}
	offset := 0
	for _, pl := range plans {
		// A range's replicas in this datacenter are those of the first of
		// its tokens at or after the range's end, wrapping to the first.
		next := 0
		for i := range n {
			for next < len(pl.sub) && pl.sub[next] < i {
				next++
			}
			s := next
			if s == len(pl.sub) {
				s = 0
			}
			copy(p.reps[i*perToken+offset:], pl.reps[s*pl.perTok:(s+1)*pl.perTok])
		}
		offset += pl.perTok
	}
	return p, nil
}

// fillDatacenter runs ScyllaDB's per-datacenter replica selection from every
// position of the datacenter's sub-ring.
func fillDatacenter(owner []int32, sub []int, rackOf []int32, perTok, repeats int) []int32 {
	reps := make([]int32, 0, len(sub)*perTok)
	var racksSeen []int32
	for s := range sub {
		start := len(reps)
		left, repeatsLeft := perTok, repeats
		racksSeen = racksSeen[:0]
		for step := 0; step < len(sub) && left > 0; step++ {
			ep := owner[sub[(s+step)%len(sub)]]
			rack := rackOf[ep]
			switch {
			case !slices.Contains(racksSeen, rack):
				racksSeen = append(racksSeen, rack)
				reps = append(reps, ep)
				left--
			case repeatsLeft > 0 && !slices.Contains(reps[start:], ep):
				reps = append(reps, ep)
				repeatsLeft--
				left--
			}
		}
	}
	return reps
}

// holds reports whether ep is among reps, in O(1) when reps is every member.
func holds(p placement, c compiledRing, reps []int32, ep int32) bool {
	if p.everyone {
		return c.isMember[ep]
	}
	return slices.Contains(reps, ep)
}
