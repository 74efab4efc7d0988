package lhstore

import (
	"hash/maphash"
	"sync"
)

// blockSet is a set of block checksums that several scanners fill at once:
// 256 shards by the checksum's first two hex digits, each under its own
// lock. A full collection puts every block the remaining backups
// reference in it (hundreds of thousands), so a shard is a flat
// open-addressing table over one buffer of the checksums, not a map with
// a string per block: one allocation per growth instead of one per block,
// and nothing for the garbage collector to trace.
type blockSet struct {
	seed   maphash.Seed
	shards [256]setShard
}

type setShard struct {
	mu    sync.Mutex
	seed  maphash.Seed // the set's
	slots []uint64     // 0 (empty), or the hash's high 32 bits | index+1
	keys  []byte       // the checksums, one after another
	ends  []uint32     // checksum i is keys[ends[i-1]:ends[i]]
}

func newBlockSet() *blockSet {
	b := &blockSet{seed: maphash.MakeSeed()}
	for i := range b.shards {
		b.shards[i].seed = b.seed
	}
	return b
}

// shardOf maps a valid checksum to its shard.
func shardOf(ck []byte) int { return int(hexVal[ck[0]])<<4 | int(hexVal[ck[1]]) }

// addAll adds valid checksums (the scanner validated them); safe for
// concurrent use.
func (b *blockSet) addAll(cks [][]byte) {
	// The first backup scanned shows about how many blocks a shard will
	// hold (most of a volume's backups share most blocks): an empty shard
	// is sized for its share of this batch, with room to spare, so that
	// it rarely grows.
	hint := len(cks)/len(b.shards) + 1
	for _, ck := range cks {
		h := maphash.Bytes(b.seed, ck)
		sh := &b.shards[shardOf(ck)]
		sh.mu.Lock()
		if len(sh.slots) == 0 {
			sh.reserve(hint + hint/4)
		}
		if _, slot := sh.find(ck, h); slot >= 0 {
			sh.insert(ck, h, slot)
		}
		sh.mu.Unlock()
	}
}

// reserve sizes an empty shard for n checksums of Longhorn's 64 digits.
func (sh *setShard) reserve(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	sh.slots = make([]uint64, size)
	sh.keys = make([]byte, 0, 64*n)
	sh.ends = make([]uint32, 0, n)
}

// has is for after the scanners are done: it takes no lock.
func (b *blockSet) has(ck []byte) bool {
	if len(ck) < 2 {
		return false
	}
	i, _ := b.shards[shardOf(ck)].find(ck, maphash.Bytes(b.seed, ck))
	return i >= 0
}

func (b *blockSet) len() int {
	n := 0
	for i := range b.shards {
		b.shards[i].mu.Lock()
		n += len(b.shards[i].ends)
		b.shards[i].mu.Unlock()
	}
	return n
}

func (sh *setShard) key(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = sh.ends[i-1]
	}
	return sh.keys[start:sh.ends[i]]
}

// find returns ck's index, or -1 and the empty slot where it belongs (-1
// too when the table has no slots yet).
func (sh *setShard) find(ck []byte, h uint64) (i, slot int) {
	if len(sh.slots) == 0 {
		return -1, 0
	}
	mask := len(sh.slots) - 1
	for slot = int(h) & mask; ; slot = (slot + 1) & mask {
		e := sh.slots[slot]
		if e == 0 {
			return -1, slot
		}
		if e&tagMask == h&tagMask {
			if i := int(e&^tagMask) - 1; string(sh.key(i)) == string(ck) {
				return i, -1
			}
		}
	}
}

// insert adds ck (absent) at slot, growing the table to stay at most half
// full.
func (sh *setShard) insert(ck []byte, h uint64, slot int) {
	if 2*(len(sh.ends)+1) > len(sh.slots) {
		sh.grow()
		_, slot = sh.find(ck, h)
	}
	sh.keys = append(sh.keys, ck...)
	sh.ends = append(sh.ends, uint32(len(sh.keys)))
	sh.slots[slot] = h&tagMask | uint64(len(sh.ends))
}

// grow doubles the table and places every key again.
func (sh *setShard) grow() {
	size := max(16, 2*len(sh.slots))
	sh.slots = make([]uint64, size)
	mask := size - 1
	for i := range sh.ends {
		h := maphash.Bytes(sh.seed, sh.key(i))
		slot := int(h) & mask
		for sh.slots[slot] != 0 {
			slot = (slot + 1) & mask
		}
		sh.slots[slot] = h&tagMask | uint64(i+1)
	}
}

// hexVal is the value of a lowercase hex digit.
var hexVal = func() (t [256]byte) {
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()
