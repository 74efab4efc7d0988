package tokenring

import (
	"encoding/json"
	"errors"
	"reflect"
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
	var b Baselines
	b = mustObserve(t, b, Topology{ring(locs, 10, "A"), withKeyspaces(nil)}, ObserveOptions{})
	now := Topology{ring(locs, 10, "A", 20, "B"), withKeyspaces(map[string]Replication{"geo": nts(map[string]int{"dc1": 1, "dc2": 1})})}
	b = mustObserve(t, b, now, ObserveOptions{})
	a := mustAnalyzeBaselines(t, b, now)
	if got := a.NeedsCleanup(); len(got) != 0 {
		t.Errorf("NeedsCleanup = %v: A holds all of dc1's replica before and after", got)
	}
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
