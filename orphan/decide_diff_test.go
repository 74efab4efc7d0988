package orphan_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// checkSameAsOld fails t unless Decide's plan equals, field for field,
// the plan of Decide as it was before the allocation work (decideOld).
func checkSameAsOld(t *testing.T, what string, in orphan.Input) {
	t.Helper()
	got, want := orphan.Decide(in), orphan.DecideOldForTest(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Decide and the old Decide differ\n got  %+v\n want %+v\ninput %+v", what, got, want, in)
	}
}

// TestDecideMatchesOldDecide: the rewritten Decide plans every input
// exactly as the old one did: the random inputs, the hard ones (colliding
// dash-joined fields, forged records, duplicates) and the large ones.
func TestDecideMatchesOldDecide(t *testing.T) {
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 99))
		checkSameAsOld(t, "random", randomInput(rng))
		rng = rand.New(rand.NewPCG(seed, 7))
		checkSameAsOld(t, "hard", hardInput(rng, seed%3 == 0))
	}
	for _, every := range []int{1, 2, 3, 100} {
		checkSameAsOld(t, "large", planInputWithOrphans(3000, every))
	}
}

// FuzzDecideMatchesOldDecide drives the hard-input generator from the
// fuzzer's seeds.
func FuzzDecideMatchesOldDecide(f *testing.F) {
	f.Add(uint64(1), uint64(2), false)
	f.Add(uint64(3), uint64(4), true)
	f.Fuzz(func(t *testing.T, a, b uint64, steady bool) {
		rng := rand.New(rand.NewPCG(a, b))
		checkSameAsOld(t, "hard", hardInput(rng, steady))
		checkSameAsOld(t, "random", randomInput(rng))
	})
}
