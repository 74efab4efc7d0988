package lhstore

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

// checksum returns a 64-hex block checksum like Longhorn's.
func checksum(seed string) string { return lhformat.BlockChecksum([]byte(seed)) }

// TestCandidateIndex: the index holds each distinct candidate once and
// marks exactly the candidates it is shown, from concurrent markers, and
// never one that only shares a prefix with a shown block.
func TestCandidateIndex(t *testing.T) {
	var cands [][]byte
	for i := range 1000 {
		ck := checksum(fmt.Sprint(i))
		cands = append(cands, []byte(ck), []byte(ck[:4+i%60])) // 4 to 63 digits
	}
	cands = append(cands, cands[:100]...) // repeated
	x := newCandidateIndex(cands)
	if x.n != 2000 {
		t.Fatalf("%d distinct candidates, want 2000", x.n)
	}
	want := map[string]bool{}
	var shown [][]byte
	for i := range 1000 {
		ck := checksum(fmt.Sprint(i))
		if i%3 == 0 {
			shown = append(shown, []byte(ck))
			want[ck] = true
		}
		shown = append(shown, []byte(ck[:4+i%60]+"x"), []byte(ck[:3+i%60]), []byte(checksum(fmt.Sprint("other", i))))
	}
	done := make(chan bool)
	for w := range 4 {
		go func() {
			x.mark(shown[w*len(shown)/4 : (w+1)*len(shown)/4])
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
	seen := map[string]bool{}
	x.each(func(ck string, marked bool) {
		if marked != want[ck] || seen[ck] {
			t.Fatalf("candidate %s marked %v (seen before: %v)", ck, marked, seen[ck])
		}
		seen[ck] = true
	})
	if len(seen) != 2000 {
		t.Fatalf("each showed %d candidates, want 2000", len(seen))
	}
	if x.marked() != len(want) || x.unmarked() != 2000-len(want) {
		t.Fatalf("marked %d, unmarked %d", x.marked(), x.unmarked())
	}
	if e := newCandidateIndex(nil); e.marked() != 0 || e.unmarked() != 0 {
		t.Fatal("empty index")
	}
}

// FuzzCandidateIndex compares the index with a map: candidates and shown
// blocks are cut from the input at '|' (a leading 'L' makes every
// candidate 64 bytes long, the fixed-stride layout; the rest mixes
// lengths), then the index must hold each distinct candidate once, mark
// exactly those shown, and count them as the map does.
func FuzzCandidateIndex(f *testing.F) {
	f.Add([]byte("abcd|abcd|ef01|+abcd|0000"))
	f.Add([]byte("L" + strings.Repeat("a", 64) + "|" + strings.Repeat("b", 64) + "|+" + strings.Repeat("a", 64)))
	f.Add([]byte("||+|"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fixed := len(data) > 0 && data[0] == 'L'
		var cands, shown [][]byte
		for i, part := range bytes.Split(data, []byte("|")) {
			if i == 0 && fixed {
				part = part[1:]
			}
			isShown := len(part) > 0 && part[0] == '+'
			if isShown {
				part = part[1:]
			}
			if fixed {
				part = append(bytes.Repeat([]byte("0"), 64-min(64, len(part))), part[:min(64, len(part))]...)
			}
			if isShown {
				shown = append(shown, part)
			} else {
				cands = append(cands, part)
			}
		}
		want := map[string]bool{}
		for _, c := range cands {
			want[string(c)] = false
		}
		for _, s := range shown {
			if _, ok := want[string(s)]; ok {
				want[string(s)] = true
			}
		}
		x := newCandidateIndex(cands)
		x.mark(shown)
		got := map[string]bool{}
		x.each(func(ck string, marked bool) {
			if _, dup := got[ck]; dup {
				t.Fatalf("%q held twice", ck)
			}
			got[ck] = marked
		})
		if !maps.Equal(got, want) {
			t.Fatalf("index %v, map %v", got, want)
		}
		nMarked := 0
		for _, m := range want {
			if m {
				nMarked++
			}
		}
		if x.marked() != nMarked || x.unmarked() != len(want)-nMarked {
			t.Fatalf("marked %d unmarked %d, want %d and %d", x.marked(), x.unmarked(), nMarked, len(want)-nMarked)
		}
	})
}
