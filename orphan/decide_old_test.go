package orphan

// This file keeps Decide as it was before the allocation work of issue 14
// (commit 6be4bce), renamed with an Old suffix: the reference that
// TestDecideMatchesOldDecide and FuzzDecideMatchesOldDecide compare the
// new Decide with, plan for plan, field for field.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type planOld struct {
	Plan
	condsOld condListsOld
	vols     map[string]VolumeState
	msg      []byte
}

func decideOld(in Input) Plan {
	var plan planOld
	plan.vols = in.Volumes
	cands := indexCandidatesOld(in.Candidates, in.Records, &plan)
	guard := newGuardState(in, cands.counts)
	scopes := scopeResolverOld{scopes: in.Scopes, guard: guard, evidenceRequired: in.EvidenceRequired}
	// Most records are kept, and most kept ones need a condition at most
	// once: room for all of them, so large plans never grow by copying.
	plan.Keep = make([]Keep, 0, len(in.Records))
	plan.Conditions = make([]SetConditions, 0, len(in.Records))

	// What each record's plan depends on is looked up first, in input
	// order, which is the order the records lie in memory; then records
	// are planned in name order, so the plan's lists come out sorted and
	// large ones never have to move their entries.
	facts := recordFactsOfOld(in.Records, &cands, &scopes)
	order := sortedIndexesOld(len(in.Records), func(i int) string { return in.Records[i].Name })
	var dueAuto []int // indexes in plan.Purge of auto purges, for the guard's share rule
	for _, i := range order {
		f := facts[i]
		if f.rs == nil {
			continue
		}
		r := in.Records[i]
		st, scope := f.rs.st, f.rs.scope
		ci, seen := int(f.ci), f.seen
		if specOf(r.Kind) == nil {
			plan.Keep = append(plan.Keep, Keep{Record: r, Reason: unknownKindReason(r.Kind)})
			continue
		}
		if plan.outsideReady(r, st, scope) { // the rules outside a Ready scope are shared
			continue
		}
		hit := scopes.hitOf(f.rs, r.Kind, r.DataEngine)
		var cp *Copy
		if seen {
			cp = cands.named[ci].Item.Copy
		}
		var c namedCandidateOld
		if seen && !f.orphan {
			c = cands.named[ci] // for its verdict; an orphan's is known
		}
		if !f.consistent {
			plan.forgetOld(r, ReasonMismatch, "the record's name does not match its parameters")
			continue
		}
		switch {
		case !seen:
			plan.forgetOld(r, ReasonGone, "no longer seen in "+scope.String())
			continue
		case !f.orphan && c.Verdict.Outcome == OutcomeOwned:
			plan.forgetOld(r, ReasonOwned, c.Verdict.Reason)
			continue
		case r.Dismissed:
			plan.dismissed(r)
			continue
		case !f.orphan && r.DeletionRequested:
			// Issue 32 point 6: a requested deletion never sits silently.
			plan.keepOld(r, hit, cp, "undecided: "+c.Verdict.Reason)
			plan.Keep = plan.Keep[:len(plan.Keep)-1]
			plan.refuseUndecided(r, c.Verdict.Reason)
			continue
		case !f.orphan:
			plan.keepOld(r, hit, cp, "undecided: "+c.Verdict.Reason)
			continue
		}
		due, auto := in.Policy.DueAt(r)
		isDue := r.DeletionRequested || (auto && !in.Now.Before(due))
		switch {
		case !isDue && auto:
			plan.requeueOld(due)
			plan.keepOld(r, hit, cp, "auto-deletion due at "+due.UTC().Format(time.RFC3339))
		case !isDue:
			plan.keepOld(r, hit, cp, "orphan; waiting for a deletion request")
		case r.NotCleanable() && !r.DeletionRequested && heldMark(r):
			plan.requeueOld(in.Now)
			plan.keepOld(r, hit, cp, "purge due once DataCleanable=True is recorded again")
		case r.NotCleanable():
			what := "auto-deletion due"
			if r.DeletionRequested {
				what = "deletion requested"
			}
			plan.forgetOld(r, ReasonNotCleanable, what+", but the record says its data is not cleanable")
		case !r.Cleanable():
			plan.requeueOld(in.Now)
			plan.keepOld(r, hit, cp, "purge due once DataCleanable=True is recorded")
		case hit.rule != "":
			plan.refuseOld(r, hit, cp)
		case !sameScopeOld(cands.named[ci].scope, scope):
			// The name's observation lies in another scope (an instance
			// seen on another node: the node is not in Longhorn's formula;
			// node and disk names that dash-join alike). It vouches for
			// nothing in this record's scope, whose scan did not see the
			// record's item. Checked here, where the candidate is read
			// anyway, because only a purge acts on the observation.
			plan.forgetOld(r, ReasonGone, "no longer seen in "+scope.String()+"; its name was seen in "+cands.named[ci].scope.String())
		default:
			if lc := lastCopyHit(&in, &r, &cands.named[ci].Item); lc.rule != "" {
				plan.refuseOld(r, lc, cp)
				continue
			}
			plan.Purge = append(plan.Purge, Purge{Record: r, Candidate: cands.named[ci].Candidate, Auto: !r.DeletionRequested})
			if !r.DeletionRequested {
				dueAuto = append(dueAuto, len(plan.Purge)-1)
			}
		}
	}
	plan.applyAutoRulesOld(guard, dueAuto, in)
	plan.createOld(in, &cands, &scopes)
	plan.sortOld()
	return plan.Plan
}

