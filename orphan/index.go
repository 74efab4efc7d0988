package orphan

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"strings"
)

// index is everything the rules look up, built once per Decide before any
// rule is applied: the candidates that can matter, named and merged (see
// indexCandidates); each record's scope resolved and its candidate found
// (recordFactsOf); the Guard's counts; the records in name order. The
// rules (Plan.decideRecord) ask it small questions about record i of the
// input and never see how it answers them: sums in an open-addressing
// table, a Bloom filter of match keys, radix-sorted keys, working arrays
// that a Planner lends from one cycle to the next.
type index struct {
	recs    []Record // the input's
	cands   candidates
	scopes  scopeResolver
	guard   *guardState
	facts   []recordFacts // by index in recs
	creates []int32       // the unrecorded orphans, as indexes in cands.named, in name order
	spelled string        // the names of the block of creates that newOrphan(j) is in
	sc      *scratch
}

// newIndex indexes in. Candidates that could not be named are added to
// plan.Rejected.
func newIndex(in *Input, plan *Plan, sc *scratch) index {
	ix := index{recs: in.Records, sc: sc}
	ix.cands = indexCandidates(in.Candidates, in.Records, plan, sc)
	ix.guard = newGuardState(*in, ix.cands.counts)
	ix.scopes = scopeResolver{scopes: in.Scopes, guard: ix.guard, evidenceRequired: in.EvidenceRequired}
	// What each record's plan depends on is looked up in input order,
	// which is the order the records lie in memory; they are planned in
	// name order (recordsByName).
	ix.facts = recordFactsOf(in.Records, &ix.cands, &ix.scopes, sc)
	return ix
}

// recordsByName is the indexes of the input's records in name order.
func (ix *index) recordsByName() []int {
	return sortedIndexes(len(ix.recs), func(i int) string { return ix.recs[i].Name }, ix.sc)
}

// inAuthority reports whether record i's scope resolves to a status of
// the input's (see Decide).
func (ix *index) inAuthority(i int) bool { return ix.facts[i].rs != nil }

// scopeOf is record i's scope and the status it resolves to.
func (ix *index) scopeOf(i int) (ScopeStatus, Scope) {
	rs := ix.facts[i].rs
	return rs.st, rs.scope
}

// nameMatches reports whether record i's name is the one its own fields
// give; known only in a Ready scope (false elsewhere).
func (ix *index) nameMatches(i int) bool { return ix.facts[i].consistent }

// seen reports whether a candidate of record i's name takes part.
func (ix *index) seen(i int) bool { return ix.facts[i].seen }

// verdict is the merged verdict of record i's candidate; the zero Verdict
// (undecided) if none was seen.
func (ix *index) verdict(i int) Verdict {
	if f := &ix.facts[i]; f.seen {
		return ix.cands.verdict(int(f.ci))
	}
	return Verdict{}
}

// copy is this cycle's inspection of record i's item (Item.Copy of the
// observation kept), nil if there is none.
func (ix *index) copy(i int) *Copy {
	if f := &ix.facts[i]; f.seen && ix.cands.named[f.ci].copied {
		return ix.cands.cs[ix.cands.named[f.ci].last].Item.Copy
	}
	return nil
}

// hit is the Guard's hit (NoneExpected, WholeScope, or the evidence
// Judged requires) of record i's group in its scope; zero if none stops
// it.
func (ix *index) hit(i int) guardHit {
	r := &ix.recs[i]
	return ix.scopes.hitOf(ix.facts[i].rs, r.Kind, r.DataEngine)
}

// candidate is record i's candidate (seen): the last observation of its
// name, with the merged verdict.
func (ix *index) candidate(i int) Candidate { return ix.cands.candidate(int(ix.facts[i].ci)) }

// item is the item of record i's candidate (seen).
func (ix *index) item(i int) *Item { return &ix.cands.cs[ix.cands.named[ix.facts[i].ci].last].Item }

// candidateScope is the scope of record i's candidate (seen).
func (ix *index) candidateScope(i int) Scope { return ix.cands.scope(int(ix.facts[i].ci)) }

// seenInScope reports whether record i's candidate (seen) was observed in
// the record's own scope.
func (ix *index) seenInScope(i int) bool {
	return sameScope(ix.candidateScope(i), ix.facts[i].rs.scope)
}

// newOrphan is an orphan candidate that gets a record.
type newOrphan struct {
	name string
	item *Item
	hit  guardHit // the Guard's hit of its group in its scope
}

