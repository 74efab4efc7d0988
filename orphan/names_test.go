package orphan

import (
	"fmt"
	"hash/maphash"
	"testing"
)

func memoItem(i int, uuid string) Item {
	return Item{Kind: KindReplicaData, NodeID: "n", Parameters: map[string]string{
		ParamDiskName: "d", ParamDiskPath: "/var/lib/longhorn/", ParamDiskUUID: uuid, ParamDataName: fmt.Sprintf("pvc-%d-%08x", i, i)}}
}

// memoCycle asks m for the sums of items as one cycle does, and returns
// how many it found without hashing.
func memoCycle(t *testing.T, m *sumMemo, items []Item) (hits int) {
	t.Helper()
	m.start()
	for i := range items {
		spec := specOf(items[i].Kind)
		key, err := items[i].appendNameKey(nil, spec)
		if err != nil {
			t.Fatal(err)
		}
		if string(key) == "" {
			t.Fatal("empty key")
		}
		got, err := m.sum(spec, &items[i], "")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := items[i].nameSum()
		if got != want {
			t.Fatalf("item %d: memo sum %x, want %x", i, got, want)
		}
	}
	hits = m.hits
	m.end()
	return hits
}

// TestSumMemoSteadyStateHitsAndWholeKeys: a second cycle of the same items
// finds every sum; items whose keys differ only in their last byte, or
// only after a long common prefix, at the very same positions, find none;
// moved and vanished items are still found; and only the last cycle's
// entries are kept.
func TestSumMemoSteadyStateHitsAndWholeKeys(t *testing.T) {
	var items, changed []Item
	for i := range 500 {
		items = append(items, memoItem(i, "uuid-a"))
		changed = append(changed, memoItem(i, "uuid-b")) // same length, differs in the middle
	}
	var m sumMemo
	if hits := memoCycle(t, &m, items); hits != 0 {
		t.Fatalf("first cycle: %d hits", hits)
	}
	if hits := memoCycle(t, &m, items); hits != len(items) {
		t.Fatalf("steady cycle: %d hits of %d", hits, len(items))
	}
	if hits := memoCycle(t, &m, changed); hits != 0 {
		t.Fatalf("changed keys: %d hits, want none", hits)
	}
	// Keys that differ only in their last byte.
	last := make([]Item, len(changed))
	for i, it := range changed {
		it.Parameters = map[string]string{}
		for k, v := range changed[i].Parameters {
			it.Parameters[k] = v
		}
		dn := it.Parameters[ParamDataName]
		it.Parameters[ParamDataName] = dn[:len(dn)-1] + "z"
		last[i] = it
	}
	if hits := memoCycle(t, &m, last); hits != 0 {
		t.Fatalf("keys differing in the last byte: %d hits, want none", hits)
	}
	// Reversed, and every third vanished: all found again.
	var moved []Item
	for i := len(last) - 1; i >= 0; i-- {
		if i%3 != 0 {
			moved = append(moved, last[i])
		}
	}
	if hits := memoCycle(t, &m, moved); hits != len(moved) {
		t.Fatalf("moved: %d hits of %d", hits, len(moved))
	}
	if m.prev.len() != len(moved) {
		t.Fatalf("memo holds %d entries after a cycle of %d", m.prev.len(), len(moved))
	}
	small := items[:3]
	memoCycle(t, &m, small)
	if m.prev.len() != len(small) {
		t.Fatalf("memo holds %d entries after a cycle of %d", m.prev.len(), len(small))
	}
}

// TestSumMemoIndexConfirmsWholeKeys: an index entry for a key's hash that
// points at another key's entry (a maphash collision, forced here) is no
// hit: the index only finds candidates, the whole key decides.
func TestSumMemoIndexConfirmsWholeKeys(t *testing.T) {
	var items []Item
	for i := range 2 * memoIndexMin {
		items = append(items, memoItem(i, "uuid-a"))
	}
	var m sumMemo
	memoCycle(t, &m, items)
	m.start()
	m.buildIndex()
	stranger := memoItem(10_000, "uuid-a")
	key, err := stranger.appendNameKey(nil, specOf(stranger.Kind))
	if err != nil {
		t.Fatal(err)
	}
	m.index[maphash.Bytes(m.hashSeed, key)] = 5 // collides with entry 5
	m.pos = len(items)                          // past the lookahead: only the index can find it
	if sum, ok := m.find(key); ok {
		t.Fatalf("a key never seen was found through a colliding hash: %x", sum)
	}
	m.pos = len(items)
	if _, ok := m.find(m.prev.key(7)); !ok {
		t.Fatalf("an entry of the last cycle was not found through the index")
	}
}