// recordFacts is what a record's plan depends on besides the record.
type recordFactsOld struct {
	rs         *resolvedScopeOld // its scope resolved; nil outside the input's authority
	ci         int32             // its candidate's index in named, if seen
	seen       bool              // a candidate of its name takes part
	orphan     bool              // that candidate's merged verdict is OutcomeOrphan
	consistent bool              // its name is the one its fields give; computed only in a Ready scope
}

// recordFactsOf resolves each record's scope, finds its candidate (and
// marks the candidate recorded: the record is in the input's authority,
// whatever its scope's health) and, in a Ready scope, checks its name,
// which is all Decide reads of a record besides its own fields.
//
// A record's name is checked by hashing its own fields, every time:
// nothing else tells a record whose name is not the one its fields give
// (tampered, or written by hand) from the record of the candidate it
// names, and the hash costs less than reaching the candidate's fields
// would.
func recordFactsOfOld(recs []Record, cands *candidatesOld, scopes *scopeResolverOld) []recordFactsOld {
	facts := make([]recordFactsOld, len(recs))
	for i := range recs {
		r := &recs[i]
		rs := scopes.resolve(r.Scope())
		if !rs.ok {
			continue
		}
		f := &facts[i]
		f.rs = rs
		sum, canonical := parseName(r.Name) // a name of another form is no candidate's, and not its fields'
		if canonical {
			if j, ok := cands.byName.find(&sum); ok {
				sl := &cands.byName.slots[j]
				f.ci, f.seen, f.orphan = int32(sl.index()), true, sl.orphan
				cands.recorded.add(sl.index())
			}
		}
		if rs.st.Health == HealthReady && canonical {
			own, err := r.Item().nameSum()
			f.consistent = err == nil && own == sum
		}
	}
	return facts
}

// create plans a record for every orphan candidate of a Ready scope that
// no record in the input's authority names. The names are spelled, in
// name order, into strings of namesPerBlock names, and each record's is a
// piece of one.
func (p *planOld) createOld(in Input, cands *candidatesOld, scopes *scopeResolverOld) {
	var creates []int32
	for i, c := range cands.named {
		if c.Verdict.Outcome == OutcomeOrphan && !cands.recorded.contains(i) && scopes.resolve(c.scope).isReady() {
			creates = append(creates, int32(i))
		}
	}
	sortBySumOld(creates, cands.named)
	p.Create = make([]Record, 0, len(creates))
	var labels labelCacheOld
	var spelled string // the names of this block of namesPerBlockOld records
	for j, i := range creates {
		c := &cands.named[i]
		if j%namesPerBlockOld == 0 {
			spelled = spellNamesOld(creates[j:min(j+namesPerBlockOld, len(creates))], cands.named)
		}
		k := j % namesPerBlockOld
		rec := Record{Name: spelled[k*nameLen : (k+1)*nameLen], Kind: c.Item.Kind, NodeID: c.Item.NodeID, DataEngine: c.Item.DataEngine,
			Parameters: c.Item.Parameters, Labels: labels.of(c.Item), CreatedAt: in.Now}
		rec.Conditions = p.newConditionsOld(rec, scopes.hitOf(scopes.resolve(c.scope), rec.Kind, rec.DataEngine), c.Item.Copy)
		p.Create = append(p.Create, rec)
		if due, auto := in.Policy.DueAt(rec); auto {
			p.requeueOld(due)
		}
	}
}

