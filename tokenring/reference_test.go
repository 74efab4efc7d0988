package tokenring

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// --- the naive reference -------------------------------------------------
//
// Everything below is deliberately simple: strings and maps, one walk of
// the ring per range, exactly as ScyllaDB's natural_endpoints_tracker
// (locator/network_topology_strategy.cc) and SimpleStrategy describe it. The
// optimised Analyze must agree with it byte for byte.

// refRing is a ring sorted once, with the counts the walks need.
type refRing struct {
	owners   []TokenOwner // sorted by token
	locs     map[string]Location
	distinct map[string]bool
	nodes    map[string]int             // endpoints per datacenter
	racks    map[string]map[string]bool // racks per datacenter
}

func newRefRing(r Ring) *refRing {
	rr := &refRing{owners: slices.Clone(r.Owners), locs: r.Locations, distinct: map[string]bool{},
		nodes: map[string]int{}, racks: map[string]map[string]bool{}}
	sort.Slice(rr.owners, func(a, b int) bool { return rr.owners[a].Token < rr.owners[b].Token })
	for _, o := range rr.owners {
		rr.distinct[o.Endpoint] = true
	}
	for ep := range rr.distinct {
		loc := r.Locations[ep]
		rr.nodes[loc.Datacenter]++
		if rr.racks[loc.Datacenter] == nil {
			rr.racks[loc.Datacenter] = map[string]bool{}
		}
		rr.racks[loc.Datacenter][loc.Rack] = true
	}
	return rr
}

// replicas walks the whole ring from token index i, one token at a time.
func (rr *refRing) replicas(repl Replication, i int) []string {
	owners := rr.owners
	n := len(owners)
	var reps []string
	has := func(ep string) bool { return slices.Contains(reps, ep) }
	switch repl.Strategy {
	case SimpleStrategy:
		want := min(repl.ReplicationFactor, len(rr.distinct))
		for step := 0; step < n && len(reps) < want; step++ {
			if ep := owners[(i+step)%n].Endpoint; !has(ep) {
				reps = append(reps, ep)
			}
		}
	case NetworkTopologyStrategy:
		type dcState struct{ left, repeats int }
		state := map[string]*dcState{}
		for dc, rf := range repl.Datacenters {
			if rf > 0 && rr.nodes[dc] > 0 {
				state[dc] = &dcState{left: min(rf, rr.nodes[dc]), repeats: rf - len(rr.racks[dc])}
			}
		}
		seenRack := map[Location]bool{}
		toFill := len(state)
		for step := 0; step < n && toFill > 0; step++ {
			ep := owners[(i+step)%n].Endpoint
			loc := rr.locs[ep]
			st := state[loc.Datacenter]
			if st == nil || st.left == 0 {
				continue
			}
			switch {
			case !seenRack[loc]:
				seenRack[loc] = true
				reps = append(reps, ep)
				st.left--
			case st.repeats > 0 && !has(ep):
				reps = append(reps, ep)
				st.repeats--
				st.left--
			default:
				continue
			}
			if st.left == 0 {
				toFill--
			}
		}
	case EverywhereStrategy:
		for ep := range rr.distinct {
			reps = append(reps, ep)
		}
	}
	return reps
}

// ownersOf returns who replicated the range holding u: the range of the
// first token at or after u, wrapping to the first token.
func (rr *refRing) ownersOf(repl Replication, u Token) []string {
	if len(rr.owners) == 0 || repl.Strategy == LocalStrategy {
		return nil
	}
	i := sort.Search(len(rr.owners), func(i int) bool { return rr.owners[i].Token >= u })
	if i == len(rr.owners) {
		i = 0 // wraps
	}
	return rr.replicas(repl, i)
}

