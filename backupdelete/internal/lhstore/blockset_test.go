package lhstore

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestBlockSetMatchesMap fills a blockSet from several goroutines with
// checksums of every valid length, many repeated, and compares it with a
// map: every added checksum is in it, no other is (one digit changed,
// one digit longer or shorter), and len is the distinct count.
func TestBlockSetMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		ck := make([]byte, n)
		for i := range ck {
			ck[i] = "0123456789abcdef"[r.IntN(16)]
		}
		return ck
	}
	var all [][]byte
	for range 20000 {
		n := 64
		if r.IntN(10) == 0 {
			n = 4 + r.IntN(125)
		}
		all = append(all, random(n))
	}
	for range 10000 {
		all = append(all, all[r.IntN(len(all))]) // repeats
	}
	want := map[string]bool{}
	for _, ck := range all {
		want[string(ck)] = true
	}
	set := newBlockSet()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * 1000; i < len(all); i += 4000 {
				set.addAll(all[i:min(i+1000, len(all))])
			}
		}()
	}
	wg.Wait()
	if set.len() != len(want) {
		t.Fatalf("len %d, want %d", set.len(), len(want))
	}
	for _, ck := range all {
		if !set.has(ck) {
			t.Fatalf("%s added but not in the set", ck)
		}
		for _, other := range [][]byte{
			append(append([]byte{}, ck[:len(ck)-1]...), "0123456789abcdef"[(hexVal[ck[len(ck)-1]]+1)%16]),
			append(append([]byte{}, ck...), '0'),
			ck[:len(ck)-1],
		} {
			if set.has(other) != want[string(other)] {
				t.Fatalf("has(%s) = %v, want %v", other, set.has(other), want[string(other)])
			}
		}
	}
}