// namesPerBlock is how many new records' names share one string: few
// allocations, and a store that keeps one record of a block keeps at
// most this many names' bytes alive with it.
const namesPerBlockOld = 64

// spellNames spells the names of named[idx...] into one string.
func spellNamesOld(idx []int32, named []namedCandidateOld) string {
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
func sortBySumOld(idx []int32, named []namedCandidateOld) {
	type key struct {
		leadOld uint64
		i       int32
	}
	keys := make([]key, len(idx))
	for j, i := range idx {
		keys[j] = key{leadOld(&named[i].sum), i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.leadOld, b.leadOld); c != 0 {
			return c
		}
		return bytes.Compare(named[a.i].sum[:], named[b.i].sum[:])
	})
	for j, k := range keys {
		idx[j] = k.i
	}
}

// scopeResolver is resolveScope and the guard's hit, remembered per
// scope: a node has few scopes and a large input long runs of one. Both
// are functions of the Input alone, which Decide never changes, so what
// is remembered never goes stale within one Decide.
type scopeResolverOld struct {
	scopes           map[Scope]ScopeStatus
	guard            *guardState
	evidenceRequired bool
	recent           []*resolvedScopeOld
	all              map[Scope]*resolvedScopeOld
}

type resolvedScopeOld struct {
	scope Scope
	st    ScopeStatus
	ok    bool // the scope is in the input's authority
	hits  map[Group]guardHit
}

func (sr *scopeResolverOld) hitOf(rs *resolvedScopeOld, k Kind, e DataEngine) guardHit {
	g := Group{Kind: k, DataEngine: e}
	if h, ok := rs.hits[g]; ok {
		return h
	}
	if rs.hits == nil {
		rs.hits = map[Group]guardHit{}
	}
	rs.hits[g] = sr.guard.hit(guardKey{scope: rs.scope, group: g})
	if sr.evidenceRequired {
		rs.hits[g] = evidenceHit(sr.scopes, guardKey{scope: rs.scope, group: g}, rs.hits[g])
	}
	return rs.hits[g]
}

func (rs *resolvedScopeOld) isReady() bool { return rs.ok && rs.st.Health == HealthReady }

func (sr *scopeResolverOld) resolve(s Scope) *resolvedScopeOld {
	for _, e := range sr.recent {
		if sameScopeOld(e.scope, s) {
			return e
		}
	}
	if e, ok := sr.all[s]; ok {
		return e
	}
	st, ok := resolveScopeOld(sr.scopes, s)
	e := &resolvedScopeOld{scope: s, st: st, ok: ok}
	if sr.all == nil {
		sr.all = map[Scope]*resolvedScopeOld{}
	}
	sr.all[s] = e
	if len(sr.recent) < recentScopesOld {
		sr.recent = append(sr.recent, e)
	}
	return e
}

// sameScope is a == b, telling most different scopes of a node apart by
// their disk names' lengths and last bytes before comparing whole strings.
func sameScopeOld(a, b Scope) bool {
	if n := len(a.Disk); n != len(b.Disk) || n > 0 && a.Disk[n-1] != b.Disk[n-1] {
		return false
	}
	return a == b
}

// keep keeps a record of a Ready scope and plans the conditions it lacks;
// hit is the guard's for its scope.
func (p *planOld) keepOld(r Record, hit guardHit, cp *Copy, reason string) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: reason})
	p.setConditionsOld(r, hit, cp)
}

// refuse keeps a record whose due purge the guard stopped.
func (p *planOld) refuseOld(r Record, hit guardHit, cp *Copy) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: "purge refused: " + hit.String()})
	p.Refused = append(p.Refused, Refusal{Name: r.Name, Rule: string(hit.rule), Reason: hit.String()})
	p.setConditionsOld(r, hit, cp)
}

