package tokenring

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// placement says who replicates each range of one ring under one
// replication, without listing it per token: one part per datacenter that
// holds replicas (a single part for SimpleStrategy). A range's replicas
// are the concatenation, in part order, of each part's replicas there.
//
// A part is the datacenter's own sub-ring: its tokens in ring order. The
// range ending at a token gets, from each part, the replicas of the first
// of that part's tokens at or after it (wrapping to the part's first).
// The analysis sweeps the ring backwards with one partCursor per part,
// moved back whenever it passes a token of that part (partOf), and the
// cursor derives the replicas there from those it held (see
// partCursor.back), so a placement costs no memory per token.
type placement struct {
	// everyone marks EverywhereStrategy: every member replicates every
	// range, kept symbolic instead of members × tokens entries.
	everyone bool
	parts    []part
	// partOf is the part of each endpoint id, or -1 for endpoints that
	// hold no replica (a datacenter with factor 0, or no member of the
	// ring).
	partOf []int32
	// rackOf numbers each endpoint's rack within its part (SimpleStrategy:
	// a rack per endpoint).
	rackOf []int32
	// simple marks SimpleStrategy, whose racks are not locations.
	simple bool
}

// part is one datacenter's share. Every range has exactly perTok
// replicas in a part, because each walk can always complete.
type part struct {
	tokens  int // in the sub-ring
	perTok  int // min(factor, endpoints)
	racks   int
	repeats int // factor minus racks: rack repeats a walk may take
	// first holds the replicas of the sub-ring's first token, where the
	// backward sweep starts (past the last token, the ring wraps to it).
	first []int32
	// sub is the sub-ring's owners, kept only for a part that needs
	// rack repeats: there every move of a cursor walks (see back).
	sub []int32
}

// needsWalks reports whether the part's replicas can include two of one
// rack. Otherwise perTok ≤ racks, and the walk takes the first endpoint
// of each of the first perTok racks it meets and nothing else: with no
// repeats allowed that is the rule itself; with repeats allowed and
// perTok ≤ racks, perTok = endpoints ≤ racks, so each rack has a single
// endpoint and a repeat (another endpoint of a rack met) never exists.
func (p *part) needsWalks() bool { return p.perTok > p.racks }

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
	p := newPlacement(c)
	p.simple = true
	if len(c.members) == 0 {
		return p, nil
	}
	for rack, id := range c.members {
		p.partOf[id], p.rackOf[id] = 0, int32(rack)
	}
	perTok := min(rf, len(c.members))
	pt := part{tokens: len(c.owner), perTok: perTok, racks: len(c.members), repeats: rf - len(c.members)}
	if err := p.finishPart(c, 0, &pt); err != nil {
		return placement{}, err
	}
	p.parts = []part{pt}
	return p, nil
}

func newPlacement(c compiledRing) placement {
	p := placement{partOf: make([]int32, len(c.names.list)), rackOf: make([]int32, len(c.names.list))}
	for id := range p.partOf {
		p.partOf[id] = -1
	}
	return p
}

// finishPart walks from the part's first token, and keeps the sub-ring
// when the cursors will have to walk.
func (p *placement) finishPart(c compiledRing, k int32, pt *part) error {
	if pt.needsWalks() {
		pt.sub = make([]int32, 0, pt.tokens)
		for _, ep := range c.owner {
			if p.partOf[ep] == k {
				pt.sub = append(pt.sub, ep)
			}
		}
	}
	pt.first = make([]int32, pt.perTok)
	// The ring's first token of the part opens the walk: walk the ring
	// from index 0, skipping other parts' tokens.
	w := walker{rackSeen: make([]int, pt.racks)}
	if pt.repeats > 0 {
		w.taken = make([]int, len(c.names.list))
	}
	start := slices.IndexFunc(c.owner, func(ep int32) bool { return p.partOf[ep] == k })
	return w.walk(pt.first, c.owner, start, p.partOf, k, p.rackOf, pt.repeats)
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
	p := newPlacement(c)
	type dcCount struct {
		nodes, tokens int
		racks         map[string]int32
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
		p.partOf[id], p.rackOf[id] = int32(k), r
	}
	for _, ep := range c.owner {
		if k := p.partOf[ep]; k >= 0 {
			counts[k].tokens++
		}
	}
	// Datacenters without members in this ring hold nothing here (a
	// topology that asks for replicas there fails Validate first).
	partIndex := make([]int32, len(dcs))
	for k := range dcs {
		partIndex[k] = -1
		if counts[k].nodes > 0 {
			partIndex[k] = int32(len(p.parts))
			rf, cnt := factors[dcs[k]], counts[k]
			p.parts = append(p.parts, part{tokens: cnt.tokens, perTok: min(rf, cnt.nodes), racks: len(cnt.racks), repeats: rf - len(cnt.racks)})
		}
	}
	for _, id := range c.members {
		if k := p.partOf[id]; k >= 0 {
			p.partOf[id] = partIndex[k]
		}
	}
	for k, dc := range dcs {
		if pi := partIndex[k]; pi >= 0 {
			if err := p.finishPart(c, pi, &p.parts[pi]); err != nil {
				return placement{}, errclass.Wrapf("tokenring", err, "datacenter %q", dc)
			}
		}
	}
	return p, nil
}