// referenceAnalysis builds the exact Analysis the reference implies, in
// Analyze's canonical form: the union of both rings' tokens cuts the ring
// into elementary intervals (previous union token, union token], the first
// one wrapping from the largest; each node's lost (gained) intervals are
// merged into maximal runs in that order, a run crossing the wrap is
// joined into the first, and the whole ring is (largest, largest). Two
// EverywhereStrategy settings give each newcomer the whole ring as {0, 0}.
func referenceAnalysis(before, after Topology) Analysis {
	rb, ra := newRefRing(before.Ring), newRefRing(after.Ring)
	res := Analysis{Nodes: map[string]NodeChange{}}
	for ep := range ra.distinct {
		res.Nodes[ep] = NodeChange{Endpoint: ep}
	}
	seen := map[Token]bool{}
	var union []Token
	for _, o := range append(slices.Clone(rb.owners), ra.owners...) {
		if !seen[o.Token] {
			seen[o.Token] = true
			union = append(union, o.Token)
		}
	}
	slices.Sort(union)
	m := len(union)
	for _, ks := range slices.Sorted(maps.Keys(after.Keyspaces)) {
		repA := after.Keyspaces[ks]
		repB, ok := before.Keyspaces[ks]
		if !ok || repA.Strategy == LocalStrategy || repB.Strategy == LocalStrategy {
			continue
		}
		lost, gained := map[string][]Range{}, map[string][]Range{}
		if repA.Strategy == EverywhereStrategy && repB.Strategy == EverywhereStrategy {
			for ep := range ra.distinct {
				if !rb.distinct[ep] {
					gained[ep] = []Range{{0, 0}}
				}
			}
		} else {
			lostAt, gainedAt := map[string][]bool{}, map[string][]bool{}
			mark := func(flags map[string][]bool, ep string, k int) {
				if flags[ep] == nil {
					flags[ep] = make([]bool, m)
				}
				flags[ep][k] = true
			}
			for k, u := range union {
				b, a := rb.ownersOf(repB, u), ra.ownersOf(repA, u)
				for _, ep := range b {
					if !slices.Contains(a, ep) {
						mark(lostAt, ep, k)
					}
				}
				for _, ep := range a {
					if !slices.Contains(b, ep) {
						mark(gainedAt, ep, k)
					}
				}
			}
			for ep, f := range lostAt {
				lost[ep] = runsOf(union, f)
			}
			for ep, f := range gainedAt {
				gained[ep] = runsOf(union, f)
			}
		}
		for ep, n := range res.Nodes {
			if len(lost[ep]) == 0 && len(gained[ep]) == 0 {
				continue
			}
			if n.Keyspaces == nil {
				n.Keyspaces = map[string]KeyspaceChange{}
			}
			n.Keyspaces[ks] = KeyspaceChange{Lost: lost[ep], Gained: gained[ep]}
			res.Nodes[ep] = n
		}
	}
	return res
}

// runsOf merges the flagged elementary intervals into maximal ranges.
func runsOf(union []Token, f []bool) []Range {
	m := len(union)
	var rs []Range
	for k := 0; k < m; {
		if !f[k] {
			k++
			continue
		}
		s := k
		for k < m && f[k] {
			k++
		}
		rs = append(rs, Range{Start: union[(s-1+m)%m], End: union[k-1]})
	}
	if len(rs) >= 2 && f[0] && f[m-1] {
		rs[0].Start = rs[len(rs)-1].Start
		rs = rs[:len(rs)-1]
	}
	return rs
}

// checkExact compares Analyze with referenceAnalysis exactly: the same
// nodes, keyspaces, ranges and order.
func checkExact(t *testing.T, before, after Topology) {
	t.Helper()
	got, err := Analyze(before, after)
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	want := referenceAnalysis(before, after)
	if len(got.Nodes) != len(want.Nodes) {
		t.Fatalf("Analyze lists %d nodes, the reference %d", len(got.Nodes), len(want.Nodes))
	}
	for _, ep := range slices.Sorted(maps.Keys(want.Nodes)) {
		g, w := got.Nodes[ep], want.Nodes[ep]
		if g.Endpoint != w.Endpoint {
			t.Fatalf("node %q: Endpoint %q", ep, g.Endpoint)
		}
		if len(g.Keyspaces) != len(w.Keyspaces) {
			t.Fatalf("node %s: keyspaces %v, reference %v", ep, g.Keyspaces, w.Keyspaces)
		}
		for ks, wc := range w.Keyspaces {
			gc := g.Keyspaces[ks]
			if !sameRanges(gc.Lost, wc.Lost) || !sameRanges(gc.Gained, wc.Gained) {
				t.Fatalf("node %s keyspace %s (%v → %v):\n lost   %v\n want   %v\n gained %v\n want   %v",
					ep, ks, before.Keyspaces[ks], after.Keyspaces[ks], gc.Lost, wc.Lost, gc.Gained, wc.Gained)
			}
		}
	}
}

