package orphan

import (
	"fmt"
	"math"
	"time"
)

// Guard is the mass-deletion guard: evidence that a view is broken rather
// than that data is orphaned stops purges in the scope it concerns. The
// classic accident is an empty expected list (a replica list read from the
// wrong namespace prints {"items":[]}), and a host whose cache lost a
// node's records sees every item on it as an orphan: both look exactly like
// real orphans to a Judge.
//
// The zero value is on, with the defaults; each rule has its own explicit
// opt-out. Refused purges are kept, listed in Plan.Refused, and their
// records marked PurgeGuarded=True with the rule as the reason, so the
// refusal is visible where users look.
//
// The rules weigh each group of a scope (a node, or a disk of a node) on
// its own: the items of one kind and data engine (see Group), so that one
// adapter's owned items never vouch for another's orphans when Combine
// runs several on one node. A group of a disk is weighed twice: on its
// own, and with the group's items on every disk of its node (the node
// level, named "the replica/v1 items of node n1 (all disks)" in a
// refusal), so that a view that lost a few replicas of each of many disks
// cannot stay under every disk's threshold while the node as a whole is
// mostly orphans. A purge goes on only if both levels let it; the node
// level counts its disks' items, their OwnedUnlisted included, and has no
// NoneExpected of its own (an Inventory reports that of each disk's list):
//
//	NoneExpected:  the Inventory found the host's list of owners of the
//	               group empty (ScopeStatus.NoneExpected, or its entry in
//	               ScopeStatus.Groups) while the group holds valid items:
//	               no purge there, requested or automatic.
//	WholeScope:    every valid item of the group (the candidates, plus
//	               the owned ones the Inventory did not list) is judged
//	               an orphan, and there are at least MinItems of them: no
//	               purge there.
//	AutoShare:     the purges due in the group this cycle are at least
//	               MinItems and more than MaxAutoShare of its valid items:
//	               the automatic ones are refused (requested ones go on).
//	Budget:        the automatic purges of the group within BudgetWindow
//	               (Input.AutoPurges, then this cycle's, in name order)
//	               would exceed its allowance: the ones beyond it are
//	               refused until the window passes (requested ones go on).
//
// The allowance of a group of n valid items is MaxAutoShare×n rounded
// down, and never less than MinItems-1: AutoShare lets through at most
// that many automatic purges at once, and Budget at most that many over a
// window, counted across cycles, so an expected list that loses one
// replica per cycle cannot trickle a disk away. With the defaults, 10
// valid items allow 5 automatic purges an hour, and 1 to 5 valid items
// allow 2. On a disk of n valid items of a node of N across its disks,
// both max(MinItems-1, ⌊MaxAutoShare×n⌋) and max(MinItems-1,
// ⌊MaxAutoShare×N⌋) bound the automatic purges: four disks of ten
// replicas with two orphans each lose all eight in one cycle (each disk
// allows 5, the node 20), where four disks of three with two orphans each
// (8 of 12, the node allows 6) lose none automatically. Decide stays pure: the Sweeper carries the ledger from one
// plan (Plan.AutoPurges) to the next input, and a host that plans
// itself does the same.
//
// A small scope still cleans up: one orphan beside one owned item is
// purged, and fewer than MinItems orphans are never taken for a broken
// view by WholeScope, AutoShare or Budget.
type Guard struct {
	// AllowNoneExpected turns the NoneExpected rule off.
	AllowNoneExpected bool
	// AllowWholeScope turns the WholeScope rule off.
	AllowWholeScope bool
	// AllowAnyShare turns the AutoShare rule off.
	AllowAnyShare bool
	// MinItems is the fewest orphans that WholeScope and AutoShare treat as
	// a mass deletion; Budget always allows MinItems-1 automatic purges a
	// window. Zero means DefaultGuardMinItems.
	MinItems int
	// MaxAutoShare is the share of a group's valid items that automatic
	// deletion may purge in one cycle, and in one BudgetWindow, in (0, 1).
	// Zero means DefaultGuardMaxAutoShare; other values outside (0, 1)
	// mean the default too (use AllowAnyShare and AllowOverBudget to turn
	// the rules off).
	MaxAutoShare float64
	// AllowLastCopy turns the last-copy guard off (see VolumeState).
	AllowLastCopy bool
	// AllowOverBudget turns the Budget rule off.
	AllowOverBudget bool
	// BudgetWindow is how far back the Budget rule counts automatic
	// purges. Zero or negative means DefaultGuardBudgetWindow.
	BudgetWindow time.Duration
}

