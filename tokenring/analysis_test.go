package tokenring

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// ring builds a Ring from "token:endpoint" pairs and endpoint locations.
func ring(locs map[string]Location, pairs ...any) Ring {
	r := Ring{Locations: locs}
	for i := 0; i < len(pairs); i += 2 {
		r.Owners = append(r.Owners, TokenOwner{Token: Token(pairs[i].(int)), Endpoint: pairs[i+1].(string)})
	}
	return r
}

func simple(rf int) Replication { return Replication{Strategy: SimpleStrategy, ReplicationFactor: rf} }

func nts(dcs map[string]int) Replication {
	return Replication{Strategy: NetworkTopologyStrategy, Datacenters: dcs}
}

func one(ks string, r Replication) map[string]Replication { return map[string]Replication{ks: r} }

// lostOf and gainedOf return the ranges node lost or gained in ks.
func lostOf(a Analysis, node, ks string) []Range   { return a.Nodes[node].Keyspaces[ks].Lost }
func gainedOf(a Analysis, node, ks string) []Range { return a.Nodes[node].Keyspaces[ks].Gained }

func mustAnalyze(t *testing.T, before, after Topology) Analysis {
	t.Helper()
	a, err := Analyze(before, after)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func eqRanges(t *testing.T, what string, got []Range, want ...Range) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// The hand-computed rings below are worked out in the comments; a token
// owns (previous token, token].

// SimpleStrategy RF 2, ring A@10 B@20 C@30:
//
//	(30,10] → A,B   (10,20] → B,C   (20,30] → C,A
//
// Adding D@15:
//
//	(30,10] → A,D   (10,15] → D,B   (15,20] → B,C   (20,30] → C,A
//
// A keeps exactly (20,10]; B loses (30,10]; C loses (10,15]; D gains (30,15].
var (
	threeNodes = ring(nil, 10, "A", 20, "B", 30, "C")
	fourNodes  = ring(nil, 10, "A", 15, "D", 20, "B", 30, "C")
)

func TestScaleOutCleansOnlyNodesThatLostRanges(t *testing.T) {
	a := mustAnalyze(t, Topology{threeNodes, one("ks", simple(2))}, Topology{fourNodes, one("ks", simple(2))})
	if got, want := a.NeedsCleanup(), []string{"B", "C"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsCleanup = %v, want %v (A only kept its ranges, D is new)", got, want)
	}
	if len(a.Nodes["A"].Keyspaces) != 0 {
		t.Errorf("A changed: %+v", a.Nodes["A"])
	}
	eqRanges(t, "B lost", lostOf(a, "B", "ks"), Range{30, 10})
	eqRanges(t, "C lost", lostOf(a, "C", "ks"), Range{10, 15})
	eqRanges(t, "D gained", gainedOf(a, "D", "ks"), Range{30, 15})
	eqRanges(t, "D lost", lostOf(a, "D", "ks"))
}

func TestDecommissionCleansNobodyWhoOnlyGained(t *testing.T) {
	a := mustAnalyze(t, Topology{fourNodes, one("ks", simple(2))}, Topology{threeNodes, one("ks", simple(2))})
	if got := a.NeedsCleanup(); len(got) != 0 {
		t.Fatalf("NeedsCleanup = %v, want nobody", got)
	}
	if _, ok := a.Nodes["D"]; ok {
		t.Error("the decommissioned node is listed")
	}
	eqRanges(t, "B gained", gainedOf(a, "B", "ks"), Range{30, 10})
	eqRanges(t, "C gained", gainedOf(a, "C", "ks"), Range{10, 15})
}

// RF 2 → 1 on A@10 B@20 C@30: each node keeps only its primary range.
func TestReplicationFactorDecreaseWithUnchangedRing(t *testing.T) {
	a := mustAnalyze(t, Topology{threeNodes, one("ks", simple(2))}, Topology{threeNodes, one("ks", simple(1))})
	if got, want := a.NeedsCleanup(), []string{"A", "B", "C"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsCleanup = %v, want %v", got, want)
	}
	eqRanges(t, "A lost", lostOf(a, "A", "ks"), Range{20, 30})
	eqRanges(t, "B lost", lostOf(a, "B", "ks"), Range{30, 10})
	eqRanges(t, "C lost", lostOf(a, "C", "ks"), Range{10, 20})
	// And back up: nobody loses, everybody gains.
	a = mustAnalyze(t, Topology{threeNodes, one("ks", simple(1))}, Topology{threeNodes, one("ks", simple(2))})
	if got := a.NeedsCleanup(); len(got) != 0 {
		t.Fatalf("RF increase: NeedsCleanup = %v", got)
	}
}

// One datacenter, racks r1 {A@10, B@20} and r2 {C@30, D@40}.
//
//	SimpleStrategy 2:          (40,10] A,B  (10,20] B,C  (20,30] C,D  (30,40] D,A
//	NetworkTopologyStrategy 2: (40,10] A,C  (10,20] B,C  (20,30] C,A  (30,40] D,A
//
// (NTS skips a rack it has seen: from 10, B is rack r1 like A, so C.)
var (
	twoRacks = map[string]Location{"A": {"dc1", "r1"}, "B": {"dc1", "r1"}, "C": {"dc1", "r2"}, "D": {"dc1", "r2"}, "G": {"dc1", "r1"}}
	rackRing = ring(twoRacks, 10, "A", 20, "B", 30, "C", 40, "D")
)

func TestStrategyChangeWithUnchangedRing(t *testing.T) {
	a := mustAnalyze(t, Topology{rackRing, one("ks", simple(2))}, Topology{rackRing, one("ks", nts(map[string]int{"dc1": 2}))})
	if got, want := a.NeedsCleanup(), []string{"B", "D"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsCleanup = %v, want %v", got, want)
	}
	eqRanges(t, "B lost", lostOf(a, "B", "ks"), Range{40, 10})
	eqRanges(t, "D lost", lostOf(a, "D", "ks"), Range{20, 30})
	eqRanges(t, "C gained", gainedOf(a, "C", "ks"), Range{40, 10})
	eqRanges(t, "A gained", gainedOf(a, "A", "ks"), Range{20, 30})
}

// Adding G@25 in rack r1 under NTS dc1:2:
//
//	(40,10] A,C  (10,20] B,C  (20,25] G,C  (25,30] C,A  (30,40] D,A
//
// Only A loses (20,25]; the hash trigger would clean all four old nodes.
func TestNetworkTopologyScaleOutWithRacks(t *testing.T) {
	after := ring(twoRacks, 10, "A", 20, "B", 25, "G", 30, "C", 40, "D")
	ks := one("ks", nts(map[string]int{"dc1": 2}))
	a := mustAnalyze(t, Topology{rackRing, ks}, Topology{after, ks})
	if got, want := a.NeedsCleanup(), []string{"A"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsCleanup = %v, want %v", got, want)
	}
	eqRanges(t, "A lost", lostOf(a, "A", "ks"), Range{20, 25})
	eqRanges(t, "G gained", gainedOf(a, "G", "ks"), Range{20, 25})
}

// A datacenter with one rack and RF 2 accepts a rack repeat (RF - racks =
// 1); the second datacenter's factor is independent of the first.
func TestNetworkTopologyRackRepeatsAndTwoDatacenters(t *testing.T) {
	locs := map[string]Location{"A": {"dc1", "r1"}, "B": {"dc1", "r1"}, "C": {"dc1", "r1"}, "X": {"dc2", "x"}, "Y": {"dc2", "y"}}
	r := ring(locs, 10, "A", 15, "X", 20, "B", 30, "C", 35, "Y")
	// dc1:2 → like SimpleStrategy over A,B,C; dc2:1 → the next of X@15, Y@35.
	c := compileForTest(t, r)
	p, err := placeNetworkTopology(c, map[string]int{"dc1": 2, "dc2": 1})
	if err != nil {
		t.Fatal(err)
	}
	names := compileNames(r)
	want := [][]string{
		{"A", "B", "X"}, // (35,10]
		{"B", "C", "X"}, // (10,15]
		{"B", "C", "Y"}, // (15,20]
		{"C", "A", "Y"}, // (20,30]
		{"A", "B", "Y"}, // (30,35]
	}
	for i, w := range want {
		var got []string
		for _, id := range replicasOfToken(c, p, i) {
			got = append(got, names[id])
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("range %d replicas = %v, want %v", i, got, w)
		}
	}
}

func compileForTest(t *testing.T, r Ring) compiledRing {
	t.Helper()
	names := &endpointNames{ids: map[string]int32{}}
	c, err := compileRing(r, names)
	if err != nil {
		t.Fatal(err)
	}
	c.finish()
	return c
}

// replicasOfToken returns the replicas of the range ending at token i: from
// each part, those of a walk from the part's first token at or after i.
func replicasOfToken(c compiledRing, p placement, i int) []int32 {
	var reps []int32
	n := len(c.owner)
	for k := range p.parts {
		pt := &p.parts[k]
		start := i
		for p.partOf[c.owner[start]] != int32(k) {
			start = (start + 1) % n
		}
		out := make([]int32, pt.perTok)
		w := walker{rackSeen: make([]int, pt.racks), taken: make([]int, len(c.names.list))}
		if err := w.walk(out, c.owner, start, p.partOf, int32(k), p.rackOf, pt.repeats); err != nil {
			panic(err)
		}
		reps = append(reps, out...)
	}
	return reps
}

func compileNames(r Ring) []string {
	names := &endpointNames{ids: map[string]int32{}}
	_, _ = compileRing(r, names)
	return names.list
}

func TestWholeRingAndWrap(t *testing.T) {
	// One node holds everything; a second one takes half of it.
	before := Topology{ring(nil, 0, "A"), one("ks", simple(1))}
	after := Topology{ring(nil, 0, "A", 100, "B"), one("ks", simple(1))}
	a := mustAnalyze(t, before, after)
	eqRanges(t, "A lost", lostOf(a, "A", "ks"), Range{0, 100})
	eqRanges(t, "B gained", gainedOf(a, "B", "ks"), Range{0, 100})
	// And B replaces A entirely: B gains the whole ring (Start == End).
	a = mustAnalyze(t, before, Topology{ring(nil, 50, "B"), one("ks", simple(1))})
	eqRanges(t, "B gained", gainedOf(a, "B", "ks"), Range{50, 50})
	if !(Range{50, 50}).Contains(-1 << 63) {
		t.Error("a Start == End range does not contain everything")
	}
}

func TestKeyspacesOnlyInOneSnapshotAndLocal(t *testing.T) {
	before := Topology{threeNodes, map[string]Replication{"dropped": simple(2), "sys": {Strategy: LocalStrategy}, "ks": simple(2)}}
	after := Topology{fourNodes, map[string]Replication{"new": simple(2), "sys": {Strategy: LocalStrategy}, "ks": simple(2)}}
	a := mustAnalyze(t, before, after)
	for _, n := range a.Nodes {
		for ks := range n.Keyspaces {
			if ks != "ks" {
				t.Errorf("%s has a change in %q", n.Endpoint, ks)
			}
		}
	}
}

func TestEverywhereStrategy(t *testing.T) {
	ks := one("ks", Replication{Strategy: EverywhereStrategy})
	a := mustAnalyze(t, Topology{threeNodes, ks}, Topology{fourNodes, ks})
	if got := a.NeedsCleanup(); len(got) != 0 {
		t.Errorf("NeedsCleanup = %v", got)
	}
	eqRanges(t, "D gained", gainedOf(a, "D", "ks"), Range{0, 0})
}

func TestAnalyzeRejectsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		before, after Topology
		want          error
	}{
		"duplicate token": {Topology{Ring: ring(nil, 1, "A", 1, "B")}, Topology{}, ErrInvalidRing},
		"empty endpoint":  {Topology{}, Topology{Ring: ring(nil, 1, "")}, ErrInvalidRing},
		"unknown strategy": {Topology{threeNodes, one("ks", Replication{Strategy: "Mystery"})},
			Topology{threeNodes, one("ks", simple(1))}, ErrInvalidReplication},
		"negative rf": {Topology{threeNodes, one("ks", simple(1))}, Topology{threeNodes, one("ks", simple(-1))}, ErrInvalidReplication},
		"negative dc rf": {Topology{rackRing, one("ks", simple(1))},
			Topology{rackRing, one("ks", nts(map[string]int{"dc1": -2}))}, ErrInvalidReplication},
		"missing location": {Topology{threeNodes, one("ks", nts(map[string]int{"dc1": 1}))},
			Topology{threeNodes, one("ks", simple(1))}, ErrMissingLocation},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Analyze(tc.before, tc.after)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{
		"SimpleStrategy": SimpleStrategy, "org.apache.cassandra.locator.NetworkTopologyStrategy": NetworkTopologyStrategy,
		"org.apache.cassandra.locator.LocalStrategy": LocalStrategy, "EverywhereStrategy": EverywhereStrategy,
	} {
		if got, err := ParseStrategy(in); err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseStrategy("OldNetworkTopologyStrategy"); !errors.Is(err, ErrInvalidReplication) {
		t.Errorf("unknown strategy: %v", err)
	}
}

// checkAgainstReference compares Analyze with the reference at every token
// of both rings (each range of the result is a union of the intervals those
// tokens end) and at one token inside each interval.
func checkAgainstReference(t *testing.T, before, after Topology) {
	t.Helper()
	got, err := Analyze(before, after)
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	var probes []Token
	for _, o := range append(slices.Clone(before.Ring.Owners), after.Ring.Owners...) {
		probes = append(probes, o.Token, o.Token-1)
	}
	afterMembers := map[string]bool{}
	for _, o := range after.Ring.Owners {
		afterMembers[o.Endpoint] = true
	}
	if len(got.Nodes) != len(afterMembers) {
		t.Fatalf("Analyze lists %d nodes, after ring has %d", len(got.Nodes), len(afterMembers))
	}
	covered := func(rs []Range, u Token) bool {
		n := 0
		for _, r := range rs {
			if r.Contains(u) {
				n++
			}
		}
		if n > 1 {
			t.Errorf("ranges %v overlap at %v", rs, u)
		}
		return n == 1
	}
	refBefore, refAfter := newRefRing(before.Ring), newRefRing(after.Ring)
	for ks, ra := range after.Keyspaces {
		rb, ok := before.Keyspaces[ks]
		if !ok {
			continue
		}
		for _, u := range probes {
			b, a := refBefore.ownersOf(rb, u), refAfter.ownersOf(ra, u)
			for ep := range afterMembers {
				wantLost := slices.Contains(b, ep) && !slices.Contains(a, ep)
				wantGained := slices.Contains(a, ep) && !slices.Contains(b, ep)
				ch := got.Nodes[ep].Keyspaces[ks]
				if covered(ch.Lost, u) != wantLost || covered(ch.Gained, u) != wantGained {
					t.Fatalf("keyspace %s token %v node %s: lost %v gained %v, reference lost=%v gained=%v (before %v, after %v)",
						ks, u, ep, ch.Lost, ch.Gained, wantLost, wantGained, b, a)
				}
			}
		}
	}
	checkExact(t, before, after)
}

// randomCluster makes a topology with up to 3 datacenters, 3 racks each.
func randomCluster(r *rand.Rand, prefix string, nodes int) map[string]Location {
	locs := map[string]Location{}
	dcs := 1 + r.IntN(3)
	for i := range nodes {
		dc := r.IntN(dcs)
		locs[fmt.Sprintf("%s%d", prefix, i)] = Location{fmt.Sprintf("dc%d", dc), fmt.Sprintf("r%d", r.IntN(3))}
	}
	return locs
}

// randomRing gives each endpoint 1-4 tokens from a small space, so the
// two rings share tokens often and wrap-around cases are common.
func randomRing(r *rand.Rand, locs map[string]Location) Ring {
	ring := Ring{Locations: locs}
	used := map[Token]bool{}
	eps := make([]string, 0, len(locs))
	for ep := range locs {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	for _, ep := range eps {
		for range 1 + r.IntN(4) {
			tok := Token(r.IntN(200) - 100)
			if used[tok] {
				continue
			}
			used[tok] = true
			ring.Owners = append(ring.Owners, TokenOwner{Token: tok, Endpoint: ep})
		}
	}
	return ring
}

// randomReplication returns a replication valid for a ring whose
// datacenters are dcs: factors of 0 (also for a datacenter the ring does
// not have) are common, and at least one factor is positive.
func randomReplication(r *rand.Rand, dcs map[string]bool) Replication {
	switch r.IntN(5) {
	case 0:
		return simple(1 + r.IntN(4))
	case 1:
		return Replication{Strategy: EverywhereStrategy}
	default:
		factors := map[string]int{}
		var positive []string
		for dc := range 3 {
			name := fmt.Sprintf("dc%d", dc)
			switch {
			case r.IntN(4) == 0:
			case dcs[name]:
				factors[name] = r.IntN(5)
				if factors[name] > 0 {
					positive = append(positive, name)
				}
			default:
				factors[name] = 0 // a datacenter drained and gone
			}
		}
		if len(positive) == 0 {
			known := slices.Sorted(maps.Keys(dcs))
			if len(known) == 0 {
				return simple(1 + r.IntN(4))
			}
			factors[known[r.IntN(len(known))]] = 1 + r.IntN(4)
		}
		return nts(factors)
	}
}

// datacentersOf returns the datacenters of a ring's token owners.
func datacentersOf(ring Ring) map[string]bool {
	dcs := map[string]bool{}
	for _, o := range ring.Owners {
		dcs[ring.Locations[o.Endpoint].Datacenter] = true
	}
	return dcs
}

// TestAnalyzeAgreesWithReference: random topologies, rings, scale-outs,
// decommissions, replication and strategy changes, seeded and reproducible.
func TestAnalyzeAgreesWithReference(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 42))
		locs := randomCluster(r, "n", 1+r.IntN(10))
		before := randomRing(r, locs)

		// After: keep a random subset of endpoints with their tokens (a
		// decommission), add new ones (a scale-out), or reshuffle.
		afterLocs := map[string]Location{}
		for ep, loc := range locs {
			if r.IntN(4) > 0 {
				afterLocs[ep] = loc
			}
		}
		for ep, loc := range randomCluster(r, "m", r.IntN(4)) {
			afterLocs[ep] = loc
		}
		var after Ring
		if r.IntN(2) == 0 {
			after = Ring{Locations: afterLocs}
			used := map[Token]bool{}
			for _, o := range before.Owners {
				if _, ok := afterLocs[o.Endpoint]; ok {
					after.Owners = append(after.Owners, o)
					used[o.Token] = true
				}
			}
			for _, o := range randomRing(r, afterLocs).Owners {
				if !used[o.Token] && o.Endpoint[0] == 'm' {
					after.Owners = append(after.Owners, o)
					used[o.Token] = true
				}
			}
		} else {
			after = randomRing(r, afterLocs)
		}

		ks := map[string]Replication{}
		ksAfter := map[string]Replication{}
		dcsBefore, dcsAfter := datacentersOf(before), datacentersOf(after)
		both := map[string]bool{}
		for dc := range dcsBefore {
			if dcsAfter[dc] {
				both[dc] = true
			}
		}
		for i := range 1 + r.IntN(3) {
			name := fmt.Sprintf("ks%d", i)
			if r.IntN(2) == 0 {
				ks[name] = randomReplication(r, both) // unchanged: valid in both rings
				ksAfter[name] = ks[name]
			} else {
				ks[name] = randomReplication(r, dcsBefore)
				ksAfter[name] = randomReplication(r, dcsAfter)
			}
		}
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			checkAgainstReference(t, Topology{before, ks}, Topology{after, ksAfter})
		})
	}
}