func sameRanges(a, b []Range) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }

// --- random rings at scale -----------------------------------------------

// scaleCluster is a random multi-datacenter cluster: its endpoints'
// locations and tokens.
type scaleCluster struct {
	locs   map[string]Location
	tokens map[string][]Token
}

// randomScaleCluster makes 1-4 datacenters with 1-5 racks each (sometimes
// a rack per node, sometimes more than 64 racks), 3-60 endpoints with
// 1-48 vnodes each (not all the same), and tokens uniform over 64 bits
// (the radix sort's fast path), clustered in a small space (its fallback),
// or including the extremes of the ring.
func randomScaleCluster(r *rand.Rand, used map[Token]bool) scaleCluster {
	c := scaleCluster{locs: map[string]Location{}, tokens: map[string][]Token{}}
	dcs := 1 + r.IntN(4)
	nodes := 3 + r.IntN(58)
	racks := make([]int, dcs)
	for dc := range racks {
		racks[dc] = 1 + r.IntN(5)
		if r.IntN(8) == 0 {
			racks[dc] = 70 // more racks than a machine word has bits
		}
	}
	vnodes := 1 + r.IntN(48)
	mode := r.IntN(4)
	for i := range nodes {
		ep := fmt.Sprintf("n%d", i)
		dc := r.IntN(dcs)
		c.locs[ep] = Location{fmt.Sprintf("dc%d", dc), fmt.Sprintf("r%d", r.IntN(racks[dc]))}
		v := vnodes
		if r.IntN(3) == 0 {
			v = 1 + r.IntN(48)
		}
		c.tokens[ep] = randomTokens(r, used, mode, v)
	}
	return c
}

func randomTokens(r *rand.Rand, used map[Token]bool, mode, n int) []Token {
	var out []Token
	for range n {
		var tok Token
		switch {
		case mode == 0:
			tok = Token(r.IntN(20000) - 10000)
		case mode == 1 && r.IntN(50) == 0:
			tok = []Token{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, 0, -1}[r.IntN(5)]
		default:
			tok = Token(r.Uint64())
		}
		if !used[tok] {
			used[tok] = true
			out = append(out, tok)
		}
	}
	return out
}

func (c scaleCluster) ring() Ring {
	ring := Ring{Locations: c.locs}
	for _, ep := range slices.Sorted(maps.Keys(c.tokens)) {
		for _, tok := range c.tokens[ep] {
			ring.Owners = append(ring.Owners, TokenOwner{Token: tok, Endpoint: ep})
		}
	}
	return ring
}

func (c scaleCluster) clone() scaleCluster {
	return scaleCluster{locs: maps.Clone(c.locs), tokens: maps.Clone(c.tokens)}
}

