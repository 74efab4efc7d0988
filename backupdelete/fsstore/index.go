package fsstore

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// candidateIndex is a targeted collection's distinct candidates, with a
// mark per candidate that the scanners set when a remaining backup
// references it. It is read-only while they run, so marking takes no lock
// and allocates nothing. Every block of every remaining backup is looked
// up in it, so it is a flat open-addressing table rather than a map: one
// word per slot holds a hash tag and the candidate's index, and most
// lookups touch that word and nothing else.
type candidateIndex struct {
	seed  maphash.Seed
	slots []uint64 // 0 (empty), or the hash's high 32 bits | index+1
	cks   []string
	marks []atomic.Bool
}

const tagMask = uint64(0xffffffff_00000000)

func newCandidateIndex(candidates [][]byte) *candidateIndex {
	// The candidates are kept as substrings of one copy of them all: one
	// allocation instead of one per candidate.
	n := 0
	for _, ck := range candidates {
		n += len(ck)
	}
	var sb strings.Builder // String() hands over its buffer: no second copy
	sb.Grow(n)
	for _, ck := range candidates {
		sb.Write(ck)
	}
	all := sb.String()
	size := 1
	for size < 2*len(candidates) { // at most half full
		size <<= 1
	}
	x := &candidateIndex{seed: maphash.MakeSeed(), slots: make([]uint64, size), cks: make([]string, 0, len(candidates))}
	off := 0
	for _, ck := range candidates {
		key := all[off : off+len(ck)]
		off += len(ck)
		if i, slot, h := x.find(ck); i < 0 {
			x.slots[slot] = h&tagMask | uint64(len(x.cks)+1)
			x.cks = append(x.cks, key)
		}
	}
	x.marks = make([]atomic.Bool, len(x.cks))
	return x
}

// find returns ck's index in cks, or -1 and the empty slot where it
// belongs; h is ck's hash.
func (x *candidateIndex) find(ck []byte) (i, slot int, h uint64) {
	h = maphash.Bytes(x.seed, ck)
	mask := len(x.slots) - 1
	for slot = int(h) & mask; ; slot = (slot + 1) & mask {
		e := x.slots[slot]
		if e == 0 {
			return -1, slot, h
		}
		if e&tagMask == h&tagMask {
			if i := int(e&^tagMask) - 1; x.cks[i] == string(ck) {
				return i, slot, h
			}
		}
	}
}

// mark marks the candidates among cks; safe for concurrent use.
func (x *candidateIndex) mark(cks [][]byte) {
	for _, ck := range cks {
		if i, _, _ := x.find(ck); i >= 0 && !x.marks[i].Load() {
			x.marks[i].Store(true)
		}
	}
}

// marked and unmarked count the distinct candidates, after the scan.
func (x *candidateIndex) marked() int { return len(x.cks) - x.unmarked() }

func (x *candidateIndex) unmarked() int {
	n := 0
	for i := range x.marks {
		if !x.marks[i].Load() {
			n++
		}
	}
	return n
}