// TestRadixSortByToken covers the large-ring path the small random rings
// above never reach: signed order, extremes, stability for equal tokens.
func TestRadixSortByToken(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{255, 256, 5000} {
		pairs := make([]ownedToken, n)
		for i := range pairs {
			tok := Token(r.Uint64())
			switch i % 7 {
			case 0:
				tok = -1 << 63
			case 1:
				tok = 1<<63 - 1
			case 2:
				tok = Token(r.IntN(5) - 2) // many equal small tokens
			}
			pairs[i] = ownedToken{token: tok, owner: int32(i)}
		}
		want := slices.Clone(pairs)
		slices.SortStableFunc(want, func(x, y ownedToken) int {
			switch {
			case x.token < y.token:
				return -1
			case x.token > y.token:
				return 1
			}
			return 0
		})
		radixSortByToken(pairs)
		if !slices.Equal(pairs, want) {
			t.Fatalf("n=%d: radix sort disagrees with a stable sort", n)
		}
	}
}

// TestLocationChangeWithUnchangedTokens: an endpoint that changes rack or
// datacenter keeps its tokens, so the two rings agree token for token;
// the analysis must still see that replicas moved. (The sweep derives a
// token's replicas once for both rings only while every endpoint keeps
// its location: this is the change that must turn that off.)
func TestLocationChangeWithUnchangedTokens(t *testing.T) {
	locs := func(dRack, dDC string) map[string]Location {
		return map[string]Location{
			"A": {"dc1", "r1"}, "B": {"dc1", "r2"}, "C": {"dc1", "r3"},
			"D": {dDC, dRack}, "E": {"dc1", "r2"}, "F": {"dc1", "r3"},
			"X": {"dc2", "x1"}, "Y": {"dc2", "x2"},
		}
	}
	tokens := func(l map[string]Location) Ring {
		return ring(l, 10, "A", 20, "D", 30, "B", 40, "E", 50, "D", 60, "C", 70, "F", 80, "D",
			90, "A", 100, "X", 110, "B", 120, "Y", 130, "D", 140, "C", 150, "E")
	}
	before := tokens(locs("r1", "dc1"))
	for name, after := range map[string]Ring{
		"rack":       tokens(locs("r2", "dc1")),
		"datacenter": tokens(locs("x1", "dc2")),
	} {
		t.Run(name, func(t *testing.T) {
			for _, r := range []Replication{nts(map[string]int{"dc1": 2, "dc2": 1}), nts(map[string]int{"dc1": 3, "dc2": 2})} {
				ks := one("ks", r)
				checkExact(t, Topology{before, ks}, Topology{after, ks})
				if got := mustAnalyze(t, Topology{before, ks}, Topology{after, ks}).NeedsCleanup(); len(got) == 0 {
					t.Errorf("%v: nobody lost a range when D moved", r)
				}
			}
		})
	}
}