// unrecordedOrphans indexes the orphan candidates of a Ready scope that
// no record in the input's authority names, in name order, and returns
// how many there are; newOrphan(j) is the j-th.
func (ix *index) unrecordedOrphans() int {
	cands := &ix.cands
	creates := room(&ix.sc.creates, len(cands.named))
	for i := range cands.named {
		if nc := &cands.named[i]; nc.orphan && !cands.recorded.contains(i) && ix.scopes.resolveID(nc.scope, cands.scopes).isReady() {
			creates = append(creates, int32(i))
		}
	}
	sortBySum(creates, cands.named, ix.sc)
	ix.creates = creates
	return len(creates)
}

// newOrphan is the j-th unrecorded orphan. Ask for them in order, from
// 0: the names are spelled into strings of namesPerBlock names as a block
// begins, and each one is a piece of one.
func (ix *index) newOrphan(j int) newOrphan {
	cands := &ix.cands
	if j%namesPerBlock == 0 {
		ix.spelled = spellNames(ix.creates[j:min(j+namesPerBlock, len(ix.creates))], cands.named)
	}
	k := j % namesPerBlock
	nc := &cands.named[ix.creates[j]]
	it := &cands.cs[nc.last].Item
	rs := ix.scopes.resolveID(nc.scope, cands.scopes)
	return newOrphan{name: ix.spelled[k*nameLen : (k+1)*nameLen], item: it, hit: ix.scopes.hitOf(rs, it.Kind, it.DataEngine)}
}

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
func indexCandidates(cs []Candidate, recs []Record, plan *Plan, sc *scratch) candidates {
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
		sum, err := c.Item.nameSumOf(spec, scope.Disk)
		if err != nil {
			plan.Rejected = append(plan.Rejected, Rejected{Item: c.Item, Err: err})
			continue
		}
		out.named = append(out.named, namedCandidate{sum: sum, last: int32(ci), scope: sid, orphan: orphan, copied: c.Item.Copy != nil})
	}
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

// recordFacts is what a record's plan depends on besides the record.
type recordFacts struct {
	rs         *resolvedScope // its scope resolved; nil outside the input's authority
	ci         int32          // its candidate's index in named, if seen
	seen       bool           // a candidate of its name takes part
	consistent bool           // its name is the one its fields give; computed only in a Ready scope
}

// recordFactsOf resolves each record's scope, finds its candidate (and
// marks the candidate recorded: the record is in the input's authority,
// whatever its scope's health) and, in a Ready scope, checks its name,
// which is all Decide reads of a record besides its own fields.
//
// A record's name is checked against its own fields, every time: nothing
// else tells a record whose name is not the one its fields give
// (tampered, or written by hand) from the record of the candidate it
// names, and the hash costs less than reaching the candidate's fields
// would.
func recordFactsOf(recs []Record, cands *candidates, scopes *scopeResolver, sc *scratch) []recordFacts {
	facts := take(&sc.facts, len(recs))
	// The names are parsed and checked first, and looked up in a loop of
	// their own, so that the table's cache misses overlap.
	parsed := take(&sc.parsed, len(recs))
	canon := newBitset(len(recs))
	for i := range recs {
		r := &recs[i]
		rs := scopes.resolve(r.Scope())
		if !rs.ok {
			continue
		}
		f := &facts[i]
		f.rs = rs
		sum, canonical := parseName(r.Name) // a name of another form is no candidate's, and not its fields'
		if !canonical {
			continue
		}
		parsed[i] = sum
		canon.add(i)
		if rs.st.Health == HealthReady {
			it := r.Item()
			own, err := it.nameSumOf(specOf(it.Kind), rs.scope.Disk)
			f.consistent = err == nil && own == sum
		}
	}
	for i := range recs {
		if !canon.contains(i) {
			continue
		}
		if j, ok := cands.byName.find(&parsed[i], cands.named); ok {
			f := &facts[i]
			k := cands.byName.slots[j].index()
			f.ci, f.seen = int32(k), true
			cands.recorded.add(k)
		}
	}
	return facts
}

// namesPerBlock is how many new records' names share one string: few
// allocations, and a store that keeps one record of a block keeps at
// most this many names' bytes alive with it.
const namesPerBlock = 64

// spellNames spells the names of named[idx...] into one string.
func spellNames(idx []int32, named []namedCandidate) string {
	var b strings.Builder
	b.Grow(len(idx) * nameLen)
	var buf [nameLen]byte
	for _, i := range idx {
		b.Write(named[i].sum.appendName(buf[:0]))
	}
	return b.String()
}

// sortBySum orders indexes of named by their names: the sums' bytes
// compare as their lower-case hex spellings do.
func sortBySum(idx []int32, named []namedCandidate, sc *scratch) {
	keys := take(&sc.keys, len(idx))
	for j, i := range idx {
		keys[j] = sortKey{lead(&named[i].sum), i}
	}
	sortKeys(keys, &sc.tmp, func(a, b int32) int { return bytes.Compare(named[a].sum[:], named[b].sum[:]) })
	for j, k := range keys {
		idx[j] = k.i
	}
}