// The guard's defaults.
const (
	DefaultGuardMinItems     = 3
	DefaultGuardMaxAutoShare = 0.5
	DefaultGuardBudgetWindow = time.Hour
)

// GuardRule names the rule that refused a purge; it is the reason of the
// PurgeGuarded condition.
type GuardRule string

// The guard's rules.
const (
	GuardNoneExpected GuardRule = "NoneExpected"
	GuardWholeScope   GuardRule = "WholeScope"
	GuardAutoShare    GuardRule = "AutoShare"
	GuardBudget       GuardRule = "Budget"
)

// ConditionPurgeGuarded is caretaker's condition on a record whose purge
// the Guard refuses (True, reason the GuardRule) or no longer refuses
// (False, reason ReasonGuardClear). Longhorn has no such condition.
const ConditionPurgeGuarded = "PurgeGuarded"

// Condition reasons caretaker writes.
const (
	// ReasonCleanable is the reason of DataCleanable=True.
	ReasonCleanable = "Ready"
	// ReasonGuardClear is the reason of PurgeGuarded=False.
	ReasonGuardClear = "Clear"
	// ReasonNoError is the reason of Error=False.
	ReasonNoError = "NoError"
	// ReasonPurgeFailed is the reason of Error=True after the Deleter
	// failed.
	ReasonPurgeFailed = "PurgeFailed"
	// ReasonPurgeRefused is the reason of Error=True after a re-check at
	// the moment of deletion stopped a purge.
	ReasonPurgeRefused = "PurgeRefused"
	// ReasonInstanceObserved is the reason of InstanceExist=True.
	ReasonInstanceObserved = "Observed"
)

func (g Guard) minItems() int {
	if g.MinItems > 0 {
		return g.MinItems
	}
	return DefaultGuardMinItems
}

func (g Guard) maxAutoShare() float64 {
	if g.MaxAutoShare > 0 && g.MaxAutoShare < 1 {
		return g.MaxAutoShare
	}
	return DefaultGuardMaxAutoShare
}

// Group is one part of a scope's items that the guard weighs on its own:
// the items of one kind and one data engine. Two adapters combined on one
// node (an SPDK runtime's instances, a backupstore's failed backups)
// never serve the same group (Combine refuses two adapters of one kind
// and engine), so one adapter's owned items never vouch for another
// adapter's orphans.
type Group struct {
	Kind       Kind
	DataEngine DataEngine
}

// String returns "kind" or "kind/engine".
func (g Group) String() string {
	if g.DataEngine == "" {
		return string(g.Kind)
	}
	return string(g.Kind) + "/" + string(g.DataEngine)
}

// Evidence is what an Inventory tells the guard about one group of a
// scope's items (see ScopeStatus.Groups): the same two facts as
// ScopeStatus.OwnedUnlisted and ScopeStatus.NoneExpected, for that group
// alone.
type Evidence struct {
	// OwnedUnlisted counts the group's valid items that the Inventory
	// found owned and did not list. A negative count is taken as zero.
	OwnedUnlisted int
	// NoneExpected says the host's list of what may own the group's items
	// was empty.
	NoneExpected bool
}

// merge keeps the evidence of two reports of one group: NoneExpected if
// either says so, and the larger OwnedUnlisted (two sources counting one
// group's owned items count the same items).
func (e Evidence) merge(o Evidence) Evidence {
	return Evidence{OwnedUnlisted: max(e.OwnedUnlisted, o.OwnedUnlisted), NoneExpected: e.NoneExpected || o.NoneExpected}
}

func (g Guard) budgetWindow() time.Duration {
	if g.BudgetWindow > 0 {
		return g.BudgetWindow
	}
	return DefaultGuardBudgetWindow
}