// forget plans dropping a record, and the DataCleanable=False its
// writer sets first.
func (p *planOld) forgetOld(r Record, reason ForgetReason, msg string) {
	p.Forget = append(p.Forget, Forget{Record: r, Reason: reason, Message: msg,
		Conditions: []metav1.Condition{{Type: ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: string(reason), Message: msg}}})
}

// newConditions are the conditions a new record is created with: what
// setConditions would plan for it (and, like them, shared between records
// that need the same).
func (p *planOld) newConditionsOld(r Record, hit guardHit, cp *Copy) []metav1.Condition {
	n := len(p.Conditions)
	p.setConditionsOld(r, hit, cp)
	if len(p.Conditions) == n {
		return nil
	}
	cs := p.Conditions[n].Conditions
	p.Conditions = p.Conditions[:n]
	return cs
}

// labelCache shares one labels map between the new records whose labels
// are equal: a plan is read-only, and stores copy what they keep.
type labelCacheOld struct {
	last  labelKeyOld
	m     map[string]string
	cache map[labelKeyOld]map[string]string
}

type labelKeyOld struct {
	kind  Kind
	node  string
	extra string // the kind's label parameters' values, when it has one
}

func (lc *labelCacheOld) of(it Item) map[string]string {
	k := labelKeyOld{kind: it.Kind, node: it.NodeID}
	if s := specOf(it.Kind); s != nil {
		switch len(s.LabelParams) {
		case 0:
		case 1:
			for _, param := range s.LabelParams {
				k.extra = it.Param(param)
			}
		default:
			return it.Labels() // no sharing for kinds of several label parameters
		}
	}
	if lc.m != nil && k == lc.last {
		return lc.m
	}
	m, ok := lc.cache[k]
	if !ok {
		m = it.Labels()
		if lc.cache == nil {
			lc.cache = map[labelKeyOld]map[string]string{}
		}
		lc.cache[k] = m
	}
	lc.last, lc.m = k, m
	return m
}

// setConditions plans, for a record kept in a Ready scope, the conditions
// it lacks: DataCleanable=True; Error=False unless a purge of it is in
// progress (Longhorn keeps the condition on every record; the Sweeper sets
// it True when a purge fails or is refused, and a plan that keeps the
// record clears it); InstanceExist=True for kinds that carry it (the
// record's item was seen, or it would have been forgotten); and
// PurgeGuarded as the guard's hit says (zero: not guarded).
func (p *planOld) setConditionsOld(r Record, hit guardHit, cp *Copy) {
	var k condKeyOld
	if cc, ok := copyCondNeeded(&r, cp, p.vols, &p.msg); ok {
		k.set |= setCopyOld
		k.copy = cc
	}
	if !r.Cleanable() {
		k.set |= setCleanableOld
	}
	if clearsError(r) {
		k.set |= setNoErrorOld
	}
	if s := specOf(r.Kind); s != nil && s.InstanceExist && !meta.IsStatusConditionTrue(r.Conditions, ConditionInstanceExist) {
		k.set |= setInstanceExistOld
	}
	switch {
	case hit.rule != "":
		if c := meta.FindStatusCondition(r.Conditions, ConditionPurgeGuarded); c == nil ||
			c.Status != metav1.ConditionTrue || c.Reason != string(hit.rule) || c.Message != hit.msg {
			k.set |= setGuardedOld
			k.hit = hit
		}
	case meta.IsStatusConditionTrue(r.Conditions, ConditionPurgeGuarded):
		k.set |= setGuardClearOld
	}
	if k.set == 0 {
		return
	}
	p.Conditions = append(p.Conditions, SetConditions{Record: r, Conditions: p.condsOld.of(k)})
}

// condLists shares one slice of conditions between the records that need
// the same. A plan needs few different ones (a few sets, times the
// guard's hits), so the first are found by a linear search, without
// hashing the hits' messages; the map holds them all.
type condListsOld struct {
	recent []condListOld
	all    map[condKeyOld][]metav1.Condition
}

type condListOld struct {
	key condKeyOld
	cs  []metav1.Condition
}

const recentCondListsOld = 16

func (cl *condListsOld) of(k condKeyOld) []metav1.Condition {
	for _, e := range cl.recent {
		if e.key == k {
			return e.cs
		}
	}
	cs, ok := cl.all[k]
	if !ok {
		cs = k.conditions()
		if cl.all == nil {
			cl.all = map[condKeyOld][]metav1.Condition{}
		}
		cl.all[k] = cs
	}
	if len(cl.recent) < recentCondListsOld {
		cl.recent = append(cl.recent, condListOld{k, cs})
	}
	return cs
}

