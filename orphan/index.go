package orphan

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
)

// candidates is the input's candidates as Decide needs them: the ones
// that can matter, named and merged, in input order, and the guard's
// counts of every scope.
type candidates struct {
	cs       []Candidate // the input's candidates, which named indexes
	named    []namedCandidate
	merged   map[int32]Verdict // by index in named: the verdicts of names whose observations disagreed
	scopes   []Scope           // by scope id
	byName   sumTable          // name → index in named
	recorded bitset            // indexes in named that a record in the input's authority names
	counts   guardCounts
}

// namedCandidate is a candidate's record name, as a sum, and where to find
// the rest. It holds no pointers and no copy of the Candidate: a million
// of them are one flat array the garbage collector never scans, and the
// candidate's own fields are read only where a plan entry needs them.
type namedCandidate struct {
	sum    nameSum
	last   int32 // index in cs of the observation kept (the last one of the name)
	scope  int32 // the last observation's scope, as an index in candidates.scopes
	orphan bool  // the merged verdict is OutcomeOrphan
	merged bool  // the merged verdict is in candidates.merged, not cs[last]'s own
	copied bool  // cs[last].Item.Copy is set
}

// verdict is the merged verdict of named[i].
func (cd *candidates) verdict(i int) Verdict {
	if nc := &cd.named[i]; nc.merged {
		return cd.merged[int32(i)]
	} else {
		return cd.cs[nc.last].Verdict
	}
}

// candidate is named[i] as a Candidate: the last observation of its name
// with the merged verdict.
func (cd *candidates) candidate(i int) Candidate {
	return Candidate{Item: cd.cs[cd.named[i].last].Item, Verdict: cd.verdict(i)}
}

// scope is named[i]'s scope.
func (cd *candidates) scope(i int) Scope { return cd.scopes[cd.named[i].scope] }

// bitset is a set of small integers: a million of them fit in 128 KiB,
// which stays in the cache while a planner marks them at random.
type bitset []uint64

