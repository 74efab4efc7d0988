package tokenring

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// racked9 is three racks of three nodes in dc1, NetworkTopologyStrategy
// with factor 3: each range has one replica per rack, so nodes of one rack
// never share a range. The tokens run n1 ... n9 twice round the ring, so
// the range ending at n<i>'s token is on n<i>, n<i+1> and n<i+2> (modulo
// 9): n<i> shares ranges with n<i±1> and n<i±2>.
func racked9() Topology {
	locs := map[string]Location{}
	var pairs []any
	for i := range 9 {
		ep := fmt.Sprintf("n%d", i+1)
		locs[ep] = Location{Datacenter: "dc1", Rack: fmt.Sprintf("r%d", i%3+1)}
		// Tokens interleave racks: n1 r1, n2 r2, n3 r3, n4 r1...
		pairs = append(pairs, (i+1)*100, ep, (i+1)*100+1000, ep)
	}
	return Topology{Ring: ring(locs, pairs...), Keyspaces: one("shop", nts(map[string]int{"dc1": 3}))}
}

func mustScheduler(t *testing.T, topo Topology, limits ScheduleLimits) *Scheduler {
	t.Helper()
	s, err := NewScheduler(topo, limits)
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	return s
}

func all9() []string {
	var eps []string
	for i := range 9 {
		eps = append(eps, fmt.Sprintf("n%d", i+1))
	}
	return eps
}

