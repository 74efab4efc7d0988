package orphan_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// checkPlannerSequence plans each input of seq with one Planner and with
// Decide, and fails t unless every plan is the same, field for field.
func checkPlannerSequence(t *testing.T, what string, seq []orphan.Input) {
	t.Helper()
	var p orphan.Planner
	var gots, wants []orphan.Plan
	for i, in := range seq {
		got, want := p.Decide(in), orphan.Decide(in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s, cycle %d: Planner and Decide differ\n got  %+v\n want %+v\ninput %+v", what, i, got, want, in)
		}
		gots, wants = append(gots, got), append(wants, want)
	}
	// The Planner reuses its memory from cycle to cycle: no plan it
	// returned may change when it plans the next.
	for i := range gots {
		if !reflect.DeepEqual(gots[i], wants[i]) {
			t.Fatalf("%s: the plan of cycle %d changed after later cycles", what, i)
		}
	}
}

// evolve returns the next cycle's input: the previous one with items
// appearing, vanishing, moving and changing fields, duplicates and
// conflicting verdicts, records created for orphans, dropped, forged
// (renamed to another item's name, or tampered after naming) or
// re-spelled, and the scopes' healths changing now and then. The input
// given is not modified: each cycle's slices and maps are new, as a
// host's would be.
func evolve(rng *rand.Rand, in orphan.Input, pool []orphan.Item) orphan.Input {
	out := in
	out.Now = in.Now.Add(time.Duration(rng.IntN(200)) * time.Second)
	if rng.IntN(4) == 0 {
		out.Scopes = map[orphan.Scope]orphan.ScopeStatus{}
		for s, st := range in.Scopes {
			if rng.IntN(3) == 0 {
				st.Health = healths[rng.IntN(len(healths))]
			}
			out.Scopes[s] = st
		}
	}
	verdicts := []orphan.Verdict{orphan.Orphan("o"), orphan.Orphan("o2"), orphan.Owned("w"), orphan.Undecided("u")}
	out.Candidates = nil
	for _, c := range in.Candidates {
		switch rng.IntN(20) {
		case 0: // vanishes
			continue
		case 1: // a field changes
			c.Item.Parameters = clone(c.Item.Parameters)
			for k := range c.Item.Parameters {
				c.Item.Parameters[k] += "x"
				break
			}
		case 2: // another verdict
			c.Verdict = verdicts[rng.IntN(len(verdicts))]
		case 3: // a duplicate, maybe with a conflicting verdict
			out.Candidates = append(out.Candidates, orphan.Candidate{Item: c.Item, Verdict: verdicts[rng.IntN(len(verdicts))]})
		case 4: // a new item before it
			out.Candidates = append(out.Candidates, orphan.Candidate{Item: pool[rng.IntN(len(pool))], Verdict: verdicts[rng.IntN(len(verdicts))]})
		case 5: // the same item, as a fresh copy with its own strings
			it := c.Item
			it.Parameters = map[string]string{}
			for k, v := range c.Item.Parameters {
				it.Parameters[k] = string([]byte(v))
			}
			c.Item = it
		}
		out.Candidates = append(out.Candidates, c)
	}
	if rng.IntN(6) == 0 { // listed in another order
		rng.Shuffle(len(out.Candidates), func(i, j int) { out.Candidates[i], out.Candidates[j] = out.Candidates[j], out.Candidates[i] })
	}
	// Records: the host applied the last plan (more or less), and some
	// records are forged or damaged.
	last := orphan.Decide(in)
	byName := map[string]bool{}
	out.Records = nil
	add := func(r orphan.Record) {
		if r.Name != "" && !byName[r.Name] {
			byName[r.Name] = true
			out.Records = append(out.Records, r)
		}
	}
	gone := map[string]bool{}
	for _, f := range last.Forget {
		gone[f.Record.Name] = rng.IntN(5) != 0
	}
	for _, pu := range last.Purge {
		gone[pu.Record.Name] = rng.IntN(5) != 0
	}
	for _, r := range in.Records {
		if gone[r.Name] {
			continue
		}
		switch rng.IntN(25) {
		case 0: // a forged name: another item's
			r = r.Clone()
			r.Name, _ = pool[rng.IntN(len(pool))].Name()
		case 1: // tampered after naming
			r = r.Clone()
			for k := range r.Parameters {
				r.Parameters[k] += "-t"
				break
			}
		case 2:
			r.DeletionRequested = true
		case 3:
			r = r.Clone()
			r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: "Cleanable"}}
		}
		add(r)
	}
	for _, r := range last.Create {
		if rng.IntN(4) != 0 {
			add(r.Clone())
		}
	}
	if rng.IntN(8) == 0 {
		rng.Shuffle(len(out.Records), func(i, j int) { out.Records[i], out.Records[j] = out.Records[j], out.Records[i] })
	}
	return out
}