// AutoPurge is one automatic purge in the guard's ledger, which the
// Budget rule counts: Plan.AutoPurges lists the ones of the last
// BudgetWindow, this plan's included, and the next cycle's
// Input.AutoPurges hands them back. A purge counts when it is planned,
// whether or not it then succeeds; a name counts once per window.
type AutoPurge struct {
	// Name is the record's.
	Name string
	// Scope and Group are the record's.
	Scope Scope
	Group Group
	// At is the Input.Now of the plan that purged it.
	At time.Time
}

// guardHit is a rule that holds for a group of a scope, with the message
// saying why.
type guardHit struct {
	rule GuardRule
	msg  string
}

// scopeCount is what the guard counts of one group of a scope.
type scopeCount struct {
	valid, orphans int
}

// guardKey is a group of a scope, or of all the disks of a node: what
// the guard counts and rules over.
type guardKey struct {
	scope Scope
	group Group
	// allDisks says the key is the group's items on every disk of the
	// node scope.NodeID (scope.Disk is empty): the node level.
	allDisks bool
}

func (k guardKey) String() string {
	if k.allDisks {
		return "the " + k.group.String() + " items of node " + k.scope.NodeID + " (all disks)"
	}
	return "the " + k.group.String() + " items of " + k.scope.String()
}

// nodeLevel is the key of the group's items on all the disks of k's node,
// which the guard weighs as well as k's own disk; false if k's scope is
// not a disk.
func (k guardKey) nodeLevel() (guardKey, bool) {
	if k.allDisks || k.scope.Disk == "" {
		return guardKey{}, false
	}
	return guardKey{scope: Scope{NodeID: k.scope.NodeID}, group: k.group, allDisks: true}, true
}

// levels are the keys the guard weighs a record of key k by: k itself,
// then its node level if k is a disk's.
func (k guardKey) levels() []guardKey {
	if n, ok := k.nodeLevel(); ok {
		return []guardKey{k, n}
	}
	return []guardKey{k}
}

// guardCounts are the guard's counts by group of a scope.
type guardCounts map[guardKey]*scopeCount

// guardState is the guard evaluated over one Input. The rules that do not
// depend on the plan (NoneExpected, WholeScope) are evaluated for a group
// when it is first asked for, and remembered.
type guardState struct {
	g      Guard
	scopes map[Scope]ScopeStatus
	counts guardCounts
	hits   map[guardKey]guardHit
	nodes  map[guardKey]scopeCount // the node levels' counts, as first asked for
	now    time.Time               // Input.Now
	since  time.Time               // Input.AutoPurgesSince
}

// newGuardState takes each group's count of valid items and orphans (see
// indexCandidates); the evidence comes from in.Scopes.
func newGuardState(in Input, counts guardCounts) *guardState {
	return &guardState{g: in.Guard, scopes: in.Scopes, counts: counts, hits: map[guardKey]guardHit{}, now: in.Now, since: in.AutoPurgesSince}
}

// evidence is what the scope's status says of the group: its own entry
// in Groups, the entry of its kind for every data engine, and the
// status's own fields, which speak for every group of the scope (an
// Inventory that reports them serves the scope alone, or Combine has
// moved them into Groups).
func (gs *guardState) evidence(k guardKey) Evidence {
	st := gs.scopes[k.scope]
	ev := Evidence{OwnedUnlisted: st.OwnedUnlisted, NoneExpected: st.NoneExpected}
	if e, ok := st.Groups[k.group]; ok {
		ev = ev.merge(e)
	}
	if k.group.DataEngine != "" {
		if e, ok := st.Groups[Group{Kind: k.group.Kind}]; ok {
			ev = ev.merge(e)
		}
	}
	// A negative count is no count: it would shrink the valid items below
	// the orphans seen, so that WholeScope never trips and NoneExpected
	// sees nothing valid.
	ev.OwnedUnlisted = max(ev.OwnedUnlisted, 0)
	return ev
}