// TestSortByToken covers both paths of the ring sort (buckets and insertion
// for spread tokens, the byte-wise radix sort for crowded or small rings)
// against a stable sort: order, owners, the duplicate flag, and which
// duplicate compileRing names. (Only time tells whether crowded tokens
// took the radix sort: the insertion sort would still sort them, slowly.)
func TestSortByToken(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	eps := make([]string, 50)
	for i := range eps {
		eps[i] = fmt.Sprintf("n%d", i)
	}
	for _, n := range []int{0, 1, 255, 256, 257, 1000, 20000} {
		for _, spread := range []string{"uniform", "crowded", "extremes", "evenly split"} {
			for _, dups := range []int{0, 1, 3} {
				owners := make([]TokenOwner, n)
				for i := range owners {
					var tok Token
					switch spread {
					case "uniform":
						tok = Token(r.Uint64())
					case "crowded":
						tok = Token(r.IntN(1 << 20))
					case "extremes":
						tok = []Token{math.MinInt64, math.MaxInt64, -1, 0}[i%4] + Token(r.IntN(1<<30))*Token(1-2*(i%2))
					case "evenly split":
						tok = Token(uint64(i)*(math.MaxUint64/uint64(n)) ^ 1<<63) // i-th of n equal steps from the smallest token
					}
					owners[i] = TokenOwner{Token: tok, Endpoint: eps[r.IntN(len(eps))]}
				}
				for range dups {
					if n > 1 {
						owners[r.IntN(n)].Token = owners[r.IntN(n)].Token
					}
				}
				want := slices.Clone(owners)
				slices.SortStableFunc(want, func(x, y TokenOwner) int { return cmp.Compare(x.Token, y.Token) })
				wantDup := ""
				for i := 1; i < n; i++ {
					if want[i-1].Token == want[i].Token {
						wantDup = fmt.Sprintf("token %v owned twice (%q and %q)", want[i].Token, want[i-1].Endpoint, want[i].Endpoint)
						break
					}
				}

				names := &endpointNames{ids: map[string]int32{}}
				in := interner{names: names}
				tokens, owner := make([]Token, n), make([]int32, n)
				dup, err := sortByToken(owners, &in, tokens, owner)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if tokens[i] != want[i].Token || names.list[owner[i]] != want[i].Endpoint {
						t.Fatalf("n=%d %s: position %d is %v@%s, want %v@%s", n, spread, i, tokens[i], names.list[owner[i]], want[i].Token, want[i].Endpoint)
					}
				}
				if dup != (wantDup != "") {
					t.Fatalf("n=%d %s: duplicate = %v, want %q", n, spread, dup, wantDup)
				}
				_, err = compileRing(Ring{Owners: owners}, &endpointNames{ids: map[string]int32{}})
				switch {
				case wantDup == "" && err != nil:
					t.Fatalf("n=%d %s: %v", n, spread, err)
				case wantDup != "" && (!errors.Is(err, ErrInvalidRing) || !strings.Contains(fmt.Sprint(err), wantDup)):
					t.Fatalf("n=%d %s: error %v, want one saying %s", n, spread, err, wantDup)
				}
			}
		}
	}
	// An empty endpoint is reported, the first in the ring's order, on
	// either path, even beside a duplicate token.
	for _, n := range []int{10, 1000} {
		owners := make([]TokenOwner, n)
		for i := range owners {
			owners[i] = TokenOwner{Token: Token(r.Uint64()), Endpoint: "a"}
		}
		owners[n/2].Endpoint, owners[n-1].Endpoint = "", ""
		owners[1].Token = owners[0].Token
		_, err := compileRing(Ring{Owners: owners}, &endpointNames{ids: map[string]int32{}})
		if want := fmt.Sprintf("token %v has no endpoint", owners[n/2].Token); !errors.Is(err, ErrInvalidRing) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("n=%d: error %v, want one saying %s", n, err, want)
		}
	}
}
