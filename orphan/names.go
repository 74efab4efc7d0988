package orphan

import (
	"bytes"
	"crypto/sha256"
	"hash/maphash"
	"strings"
)

// ReplicaDataName returns the record name of a replica data directory,
// as longhorn-manager's types.GetOrphanChecksumNameForOrphanedDataStore
// (types/types.go) spells it: NamePrefix and the hex SHA-256 of the
// fields joined by "-" and trimmed with strings.TrimSpace. It needs no
// kind and cannot fail. For an item whose fields are all non-empty it is
// Item.Name of the KindReplicaData item with those parameters; where a
// field is empty, Item.Name refuses the item (two different items must
// never share a name because one of them lacked a field), while this
// gives the name Longhorn would.
func ReplicaDataName(nodeID, diskName, diskPath, diskUUID, dataName string) string {
	return longhornName(nodeID, diskName, diskPath, diskUUID, dataName)
}

// InstanceName returns the record name of a runtime instance (engine,
// replica, shard or shard group: Longhorn names them all alike), as
// longhorn-manager's types.GetOrphanChecksumNameForOrphanedInstance
// spells it. It needs no kind and cannot fail; for non-empty fields it
// is the Item.Name of the instance item, as ReplicaDataName is for
// replica data.
func InstanceName(instanceName, instanceUUID, instanceManager, dataEngine string) string {
	return longhornName(instanceName, instanceUUID, instanceManager, dataEngine)
}

// longhornName is Longhorn's formula: the fields joined by "-", trimmed of
// surrounding white space, hashed.
func longhornName(fields ...string) string {
	sum := nameSum(sha256.Sum256([]byte(strings.TrimSpace(strings.Join(fields, "-")))))
	return sum.name()
}

// sumSource gives decide the name sums of candidates and records. With a
// nil memo it hashes every item, which is Decide's way; a Planner's gives
// the sums it remembers from its previous cycle.
//
// decide asks in a fixed order: the candidates that need a name, in input
// order, between startCandidates and endCandidates; then the records of a
// Ready scope with a canonical name, in input order, between startRecords
// and endRecords.
type sumSource struct {
	memo *Planner
}

func (s *sumSource) startCandidates() {
	if s.memo != nil {
		s.memo.cands.start()
	}
}

func (s *sumSource) endCandidates() {
	if s.memo != nil {
		s.memo.cands.end()
	}
}

func (s *sumSource) startRecords() {
	if s.memo != nil {
		s.memo.recs.start()
	}
}

func (s *sumSource) endRecords() {
	if s.memo != nil {
		s.memo.recs.end()
	}
}

// candidate is the sum of it, whose kind's spec is spec (nil for a kind
// the table does not hold) and whose scope's disk is disk.
func (s *sumSource) candidate(spec *KindSpec, it *Item, disk string) (nameSum, error) {
	if s.memo == nil {
		return it.nameSumOf(spec, disk)
	}
	return s.memo.cands.sum(spec, it, disk)
}

// record is the sum r's own fields give: never the sum its name spells,
// which is what this sum is checked against.
// disk is its scope's.
func (s *sumSource) record(r *Record, disk string) (nameSum, error) {
	it := r.Item()
	if s.memo == nil {
		return it.nameSumOf(specOf(it.Kind), disk)
	}
	return s.memo.recs.sum(specOf(it.Kind), &it, disk)
}

// sumMemo remembers the name sums of one stream of items (a Planner's
// candidates, or its records) from the previous cycle, in the order they
// were asked for, by their whole name keys (see Item.appendNameKey).
//
// A host lists the same items in the same order cycle after cycle (an
// informer's cache, a sorted directory listing), so the item asked for
// next is usually the one after the last hit: its key is compared with
// that entry's, byte for byte, and on a match its sum is taken. An item
// that is not there is looked for a few entries ahead (items that
// vanished), then through an index of the previous cycle's keys by their
// maphash (items that moved); a hash hit is confirmed by comparing the
// whole key, so a hash never stands in for a key. Anything else is hashed
// with SHA-256, which is what Decide does for every item.
//
// The sum of a key is the SHA-256 of the key's bytes, and an entry's sum
// was computed from the very bytes it is stored with (or copied from an
// entry with the same bytes), so a sum from the memo is always the one
// hashing would give. Only this cycle's entries are kept for the next:
// what was not asked for in a cycle is dropped, and the memory is about
// twice one cycle's keys and sums, whose buffers are reused.
type sumMemo struct {
	prev, next memoEntries
	pos        int // the entry of prev after the last hit
	hashSeed   maphash.Seed
	index      map[uint64]int32 // prev's entries by their keys' maphash, built at the first miss of a cycle
	indexed    bool
	buf        []byte
	hits       int // sums found this cycle, for tests
}