// count is the group's valid items (the candidates counted, and the owned
// ones its Inventory did not list) and orphans, with the evidence.
//
// A node level (all the disks of a node) counts what its disks' groups
// count, their OwnedUnlisted included, and has no evidence of its own:
// an Inventory reports the list it judged by per disk.
func (gs *guardState) count(k guardKey) (sc scopeCount, ev Evidence) {
	if k.allDisks {
		return gs.nodeCount(k), Evidence{}
	}
	ev = gs.evidence(k)
	if c := gs.counts[k]; c != nil {
		sc = *c
	}
	sc.valid += ev.OwnedUnlisted
	return sc, ev
}

// hit returns the rule that stops every purge in the group; the zero
// guardHit if none does.
//
// A disk's group is weighed on its own first, then with the group's items
// on every disk of its node: a view that lost a few replicas of each disk
// stays under each disk's threshold while the node as a whole is mostly
// orphans. The hit names the level that tripped.
func (gs *guardState) hit(k guardKey) guardHit {
	if h, ok := gs.hits[k]; ok {
		return h
	}
	var h guardHit
	for _, l := range k.levels() {
		if h = gs.levelHit(l); h.rule != "" {
			break
		}
	}
	gs.hits[k] = h
	return h
}

// levelHit is the rule that holds for the group of k alone, if any.
func (gs *guardState) levelHit(k guardKey) guardHit {
	sc, ev := gs.count(k)
	switch {
	case ev.NoneExpected && sc.valid > 0 && !gs.g.AllowNoneExpected:
		return guardHit{GuardNoneExpected, fmt.Sprintf(
			"nothing is expected of %s while it holds %d valid items: the host's view looks broken (a replica list from the wrong namespace?)", k, sc.valid)}
	case sc.orphans == sc.valid && sc.orphans >= gs.g.minItems() && !gs.g.AllowWholeScope:
		return guardHit{GuardWholeScope, fmt.Sprintf(
			"all %d valid items of %s are judged orphans: the host's view looks broken (a lost cache?)", sc.valid, k)}
	}
	return guardHit{}
}

// nodeCount is the count of a node level: the sum of its node's disks'
// counts of the group. Computed once per node level; a node has few disks
// and an Input few nodes.
func (gs *guardState) nodeCount(k guardKey) scopeCount {
	if c, ok := gs.nodes[k]; ok {
		return c
	}
	var c scopeCount
	for dk, dc := range gs.counts {
		if !dk.allDisks && dk.scope.Disk != "" && dk.scope.NodeID == k.scope.NodeID && dk.group == k.group {
			c.valid += dc.valid
			c.orphans += dc.orphans
		}
	}
	for s := range gs.scopes {
		if s.Disk != "" && s.NodeID == k.scope.NodeID {
			c.valid += gs.evidence(guardKey{scope: s, group: k.group}).OwnedUnlisted
		}
	}
	if gs.nodes == nil {
		gs.nodes = map[guardKey]scopeCount{}
	}
	gs.nodes[k] = c
	return c
}

func (h guardHit) String() string { return string(h.rule) + ": " + h.msg }

// groupOf is the guard's key of a record.
func groupOf(r *Record) guardKey {
	return guardKey{scope: r.Scope(), group: Group{Kind: r.Kind, DataEngine: r.DataEngine}}
}