// condKey says which conditions a record needs; records that need the
// same share one slice of them (a plan is read-only).
type condKeyOld struct {
	set  uint8
	hit  guardHit
	copy copyCond
}

const (
	setCleanableOld uint8 = 1 << iota
	setNoErrorOld
	setInstanceExistOld
	setGuardedOld
	setGuardClearOld
	setCopyOld
)

func (k condKeyOld) conditions() []metav1.Condition {
	var cs []metav1.Condition
	if k.set&setCleanableOld != 0 {
		cs = append(cs, cleanableTrueOld())
	}
	if k.set&setNoErrorOld != 0 {
		cs = append(cs, metav1.Condition{Type: ConditionError, Status: metav1.ConditionFalse, Reason: ReasonNoError,
			Message: "no purge of this record has failed since it was last planned"})
	}
	if k.set&setInstanceExistOld != 0 {
		cs = append(cs, metav1.Condition{Type: ConditionInstanceExist, Status: metav1.ConditionTrue, Reason: ReasonInstanceObserved,
			Message: "the runtime instance was observed on its node"})
	}
	if k.set&setGuardedOld != 0 {
		cs = append(cs, guardedTrueOld(k.hit))
	}
	if k.set&setGuardClearOld != 0 {
		cs = append(cs, metav1.Condition{Type: ConditionPurgeGuarded, Status: metav1.ConditionFalse, Reason: ReasonGuardClear,
			Message: "the mass-deletion guard no longer covers this record's scope"})
	}
	if k.set&setCopyOld != 0 {
		cs = append(cs, k.copy.condition())
	}
	return slices.Clip(cs)
}

func cleanableTrueOld() metav1.Condition {
	return metav1.Condition{Type: ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: ReasonCleanable,
		Message: "the record's node and disk are ready"}
}

func guardedTrueOld(hit guardHit) metav1.Condition {
	return metav1.Condition{Type: ConditionPurgeGuarded, Status: metav1.ConditionTrue, Reason: string(hit.rule), Message: hit.msg}
}

// resolveScope finds the status that applies to s, node first; see Decide.
func resolveScopeOld(scopes map[Scope]ScopeStatus, s Scope) (ScopeStatus, bool) {
	node, nodeListed := scopes[Scope{NodeID: s.NodeID}]
	node = normaliseOld(node)
	if s.Disk == "" {
		return node, nodeListed
	}
	disk, diskListed := scopes[s]
	disk = normaliseOld(disk)
	switch {
	case nodeListed && node.Health.Forgets():
		return node, true
	case diskListed && disk.Health.Forgets():
		return disk, true
	case !diskListed && !nodeListed:
		return ScopeStatus{}, false
	case !diskListed && node.Health == HealthReady:
		return ScopeStatus{Health: HealthDiskRemoved, Message: "disk " + s.Disk + " is no longer part of node " + s.NodeID}, true
	case !diskListed:
		return node, true
	case !nodeListed:
		return ScopeStatus{Health: HealthUnknown, Message: "the health of node " + s.NodeID + " was not given: a disk is Ready only under a Ready node"}, true
	case node.Health != HealthReady:
		return node, true
	}
	return disk, true
}

// normalise treats an empty health as Unknown: a status nobody filled in
// must not vouch for a complete scan.
func normaliseOld(st ScopeStatus) ScopeStatus {
	if st.Health == "" {
		st.Health = HealthUnknown
	}
	return st
}

func (p *planOld) requeueOld(at time.Time) {
	if p.RequeueAt.IsZero() || at.Before(p.RequeueAt) {
		p.RequeueAt = at
	}
}

// sort puts every list in name order; Decide builds them nearly sorted,
// so each is checked first.
func (p *planOld) sortOld() {
	p.condsOld = condListsOld{}
	sortByOld(p.Create, func(r Record) string { return r.Name })
	sortByOld(p.Forget, func(f Forget) string { return f.Record.Name })
	sortByOld(p.Purge, func(pu Purge) string { return pu.Record.Name })
	sortByOld(p.Keep, func(k Keep) string { return k.Record.Name })
	sortByOld(p.Conditions, func(c SetConditions) string { return c.Record.Name })
	sortByOld(p.Refused, func(r Refusal) string { return r.Name })
}

