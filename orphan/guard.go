package orphan

import (
	"fmt"
	"math"
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
// The rules, per scope (a node, or a disk of a node):
//
//	NoneExpected:  the Inventory found the host's list of owners of the
//	               scope empty (ScopeStatus.NoneExpected) while the scope
//	               holds valid items: no purge there, requested or
//	               automatic.
//	WholeScope:    every valid item of the scope (the candidates, plus
//	               ScopeStatus.OwnedUnlisted) is judged an orphan, and
//	               there are at least MinItems of them: no purge there.
//	AutoShare:     the purges due in the scope this cycle are at least
//	               MinItems and more than MaxAutoShare of its valid items:
//	               the automatic ones are refused (requested ones go on).
//
// A small scope still cleans up: one orphan beside one owned item is
// purged, and fewer than MinItems orphans are never taken for a broken
// view by WholeScope or AutoShare.
type Guard struct {
	// AllowNoneExpected turns the NoneExpected rule off.
	AllowNoneExpected bool
	// AllowWholeScope turns the WholeScope rule off.
	AllowWholeScope bool
	// AllowAnyShare turns the AutoShare rule off.
	AllowAnyShare bool
	// MinItems is the fewest orphans that WholeScope and AutoShare treat as
	// a mass deletion. Zero means DefaultGuardMinItems.
	MinItems int
	// MaxAutoShare is the share of a scope's valid items that automatic
	// deletion may purge in one cycle, in (0, 1). Zero means
	// DefaultGuardMaxAutoShare; other values outside (0, 1) mean the
	// default too (use AllowAnyShare to turn the rule off).
	MaxAutoShare float64
}

// The guard's defaults.
const (
	DefaultGuardMinItems     = 3
	DefaultGuardMaxAutoShare = 0.5
)

// GuardRule names the rule that refused a purge; it is the reason of the
// PurgeGuarded condition.
type GuardRule string

// The guard's rules.
const (
	GuardNoneExpected GuardRule = "NoneExpected"
	GuardWholeScope   GuardRule = "WholeScope"
	GuardAutoShare    GuardRule = "AutoShare"
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

// guardHit is a rule that holds for a scope, with the message saying why.
type guardHit struct {
	rule GuardRule
	msg  string
}

// scopeCount is what the guard counts of one scope.
type scopeCount struct {
	valid, orphans int
}

// guardState is the guard evaluated over one Input.
type guardState struct {
	g      Guard
	counts scopeCounts
	hits   map[Scope]guardHit
}

// scopeCounts are the guard's counts by scope.
type scopeCounts map[Scope]*scopeCount

func (sc scopeCounts) add(s Scope, valid, orphans int) {
	c := sc[s]
	if c == nil {
		c = &scopeCount{}
		sc[s] = c
	}
	c.valid += valid
	c.orphans += orphans
}

// newGuardState takes each scope's count of valid items and orphans (see
// indexCandidates), adds the owned items the Inventory left unlisted, and
// applies the rules that do not depend on the plan (NoneExpected,
// WholeScope).
func newGuardState(in Input, counts scopeCounts) *guardState {
	gs := &guardState{g: in.Guard, counts: counts, hits: map[Scope]guardHit{}}
	for s, st := range in.Scopes {
		if st.OwnedUnlisted > 0 {
			counts.add(s, st.OwnedUnlisted, 0)
		}
	}
	for s, sc := range gs.counts {
		st := in.Scopes[s]
		switch {
		case st.NoneExpected && sc.valid > 0 && !gs.g.AllowNoneExpected:
			gs.hits[s] = guardHit{GuardNoneExpected, fmt.Sprintf(
				"nothing is expected in %s while it holds %d valid items: the host's view looks broken (a replica list from the wrong namespace?)", s, sc.valid)}
		case sc.orphans == sc.valid && sc.orphans >= gs.g.minItems() && !gs.g.AllowWholeScope:
			gs.hits[s] = guardHit{GuardWholeScope, fmt.Sprintf(
				"all %d valid items of %s are judged orphans: the host's view looks broken (a lost cache?)", sc.valid, s)}
		}
	}
	return gs
}

// refuses returns the rule that stops every purge in s; the zero guardHit
// if none does.
func (gs *guardState) refuses(s Scope) guardHit { return gs.hits[s] }

func (h guardHit) String() string { return string(h.rule) + ": " + h.msg }

// applyShareRule refuses the automatic purges of scopes where the purges
// due this cycle are at least MinItems and more than MaxAutoShare of the
// scope's valid items. auto indexes plan.Purge. It reports whether it
// refused any, which appends to Keep, Conditions and Refused out of name
// order.
func (p *Plan) applyShareRule(gs *guardState, auto []int) bool {
	if gs.g.AllowAnyShare || len(auto) == 0 {
		return false
	}
	due := map[Scope]int{}
	for _, pu := range p.Purge {
		due[pu.Record.Scope()]++
	}
	refused := map[int]bool{}
	for _, i := range auto {
		s := p.Purge[i].Record.Scope()
		n, valid := due[s], 0
		if sc := gs.counts[s]; sc != nil {
			valid = sc.valid
		}
		if n < gs.g.minItems() || float64(n) <= gs.g.maxAutoShare()*float64(valid) {
			continue
		}
		refused[i] = true
		p.refuse(p.Purge[i].Record, guardHit{GuardAutoShare, fmt.Sprintf(
			"%d of the %d valid items of %s are due for purging at once, more than %d%%: automatic deletion stops here",
			n, valid, s, int(math.Round(100*gs.g.maxAutoShare())))})
	}
	if len(refused) == 0 {
		return false
	}
	kept := p.Purge[:0:0]
	for i, pu := range p.Purge {
		if !refused[i] {
			kept = append(kept, pu)
		}
	}
	p.Purge = kept
	return true
}
