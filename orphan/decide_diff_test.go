package orphan_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestDecideAgreesWithReference checks Decide against referenceDecide, a
// deliberately naive restatement of the rules, on random inputs with many
// name collisions, overlapping scopes, every health, the guard's evidence
// and options.
func TestDecideAgreesWithReference(t *testing.T) {
	for seed := range uint64(5000) {
		rng := rand.New(rand.NewPCG(seed, 99))
		in := randomInput(rng)
		checkAgainstReference(t, seed, in)
		checkAgainstReference(t, seed, nextCycle(in, rng))
	}
}

// nextCycle is the input of the cycle after in's plan was applied: the
// plan's conditions written on the records (so they carry exactly what
// the planner spelled, messages included), forgotten and purged records
// gone, new ones stored, some time later. It puts the rules that leave a
// current condition alone to the test.
func nextCycle(in orphan.Input, rng *rand.Rand) orphan.Input {
	p := orphan.Decide(in)
	planned := map[string][]metav1.Condition{}
	for _, sc := range p.Conditions {
		planned[sc.Record.Name] = sc.Conditions
	}
	gone := map[string]bool{}
	for _, f := range p.Forget {
		gone[f.Record.Name] = true
	}
	for _, pu := range p.Purge {
		gone[pu.Record.Name] = true
	}
	next := in
	next.Records = nil
	for _, r := range append(slices.Clone(in.Records), p.Create...) {
		if gone[r.Name] {
			continue
		}
		r = r.Clone()
		for _, c := range planned[r.Name] {
			meta.SetStatusCondition(&r.Conditions, c)
		}
		if rng.IntN(4) == 0 {
			r.DeletionRequested = !r.DeletionRequested
		}
		next.Records = append(next.Records, r)
	}
	next.AutoPurges = p.AutoPurges
	next.Now = in.Now.Add(time.Duration(rng.IntN(400)) * time.Second)
	return next
}

// checkAgainstReference fails t unless Decide plans in exactly as
// referenceDecide does: every record's fate, every word of it (keep
// reasons, forget messages and their conditions, refusals, conditions
// with their messages), new records whole, purges' candidates with their
// verdicts, rejected candidates with their errors, the ledger in order,
// and the requeue time.
func checkAgainstReference(t *testing.T, seed uint64, in orphan.Input) {
	t.Helper()
	got := orphan.Decide(in)
	want := referenceDecide(in)
	differ := func(what string, g, w any) {
		t.Helper()
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("seed %d: %s differ\n got  %v\n want %v\ninput %+v", seed, what, g, w, in)
		}
	}
	differ("actions", actions(got), want.actions)
	keeps, forgets := map[string]string{}, map[string]string{}
	for _, k := range got.Keep {
		keeps[k.Record.Name] = k.Reason
	}
	for _, f := range got.Forget {
		forgets[f.Record.Name] = f.Message
		// The condition a forget writes first is its own reason and message.
		wantCond := []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: string(f.Reason), Message: f.Message}}
		differ("forget conditions of "+f.Record.Name, f.Conditions, wantCond)
	}
	differ("keep reasons", keeps, want.keeps)
	differ("forget messages", forgets, want.forgets)
	differ("conditions", marks(got), want.marks)
	differ("refusals", refusals(got), want.refused)
	if !got.RequeueAt.Equal(want.requeue) {
		t.Fatalf("seed %d: RequeueAt = %v, want %v", seed, got.RequeueAt, want.requeue)
	}
	purged := map[string]string{}
	for _, pu := range got.Purge {
		purged[pu.Record.Name] = fmt.Sprint(pu.Candidate)
	}
	differ("purges' candidates", purged, want.purged)
	created, createdMarks := map[string]orphan.Record{}, map[string][]string{}
	for _, r := range got.Create {
		if cs := spellConditions(r.Conditions); len(cs) > 0 {
			createdMarks[r.Name] = cs
		}
		r.Conditions = nil
		created[r.Name] = r
	}
	differ("created records", created, want.created)
	differ("created records' conditions", createdMarks, want.createdMarks)
	var rejected []string
	for _, r := range got.Rejected {
		rejected = append(rejected, fmt.Sprint(r.Item)+": "+r.Err.Error())
	}
	differ("rejected", rejected, want.rejected)
	var ledger []string
	for _, e := range got.AutoPurges {
		ledger = append(ledger, fmt.Sprint(e))
	}
	differ("ledgers", ledger, want.ledger)
	checkPlanInvariants(t, seed, in, got)
}

