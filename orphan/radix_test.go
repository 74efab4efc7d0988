package orphan

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// referenceSortKeys is the comparison sort sortKeys replaces.
func referenceSortKeys(keys []sortKey, tie func(a, b int32) int) {
	slices.SortStableFunc(keys, func(a, b sortKey) int {
		if c := cmp.Compare(a.k, b.k); c != 0 {
			return c
		}
		return tie(a.i, b.i)
	})
}

// randomKeys draws n keys from a few shapes: uniform, few distinct
// values, keys that differ only in one byte, and all equal.
func randomKeys(rng *rand.Rand, n int) []sortKey {
	keys := make([]sortKey, n)
	shape := rng.IntN(4)
	for i := range keys {
		var k uint64
		switch shape {
		case 0:
			k = rng.Uint64()
		case 1:
			k = uint64(rng.IntN(5)) << (8 * rng.IntN(8))
		case 2:
			k = 0xabcdef0011223300 | uint64(rng.IntN(256))
		}
		keys[i] = sortKey{k, int32(i)}
	}
	return keys
}

// sharedTmp is one second array for every sort of a test, as a Planner
// keeps one across cycles of different sizes.
var sharedTmp []sortKey

func checkSortKeys(t *testing.T, keys []sortKey, tieBy []int) {
	t.Helper()
	tie := func(a, b int32) int { return cmp.Compare(tieBy[a], tieBy[b]) }
	got, want := slices.Clone(keys), slices.Clone(keys)
	sortKeys(got, &sharedTmp, tie)
	referenceSortKeys(want, tie)
	if !slices.Equal(got, want) {
		t.Fatalf("sortKeys of %d keys differs from the reference", len(keys))
	}
}

// TestSortKeysMatchesComparisonSort: the radix sort orders as the stable
// comparison sort does, around the size it switches at, with ties.
func TestSortKeysMatchesComparisonSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, radixMin - 1, radixMin, radixMin + 1, 5000} {
		for range 8 {
			keys := randomKeys(rng, n)
			tieBy := make([]int, n)
			for i := range tieBy {
				tieBy[i] = rng.IntN(3)
			}
			checkSortKeys(t, keys, tieBy)
		}
	}
}

// FuzzSortKeys compares sortKeys with the comparison sort on keys the
// fuzzer chooses.
func FuzzSortKeys(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07"), uint16(600))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		m := int(n % 2048)
		keys := make([]sortKey, m)
		tieBy := make([]int, m)
		for i := range keys {
			var k uint64
			for b := range 8 {
				if len(data) > 0 {
					k = k<<8 | uint64(data[(i*8+b)%len(data)]^byte(i*b))
				}
			}
			keys[i] = sortKey{k, int32(i)}
			tieBy[i] = int(k % 3)
		}
		checkSortKeys(t, keys, tieBy)
	})
}

// TestSortedIndexesIsStringOrder: record names of every form (computed
// names, upper-case, short, before and after the NamePrefix range,
// duplicates) come out in string order, ties in input order.
func TestSortedIndexesIsStringOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{10, radixMin + 7, 4000} {
		names := make([]string, n)
		for i := range names {
			switch rng.IntN(8) {
			case 0:
				names[i] = strings.ToUpper(fmt.Sprintf("orphan-%064x", rng.Uint64()))
			case 1:
				names[i] = fmt.Sprintf("orphan-%d", rng.IntN(50))
			case 2:
				names[i] = []string{"", "a", "orphan", "orphan.", "z", "orphan-"}[rng.IntN(6)]
			case 3:
				names[i] = names[rng.IntN(i+1)] // a duplicate (or itself, empty)
			default:
				names[i] = fmt.Sprintf("orphan-%016x%048x", rng.Uint64()&0xffffffff0000000f, i)
			}
		}
		got := sortedIndexes(n, func(i int) string { return names[i] }, &scratch{})
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(names[a], names[b]) })
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: sortedIndexes is not the names' string order", n)
		}
	}
}