func newBitset(n int) bitset         { return make(bitset, (n+63)/64) }
func (b bitset) add(i int)           { b[i/64] |= 1 << (i % 64) }
func (b bitset) contains(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// indexCandidates names the candidates that can matter and merges
// duplicates; conflicting verdicts or kinds for one name become undecided,
// because "orphan" must be unanimous. (Once undecided, a name stays
// undecided whatever later duplicates say; the item kept is the last
// observation's.)
//
// A candidate matters if it is judged orphan (it may need a record) or if
// a record or an orphan candidate shares its match key (it may be the
// record's item, or a conflicting observation of an orphan). Naming means
// hashing, and most candidates of a large disk are owned directories with
// no record: skipping them is what lets Decide plan millions of items a
// second.
//
// It also counts, for the guard, each group's valid items and orphans:
// orphans once per name, as merged; other candidates once per
// observation, which only ever makes a scope look less orphaned. An
// orphan that could not be named is no valid item.
//
// The cost that dominates a large input is touching each item's
// Parameters map, a cache miss per item: the first pass reads only the
// orphans' maps (few, usually; none when every candidate is an orphan),
// the second reads each map once, for both the match key and the scope.
// Names are kept as sums (see sumTable) and spelled only for new records.
func indexCandidates(cs []Candidate, recs []Record, plan *Plan, sums *sumSource, sc *scratch) candidates {
	// Orphans are always named; match keys are needed only to name the
	// other candidates, so a set made only of orphans builds none.
	others := 0
	for _, c := range cs {
		if c.Verdict.Outcome != OutcomeOrphan {
			others++
		}
	}
	var needed map[string]uint8 // match key → its name classes, as bits
	classes := map[string]uint8{}
	classBit := func(class string) uint8 {
		b, ok := classes[class]
		if !ok {
			b = 1 << (len(classes) % 8) // more than eight classes share bits: a false "needed", never a miss
			classes[class] = b
		}
		return b
	}
	var lk kindLookup
	if others > 0 {
		needed = make(map[string]uint8, len(recs)+len(cs)/64)
		for _, r := range recs {
			k := lk.keyOf(r.Kind, r.Parameters)
			needed[k.primary] |= classBit(k.class)
		}
		for _, c := range cs {
			if c.Verdict.Outcome == OutcomeOrphan {
				k := lk.keyOf(c.Item.Kind, c.Item.Parameters)
				needed[k.primary] |= classBit(k.class)
			}
		}
	}

	filter := newKeyFilter(needed)
	var ids scopeIDs
	var gids groupIDs
	var tally []scopeCount // by group id
	n := min(len(needed)+len(cs)-others, len(cs))
	out := candidates{cs: cs, byName: newSumTable(n, &sc.slots), named: room(&sc.named, n)}
	sums.startCandidates()
	for ci := range cs {
		c := &cs[ci]
		spec := lk.spec(c.Item.Kind)
		orphan := c.Verdict.Outcome == OutcomeOrphan
		k, scope := lk.keyAndScope(spec, &c.Item, !orphan) // an orphan is named whatever its key
		sid := ids.of(scope)
		gid := gids.of(sid, c.Item.Kind, c.Item.DataEngine)
		if int(gid) == len(tally) {
			tally = append(tally, scopeCount{})
		}
		if !orphan {
			tally[gid].valid++
			if !filter.mayHave(k.primary) {
				continue
			}
			if bits, ok := needed[k.primary]; !ok || bits&classBit(k.class) == 0 {
				continue
			}
		}
		sum, err := sums.candidate(spec, &c.Item, scope.Disk)
		if err != nil {
			plan.Rejected = append(plan.Rejected, Rejected{Item: c.Item, Err: err})
			continue
		}
		out.named = append(out.named, namedCandidate{sum: sum, last: int32(ci), scope: sid, orphan: orphan, copied: c.Item.Copy != nil})
	}
	sums.endCandidates()
	out.merge()
	out.recorded = newBitset(len(out.named))
	for _, nc := range out.named {
		if nc.orphan {
			it := &cs[nc.last].Item // counted in the group of the observation kept
			gid := gids.of(nc.scope, it.Kind, it.DataEngine)
			tally[gid].valid++
			tally[gid].orphans++
		}
	}
	out.scopes = ids.scopes
	out.counts = make(guardCounts, len(tally))
	for gid, n := range tally {
		if n != (scopeCount{}) {
			g := gids.keys[gid]
			out.counts[guardKey{scope: ids.scopes[g.sid], group: g.group}] = &n
		}
	}
	return out
}

// groupIDs numbers the groups of scopes (by scope id) in the order they
// are first seen. Candidates come in long runs of one scope and kind, so
// the last one is checked first; the map holds them all.
type groupIDs struct {
	keys []groupID
	last int32 // the last id found, plus one
	all  map[groupID]int32
}

type groupID struct {
	sid   int32
	group Group
}

func (t *groupIDs) of(sid int32, k Kind, e DataEngine) int32 {
	if t.last > 0 {
		if g := &t.keys[t.last-1]; g.sid == sid && g.group.Kind == k && g.group.DataEngine == e {
			return t.last - 1
		}
	}
	key := groupID{sid, Group{Kind: k, DataEngine: e}}
	id, ok := t.all[key]
	if !ok {
		id = int32(len(t.keys))
		t.keys = append(t.keys, key)
		if t.all == nil {
			t.all = map[groupID]int32{}
		}
		t.all[key] = id
	}
	t.last = id + 1
	return id
}

// merge merges the observations of each name in named (one entry per
// observation, in input order) into the first one's entry, keeping the
// last observation, and fills byName. It is a loop of its own, apart
// from the naming, so that the table's cache misses, one per name in a
// large input, are independent and overlap.
func (cd *candidates) merge() {
	w := 0
	for r := range cd.named {
		e := cd.named[r]
		cd.byName.makeRoom(cd.named[:w])
		j, dup := cd.byName.find(&e.sum, cd.named[:w])
		if !dup {
			cd.byName.set(j, &e.sum, w)
			cd.named[w] = e
			w++
			continue
		}
		i := cd.byName.slots[j].index()
		nc := &cd.named[i]
		c := &cd.cs[e.last]
		prevKind, prevOutcome := cd.cs[nc.last].Item.Kind, cd.verdict(i).Outcome
		merged := true
		var v Verdict
		switch {
		case prevKind != c.Item.Kind:
			// Engine and replica instances share Longhorn's name formula:
			// one name seen as two kinds is no item anyone can vouch for.
			v = Undecided("one name observed as two kinds: " + string(prevKind) + " and " + string(c.Item.Kind))
		case prevOutcome != c.Verdict.Outcome:
			v = Undecided("conflicting verdicts for one item: " + prevOutcome.String() + " and " + c.Verdict.Outcome.String())
		default:
			v, merged = c.Verdict, false
		}
		*nc = namedCandidate{sum: e.sum, last: e.last, scope: e.scope, orphan: v.Outcome == OutcomeOrphan, merged: merged, copied: e.copied}
		if merged {
			if cd.merged == nil {
				cd.merged = map[int32]Verdict{}
			}
			cd.merged[int32(i)] = v
		}
	}
	cd.named = cd.named[:w]
}

// scopeIDs numbers scopes in the order they are first seen. A node has
// few scopes (its disks), and comparing two short strings is cheaper than
// hashing them, so the first ones are found by a linear search; the map
// holds them all.
type scopeIDs struct {
	scopes []Scope
	recent []int32
	all    map[Scope]int32
}

func (t *scopeIDs) of(s Scope) int32 {
	for _, id := range t.recent {
		if sameScope(t.scopes[id], s) {
			return id
		}
	}
	if id, ok := t.all[s]; ok {
		return id
	}
	id := int32(len(t.scopes))
	t.scopes = append(t.scopes, s)
	if t.all == nil {
		t.all = map[Scope]int32{}
	}
	t.all[s] = id
	if len(t.recent) < recentScopes {
		t.recent = append(t.recent, id)
	}
	return id
}

// recentScopes is how many scopes are found by a linear search.
const recentScopes = 32

// keyFilter is a Bloom filter over the needed match keys: most items of a
// large input are owned and not needed, and two bits of a small bitset
// tell most of them so without a map look-up. A "maybe" is checked in the
// map, so the filter only ever saves work.
type keyFilter struct {
	seed maphash.Seed
	bits []uint64
	mask uint64
}

func newKeyFilter(keys map[string]uint8) keyFilter {
	n := uint64(1024)
	for n < 16*uint64(len(keys)) {
		n <<= 1
	}
	f := keyFilter{seed: maphash.MakeSeed(), bits: make([]uint64, n/64), mask: n - 1}
	for k := range keys {
		h := maphash.String(f.seed, k)
		a, b := h&f.mask, (h>>32)&f.mask
		f.bits[a/64] |= 1 << (a % 64)
		f.bits[b/64] |= 1 << (b % 64)
	}
	return f
}

func (f *keyFilter) mayHave(k string) bool {
	h := maphash.String(f.seed, k)
	a, b := h&f.mask, (h>>32)&f.mask
	return f.bits[a/64]&(1<<(a%64)) != 0 && f.bits[b/64]&(1<<(b%64)) != 0
}

// kindLookup finds kind specs, remembering the last: candidates come in
// long runs of one kind.
type kindLookup struct {
	kind Kind
	last *KindSpec
}

func (l *kindLookup) spec(k Kind) *KindSpec {
	if l.last == nil || k != l.kind {
		l.kind, l.last = k, specOf(k)
	}
	return l.last
}

func (l *kindLookup) keyOf(k Kind, params map[string]string) matchKey {
	s := l.spec(k)
	if s == nil {
		return matchKey{class: "unknown:" + string(k)} // fails naming anyway
	}
	return matchKey{s.NameClass, strings.TrimSpace(params[s.MatchParam])}
}

// keyAndScope is Item.Scope, and keyOf when withKey (a zero key
// otherwise), in one look at the item's parameters.
func (l *kindLookup) keyAndScope(s *KindSpec, it *Item, withKey bool) (matchKey, Scope) {
	if s == nil {
		return matchKey{class: "unknown:" + string(it.Kind)}, Scope{NodeID: it.NodeID}
	}
	scope := Scope{NodeID: it.NodeID}
	if s.ScopeParam != "" {
		scope.Disk = it.Parameters[s.ScopeParam]
	}
	if !withKey {
		return matchKey{}, scope
	}
	return matchKey{s.NameClass, strings.TrimSpace(it.Parameters[s.MatchParam])}, scope
}

// sumTable maps name sums to indexes in named, by open addressing on the
// sum's first eight bytes: a SHA-256 is already uniformly spread, so
// nothing is hashed again. A slot is eight bytes (a tag, the sum's first
// four bytes, and the index), so a million names cost a 16 MiB array
// instead of a million strings in a map; the whole sum lives in named, and
// a hit is a whole sum equal: two names share a slot exactly when they are
// equal, as in a map of names. The tag spares reading named for most
// slots that hold another name.
type sumTable struct {
	slots []sumSlot
	n     int
}

type sumSlot struct {
	tag uint32 // the sum's first four bytes
	i   int32  // index in named + 1; zero is an empty slot
}

func (sl *sumSlot) index() int { return int(sl.i) - 1 }

func newSumTable(n int, buf *[]sumSlot) sumTable {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return sumTable{slots: take(buf, size)}
}

func lead(sum *nameSum) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

// find returns the slot holding sum, or the empty slot where it belongs.
func (t *sumTable) find(sum *nameSum, named []namedCandidate) (int, bool) {
	mask := uint64(len(t.slots) - 1)
	l := lead(sum)
	tag := uint32(l >> 32)
	for j := l & mask; ; j = (j + 1) & mask {
		sl := &t.slots[j]
		if sl.i == 0 {
			return int(j), false
		}
		if sl.tag == tag && named[sl.i-1].sum == *sum {
			return int(j), true
		}
	}
}

// set fills the empty slot j that find returned for sum, which is
// named[i].sum.
func (t *sumTable) set(j int, sum *nameSum, i int) {
	t.slots[j] = sumSlot{tag: uint32(lead(sum) >> 32), i: int32(i + 1)}
	t.n++
}

// makeRoom grows the table, if needed, so that one more sum can be set;
// call it before the find whose slot is set.
func (t *sumTable) makeRoom(named []namedCandidate) {
	if 2*(t.n+1) <= len(t.slots) {
		return
	}
	old := t.slots
	t.slots = make([]sumSlot, 2*len(old))
	for k := range old {
		if old[k].i != 0 {
			j, _ := t.find(&named[old[k].i-1].sum, named)
			t.slots[j] = old[k]
		}
	}
}
