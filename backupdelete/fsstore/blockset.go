package fsstore

import "sync"

// blockSet is a set of block checksums that several scanners fill at once:
// 256 shards by the checksum's first two hex digits, each filled a batch at
// a time under its own lock.
type blockSet struct {
	shards [256]struct {
		mu sync.Mutex
		m  map[string]struct{}
	}
}

func newBlockSet() *blockSet {
	b := &blockSet{}
	for i := range b.shards {
		b.shards[i].m = map[string]struct{}{}
	}
	return b
}

// shardOf maps a valid checksum to its shard.
func shardOf(ck []byte) int { return int(hexVal[ck[0]])<<4 | int(hexVal[ck[1]]) }

// addAll adds valid checksums (the scanner validated them).
func (b *blockSet) addAll(cks [][]byte) {
	var batches [256][][]byte
	for _, ck := range cks {
		i := shardOf(ck)
		batches[i] = append(batches[i], ck)
	}
	for i, batch := range batches {
		if len(batch) == 0 {
			continue
		}
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, ck := range batch {
			// The lookup converts without allocating; only a block seen
			// for the first time gets its own string.
			if _, ok := sh.m[string(ck)]; !ok {
				sh.m[string(ck)] = struct{}{}
			}
		}
		sh.mu.Unlock()
	}
}

// has is for after the scanners are done: it takes no lock.
func (b *blockSet) has(ck []byte) bool {
	_, ok := b.shards[shardOf(ck)].m[string(ck)]
	return ok
}

func (b *blockSet) len() int {
	n := 0
	for i := range b.shards {
		b.shards[i].mu.Lock()
		n += len(b.shards[i].m)
		b.shards[i].mu.Unlock()
	}
	return n
}