// walker runs ScyllaDB's per-datacenter replica selection
// (natural_endpoints_tracker::data_center_endpoints in
// locator/network_topology_strategy.cc): walking clockwise, an endpoint
// of a rack not seen yet is taken; one of a rack already seen is taken
// only while rack repeats are left (factor minus racks) and it was not
// taken already; the walk stops at perTok replicas. The seen-sets are
// stamps, so no walk clears anything.
type walker struct {
	stamp    int
	rackSeen []int // by rack
	taken    []int // by endpoint id; only with rack repeats
}

// walk fills out (perTok long) walking seq from start, at most one turn,
// counting only the endpoints of part k.
func (w *walker) walk(out, seq []int32, start int, partOf []int32, k int32, rackOf []int32, repeats int) error {
	w.stamp++
	n, found := len(seq), 0
	for step, idx := 0, start; step < n && found < len(out); step++ {
		ep := seq[idx]
		if idx++; idx == n {
			idx = 0
		}
		if partOf[ep] != k {
			continue
		}
		switch rack := rackOf[ep]; {
		case w.rackSeen[rack] != w.stamp:
			w.rackSeen[rack] = w.stamp
			out[found] = ep
			found++
			if w.taken != nil {
				w.taken[ep] = w.stamp
			}
		case repeats > 0 && w.taken[ep] != w.stamp:
			w.taken[ep] = w.stamp
			out[found] = ep
			found++
			repeats--
		}
	}
	if found < len(out) {
		return errShortWalk(found, len(out))
	}
	return nil
}

// partCursor holds one part's replicas at the sweep's position.
type partCursor struct {
	pos         int // in the sub-ring
	reps, spare []int32
	w           walker // only for parts that need walks
}

func newCursors(c compiledRing, p placement) []partCursor {
	cur := make([]partCursor, len(p.parts))
	for k := range p.parts {
		pt := &p.parts[k]
		cur[k] = partCursor{reps: slices.Clone(pt.first), spare: make([]int32, pt.perTok)}
		if pt.needsWalks() {
			cur[k].w.rackSeen = make([]int, pt.racks)
			cur[k].w.taken = make([]int, len(c.names.list))
		}
	}
	return cur
}

// back moves the cursor to the part's previous token, owned by ep, and
// derives its replicas.
//
// Without rack repeats the replicas are the first endpoint met of each of
// the first perTok racks met (see needsWalks). The walk from token s meets
// s's own rack first and then, in order, the racks the walk from s+1
// meets, less s's rack. So the replicas at s are ep followed by those at
// s+1 that are not in ep's rack, cut to perTok: O(perTok), no walk. (The
// walk from s+1 goes round to s itself at its very end, but ep is in the
// rack dropped.) With rack repeats the cursor walks the sub-ring.
func (cur *partCursor) back(p placement, pt *part, ep int32) error {
	if cur.pos--; cur.pos < 0 {
		cur.pos = pt.tokens - 1
	}
	if pt.needsWalks() {
		return cur.w.walk(cur.reps, pt.sub, cur.pos, p.partOf, p.partOf[ep], p.rackOf, pt.repeats)
	}
	out, rack := cur.spare, p.rackOf[ep]
	out[0] = ep
	k := 1
	for _, x := range cur.reps {
		if k == len(out) {
			break
		}
		if p.rackOf[x] != rack {
			out[k] = x
			k++
		}
	}
	if k < len(out) {
		return errShortWalk(k, len(out))
	}
	cur.reps, cur.spare = out, cur.reps
	return nil
}

// follow moves the cursor to the part's previous token, taking the
// replicas another cursor derived there (see sharedParts).
func (cur *partCursor) follow(pt *part, other *partCursor) {
	if cur.pos--; cur.pos < 0 {
		cur.pos = pt.tokens - 1
	}
	copy(cur.reps, other.reps)
}

// errShortWalk: a full turn meets every endpoint of the datacenter, so a
// walk always finds min(factor, endpoints) replicas, and without repeats
// the racks met are at least perTok. A short walk would leave made-up
// replicas behind, so it is an error, never a placement.
func errShortWalk(found, want int) error {
	return fmt.Errorf("tokenring: internal error: a walk found %d of %d replicas", found, want)
}
