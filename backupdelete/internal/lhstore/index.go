package lhstore

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// candidateIndex is a targeted collection's distinct candidates, with a
// mark per candidate that the scanners set when a remaining backup
// references it. Its layout is fixed while they run, so marking takes no
// lock and allocates nothing. Every block of every remaining backup is
// looked up in it (450k lookups for 10 backups of 50k blocks, most of
// them hits), so it is laid out for few cache misses per lookup: a flat
// open-addressing table of one word per slot, holding a hash tag, the
// mark and the candidate's index; and the distinct candidates packed one
// after another in one string, at a fixed stride when they all have the
// same length (Longhorn's are all 64 digits), so a hit touches the slot
// and the candidate's bytes and nothing else.
type candidateIndex struct {
	seed  maphash.Seed
	slots []atomic.Uint64 // 0 (empty), or the hash's high 32 bits | mark | index+1
	all   string          // the distinct candidates, in index order
	// width is every candidate's length, or 0 when they differ: then
	// candidate i ends at ends[i].
	width int
	ends  []int
	n     int
}

const (
	tagMask = uint64(0xffffffff_00000000)
	// markBit is set in a candidate's slot once a scanner found it.
	markBit = uint64(1) << 31
	idxMask = markBit - 1
	// maxIndexed: an index+1 must fit below markBit. A larger candidate
	// list (a cfg of tens of GB) is collected through the referenced set.
	maxIndexed = int(idxMask) - 1
)

// newCandidateIndex indexes the candidates (at most maxIndexed of them).
func newCandidateIndex(candidates [][]byte) *candidateIndex {
	size := 1
	for size < 2*len(candidates) { // at most half full
		size <<= 1
	}
	x := &candidateIndex{seed: maphash.MakeSeed(), slots: make([]atomic.Uint64, size)}
	// First the distinct candidates, found with a scratch table of
	// positions in candidates (no copy yet), then one copy of them.
	first := make([]int32, 0, len(candidates))
	width, total := -1, 0
	for i, ck := range candidates {
		h := maphash.Bytes(x.seed, ck)
		mask := len(x.slots) - 1
		slot := int(h) & mask
		dup := false
		for ; ; slot = (slot + 1) & mask {
			e := x.slots[slot].Load()
			if e == 0 {
				break
			}
			if e&tagMask == h&tagMask && string(candidates[first[int(e&idxMask)-1]]) == string(ck) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		first = append(first, int32(i))
		x.slots[slot].Store(h&tagMask | uint64(len(first)))
		total += len(ck)
		switch {
		case width == -1:
			width = len(ck)
		case width != len(ck):
			width = 0
		}
	}
	var sb strings.Builder // String() hands over its buffer: no second copy
	sb.Grow(total)
	if width <= 0 {
		x.ends = make([]int, 0, len(first))
	}
	for _, i := range first {
		sb.Write(candidates[i])
		if width <= 0 {
			x.ends = append(x.ends, sb.Len())
		}
	}
	x.all, x.width, x.n = sb.String(), max(width, 0), len(first)
	return x
}

// key is candidate i.
func (x *candidateIndex) key(i int) string {
	if x.width > 0 {
		return x.all[i*x.width : (i+1)*x.width]
	}
	start := 0
	if i > 0 {
		start = x.ends[i-1]
	}
	return x.all[start:x.ends[i]]
}

// mark marks the candidates among cks; safe for concurrent use.
func (x *candidateIndex) mark(cks [][]byte) {
	if x.n == 0 {
		return
	}
	mask := len(x.slots) - 1
	for _, ck := range cks {
		h := maphash.Bytes(x.seed, ck)
		for slot := int(h) & mask; ; slot = (slot + 1) & mask {
			e := x.slots[slot].Load()
			if e == 0 {
				break
			}
			if e&tagMask == h&tagMask && x.key(int(e&idxMask)-1) == string(ck) {
				if e&markBit == 0 {
					x.slots[slot].Or(markBit)
				}
				break
			}
		}
	}
}

// each calls f with every distinct candidate and whether it is marked,
// after the scan.
func (x *candidateIndex) each(f func(ck string, marked bool)) {
	for i := range x.slots {
		if e := x.slots[i].Load(); e != 0 {
			f(x.key(int(e&idxMask)-1), e&markBit != 0)
		}
	}
}

// marked and unmarked count the distinct candidates, after the scan.
func (x *candidateIndex) marked() int { return x.n - x.unmarked() }

func (x *candidateIndex) unmarked() int {
	n := 0
	for i := range x.slots {
		if e := x.slots[i].Load(); e != 0 && e&markBit == 0 {
			n++
		}
	}
	return n
}