// spellConditions spells conditions as the reference's marks, sorted:
// their order within one record's entry is not part of the contract,
// each type appearing at most once is (checkPlanInvariants).
func spellConditions(cs []metav1.Condition) []string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, spellCondition(c))
	}
	sort.Strings(parts)
	return parts
}

// marks flattens a plan's conditions to name → spelled conditions.
func marks(p orphan.Plan) map[string][]string {
	out := map[string][]string{}
	for _, sc := range p.Conditions {
		out[sc.Record.Name] = spellConditions(sc.Conditions)
	}
	return out
}

// refusals flattens a plan's refusals to name → "Rule|Reason".
func refusals(p orphan.Plan) map[string]string {
	out := map[string]string{}
	for _, r := range p.Refused {
		out[r.Name] = r.Rule + "|" + r.Reason
	}
	return out
}

// checkPlanInvariants states the safety rules directly.
func checkPlanInvariants(t *testing.T, seed uint64, in orphan.Input, p orphan.Plan) {
	t.Helper()
	held := map[string]int{} // how many records of the input hold each name
	for _, r := range in.Records {
		held[r.Name]++
	}
	for _, pu := range p.Purge {
		if pu.Candidate.Verdict.Outcome != orphan.OutcomeOrphan {
			t.Fatalf("seed %d: purge of %s whose candidate is %v", seed, pu.Record.Name, pu.Candidate.Verdict.Outcome)
		}
		if !pu.Auto && !pu.Record.DeletionRequested {
			t.Fatalf("seed %d: purge of %s that nobody requested", seed, pu.Record.Name)
		}
		if !hasTrueCleanable(pu.Record) {
			t.Fatalf("seed %d: purge of %s, which is not marked cleanable", seed, pu.Record.Name)
		}
		if pu.Auto && !in.Policy.AutoDeletes(pu.Record.Kind) {
			t.Fatalf("seed %d: auto purge of a kind the policy does not delete", seed)
		}
		node := in.Scopes[orphan.Scope{NodeID: pu.Record.NodeID}]
		if node.Health != orphan.HealthReady {
			t.Fatalf("seed %d: purge of %s on node %s whose health is %q", seed, pu.Record.Name, pu.Record.NodeID, node.Health)
		}
		vols, covered := copiesOf(pu)
		for _, vol := range vols {
			if !covered || in.Guard.AllowLastCopy {
				break
			}
			state, listed := in.Volumes[vol]
			if !listed && in.VolumesComplete && vol != "" {
				state = orphan.VolumeDeleted
			}
			switch {
			case state == orphan.VolumeFaulted && (pu.Auto || !in.LastCopyOverride[pu.Record.Name]):
				t.Fatalf("seed %d: purge of %s, a copy of faulted volume %q that may hold data, without an override", seed, pu.Record.Name, vol)
			case pu.Auto && state != orphan.VolumeHealthy && state != orphan.VolumeDeleted:
				t.Fatalf("seed %d: automatic purge of %s, a copy of volume %q that may hold data, which is %q", seed, pu.Record.Name, vol, state)
			}
		}
		if st := in.Scopes[pu.Record.Scope()]; st.NoneExpected && !in.Guard.AllowNoneExpected {
			t.Fatalf("seed %d: purge of %s in a scope where nothing is expected", seed, pu.Record.Name)
		}
	}
	var condNames, refusedNames []string
	for _, sc := range p.Conditions {
		condNames = append(condNames, sc.Record.Name)
		if len(sc.Conditions) == 0 {
			t.Fatalf("seed %d: an entry of Conditions for %s with no condition", seed, sc.Record.Name)
		}
		checkConditionTypesOnce(t, seed, sc.Record.Name, sc.Conditions)
	}
	for _, r := range p.Create {
		checkConditionTypesOnce(t, seed, r.Name, r.Conditions)
	}
	for _, r := range p.Refused {
		refusedNames = append(refusedNames, r.Name)
	}
	// Every list of the plan is in name order, each name at most once.
	for _, list := range [][]string{names(p.Create), forgetNames(p.Forget), purgeNames(p.Purge), keepNames(p.Keep), condNames, refusedNames} {
		if !sort.StringsAreSorted(list) {
			t.Fatalf("seed %d: plan list not sorted: %v", seed, list)
		}
		for i := 1; i < len(list); i++ {
			if list[i] == list[i-1] && held[list[i]] < 2 {
				t.Fatalf("seed %d: %s twice in one list of the plan", seed, list[i])
			}
		}
	}
	// A name is in one list only, as often as records hold it (a new
	// record once).
	lists := map[string]map[string]int{}
	for i, list := range [][]string{names(p.Create), forgetNames(p.Forget), purgeNames(p.Purge), keepNames(p.Keep)} {
		for _, name := range list {
			if lists[name] == nil {
				lists[name] = map[string]int{}
			}
			lists[name][fmt.Sprint(i)]++
		}
	}
	for name, in := range lists {
		for _, n := range in {
			if len(in) > 1 || n > max(1, held[name]) {
				t.Fatalf("seed %d: %s appears in more than one list, or more often than records hold it: %v", seed, name, in)
			}
		}
	}
}