// plannerSequence is a random sequence of n cycles, starting from a random
// or a hard input.
func plannerSequence(rng *rand.Rand, n int) []orphan.Input {
	var in orphan.Input
	if rng.IntN(2) == 0 {
		in = randomInput(rng)
	} else {
		in = hardInput(rng, rng.IntN(2) == 0)
	}
	pool := make([]orphan.Item, 0, 16)
	for range 8 {
		pool = append(pool, randomItem(rng), hardItem(rng))
	}
	seq := []orphan.Input{in}
	for range n - 1 {
		in = evolve(rng, in, pool)
		seq = append(seq, in)
	}
	return seq
}

// TestPlannerMatchesDecideOverSequences: a Planner's plans equal Decide's
// over random sequences of inputs, whatever changes between cycles.
func TestPlannerMatchesDecideOverSequences(t *testing.T) {
	for seed := range uint64(1500) {
		rng := rand.New(rand.NewPCG(seed, 14))
		checkPlannerSequence(t, fmt.Sprintf("seed %d", seed), plannerSequence(rng, 2+rng.IntN(8)))
	}
}

// TestPlannerMatchesDecideOnLargeInputs: working arrays that grow, are
// reused and are given back, with items vanishing, moving and being
// forged between cycles; and across inputs of different nodes, one
// Planner for all.
func TestPlannerMatchesDecideOnLargeInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := planInputWithOrphans(2000, 2)
	pool := []orphan.Item{randomItem(rng), hardItem(rng)}
	seq := []orphan.Input{base, base}
	in := base
	for range 6 {
		in = evolve(rng, in, pool)
		seq = append(seq, in, in)
	}
	seq = append(seq, base, planInputWithOrphans(50, 1), base, planInputWithOrphans(3000, 3))
	checkPlannerSequence(t, "large", seq)
}

// TestPlannerKeepsCheckingRecordNames: a record forged in a later cycle,
// after the Planner planned the genuine record at the same place, is
// still forgotten as Mismatch and never purged.
func TestPlannerKeepsCheckingRecordNames(t *testing.T) {
	in := planInputWithOrphans(200, 1)
	for i := range in.Records {
		in.Records[i] = requestedClean(in.Records[i])
	}
	var p orphan.Planner
	p.Decide(in)
	forged := in
	forged.Records = make([]orphan.Record, len(in.Records))
	for i, r := range in.Records {
		r = r.Clone()
		r.Parameters[orphan.ParamDiskUUID] = "another-disk" // the name stays, the fields change
		forged.Records[i] = r
	}
	plan := p.Decide(forged)
	if len(plan.Purge) != 0 {
		t.Fatalf("%d forged records purged", len(plan.Purge))
	}
	for _, f := range plan.Forget {
		if f.Reason != orphan.ReasonMismatch {
			t.Fatalf("%s forgotten as %s, want Mismatch", f.Record.Name, f.Reason)
		}
	}
	if len(plan.Forget) != len(in.Records) {
		t.Fatalf("%d of %d forged records forgotten", len(plan.Forget), len(in.Records))
	}
	checkPlannerSequence(t, "forged after genuine", []orphan.Input{in, forged, in})
}

// FuzzPlannerMatchesDecide drives the sequence generator from the
// fuzzer's seeds.
func FuzzPlannerMatchesDecide(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint8(5))
	f.Add(uint64(7), uint64(14), uint8(12))
	f.Fuzz(func(t *testing.T, a, b uint64, n uint8) {
		rng := rand.New(rand.NewPCG(a, b))
		checkPlannerSequence(t, "fuzz", plannerSequence(rng, 1+int(n%16)))
	})
}