func sortByOld[T any](s []T, name func(T) string) {
	cmpName := func(a, b T) int { return cmp.Compare(name(a), name(b)) }
	if !slices.IsSortedFunc(s, cmpName) {
		slices.SortStableFunc(s, cmpName)
	}
}

// sortedIndexes returns 0..n-1 ordered by name(i). It sorts small keys
// instead of whole records: the eight bytes of each name after the
// common "orphan-" prefix, compared as a number, and the whole names only
// where those tie.
func sortedIndexesOld(n int, name func(int) string) []int {
	type key struct {
		prefix uint64
		i      int
	}
	keys := make([]key, n)
	for i := range keys {
		keys[i] = key{namePrefixOld(name(i)), i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return cmp.Compare(name(a.i), name(b.i))
	})
	idx := make([]int, n)
	for j, k := range keys {
		idx[j] = k.i
	}
	return idx
}

// namePrefix packs the eight bytes of name after NamePrefix (fewer,
// zero-padded, when it is shorter) big-endian, so that comparing prefixes
// orders names as comparing the strings does, apart from ties.
func namePrefixOld(name string) uint64 {
	rest := strings.TrimPrefix(name, NamePrefix)
	if len(rest) == len(name) {
		rest = name // not an orphan name: order by its own first bytes
	}
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(rest) {
			p |= uint64(rest[i])
		}
	}
	return p
}

type candidatesOld struct {
	named    []namedCandidateOld
	byName   sumTableOld // name → index in named, and whether it is an orphan
	recorded bitsetOld   // indexes in named that a record in the input's authority names
	counts   guardCounts
}

// namedCandidate is a candidate with its record name, as a sum, and scope.
type namedCandidateOld struct {
	Candidate
	sum   nameSum
	scope Scope
}

// bitset is a set of small integers: a million of them fit in 128 KiB,
// which stays in the cache while a planner marks them at random.
type bitsetOld []uint64