// copiesOf are the volumes a purge may hold data of, and whether it may
// hold any, as the last-copy guard sees it: its observation's Copy
// (every one but a NoData one, recoverable or not), and for replica
// data, the volume its directory is named after.
func copiesOf(pu orphan.Purge) ([]string, bool) {
	c := pu.Candidate.Item.Copy
	if c != nil && c.NoData {
		return nil, false
	}
	var vols []string
	if c != nil {
		vols = append(vols, c.Volume)
	}
	if pu.Record.Kind == orphan.KindReplicaData {
		vol := "" // a volume nobody can tell
		if m := regexp.MustCompile(`^(.+)-[a-zA-Z0-9]{8}$`).FindStringSubmatch(pu.Record.Param(orphan.ParamDataName)); m != nil {
			vol = m[1]
		}
		if c == nil || vol != "" && vol != c.Volume {
			vols = append(vols, vol)
		}
	}
	return vols, len(vols) > 0
}

// TestDecideAgreesWithReferenceOnLargeInputs: inputs large enough that
// the planner's fast paths all run (records sorted by radix, the sum
// table grown several times, new records' names spelled in several
// blocks, the Bloom filter of match keys consulted), each held to the
// reference.
func TestDecideAgreesWithReferenceOnLargeInputs(t *testing.T) {
	for _, c := range []struct{ n, every int }{{1500, 1}, {2000, 2}, {3000, 3}, {3000, 100}} {
		checkAgainstReference(t, uint64(c.n*1000+c.every), planInputWithOrphans(c.n, c.every))
	}
}

// FuzzDecideAgreesWithReference drives the random and the hard-input
// generators from the fuzzer's seeds and holds Decide to the reference.
func FuzzDecideAgreesWithReference(f *testing.F) {
	f.Add(uint64(1), uint64(2), false)
	f.Add(uint64(3), uint64(4), true)
	f.Fuzz(func(t *testing.T, a, b uint64, steady bool) {
		rng := rand.New(rand.NewPCG(a, b))
		for _, in := range []orphan.Input{hardInput(rng, steady), randomInput(rng), guardInput(rng)} {
			checkAgainstReference(t, a, in)
			checkAgainstReference(t, a, nextCycle(in, rng))
		}
	})
}

// checkConditionTypesOnce fails t if cs sets one condition type twice: a
// writer applying them in turn would keep only the last.
func checkConditionTypesOnce(t *testing.T, seed uint64, name string, cs []metav1.Condition) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.Type] {
			t.Fatalf("seed %d: condition %s planned twice for %s: %v", seed, c.Type, name, cs)
		}
		seen[c.Type] = true
	}
}
