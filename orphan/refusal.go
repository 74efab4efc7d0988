package orphan

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The rules of refusals that are not a guard's (a guard's refusal carries
// its GuardRule). Refusal.Rule holds one of them or a GuardRule; it is a
// single word, fit for a condition's reason.
const (
	// RuleDismissed: a deletion was requested of a dismissed orphan
	// (RefusalDismissed).
	RuleDismissed = "Dismissed"
	// RuleUndecided: a deletion was requested, but this cycle's judgement
	// of the record's item is undecided (its directory became a symbolic
	// link, its meta cannot be read, the judge's cache is not synced).
	RuleUndecided = "Undecided"
	// RuleScopeUnknown: a deletion was requested, but the record's scope
	// was not scanned completely, or its node's health was not given.
	RuleScopeUnknown = "ScopeUnknown"
	// RuleDuplicateName: a deletion was requested, but several records
	// of the input share the record's name (two lists merged, a cache
	// holding an object twice): which one a store holds cannot be told,
	// and one of them may be dismissed.
	RuleDuplicateName = "DuplicateName"
	// RuleRecheck: a re-check at the moment of deletion stopped the purge
	// (the record or its item changed since the plan, or the Deleter
	// refused with ErrPreconditionFailed).
	RuleRecheck = "Recheck"
	// RuleNotRequested: PurgeRecord was asked to purge a record whose
	// deletion is not requested.
	RuleNotRequested = "NotRequested"
	// RuleMismatch: PurgeRecord was asked to purge a record whose name is
	// not the one its parameters give (a forged or hand-written record).
	RuleMismatch = "Mismatch"
	// RuleNotPlanned: PurgeRecord found the record kept by the rules for
	// a reason that is none of the above (outside the scopes the host
	// gave, a kind caretaker does not purge, its DataCleanable=True not
	// recorded yet).
	RuleNotPlanned = "NotPlanned"
	// RuleInProgress: another purge of the same record is in progress in
	// this Sweeper.
	RuleInProgress = "InProgress"
)

// requestUndecided keeps a record of a Ready scope whose deletion is
// requested while its item is undecided: the request is refused visibly
// (Refused, and Error=True with the reason) instead of sitting silently.
func (p *Plan) requestUndecided(r Record, hit guardHit, cp *Copy, why string) {
	p.setConditions(r, hit, cp)
	p.refuseUndecided(r, why)
}

// refuseUndecided is requestUndecided after the record's other conditions
// are planned.
func (p *Plan) refuseUndecided(r Record, why string) {
	p.requestKept(r, RuleUndecided, "deletion requested, but its item is undecided: "+why)
}

// requestKept keeps a record whose deletion is requested but cannot go on
// this cycle, reports it in Refused with rule, and plans Error=True
// (ReasonPurgeRefused) with msg, merged into the record's entry of
// Conditions if the plan has one (it is the last: records are planned in
// order). Decide keeps Error=True on a requested record (see clearsError),
// so it shows for as long as the request stands and is cleared once the
// record is purged, forgotten or no longer requested.
func (p *Plan) requestKept(r Record, rule, msg string) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: msg})
	p.Refused = append(p.Refused, Refusal{Name: r.Name, Rule: rule, Reason: msg})
	c := metav1.Condition{Type: ConditionError, Status: metav1.ConditionTrue, Reason: ReasonPurgeRefused, Message: msg}
	if cur := meta.FindStatusCondition(r.Conditions, ConditionError); cur != nil &&
		cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message {
		return
	}
	if n := len(p.Conditions); n > 0 && p.Conditions[n-1].Record.Name == r.Name {
		// The entry's slice may be shared with other records': build anew.
		old := p.Conditions[n-1].Conditions
		cs := make([]metav1.Condition, 0, len(old)+1)
		for _, o := range old {
			if o.Type != ConditionError {
				cs = append(cs, o)
			}
		}
		p.Conditions[n-1].Conditions = append(cs, c)
		return
	}
	p.Conditions = append(p.Conditions, SetConditions{Record: r, Conditions: []metav1.Condition{c}})
}