// randomChange applies what happens to real clusters (and a few things
// that should not, but may reach Analyze anyway): a scale-out into
// existing or new racks and datacenters, a decommission, a node replaced
// under a new name with the old one's tokens, both at once, a node moved
// to another rack or datacenter, or nothing (a replication change alone).
func randomChange(r *rand.Rand, c scaleCluster, used map[Token]bool) (scaleCluster, string) {
	after := c.clone()
	eps := slices.Sorted(maps.Keys(c.tokens))
	pick := func() string { return eps[r.IntN(len(eps))] }
	addNodes := func(k int) {
		for i := range k {
			ep := fmt.Sprintf("m%d", i)
			loc := c.locs[pick()]
			switch r.IntN(4) {
			case 0:
				loc.Rack = fmt.Sprintf("new%d", r.IntN(2))
			case 1:
				loc = Location{fmt.Sprintf("dc%d", r.IntN(5)), "r0"}
			}
			after.locs[ep] = loc
			after.tokens[ep] = randomTokens(r, used, 2, 1+r.IntN(48))
		}
	}
	removeNodes := func(k int) {
		for range k {
			if len(after.tokens) > 1 {
				delete(after.tokens, pick())
			}
		}
	}
	switch op := r.IntN(7); op {
	case 0, 1:
		addNodes(1 + r.IntN(3))
		return after, "scale-out"
	case 2:
		removeNodes(1 + r.IntN(3))
		return after, "decommission"
	case 3:
		old := pick()
		after.locs["replacement"] = c.locs[old]
		after.tokens["replacement"] = c.tokens[old]
		delete(after.tokens, old)
		return after, "replace"
	case 4:
		removeNodes(1 + r.IntN(2))
		addNodes(1 + r.IntN(2))
		return after, "scale-out and decommission"
	case 5:
		ep := pick()
		loc := after.locs[ep]
		switch r.IntN(3) {
		case 0:
			loc.Rack = "moved" // a new rack
		case 1:
			loc.Rack = fmt.Sprintf("r%d", r.IntN(3)) // most likely another rack of its datacenter
		default:
			loc.Datacenter = "dc9"
		}
		after.locs[ep] = loc
		return after, "moved endpoint"
	default:
		return after, "same ring"
	}
}

// randomScaleReplication is randomReplication with factors up to 6, so
// factors above the racks (and above the nodes) of a datacenter are common.
func randomScaleReplication(r *rand.Rand, dcs map[string]bool) Replication {
	switch r.IntN(8) {
	case 0:
		return simple(1 + r.IntN(5))
	case 1:
		return Replication{Strategy: EverywhereStrategy}
	case 2:
		return Replication{Strategy: LocalStrategy}
	}
	factors := map[string]int{}
	for _, dc := range slices.Sorted(maps.Keys(dcs)) {
		if r.IntN(5) > 0 {
			factors[dc] = r.IntN(7)
		}
	}
	if r.IntN(4) == 0 {
		factors["gone"] = 0
	}
	positive := false
	for _, f := range factors {
		positive = positive || f > 0
	}
	if !positive {
		known := slices.Sorted(maps.Keys(dcs))
		if len(known) == 0 {
			return simple(1 + r.IntN(5))
		}
		factors[known[r.IntN(len(known))]] = 1 + r.IntN(6)
	}
	return nts(factors)
}

// TestAnalyzeAgreesWithReferenceAtScale: rings of hundreds to thousands of
// vnodes over several datacenters and racks, where the optimised paths
// (the bucketed sort, per-datacenter walks, the part-by-part comparison)
// run, give exactly the reference's analysis.
func TestAnalyzeAgreesWithReferenceAtScale(t *testing.T) {
	seeds := uint64(200)
	if testing.Short() {
		seeds = 30
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 1234))
		used := map[Token]bool{}
		c := randomScaleCluster(r, used)
		changed, what := randomChange(r, c, used)
		before, after := c.ring(), changed.ring()
		dcsBefore, dcsAfter := datacentersOf(before), datacentersOf(after)
		both := map[string]bool{}
		for dc := range dcsBefore {
			if dcsAfter[dc] {
				both[dc] = true
			}
		}
		ksBefore, ksAfter := map[string]Replication{}, map[string]Replication{}
		for i := range 1 + r.IntN(3) {
			name := fmt.Sprintf("ks%d", i)
			if len(both) > 0 && r.IntN(2) == 0 {
				ksBefore[name] = randomScaleReplication(r, both)
				ksAfter[name] = ksBefore[name]
			} else {
				ksBefore[name] = randomScaleReplication(r, dcsBefore)
				ksAfter[name] = randomScaleReplication(r, dcsAfter)
			}
		}
		t.Run(fmt.Sprintf("seed%d-%s-%dtokens", seed, what, len(after.Owners)), func(t *testing.T) {
			checkExact(t, Topology{before, ksBefore}, Topology{after, ksAfter})
		})
	}
}
