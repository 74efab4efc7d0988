package tokenring

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Provisioning one node after another, SimpleStrategy RF 2:
//
//	A@10 alone:          A holds everything
//	A@10 B@20:           A and B hold everything
//	A@10 B@20 C@30:      (30,10] → A,B   (10,20] → B,C   (20,30] → C,A
//
// so A loses (10,20] and B loses (20,30] when C joins, and C, the last,
// loses nothing.
var (
	provA   = ring(nil, 10, "A")
	provAB  = ring(nil, 10, "A", 20, "B")
	provABC = ring(nil, 10, "A", 20, "B", 30, "C")
	local   = map[string]Replication{"system": {Strategy: LocalStrategy}, "system_schema": {Strategy: LocalStrategy}}
)

func withKeyspaces(extra map[string]Replication) map[string]Replication {
	out := map[string]Replication{}
	for k, v := range local {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func mustObserve(t *testing.T, b Baselines, now Topology, opts ObserveOptions) Baselines {
	t.Helper()
	out, err := b.Observe(now, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustAnalyzeBaselines(t *testing.T, b Baselines, now Topology) Analysis {
	t.Helper()
	a, err := b.Analyze(now)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// scylla-operator#3102: a cluster provisioned node after node, with data
// written after the first node started. Every node but the last lost
// ranges to a node that joined after it and needs a cleanup.
func TestProvisioningWithDataWrittenAfterFirstNode(t *testing.T) {
	var b Baselines
	b = mustObserve(t, b, Topology{provA, withKeyspaces(nil)}, ObserveOptions{}) // no data yet
	if got := b.Nodes["A"]; got.Reason != BaselineNoData {
		t.Fatalf("A's baseline = %+v, want NoData", got)
	}
	shop := withKeyspaces(map[string]Replication{"shop": simple(2)}) // data written
	b = mustObserve(t, b, Topology{provA, shop}, ObserveOptions{})
	b = mustObserve(t, b, Topology{provAB, shop}, ObserveOptions{}) // B joins
	if got := b.Nodes["B"]; got.Reason != BaselineJoined {
		t.Fatalf("B's baseline = %+v, want Joined", got)
	}
	now := Topology{provABC, shop} // C joins
	b = mustObserve(t, b, now, ObserveOptions{})

	a := mustAnalyzeBaselines(t, b, now)
	if got, want := a.NeedsCleanup(), []string{"A", "B"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsCleanup = %v, want %v (C joined last)", got, want)
	}
	eqRanges(t, "A lost", lostOf(a, "A", "shop"), Range{10, 20})
	eqRanges(t, "B lost", lostOf(a, "B", "shop"), Range{20, 30})

	// What the record adds: A's first baseline had no "shop", so the plain
	// analysis against it skips the keyspace as new and finds nothing.
	plain := mustAnalyze(t, Topology{provA, withKeyspaces(nil)}, now)
	if plain.Nodes["A"].NeedsCleanup() {
		t.Fatalf("plain Analyze against A's no-data baseline found A's loss; the test no longer shows what Observe fixes")
	}

	// Cleanups recorded: nothing left to clean.
	for _, ep := range a.NeedsCleanup() {
		var err error
		if b, err = b.RecordCleanup(ep, now); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustAnalyzeBaselines(t, b, now).NeedsCleanup(); len(got) != 0 {
		t.Errorf("after recording the cleanups NeedsCleanup = %v", got)
	}
	if len(b.Topologies) != 1 {
		t.Errorf("%d topologies kept, want 1 (every node's baseline is now the same)", len(b.Topologies))
	}
}

// Provisioning with no data: no cleanup, also once data arrives after the
// last node joined; a later scale-out cleans as usual.
func TestProvisioningWithoutData(t *testing.T) {
	var b Baselines
	for _, r := range []Ring{provA, provAB, provABC} {
		b = mustObserve(t, b, Topology{r, withKeyspaces(nil)}, ObserveOptions{})
	}
	now := Topology{provABC, withKeyspaces(map[string]Replication{"shop": simple(2)})}
	b = mustObserve(t, b, now, ObserveOptions{})
	if got := mustAnalyzeBaselines(t, b, now).NeedsCleanup(); len(got) != 0 {
		t.Fatalf("NeedsCleanup after provisioning without data = %v, want none", got)
	}

	// The host may say there is no data, replicated system keyspaces
	// notwithstanding.
	var h Baselines
	auth := withKeyspaces(map[string]Replication{"system_auth": simple(2)})
	for _, r := range []Ring{provA, provAB, provABC} {
		h = mustObserve(t, h, Topology{r, auth}, ObserveOptions{Data: DataAbsent})
	}
	if got := mustAnalyzeBaselines(t, h, Topology{provABC, auth}).NeedsCleanup(); len(got) != 0 {
		t.Errorf("NeedsCleanup when the host said there was no data = %v", got)
	}
	// By default those rows count: A lost system_auth ranges to B and C.
	var d Baselines
	for _, r := range []Ring{provA, provAB, provABC} {
		d = mustObserve(t, d, Topology{r, auth}, ObserveOptions{})
	}
	if got := mustAnalyzeBaselines(t, d, Topology{provABC, auth}).NeedsCleanup(); !reflect.DeepEqual(got, []string{"A", "B"}) {
		t.Errorf("NeedsCleanup with replicated system keyspaces = %v, want [A B]", got)
	}

	// Scale-out after provisioning without data: D@15 takes from B and C
	// (see TestScaleOutCleansOnlyNodesThatLostRanges).
	four := Topology{ring(nil, 10, "A", 15, "D", 20, "B", 30, "C"), now.Keyspaces}
	b = mustObserve(t, b, four, ObserveOptions{})
	if got := mustAnalyzeBaselines(t, b, four).NeedsCleanup(); !reflect.DeepEqual(got, []string{"B", "C"}) {
		t.Errorf("NeedsCleanup after a scale-out = %v, want [B C]", got)
	}
}

// The record survives a restart through JSON: reloaded, it validates and
// gives the same analysis; a damaged one is refused.
func TestBaselinesSurviveRestart(t *testing.T) {
	shop := withKeyspaces(map[string]Replication{"shop": simple(2)})
	var b Baselines
	b = mustObserve(t, b, Topology{provA, shop}, ObserveOptions{})
	b = mustObserve(t, b, Topology{provAB, shop}, ObserveOptions{})
	saved, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}

	var reloaded Baselines
	if err := json.Unmarshal(saved, &reloaded); err != nil {
		t.Fatal(err)
	}
	if err := reloaded.Validate(); err != nil {
		t.Fatalf("reloaded record: %v", err)
	}
	now := Topology{provABC, shop}
	want := mustAnalyzeBaselines(t, mustObserve(t, b, now, ObserveOptions{}), now)
	got := mustAnalyzeBaselines(t, mustObserve(t, reloaded, now, ObserveOptions{}), now)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got.NeedsCleanup(), []string{"A", "B"}) {
		t.Errorf("after a restart: %v, before: %v; want both [A B]", got.NeedsCleanup(), want.NeedsCleanup())
	}

	for name, damage := range map[string]func(*Baselines){
		"index out of range": func(b *Baselines) { b.Nodes["A"] = Baseline{Topology: 7, Reason: BaselineJoined} },
		"unknown reason":     func(b *Baselines) { b.Nodes["A"] = Baseline{Topology: 0, Reason: "Guessed"} },
		"invalid topology":   func(b *Baselines) { b.Topologies[0].Keyspaces = one("shop", simple(0)) },
	} {
		var broken Baselines
		if err := json.Unmarshal(saved, &broken); err != nil {
			t.Fatal(err)
		}
		damage(&broken)
		if _, err := broken.Observe(now, ObserveOptions{}); !errors.Is(err, ErrInvalidBaselines) {
			t.Errorf("%s: Observe = %v, want ErrInvalidBaselines", name, err)
		}
		if _, err := broken.Analyze(now); !errors.Is(err, ErrInvalidBaselines) {
			t.Errorf("%s: Analyze = %v, want ErrInvalidBaselines", name, err)
		}
	}
}

// A host that first looks after several nodes joined: with the join order
// each gets the ring it joined; without it each is taken to have joined
// first, which cleans the last node too but never misses one.
func TestSeveralNodesFirstSeenTogether(t *testing.T) {
	shop := withKeyspaces(map[string]Replication{"shop": simple(2)})
	now := Topology{provABC, shop}

	b := mustObserve(t, Baselines{}, now, ObserveOptions{JoinOrder: []string{"A", "B", "C"}})
	if got := mustAnalyzeBaselines(t, b, now).NeedsCleanup(); !reflect.DeepEqual(got, []string{"A", "B"}) {
		t.Errorf("with the join order NeedsCleanup = %v, want [A B]", got)
	}
	b = mustObserve(t, Baselines{}, now, ObserveOptions{})
	if got := mustAnalyzeBaselines(t, b, now).NeedsCleanup(); !reflect.DeepEqual(got, []string{"A", "B", "C"}) {
		t.Errorf("without the join order NeedsCleanup = %v, want all three", got)
	}
	// Newcomers after known members: the known keep their baselines.
	b = mustObserve(t, Baselines{}, Topology{provA, shop}, ObserveOptions{})
	b = mustObserve(t, b, now, ObserveOptions{JoinOrder: []string{"C", "B"}}) // C joined before B
	a := mustAnalyzeBaselines(t, b, now)
	if got := a.NeedsCleanup(); !reflect.DeepEqual(got, []string{"A", "C"}) {
		t.Errorf("A known, C then B first seen together: NeedsCleanup = %v, want [A C]", got)
	}
}

// A keyspace created after a baseline whose ring lacks one of its
// datacenters is compared over the datacenters that ring had, not refused.
func TestAdoptedKeyspaceFitsTheBaselineRing(t *testing.T) {
	locs := map[string]Location{"A": {"dc1", "r1"}, "B": {"dc2", "r1"}}
	shop := map[string]Replication{"shop": simple(1)}
	var b Baselines
	b = mustObserve(t, b, Topology{ring(locs, 10, "A"), withKeyspaces(shop)}, ObserveOptions{})
	b = mustObserve(t, b, Topology{ring(locs, 10, "A", 20, "B"), withKeyspaces(shop)}, ObserveOptions{}) // A lost half of shop
	shop["geo"] = nts(map[string]int{"dc1": 1, "dc2": 1})
	now := Topology{ring(locs, 10, "A", 20, "B"), withKeyspaces(shop)}

	a := mustAnalyzeBaselines(t, b, now) // adopts geo into A's baseline, whose ring has no dc2
	if got := a.NeedsCleanup(); !reflect.DeepEqual(got, []string{"A"}) || len(lostOf(a, "A", "geo")) != 0 {
		t.Errorf("NeedsCleanup = %v, A lost %v of geo; want [A] for shop only: A holds all of dc1's replica of geo", got, lostOf(a, "A", "geo"))
	}
	b = mustObserve(t, b, now, ObserveOptions{})
	if got := b.Topologies[b.Nodes["A"].Topology].Keyspaces["geo"]; !reflect.DeepEqual(got, nts(map[string]int{"dc1": 1})) {
		t.Errorf("A's baseline adopted geo as %+v, want dc1 only", got)
	}
}

func TestBaselinesRefuseMisuse(t *testing.T) {
	shop := withKeyspaces(map[string]Replication{"shop": simple(2)})
	b := mustObserve(t, Baselines{}, Topology{provAB, shop}, ObserveOptions{})
	if _, err := b.Analyze(Topology{provABC, shop}); !errors.Is(err, ErrNoBaseline) {
		t.Errorf("Analyze with an unobserved member: %v, want ErrNoBaseline", err)
	}
	if _, err := b.RecordCleanup("C", Topology{provAB, shop}); !errors.Is(err, ErrNotJoined) {
		t.Errorf("RecordCleanup of a node not in the topology: %v, want ErrNotJoined", err)
	}
	if _, err := b.Observe(Topology{provABC, one("shop", simple(0))}, ObserveOptions{}); !errors.Is(err, ErrInvalidReplication) {
		t.Errorf("Observe of an invalid topology: %v, want ErrInvalidReplication", err)
	}
	before := b
	saved, _ := json.Marshal(before)
	_, _ = b.Observe(Topology{provABC, shop}, ObserveOptions{JoinOrder: []string{"C"}})
	_, _ = b.RecordCleanup("A", Topology{provAB, shop})
	if after, _ := json.Marshal(b); string(after) != string(saved) {
		t.Errorf("Observe or RecordCleanup changed the record they were called on")
	}
	// A node that left is forgotten.
	b = mustObserve(t, b, Topology{provA, shop}, ObserveOptions{})
	if _, ok := b.Nodes["B"]; ok || len(b.Topologies) != 1 {
		t.Errorf("after B left: %+v", b)
	}
}

// TestBaselinesNeverMissStaleData replays random provisionings and
// scale-outs (joins only, SimpleStrategy keyspaces created at random
// moments) against a model of every node's disk: a node holds each point
// of a keyspace that it replicated at any time since the keyspace existed
// and the node was in the ring; a point it holds and no longer replicates
// is stale. Whatever the host observes (every event, only before joins,
// or hardly ever, with or without the join order), a node with stale data
// must be asked to clean up; observing after every event, exactly those
// nodes are.
func TestBaselinesNeverMissStaleData(t *testing.T) {
	r := rand.New(rand.NewPCG(3102, 26))
	withStale := 0
	for iter := range 400 {
		// The events: joins of nodes N0..Nn-1 and creations of keyspaces.
		nodes := 2 + r.IntN(5)
		used := map[Token]bool{}
		tokensOf := make([][]Token, nodes)
		for n := range tokensOf {
			for range 1 + r.IntN(3) {
				tok := Token(r.IntN(2000) - 1000)
				for used[tok] {
					tok = Token(r.IntN(2000) - 1000)
				}
				used[tok] = true
				tokensOf[n] = append(tokensOf[n], tok)
			}
		}
		type event struct {
			join     int // node index, or -1
			keyspace string
			repl     Replication
		}
		var events []event
		for n := range nodes {
			events = append(events, event{join: n})
		}
		for k := range r.IntN(3) {
			at := r.IntN(len(events) + 1)
			ev := event{join: -1, keyspace: fmt.Sprintf("ks%d", k), repl: simple(1 + r.IntN(3))}
			events = slices.Insert(events, at, ev)
		}
		policy := r.IntN(4) // 0 every event, 1 before joins, 2 rarely with order, 3 rarely without
		var order []string

		var b Baselines
		ring := Ring{}
		keyspaces := withKeyspaces(nil)
		held := map[string]map[string]map[Token]bool{} // node → keyspace → probe points
		probes := slices.Sorted(maps.Keys(used))
		topology := func() Topology {
			return Topology{Ring: Ring{Owners: slices.Clone(ring.Owners)}, Keyspaces: maps.Clone(keyspaces)}
		}
		write := func() { // every current replica receives every point
			rr := newRefRing(ring)
			for ks, repl := range keyspaces {
				for _, p := range probes {
					for _, ep := range rr.ownersOf(repl, p) {
						if held[ep] == nil {
							held[ep] = map[string]map[Token]bool{}
						}
						if held[ep][ks] == nil {
							held[ep][ks] = map[Token]bool{}
						}
						held[ep][ks][p] = true
					}
				}
			}
		}
		observe := func() {
			if len(ring.Owners) == 0 {
				return
			}
			opts := ObserveOptions{}
			if policy == 2 {
				opts.JoinOrder = order
			}
			var err error
			if b, err = b.Observe(topology(), opts); err != nil {
				t.Fatalf("iteration %d: %v", iter, err)
			}
		}
		for _, ev := range events {
			if ev.join >= 0 && (policy == 1 || (policy >= 2 && r.IntN(4) == 0)) {
				observe() // the host's duty: before a node starts joining
			}
			if ev.join >= 0 {
				ep := fmt.Sprintf("N%d", ev.join)
				for _, tok := range tokensOf[ev.join] {
					ring.Owners = append(ring.Owners, TokenOwner{Token: tok, Endpoint: ep})
				}
				order = append(order, ep)
			} else {
				keyspaces[ev.keyspace] = ev.repl
			}
			write()
			if policy == 0 {
				observe()
			}
		}
		observe()
		now := topology()
		a, err := b.Analyze(now)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		rr := newRefRing(ring)
		var stale []string
		for _, ep := range slices.Sorted(maps.Keys(held)) {
			for ks, points := range held[ep] {
				for p := range points {
					if !slices.Contains(rr.ownersOf(keyspaces[ks], p), ep) {
						stale = append(stale, ep)
						break
					}
				}
				if slices.Contains(stale, ep) {
					break
				}
			}
		}
		got := a.NeedsCleanup()
		if len(stale) > 0 {
			withStale++
		}
		for _, ep := range stale {
			if !slices.Contains(got, ep) {
				t.Fatalf("iteration %d (policy %d, events %+v): %s holds stale data but NeedsCleanup = %v", iter, policy, events, ep, got)
			}
		}
		if policy == 0 && !reflect.DeepEqual(got, stale) {
			t.Fatalf("iteration %d (observing every event, events %+v): NeedsCleanup = %v, stale = %v", iter, events, got, stale)
		}
	}
	if withStale < 100 {
		t.Errorf("only %d of 400 runs left stale data: the test checks too little", withStale)
	}
}