func TestSchedulerWavesTable(t *testing.T) {
	abc := map[string]Location{"a": {"dc1", "r1"}, "b": {"dc1", "r2"}, "c": {"dc1", "r3"}}
	oneRack := map[string]Location{"a": {"dc1", "r1"}, "b": {"dc1", "r1"}, "c": {"dc1", "r1"}, "d": {"dc1", "r1"}}
	twoRacks := map[string]Location{"a": {"dc1", "r1"}, "b": {"dc1", "r2"}, "c": {"dc1", "r1"}, "d": {"dc1", "r2"}}
	twoDCs := map[string]Location{"a": {"dc1", "r1"}, "b": {"dc2", "r1"}, "c": {"dc1", "r1"}, "d": {"dc2", "r1"}}
	// Eight nodes alternating between dc1 (a, c, e, g) and dc2 (b, d, f,
	// h) round the ring, factor 2 in each: each range is on two
	// neighbours in dc1 (a-c, c-e, e-g, g-a) and two in dc2 (b-d, d-f,
	// f-h, h-b), and the range (80, 10] is on a, c, b and d.
	twoDCs8 := map[string]Location{}
	var pairs8 []any
	for i, ep := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		twoDCs8[ep] = Location{Datacenter: fmt.Sprintf("dc%d", i%2+1), Rack: "r1"}
		pairs8 = append(pairs8, (i+1)*10, ep)
	}
	everyDC := Topology{Ring: ring(twoDCs8, pairs8...), Keyspaces: one("ks", nts(map[string]int{"dc1": 2, "dc2": 2}))}
	all8 := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	tests := []struct {
		name    string
		topo    Topology
		limits  ScheduleLimits
		needed  []string
		running []string
		want    [][]string
	}{
		{
			name:   "SimpleStrategy RF 2 on three nodes: every pair shares a range",
			topo:   Topology{Ring: ring(abc, 10, "a", 20, "b", 30, "c"), Keyspaces: one("ks", simple(2))},
			needed: []string{"c", "b", "a"},
			want:   [][]string{{"a"}, {"b"}, {"c"}},
		},
		{
			name:   "RF 1: nothing shared, one rack, the datacenter limit cuts waves",
			topo:   Topology{Ring: ring(oneRack, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", simple(1))},
			limits: ScheduleLimits{MaxPerDatacenter: 3},
			needed: []string{"a", "b", "c", "d"},
			want:   [][]string{{"a", "b", "c"}, {"d"}},
		},
		{
			name:   "RF 1, two racks: one rack at a time",
			topo:   Topology{Ring: ring(twoRacks, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", simple(1))},
			needed: []string{"a", "b", "c", "d"},
			want:   [][]string{{"a", "c"}, {"b", "d"}},
		},
		{
			name:   "RF 1, two racks, racks together",
			topo:   Topology{Ring: ring(twoRacks, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", simple(1))},
			limits: ScheduleLimits{RacksTogether: true},
			needed: []string{"a", "b", "c", "d"},
			want:   [][]string{{"a", "b", "c", "d"}},
		},
		{
			name: "two datacenters run side by side when they share nothing",
			topo: Topology{Ring: ring(twoDCs, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: map[string]Replication{
				"east": nts(map[string]int{"dc1": 1}), "west": nts(map[string]int{"dc2": 1})}},
			limits: ScheduleLimits{MaxPerDatacenter: 1},
			needed: []string{"a", "b", "c", "d"},
			want:   [][]string{{"a", "b"}, {"c", "d"}},
		},
		{
			name:   "replicas of one range in two datacenters conflict too",
			topo:   Topology{Ring: ring(twoDCs, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", nts(map[string]int{"dc1": 1, "dc2": 1}))},
			limits: ScheduleLimits{MaxPerDatacenter: 1},
			needed: []string{"a", "b", "c", "d"},
			// (30, 40] is on c and d, (40, 10] on a and b, (10, 20]
			// on c and b, (20, 30] on c... so a-b, b-c, c-d, d-a conflict,
			// and one datacenter's limit is one: no two fit together.
			want: [][]string{{"a"}, {"c"}, {"b"}, {"d"}},
		},
		{
			name:   "WithinDatacenter: replicas in two datacenters do not conflict, the datacenters run side by side",
			topo:   Topology{Ring: ring(twoDCs, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", nts(map[string]int{"dc1": 1, "dc2": 1}))},
			limits: ScheduleLimits{MaxPerDatacenter: 1, ConflictScope: WithinDatacenter},
			needed: []string{"a", "b", "c", "d"},
			want:   [][]string{{"a", "b"}, {"c", "d"}},
		},
		{
			name:   "factor 2 in each of two datacenters, AcrossDatacenters: the datacenters take turns",
			topo:   everyDC,
			needed: all8,
			// Every wave is one datacenter's: a shares (80, 10] with b
			// and d, and so on round the ring.
			want: [][]string{{"a", "e"}, {"b", "f"}, {"c", "g"}, {"d", "h"}},
		},
		{
			name:   "factor 2 in each of two datacenters, WithinDatacenter: both datacenters in every wave",
			topo:   everyDC,
			limits: ScheduleLimits{ConflictScope: WithinDatacenter},
			needed: all8,
			want:   [][]string{{"a", "b", "e", "f"}, {"c", "d", "g", "h"}},
		},
		{
			name:   "WithinDatacenter keeps SimpleStrategy's replicas of one datacenter apart",
			topo:   Topology{Ring: ring(twoDCs, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", simple(3))},
			limits: ScheduleLimits{ConflictScope: WithinDatacenter},
			needed: []string{"a", "b", "c", "d"},
			// Factor 3 of 4 nodes: a and c share ranges (dc1), b and d
			// (dc2); across datacenters nothing holds.
			want: [][]string{{"a", "b"}, {"c", "d"}},
		},
		{
			name:   "WithinDatacenter, EverywhereStrategy: one at a time per datacenter",
			topo:   Topology{Ring: ring(twoDCs, 10, "a", 20, "b", 30, "c", 40, "d"), Keyspaces: one("ks", Replication{Strategy: EverywhereStrategy})},
			limits: ScheduleLimits{ConflictScope: WithinDatacenter},
			needed: []string{"a", "b", "c", "d"},
			want:   [][]string{{"a", "b"}, {"c", "d"}},
		},
		{
			name:   "nine nodes, three racks, RF 3: a wave per rack",
			topo:   racked9(),
			needed: all9(),
			want:   [][]string{{"n1", "n4", "n7"}, {"n2", "n5", "n8"}, {"n3", "n6", "n9"}},
		},
		{
			name:   "nine nodes, racks together changes nothing: racks share ranges",
			topo:   racked9(),
			limits: ScheduleLimits{RacksTogether: true},
			needed: all9(),
			want:   [][]string{{"n1", "n4", "n7"}, {"n2", "n5", "n8"}, {"n3", "n6", "n9"}},
		},
		{
			name:   "nine nodes, two at a time",
			topo:   racked9(),
			limits: ScheduleLimits{MaxPerDatacenter: 2},
			needed: all9(),
			want:   [][]string{{"n1", "n4"}, {"n7"}, {"n2", "n5"}, {"n8"}, {"n3", "n6"}, {"n9"}},
		},
		{
			name:    "a running node's rack goes first; it is not planned again",
			topo:    racked9(),
			needed:  all9(),
			running: []string{"n2"},
			want:    [][]string{{"n5", "n8"}, {"n1", "n4", "n7"}, {"n3", "n6", "n9"}},
		},
		{
			name:   "LocalStrategy replicates nothing",
			topo:   Topology{Ring: ring(abc, 10, "a", 20, "b", 30, "c"), Keyspaces: one("system", Replication{Strategy: LocalStrategy})},
			limits: ScheduleLimits{RacksTogether: true},
			needed: []string{"a", "b", "c"},
			want:   [][]string{{"a", "b", "c"}},
		},
		{
			name:   "EverywhereStrategy: one at a time",
			topo:   Topology{Ring: ring(abc, 10, "a", 20, "b", 30, "c"), Keyspaces: one("ks", Replication{Strategy: EverywhereStrategy})},
			limits: ScheduleLimits{RacksTogether: true},
			needed: []string{"a", "b", "c"},
			want:   [][]string{{"a"}, {"b"}, {"c"}},
		},
		{
			name:   "nothing needed, no waves",
			topo:   racked9(),
			needed: nil,
			want:   [][]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustScheduler(t, tt.topo, tt.limits)
			got, err := s.Waves(tt.needed, tt.running)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Waves = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSchedulerNextTable(t *testing.T) {
	tests := []struct {
		name    string
		limits  ScheduleLimits
		needed  []string
		running []string
		want    ScheduleStep
	}{
		{
			name:   "all idle: the first rack starts",
			needed: all9(),
			want: ScheduleStep{Start: []string{"n1", "n4", "n7"}, Held: []Hold{
				{"n2", HoldReplicaBusy, []string{"n1", "n4"}},
				{"n3", HoldReplicaBusy, []string{"n1", "n4"}},
				{"n5", HoldReplicaBusy, []string{"n4", "n7"}},
				{"n6", HoldReplicaBusy, []string{"n4", "n7"}},
				{"n8", HoldReplicaBusy, []string{"n1", "n7"}},
				{"n9", HoldReplicaBusy, []string{"n1", "n7"}},
			}},
		},
		{
			name:    "a running node holds its replicas and its datacenter's limit",
			limits:  ScheduleLimits{MaxPerDatacenter: 2},
			needed:  []string{"n1", "n4", "n7", "n5"},
			running: []string{"n2"},
			want: ScheduleStep{Start: []string{"n5"}, Held: []Hold{
				{"n1", HoldReplicaBusy, []string{"n2"}},
				{"n4", HoldReplicaBusy, []string{"n2", "n5"}},
				{"n7", HoldReplicaBusy, []string{"n5"}},
			}},
		},
		{
			name:    "a full datacenter",
			limits:  ScheduleLimits{MaxPerDatacenter: 1},
			needed:  []string{"n5", "n8"},
			running: []string{"n2"},
			want: ScheduleStep{Start: []string{}, Held: []Hold{
				{"n5", HoldDatacenterFull, []string{"n2"}},
				{"n8", HoldDatacenterFull, []string{"n2"}},
			}},
		},
		{
			name:    "running nodes of one rack: that rack goes on",
			limits:  ScheduleLimits{},
			needed:  []string{"n7"},
			running: []string{"n1", "n4"},
			want:    ScheduleStep{Start: []string{"n7"}},
		},
		{
			name:    "a node needed and running is running",
			needed:  []string{"n1"},
			running: []string{"n1"},
			want:    ScheduleStep{Start: []string{}},
		},
	}
	s := mustScheduler(t, racked9(), ScheduleLimits{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := s
			if tt.limits != (ScheduleLimits{}) {
				s = mustScheduler(t, racked9(), tt.limits)
			}
			got, err := s.Next(tt.needed, tt.running)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Next = %+v\nwant   %+v", got, tt.want)
			}
		})
	}
}

// TestSchedulerOtherRackRule: with RF 1 nothing conflicts, so only the
// rack rule holds nodes back, and a datacenter whose running cleanups
// span two racks (limits changed across a restart) starts nothing more.
func TestSchedulerOtherRackRule(t *testing.T) {
	locs := map[string]Location{"a": {"dc1", "r1"}, "b": {"dc1", "r2"}, "c": {"dc1", "r1"}, "d": {"dc1", "r3"}, "e": {"dc2", "r1"}}
	topo := Topology{Ring: ring(locs, 10, "a", 20, "b", 30, "c", 40, "d", 50, "e"), Keyspaces: one("ks", simple(1))}
	s := mustScheduler(t, topo, ScheduleLimits{})
	got, err := s.Next([]string{"c", "d", "e"}, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := ScheduleStep{Start: []string{"e"}, Held: []Hold{
		{"c", HoldOtherRack, []string{"a", "b"}},
		{"d", HoldOtherRack, []string{"a", "b"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Next = %+v, want %+v", got, want)
	}
	got, err = s.Next([]string{"c", "d"}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	want = ScheduleStep{Start: []string{"c"}, Held: []Hold{{"d", HoldOtherRack, []string{"a", "c"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Next = %+v, want %+v", got, want)
	}
}

func TestSchedulerRejectsBadInput(t *testing.T) {
	good := racked9()
	noRack := racked9()
	noRack.Ring.Locations = map[string]Location{}
	for ep, loc := range good.Ring.Locations {
		noRack.Ring.Locations[ep] = loc
	}
	noRack.Ring.Locations["n5"] = Location{Datacenter: "dc1"}
	noLoc := Topology{Ring: ring(map[string]Location{"a": {"dc1", "r1"}}, 10, "a", 20, "b"), Keyspaces: one("ks", simple(1))}
	badRepl := racked9()
	badRepl.Keyspaces = one("shop", nts(map[string]int{"dc9": 3}))
	for _, tt := range []struct {
		name   string
		topo   Topology
		limits ScheduleLimits
		want   error
	}{
		{"empty ring", Topology{}, ScheduleLimits{}, ErrInvalidRing},
		{"a node without a rack", noRack, ScheduleLimits{}, ErrMissingLocation},
		{"a node without a location", noLoc, ScheduleLimits{}, ErrMissingLocation},
		{"a replication the ring does not have", badRepl, ScheduleLimits{}, ErrUnknownDatacenter},
		{"negative limit", good, ScheduleLimits{MaxPerDatacenter: -1}, ErrInvalidLimits},
		{"unknown conflict scope", good, ScheduleLimits{ConflictScope: WithinDatacenter + 1}, ErrInvalidLimits},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewScheduler(tt.topo, tt.limits)
			if !errors.Is(err, tt.want) || s != nil {
				t.Fatalf("NewScheduler = %v, %v; want %v", s, err, tt.want)
			}
		})
	}
	s := mustScheduler(t, good, ScheduleLimits{})
	if _, err := s.Next([]string{"n1", "n10"}, nil); !errors.Is(err, ErrUnknownEndpoint) {
		t.Errorf("Next with an unknown needed node: %v", err)
	}
	if _, err := s.Waves([]string{"n1"}, []string{"ghost"}); !errors.Is(err, ErrUnknownEndpoint) {
		t.Errorf("Waves with an unknown running node: %v", err)
	}
	if _, err := s.Conflicts("n1", "ghost"); !errors.Is(err, ErrUnknownEndpoint) {
		t.Errorf("Conflicts with an unknown node: %v", err)
	}
	if got := s.Limits(); got.MaxPerDatacenter != DefaultMaxPerDatacenter || got.RacksTogether {
		t.Errorf("default limits = %+v", got)
	}
}

// --- the property test against a naive reference --------------------------

// refConflicts computes, by walking the ring from every token with the
// naive reference, which members share a range; under WithinDatacenter,
// only pairs of one datacenter count.
func refConflicts(topo Topology, scope ConflictScope) map[[2]string]bool {
	rr := newRefRing(topo.Ring)
	out := map[[2]string]bool{}
	for _, repl := range topo.Keyspaces {
		if repl.Strategy == LocalStrategy {
			continue
		}
		for i := range rr.owners {
			reps := rr.replicas(repl, i)
			for _, a := range reps {
				for _, b := range reps {
					sameDC := topo.Ring.Locations[a].Datacenter == topo.Ring.Locations[b].Datacenter
					if a != b && (scope == AcrossDatacenters || sameDC) {
						out[[2]string{a, b}] = true
					}
				}
			}
		}
	}
	return out
}

// refCheckWave checks one set of nodes starting beside running against
// every rule, naively, and returns what is wrong.
func refCheckWave(topo Topology, conflicts map[[2]string]bool, limits ScheduleLimits, wave, running []string) error {
	maxDC := limits.MaxPerDatacenter
	if maxDC == 0 {
		maxDC = DefaultMaxPerDatacenter
	}
	on := append(slices.Clone(running), wave...)
	for _, a := range wave {
		for _, b := range on {
			if a != b && conflicts[[2]string{a, b}] {
				return fmt.Errorf("%s and %s share a range", a, b)
			}
		}
	}
	perDC := map[string]int{}
	racks := map[string]map[string]bool{}
	for _, ep := range on {
		loc := topo.Ring.Locations[ep]
		perDC[loc.Datacenter]++
		if racks[loc.Datacenter] == nil {
			racks[loc.Datacenter] = map[string]bool{}
		}
		racks[loc.Datacenter][loc.Rack] = true
	}
	for _, ep := range wave {
		loc := topo.Ring.Locations[ep]
		if perDC[loc.Datacenter] > maxDC {
			return fmt.Errorf("datacenter %s runs %d > %d", loc.Datacenter, perDC[loc.Datacenter], maxDC)
		}
		if !limits.RacksTogether && len(racks[loc.Datacenter]) > 1 {
			return fmt.Errorf("datacenter %s runs racks %v together", loc.Datacenter, racks[loc.Datacenter])
		}
	}
	return nil
}

// refGreedy is the simple greedy, written naively: wave after wave, take
// the nodes by name, each one the rules allow beside those taken.
func refGreedy(topo Topology, conflicts map[[2]string]bool, limits ScheduleLimits, needed []string) [][]string {
	left := slices.Clone(needed)
	sort.Strings(left)
	var waves [][]string
	for len(left) > 0 {
		var wave, rest []string
		for _, ep := range left {
			if refCheckWave(topo, conflicts, limits, append(slices.Clone(wave), ep), nil) == nil {
				wave = append(wave, ep)
			} else {
				rest = append(rest, ep)
			}
		}
		waves = append(waves, wave)
		left = rest
	}
	return waves
}

func randomLimits(r *rand.Rand) ScheduleLimits {
	return ScheduleLimits{MaxPerDatacenter: r.IntN(4), RacksTogether: r.IntN(2) == 0}
}

// TestSchedulerAgreesWithReference: random rings, replications, racks and
// limits, seeded and reproducible. The conflicts must equal the naive
// reference's exactly; every wave must pass the naive rule check; the
// waves must cover the needed nodes exactly once, need no more waves than
// the naive greedy, and meet the bound Waves documents; Next must start
// only what the rules allow, give every held node a true reason, start
// something whenever nothing runs, and not depend on the input order.
func TestSchedulerAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3015))
	better := 0
	narrower := 0 // cases where WithinDatacenter drops a conflict
	for iter := range 400 {
		locs := randomCluster(r, "n", 2+r.IntN(10))
		rg := randomRing(r, locs)
		if len(rg.Owners) == 0 {
			continue
		}
		dcs := datacentersOf(rg)
		keyspaces := map[string]Replication{}
		for k := range 1 + r.IntN(3) {
			keyspaces[fmt.Sprintf("ks%d", k)] = randomReplication(r, dcs)
		}
		topo := Topology{Ring: rg, Keyspaces: keyspaces}
		limits := randomLimits(r)
		// Every case under both scopes: the random draws of the second
		// differ from the first's, which only widens the cases.
		for _, scope := range []ConflictScope{AcrossDatacenters, WithinDatacenter} {
			limits.ConflictScope = scope
			s, err := NewScheduler(topo, limits)
			if err != nil {
				t.Fatalf("iter %d %v: NewScheduler: %v", iter, scope, err)
			}
			conflicts := refConflicts(topo, scope)
			if scope == WithinDatacenter && len(conflicts) < len(refConflicts(topo, AcrossDatacenters)) {
				narrower++
			}
			members := slices.Clone(s.names)
			for _, a := range members {
				for _, b := range members {
					got, _ := s.Conflicts(a, b)
					if want := conflicts[[2]string{a, b}]; got != want {
						t.Fatalf("iter %d %v: Conflicts(%s, %s) = %v, reference %v\ntopology %+v", iter, scope, a, b, got, want, topo)
					}
				}
			}
			var needed []string
			for _, ep := range members {
				if r.IntN(4) != 0 {
					needed = append(needed, ep)
				}
			}

			waves, err := s.Waves(needed, nil)
			if err != nil {
				t.Fatalf("iter %d %v: Waves: %v", iter, scope, err)
			}
			var covered []string
			place := map[string]int{}
			for w, wave := range waves {
				if len(wave) == 0 {
					t.Fatalf("iter %d %v: empty wave %d", iter, scope, w)
				}
				if err := refCheckWave(topo, conflicts, limits, wave, nil); err != nil {
					t.Fatalf("iter %d %v: wave %d %v: %v", iter, scope, w, wave, err)
				}
				covered = append(covered, wave...)
				for _, ep := range wave {
					place[ep] = w
				}
			}
			slices.Sort(covered)
			if want := slices.Clone(needed); !slices.Equal(covered, want) {
				t.Fatalf("iter %d %v: waves cover %v, want %v", iter, scope, covered, want)
			}
			greedy := refGreedy(topo, conflicts, limits, needed)
			if len(waves) > len(greedy) {
				t.Fatalf("iter %d %v: %d waves, the naive greedy needs %d", iter, scope, len(waves), len(greedy))
			}
			if len(waves) < len(greedy) {
				better++
			}
			for _, v := range needed {
				blockers := 0
				for _, u := range needed {
					if u != v && (conflicts[[2]string{u, v}] || locs[u].Datacenter == locs[v].Datacenter) {
						blockers++
					}
				}
				if place[v] > blockers {
					t.Fatalf("iter %d %v: %s in wave %d, beyond the bound %d", iter, scope, v, place[v]+1, blockers+1)
				}
			}

			// Next, with some nodes running.
			var running []string
			for _, ep := range members {
				if r.IntN(5) == 0 {
					running = append(running, ep)
				}
			}
			step, err := s.Next(needed, running)
			if err != nil {
				t.Fatalf("iter %d %v: Next: %v", iter, scope, err)
			}
			if err := refCheckWave(topo, conflicts, limits, step.Start, running); err != nil {
				t.Fatalf("iter %d %v: Next starts %v beside %v: %v", iter, scope, step.Start, running, err)
			}
			if len(running) == 0 && len(needed) > 0 && len(step.Start) == 0 {
				t.Fatalf("iter %d %v: nothing runs and nothing starts", iter, scope)
			}
			accounted := append(slices.Clone(step.Start), running...)
			for _, h := range step.Held {
				accounted = append(accounted, h.Endpoint)
				on := append(slices.Clone(running), step.Start...)
				if refCheckWave(topo, conflicts, limits, []string{h.Endpoint}, on) == nil {
					t.Fatalf("iter %d %v: %s held (%s) though the rules allow it beside %v", iter, scope, h.Endpoint, h.Reason, on)
				}
				if len(h.By) == 0 {
					t.Fatalf("iter %d %v: %s held with nobody named", iter, scope, h.Endpoint)
				}
			}
			for _, ep := range needed {
				if !slices.Contains(accounted, ep) {
					t.Fatalf("iter %d %v: %s is neither started, held nor running", iter, scope, ep)
				}
			}
			// Waves beside running nodes: the first wave runs beside them
			// (or, when nothing can, after them), and the running nodes are
			// not planned again.
			wavesR, err := s.Waves(needed, running)
			if err != nil {
				t.Fatalf("iter %d %v: Waves beside %v: %v", iter, scope, running, err)
			}
			var coveredR []string
			for w, wave := range wavesR {
				var beside []string
				if w == 0 && len(step.Start) > 0 {
					beside = running
				}
				if err := refCheckWave(topo, conflicts, limits, wave, beside); err != nil {
					t.Fatalf("iter %d %v: wave %d %v beside %v: %v", iter, scope, w, wave, beside, err)
				}
				coveredR = append(coveredR, wave...)
			}
			slices.Sort(coveredR)
			wantR := slices.DeleteFunc(slices.Clone(needed), func(ep string) bool { return slices.Contains(running, ep) })
			if !slices.Equal(coveredR, wantR) {
				t.Fatalf("iter %d %v: waves beside %v cover %v, want %v", iter, scope, running, coveredR, wantR)
			}

			shuffled := slices.Clone(needed)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			shuffled = append(shuffled, shuffled...) // duplicates change nothing
			again, err := s.Next(shuffled, running)
			if err != nil || !reflect.DeepEqual(again, step) {
				t.Fatalf("iter %d %v: Next depends on the input order: %+v vs %+v (%v)", iter, scope, again, step, err)
			}
			// A topology given in another order gives the same plan.
			topo2 := topo
			topo2.Ring.Owners = slices.Clone(topo.Ring.Owners)
			r.Shuffle(len(topo2.Ring.Owners), func(i, j int) {
				topo2.Ring.Owners[i], topo2.Ring.Owners[j] = topo2.Ring.Owners[j], topo2.Ring.Owners[i]
			})
			s2, err := NewScheduler(topo2, limits)
			if err != nil {
				t.Fatal(err)
			}
			if waves2, _ := s2.Waves(shuffled, nil); !reflect.DeepEqual(waves2, waves) {
				t.Fatalf("iter %d %v: Waves depends on the ring's order: %v vs %v", iter, scope, waves2, waves)
			}
		}
	}
	if narrower == 0 {
		t.Fatal("WithinDatacenter never dropped a conflict: the random cases do not tell the scopes apart")
	}
	t.Logf("the scheduler beat the naive greedy in %d of the cases; WithinDatacenter dropped conflicts in %d", better, narrower)
}

// --- the benchmark ----------------------------------------------------------

// BenchmarkScheduler300x256: 300 nodes of 256 vnodes in three datacenters
// of three racks, keyspace ks at NetworkTopologyStrategy with factor 3 in
// each and logs at SimpleStrategy factor 2, every node needing a cleanup,
// under each ConflictScope. build is NewScheduler (the conflict sweep of
// 76,800 tokens per replication); waves plans every wave (and reports how
// many); next is one decision with a third of the nodes running.
//
//	go test -run '^$' -bench Scheduler300 -benchtime=10x ./tokenring/
func BenchmarkScheduler300x256(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rg := benchRing(r, 300, "10.0.")
	topo := Topology{Ring: rg, Keyspaces: map[string]Replication{
		"ks":   {Strategy: NetworkTopologyStrategy, Datacenters: map[string]int{"dc0": 3, "dc1": 3, "dc2": 3}},
		"logs": {Strategy: SimpleStrategy, ReplicationFactor: 2},
	}}
	var needed, running []string
	for ep := range rg.Locations {
		needed = append(needed, ep)
	}
	sort.Strings(needed)
	for i := 0; i < len(needed); i += 3 {
		running = append(running, needed[i])
	}
	for _, scope := range []ConflictScope{AcrossDatacenters, WithinDatacenter} {
		limits := ScheduleLimits{ConflictScope: scope}
		s, err := NewScheduler(topo, limits)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(scope.String()+"/build", func(b *testing.B) {
			for b.Loop() {
				if _, err := NewScheduler(topo, limits); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(scope.String()+"/waves", func(b *testing.B) {
			var waves [][]string
			for b.Loop() {
				if waves, err = s.Waves(needed, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(waves)), "waves")
		})
		b.Run(scope.String()+"/next", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Next(needed, running); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSchedulerNextWithinDatacenter: a node cleaning in dc1 holds back
// the nodes it shares a range with in any datacenter under the default
// scope, and only those of dc1 under WithinDatacenter.
func TestSchedulerNextWithinDatacenter(t *testing.T) {
	locs := map[string]Location{}
	var pairs []any
	for i, ep := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		locs[ep] = Location{Datacenter: fmt.Sprintf("dc%d", i%2+1), Rack: "r1"}
		pairs = append(pairs, (i+1)*10, ep)
	}
	topo := Topology{Ring: ring(locs, pairs...), Keyspaces: one("ks", nts(map[string]int{"dc1": 2, "dc2": 2}))}
	for _, tc := range []struct {
		scope ConflictScope
		want  ScheduleStep
	}{
		{AcrossDatacenters, ScheduleStep{Start: []string{}, Held: []Hold{
			{"b", HoldReplicaBusy, []string{"a"}},
			{"c", HoldReplicaBusy, []string{"a"}},
			{"d", HoldReplicaBusy, []string{"a"}},
		}}},
		{WithinDatacenter, ScheduleStep{Start: []string{"b"}, Held: []Hold{
			{"c", HoldReplicaBusy, []string{"a"}},
			{"d", HoldReplicaBusy, []string{"b"}},
		}}},
	} {
		t.Run(tc.scope.String(), func(t *testing.T) {
			s := mustScheduler(t, topo, ScheduleLimits{ConflictScope: tc.scope})
			got, err := s.Next([]string{"b", "c", "d"}, []string{"a"})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Next = %+v\nwant   %+v", got, tc.want)
			}
			if got := s.Limits().ConflictScope; got != tc.scope {
				t.Fatalf("Limits().ConflictScope = %v", got)
			}
		})
	}
}

// TestConflictScopeJSON: the scope reads by name in JSON, the default is
// left out, and an unknown name or value is ErrInvalidLimits.
func TestConflictScopeJSON(t *testing.T) {
	for _, tc := range []struct {
		limits ScheduleLimits
		want   string
	}{
		{ScheduleLimits{}, `{}`},
		{ScheduleLimits{ConflictScope: WithinDatacenter}, `{"conflictScope":"WithinDatacenter"}`},
	} {
		b, err := json.Marshal(tc.limits)
		if err != nil || string(b) != tc.want {
			t.Fatalf("Marshal(%+v) = %s, %v; want %s", tc.limits, b, err, tc.want)
		}
		var back ScheduleLimits
		if err := json.Unmarshal(b, &back); err != nil || back != tc.limits {
			t.Fatalf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var l ScheduleLimits
	if err := json.Unmarshal([]byte(`{"conflictScope":"Rack"}`), &l); !errors.Is(err, ErrInvalidLimits) {
		t.Fatalf("unknown scope name: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"conflictScope":"AcrossDatacenters"}`), &l); err != nil || l.ConflictScope != AcrossDatacenters {
		t.Fatalf("AcrossDatacenters by name: %+v, %v", l, err)
	}
	if _, err := json.Marshal(ScheduleLimits{ConflictScope: 7}); !errors.Is(err, ErrInvalidLimits) {
		t.Fatalf("Marshal of scope 7: %v", err)
	}
	if got := ConflictScope(7).String(); got != "ConflictScope(7)" {
		t.Fatalf("String = %q", got)
	}
}