// memoEntries are keys and their sums, in order: key i is
// keys[ends[i-1]:ends[i]].
type memoEntries struct {
	keys []byte
	ends []int
	sums []nameSum
}

func (m *memoEntries) len() int { return len(m.sums) }

func (m *memoEntries) key(i int) []byte {
	start := 0
	if i > 0 {
		start = m.ends[i-1]
	}
	return m.keys[start:m.ends[i]]
}

func (m *memoEntries) add(key []byte, sum *nameSum) {
	m.keys = append(m.keys, key...)
	m.ends = append(m.ends, len(m.keys))
	m.sums = append(m.sums, *sum)
}

func (m *memoEntries) reset() {
	m.keys, m.ends, m.sums = m.keys[:0], m.ends[:0], m.sums[:0]
}

// memoLookahead is how many entries past the expected one are compared
// before the index is used: a few items vanishing between cycles costs
// no hashing at all.
const memoLookahead = 4

// memoIndexMin is the size of the previous cycle below which a miss is
// simply hashed: building an index costs more than hashing a few items.
const memoIndexMin = 64

func (m *sumMemo) start() {
	m.next.reset()
	if n := m.prev.len(); cap(m.next.sums) < n {
		// Room for a cycle like the last: a steady state never grows the
		// buffers by copying, and from its third cycle allocates nothing.
		m.next = memoEntries{keys: make([]byte, 0, len(m.prev.keys)+len(m.prev.keys)/8),
			ends: make([]int, 0, n+n/8), sums: make([]nameSum, 0, n+n/8)}
	}
	m.pos, m.hits = 0, 0
	m.indexed = false
	clear(m.index)
}

// end makes this cycle's entries the ones the next cycle looks up, and
// keeps the old ones' buffers for the cycle after.
func (m *sumMemo) end() {
	m.prev, m.next = m.next, m.prev
	m.next.reset()
	clear(m.index)
	m.indexed = false
	// A cycle much smaller than the one before gives back the memory.
	if cap(m.next.sums) > 4*max(m.prev.len(), 1024) {
		m.next = memoEntries{}
		m.index = nil
	}
}

// sum is it's name sum, from the memo if it holds its key.
func (m *sumMemo) sum(spec *KindSpec, it *Item, disk string) (nameSum, error) {
	key, err := it.appendNameKeyIn(m.buf[:0], spec, disk)
	m.buf = key[:0]
	if err != nil {
		return nameSum{}, err
	}
	sum, ok := m.find(key)
	if !ok {
		sum = sha256.Sum256(key)
	}
	m.next.add(key, &sum)
	return sum, nil
}

// find looks key up in the previous cycle's entries; every hit compares
// the whole key.
func (m *sumMemo) find(key []byte) (nameSum, bool) {
	n := m.prev.len()
	for j := m.pos; j < n && j <= m.pos+memoLookahead; j++ {
		if bytes.Equal(m.prev.key(j), key) {
			m.pos = j + 1
			m.hits++
			return m.prev.sums[j], true
		}
	}
	if n < memoIndexMin {
		return nameSum{}, false
	}
	if !m.indexed {
		m.buildIndex()
	}
	j, ok := m.index[maphash.Bytes(m.hashSeed, key)]
	if !ok || !bytes.Equal(m.prev.key(int(j)), key) {
		return nameSum{}, false
	}
	m.pos = int(j) + 1
	m.hits++
	return m.prev.sums[j], true
}

// buildIndex indexes prev by its keys' maphash. Two keys of one hash keep
// the first entry: the other is never found by hash, and is hashed with
// SHA-256 when asked for, which is only slower.
func (m *sumMemo) buildIndex() {
	if m.index == nil {
		m.hashSeed = maphash.MakeSeed()
		m.index = make(map[uint64]int32, m.prev.len())
	}
	for j := range m.prev.len() {
		h := maphash.Bytes(m.hashSeed, m.prev.key(j))
		if _, dup := m.index[h]; !dup {
			m.index[h] = int32(j)
		}
	}
	m.indexed = true
}
