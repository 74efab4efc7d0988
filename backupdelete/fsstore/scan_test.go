package fsstore

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestLowerHex8 checks the eight-at-a-time validation against the table:
// every byte value in every position, among valid and random neighbours.
func TestLowerHex8(t *testing.T) {
	check := func(w [8]byte) {
		t.Helper()
		want := true
		for _, c := range w {
			want = want && lowerHex[c]
		}
		if got := lowerHex8(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("lowerHex8(%q) = %v, want %v", w[:], got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'0', '9', 'a', 'f', 0xff, 0x7f, '/', ':', '`', 'g'} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
			for range 20 {
				var w [8]byte
				for i := range w {
					w[i] = "0123456789abcdef"[r.IntN(16)]
					if r.IntN(8) == 0 {
						w[i] = byte(r.IntN(256))
					}
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
}