// scopeResolver is resolveScope and the guard's hit, remembered per
// scope: a node has few scopes and a large input long runs of one. Both
// are functions of the Input alone, which Decide never changes, so what
// is remembered never goes stale within one Decide.
type scopeResolver struct {
	scopes map[Scope]ScopeStatus
	guard  *guardState
	// evidenceRequired is the Input's EvidenceRequired.
	evidenceRequired bool
	recent           []*resolvedScope
	all              map[Scope]*resolvedScope
	byID             []*resolvedScope // by the candidates' scope ids
}

type resolvedScope struct {
	scope Scope
	st    ScopeStatus
	ok    bool       // the scope is in the input's authority
	hits  []groupHit // the guard's hits of the groups asked for so far
}

type groupHit struct {
	group Group
	hit   guardHit
}

func (rs *resolvedScope) isReady() bool { return rs.ok && rs.st.Health == HealthReady }

func (sr *scopeResolver) resolve(s Scope) *resolvedScope {
	for _, e := range sr.recent {
		if sameScope(e.scope, s) {
			return e
		}
	}
	if e, ok := sr.all[s]; ok {
		return e
	}
	st, ok := resolveScope(sr.scopes, s)
	e := &resolvedScope{scope: s, st: st, ok: ok}
	if sr.all == nil {
		sr.all = map[Scope]*resolvedScope{}
	}
	sr.all[s] = e
	if len(sr.recent) < recentScopes {
		sr.recent = append(sr.recent, e)
	}
	return e
}

// hitOf is the guard's hit of the group of kind k and data engine e in
// rs's scope: a scope holds few groups, found by a linear search.
func (sr *scopeResolver) hitOf(rs *resolvedScope, k Kind, e DataEngine) guardHit {
	for i := range rs.hits {
		if g := &rs.hits[i]; g.group.Kind == k && g.group.DataEngine == e {
			return g.hit
		}
	}
	g := Group{Kind: k, DataEngine: e}
	h := sr.guard.hit(guardKey{scope: rs.scope, group: g})
	if sr.evidenceRequired {
		h = evidenceHit(sr.scopes, guardKey{scope: rs.scope, group: g}, h)
	}
	rs.hits = append(rs.hits, groupHit{g, h})
	return h
}

// resolveID is resolve of scopes[id].
func (sr *scopeResolver) resolveID(id int32, scopes []Scope) *resolvedScope {
	if sr.byID == nil {
		sr.byID = make([]*resolvedScope, len(scopes))
	}
	if e := sr.byID[id]; e != nil {
		return e
	}
	e := sr.resolve(scopes[id])
	sr.byID[id] = e
	return e
}

// sameScope is a == b, telling most different scopes of a node apart by
// their disk names' lengths and last bytes before comparing whole strings.
func sameScope(a, b Scope) bool {
	if n := len(a.Disk); n != len(b.Disk) || n > 0 && a.Disk[n-1] != b.Disk[n-1] {
		return false
	}
	return a == b
}

// sortedIndexes returns 0..n-1 ordered by name(i), exactly as comparing
// the strings does (Plan.sort relies on it). It sorts small keys instead
// of whole records: which side of the NamePrefix range a name lies on,
// then the eight bytes of each name after the common "orphan-" prefix
// (of other names, their own first eight), compared as a number, and the
// whole names only where those tie. Ties of whole names keep input order.
func sortedIndexes(n int, name func(int) string, sc *scratch) []int {
	var classes [3][]sortKey // names before the NamePrefix range, in it, after it
	classes[1] = room(&sc.keys, n)
	for i := range n {
		class, p := namePrefix(name(i))
		classes[class+1] = append(classes[class+1], sortKey{p, int32(i)})
	}
	idx := room(&sc.order, n)
	for _, keys := range classes {
		sortKeys(keys, &sc.tmp, func(a, b int32) int {
			if c := cmp.Compare(name(int(a)), name(int(b))); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for _, k := range keys {
			idx = append(idx, int(k.i))
		}
	}
	return idx
}

// namePrefix packs the eight bytes of name after NamePrefix (fewer,
// zero-padded, when it is shorter) big-endian, so that comparing prefixes
// orders names as comparing the strings does, apart from ties. Names
// without NamePrefix are packed from their first byte, and class tells
// the three ranges apart: names before every NamePrefix name (-1), the
// NamePrefix names (0), and names after them (1).
func namePrefix(name string) (class int8, p uint64) {
	rest, ok := strings.CutPrefix(name, NamePrefix)
	if !ok {
		rest, class = name, 1
		if name < NamePrefix {
			class = -1
		}
	}
	for i := range 8 {
		p <<= 8
		if i < len(rest) {
			p |= uint64(rest[i])
		}
	}
	return class, p
}
