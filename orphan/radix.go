package orphan

import (
	"cmp"
	"slices"
)

// sortKey is an index to be sorted by a 64-bit key: the leading bytes of
// a name or a sum, compared as a number.
type sortKey struct {
	k uint64
	i int32
}

// radixMin is the length below which sortKeys simply compares: a radix
// sort's fixed cost (eight histograms, a second array) is not worth it.
const radixMin = 512

// sortKeys sorts keys by k and, where keys tie, by tie of their indexes,
// stably: what tie calls equal keeps its order. The keys of a large input
// are sorted by radix, eight bits at a time, least significant first; a
// pass whose digit is the same for every key is skipped. Each pass is
// stable, so the result is ordered by the whole k; then each run of equal
// k is ordered by tie. Its cost does not depend on the keys' values, which
// a host's record names choose.
//
// tmp is where the second array is kept between calls.
func sortKeys(keys []sortKey, tmp *[]sortKey, tie func(a, b int32) int) {
	if len(keys) < radixMin {
		slices.SortStableFunc(keys, func(a, b sortKey) int {
			if c := cmp.Compare(a.k, b.k); c != 0 {
				return c
			}
			return tie(a.i, b.i)
		})
		return
	}
	var counts [8][256]int
	for _, e := range keys {
		for d := range 8 {
			counts[d][byte(e.k>>(8*d))]++
		}
	}
	src, dst := keys, take(tmp, len(keys))
	for d := range 8 {
		c := &counts[d]
		if c[byte(src[0].k>>(8*d))] == len(src) {
			continue // every key has this digit: the pass would change nothing
		}
		sum := 0
		for v := range c {
			n := c[v]
			c[v] = sum
			sum += n
		}
		shift := 8 * d
		for _, e := range src {
			v := byte(e.k >> shift)
			dst[c[v]] = e
			c[v]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi].k == keys[lo].k {
			hi++
		}
		if hi-lo > 1 {
			slices.SortStableFunc(keys[lo:hi], func(a, b sortKey) int { return tie(a.i, b.i) })
		}
		lo = hi
	}
}