func newBitsetOld(n int) bitsetOld      { return make(bitsetOld, (n+63)/64) }
func (b bitsetOld) add(i int)           { b[i/64] |= 1 << (i % 64) }
func (b bitsetOld) contains(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

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
// It also counts, for the guard, each scope's valid items and orphans:
// orphans once per name, as merged; other candidates once per
// observation, which only ever makes a scope look less orphaned. An
// orphan that could not be named is no valid item.
//
// The cost that dominates a large input is touching each item's
// Parameters map, a cache miss per item: the first pass reads only the
// orphans' maps (few, usually; none when every candidate is an orphan),
// the second reads each map once, for both the match key and the scope.
// Names are kept as sums (see sumTable) and spelled only for new records.
func indexCandidatesOld(cs []Candidate, recs []Record, plan *planOld) candidatesOld {
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
	var lk kindLookupOld
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

	filter := newKeyFilterOld(needed)
	tally := scopeTallyOld{counts: guardCounts{}}
	room := min(len(needed)+len(cs)-others, len(cs))
	out := candidatesOld{byName: newSumTableOld(room), named: make([]namedCandidateOld, 0, room)}
	for _, c := range cs {
		spec := lk.spec(c.Item.Kind)
		k, scope := lk.keyAndScope(spec, c.Item)
		orphan := c.Verdict.Outcome == OutcomeOrphan
		if !orphan {
			tally.add(guardKey{scope: scope, group: Group{c.Item.Kind, c.Item.DataEngine}}, 1, 0)
			if !filter.mayHave(k.primary) {
				continue
			}
			if bits, ok := needed[k.primary]; !ok || bits&classBit(k.class) == 0 {
				continue
			}
		}
		sum, err := c.Item.nameSum()
		if err != nil {
			plan.Rejected = append(plan.Rejected, Rejected{Item: c.Item, Err: err})
			continue
		}
		out.byName.makeRoom()
		j, dup := out.byName.find(&sum)
		if !dup {
			out.byName.set(j, &sum, len(out.named), orphan)
			out.named = append(out.named, namedCandidateOld{Candidate: c, sum: sum, scope: scope})
			continue
		}
		i := out.byName.slots[j].index()
		prev := out.named[i]
		switch {
		case prev.Item.Kind != c.Item.Kind:
			// Engine and replica instances share Longhorn's name formula:
			// one name seen as two kinds is no item anyone can vouch for.
			c.Verdict = Undecided("one name observed as two kinds: " + string(prev.Item.Kind) + " and " + string(c.Item.Kind))
		case prev.Verdict.Outcome != c.Verdict.Outcome:
			c.Verdict = Undecided("conflicting verdicts for one item: " + prev.Verdict.Outcome.String() + " and " + c.Verdict.Outcome.String())
		}
		out.named[i] = namedCandidateOld{Candidate: c, sum: sum, scope: scope}
		out.byName.slots[j].orphan = c.Verdict.Outcome == OutcomeOrphan
	}
	out.recorded = newBitsetOld(len(out.named))
	for _, c := range out.named {
		if c.Verdict.Outcome == OutcomeOrphan {
			tally.add(guardKey{scope: c.scope, group: Group{c.Item.Kind, c.Item.DataEngine}}, 1, 1)
		}
	}
	out.counts = tally.counts
	return out
}

// scopeTally counts by scope. A node has few scopes (its disks), and
// comparing two short strings is cheaper than hashing them, so the first
// ones are found by a linear search; the map holds them all.
type scopeTallyOld struct {
	recent []scopeEntryOld
	counts guardCounts
}

type scopeEntryOld struct {
	key   guardKey
	count *scopeCount
}

const recentScopesOld = 32

func (t *scopeTallyOld) add(s guardKey, valid, orphans int) {
	for i := range t.recent {
		if e := &t.recent[i]; e.key == s {
			e.count.valid += valid
			e.count.orphans += orphans
			return
		}
	}
	t.counts.add(s, valid, orphans)
	if len(t.recent) < recentScopesOld {
		t.recent = append(t.recent, scopeEntryOld{s, t.counts[s]})
	}
}

// keyFilter is a Bloom filter over the needed match keys: most items of a
// large input are owned and not needed, and two bits of a small bitset
// tell most of them so without a map look-up. A "maybe" is checked in the
// map, so the filter only ever saves work.
type keyFilterOld struct {
	seed maphash.Seed
	bits []uint64
	mask uint64
}

func newKeyFilterOld(keys map[string]uint8) keyFilterOld {
	n := uint64(1024)
	for n < 16*uint64(len(keys)) {
		n <<= 1
	}
	f := keyFilterOld{seed: maphash.MakeSeed(), bits: make([]uint64, n/64), mask: n - 1}
	for k := range keys {
		h := maphash.String(f.seed, k)
		a, b := h&f.mask, (h>>32)&f.mask
		f.bits[a/64] |= 1 << (a % 64)
		f.bits[b/64] |= 1 << (b % 64)
	}
	return f
}

func (f *keyFilterOld) mayHave(k string) bool {
	h := maphash.String(f.seed, k)
	a, b := h&f.mask, (h>>32)&f.mask
	return f.bits[a/64]&(1<<(a%64)) != 0 && f.bits[b/64]&(1<<(b%64)) != 0
}

// kindLookup finds kind specs, remembering the last: candidates come in
// long runs of one kind.
type kindLookupOld struct {
	kind Kind
	last *KindSpec
}

func (l *kindLookupOld) spec(k Kind) *KindSpec {
	if l.last == nil || k != l.kind {
		l.kind, l.last = k, specOf(k)
	}
	return l.last
}

func (l *kindLookupOld) keyOf(k Kind, params map[string]string) matchKey {
	s := l.spec(k)
	if s == nil {
		return matchKey{class: "unknown:" + string(k)} // fails naming anyway
	}
	return matchKey{s.NameClass, strings.TrimSpace(params[s.MatchParam])}
}

// keyAndScope is keyOf and Item.Scope in one look at the item's
// parameters.
func (l *kindLookupOld) keyAndScope(s *KindSpec, it Item) (matchKey, Scope) {
	if s == nil {
		return matchKey{class: "unknown:" + string(it.Kind)}, Scope{NodeID: it.NodeID}
	}
	scope := Scope{NodeID: it.NodeID}
	if s.ScopeParam != "" {
		scope.Disk = it.Parameters[s.ScopeParam]
	}
	return matchKey{s.NameClass, strings.TrimSpace(it.Parameters[s.MatchParam])}, scope
}

// sumTable maps name sums to indexes in named, by open addressing on the
// sum's first eight bytes: a SHA-256 is already uniformly spread, so
// nothing is hashed again, and a million names cost one flat array
// instead of a million strings in a map. A slot holds the whole sum, and
// a hit is a whole sum equal: two names share a slot exactly when they
// are equal, as in a map of names. Finding a record's candidate and
// whether it is an orphan reads one slot, not the candidate.
type sumTableOld struct {
	slots []sumSlotOld
	n     int
}

type sumSlotOld struct {
	sum    nameSum
	i      int32 // index in named + 1; zero is an empty slot
	orphan bool  // the merged verdict of the name is OutcomeOrphan
}

func (sl *sumSlotOld) index() int { return int(sl.i) - 1 }

func newSumTableOld(room int) sumTableOld {
	size := 16
	for size < 2*room {
		size <<= 1
	}
	return sumTableOld{slots: make([]sumSlotOld, size)}
}

func leadOld(sum *nameSum) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

// find returns the slot holding sum, or the empty slot where it belongs.
func (t *sumTableOld) find(sum *nameSum) (int, bool) {
	mask := uint64(len(t.slots) - 1)
	for j := leadOld(sum) & mask; ; j = (j + 1) & mask {
		sl := &t.slots[j]
		if sl.i == 0 {
			return int(j), false
		}
		if sl.sum == *sum {
			return int(j), true
		}
	}
}

// set fills the empty slot j that find returned for sum.
func (t *sumTableOld) set(j int, sum *nameSum, i int, orphan bool) {
	t.slots[j] = sumSlotOld{sum: *sum, i: int32(i + 1), orphan: orphan}
	t.n++
}

// makeRoom grows the table, if needed, so that one more sum can be set;
// call it before the find whose slot is set.
func (t *sumTableOld) makeRoom() {
	if 2*(t.n+1) <= len(t.slots) {
		return
	}
	old := t.slots
	t.slots = make([]sumSlotOld, 2*len(old))
	for k := range old {
		if old[k].i != 0 {
			j, _ := t.find(&old[k].sum)
			t.slots[j] = old[k]
		}
	}
}

// applyAutoRulesOld is applyAutoRules with refuseOld.
func (p *planOld) applyAutoRulesOld(gs *guardState, auto []int, in Input) {
	hits, ledger := gs.autoRefusals(p.Purge, auto, in.AutoPurges, in.Now)
	p.AutoPurges = ledger
	if len(hits) == 0 {
		return
	}
	kept := p.Purge[:0:0]
	for i, pu := range p.Purge {
		if h, ok := hits[i]; ok {
			p.refuseOld(pu.Record, h, pu.Candidate.Item.Copy)
		} else {
			kept = append(kept, pu)
		}
	}
	p.Purge = kept
}

// DecideOldForTest exposes decideOld to the orphan_test package, whose
// input generators the differential tests share.
var DecideOldForTest = decideOld

// outsideReady is the old Decide's rules 1 to 4.
func (p *planOld) outsideReady(r Record, st ScopeStatus, scope Scope) bool {
	switch {
	case st.Health == HealthReady:
		return false
	case st.Health.Forgets():
		p.forget(r, ForgetReason(st.Health), st.Message)
	case r.Dismissed:
		p.dismissed(r)
	case st.Health.Holds() && r.DeletionRequested:
		p.forget(r, ForgetReason(st.Health), "deletion requested while "+scope.String()+" is "+string(st.Health)+
			": the record goes, the data stays: "+st.Message)
	case st.Health.Holds():
		p.hold(r, st, scope)
	case r.DeletionRequested && r.NotCleanable():
		p.forget(r, ReasonNotCleanable, "deletion requested, but the record says its data is not cleanable")
	case r.DeletionRequested:
		p.requestKept(r, RuleScopeUnknown, "deletion requested, but scope "+scope.String()+" was not scanned completely: "+st.Message)
	default:
		p.Keep = append(p.Keep, Keep{Record: r, Reason: "scope " + scope.String() + " was not scanned completely: " + st.Message})
	}
	return true
}