// autoRefusals applies the rules that weigh a plan's purges together: of
// the automatic purges (auto indexes purges, which are in name order), it
// returns those the AutoShare or Budget rule refuses, with the rule's
// hit, and the ledger of automatic purges the plan leaves: the entries of
// ledger still inside the window, and the automatic purges that go on,
// stamped now.
func (gs *guardState) autoRefusals(purges []Purge, auto []int, ledger []AutoPurge, now time.Time) (map[int]guardHit, []AutoPurge) {
	window := gs.g.budgetWindow()
	cutoff := now.Add(-window)
	var kept []AutoPurge
	counted := map[guardKey]map[string]bool{} // names purged automatically within the window, by group and node level
	for _, e := range ledger {
		if !e.At.After(cutoff) {
			continue
		}
		kept = append(kept, e)
		for _, k := range (guardKey{scope: e.Scope, group: e.Group}).levels() {
			if counted[k] == nil {
				counted[k] = map[string]bool{}
			}
			counted[k][e.Name] = true
		}
	}
	if len(auto) == 0 {
		return nil, kept
	}
	due := map[guardKey]int{}
	for i := range purges {
		for _, k := range groupOf(&purges[i].Record).levels() {
			due[k]++
		}
	}
	hits := map[int]guardHit{}
	spent := map[guardKey]int{}
	for _, i := range auto {
		r := &purges[i].Record
		levels := groupOf(r).levels()
		if h := gs.levelRefusal(levels, r.Name, due, counted, spent, window); h.rule != "" {
			hits[i] = h
			continue
		}
		if counted[levels[0]][r.Name] {
			continue // counted already: an earlier purge of it did not finish
		}
		for _, k := range levels {
			spent[k]++
		}
		kept = append(kept, AutoPurge{Name: r.Name, Scope: levels[0].scope, Group: levels[0].group, At: now})
	}
	return hits, kept
}

// levelRefusal is the AutoShare or Budget hit that refuses the automatic
// purge of name at one of its levels (its group, then its node level),
// the zero guardHit if none does.
func (gs *guardState) levelRefusal(levels []guardKey, name string, due map[guardKey]int, counted map[guardKey]map[string]bool, spent map[guardKey]int, window time.Duration) guardHit {
	share := int(math.Round(100 * gs.g.maxAutoShare()))
	for _, k := range levels {
		sc, _ := gs.count(k)
		if allowance := gs.g.allowance(sc.valid); !gs.g.AllowAnyShare && due[k] > allowance {
			return guardHit{GuardAutoShare, fmt.Sprintf(
				"%d of the %d valid items of %s are due for purging at once, more than %d%%: automatic deletion stops here",
				due[k], sc.valid, k, share)}
		}
	}
	if counted[levels[0]][name] {
		return guardHit{} // counted already, at every level
	}
	if since := gs.since; !gs.g.AllowOverBudget && !since.IsZero() && gs.now.Before(since.Add(window)) {
		return guardHit{GuardBudget, fmt.Sprintf(
			"the ledger of automatic purges is known only since %s (a restart whose store keeps no ledger), so the budget of %s within %s counts as spent: automatic deletion resumes at %s, or on a person's request",
			since.UTC().Format(time.RFC3339), levels[0], window, since.Add(window).UTC().Format(time.RFC3339))}
	}
	for _, k := range levels {
		sc, _ := gs.count(k)
		allowance := gs.g.allowance(sc.valid)
		if used := len(counted[k]) + spent[k]; !gs.g.AllowOverBudget && used >= allowance {
			return guardHit{GuardBudget, fmt.Sprintf(
				"%d automatic purges of %s within %s reach its budget of %d (%d%% of its %d valid items): automatic deletion resumes when the window passes, or on a person's request",
				used, k, window, allowance, share, sc.valid)}
		}
	}
	return guardHit{}
}

// allowance is how many automatic purges the guard lets through in a
// group of valid items, in one cycle (AutoShare) or in one window
// (Budget): MaxAutoShare of them, and never fewer than MinItems-1, so a
// small scope still cleans up.
func (g Guard) allowance(valid int) int {
	return max(g.minItems()-1, int(math.Floor(g.maxAutoShare()*float64(valid))))
}

// applyAutoRules refuses the automatic purges that autoRefusals refuses
// and sets the plan's ledger. It reports whether it refused any, which
// appends to Keep, Conditions and Refused out of name order.
func (p *Plan) applyAutoRules(gs *guardState, auto []int, in Input) bool {
	hits, ledger := gs.autoRefusals(p.Purge, auto, in.AutoPurges, in.Now)
	p.AutoPurges = ledger
	if len(hits) == 0 {
		return false
	}
	kept := p.Purge[:0:0]
	for i, pu := range p.Purge {
		if h, ok := hits[i]; ok {
			p.refuse(pu.Record, h, pu.Candidate.Item.Copy)
		} else {
			kept = append(kept, pu)
		}
	}
	p.Purge = kept
	return true
}
