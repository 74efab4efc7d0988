package orphan

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Input is everything Decide looks at. It is plain data: the host gathers
// it (an Inventory snapshot judged by a Judge, the records in its Store,
// the health of its nodes and disks) and Decide never does I/O.
type Input struct {
	// Now is the time the plan is made at. Records created by the plan get
	// it as CreatedAt, and the grace period is measured against it.
	Now time.Time

	// Scopes are the scopes this input speaks for, with their health. See
	// Decide for how a record's or candidate's scope is resolved against
	// them: a node's health dominates its disks', and a disk counts only
	// under a listed node. Records and candidates whose scope resolves to
	// nothing are outside this input's authority and are left alone: a
	// node's planner never touches another node's records.
	Scopes map[Scope]ScopeStatus

	// Candidates are the items observed, with their verdicts.
	Candidates []Candidate

	// Records are the existing orphan records (typically Store.List of
	// the node's records).
	Records []Record

	// Policy is the auto-deletion policy.
	Policy Policy

	// Guard is the mass-deletion guard; its zero value is on, with the
	// documented defaults.
	Guard Guard

	// AutoPurges is the guard's ledger of automatic purges: the previous
	// plan's Plan.AutoPurges (the Sweeper carries it, see LedgerStore).
	// The Budget rule counts the entries within Guard.BudgetWindow before
	// Now.
	AutoPurges []AutoPurge
	// AutoPurgesSince is when the ledger in AutoPurges began, if it is
	// not complete: a host that lost it (a restart without a LedgerStore)
	// knows nothing of the automatic purges before. Until one
	// Guard.BudgetWindow after it, the Budget rule takes every group's
	// allowance as spent and refuses each automatic purge not already in
	// the ledger; requested purges go on. Zero means AutoPurges is
	// complete.
	AutoPurgesSince time.Time

	// Volumes is the state of each volume the host knows, by name: the
	// last-copy guard (see VolumeState) keeps a recoverable orphan of a
	// volume that is faulted, or degraded, or unknown.
	Volumes map[string]VolumeState
	// VolumesComplete says Volumes lists every volume that exists, so a
	// volume it does not list is deleted; otherwise such a volume is
	// unknown.
	VolumesComplete bool
	// LastCopyOverride names the records (by record name) whose requested
	// purge a person confirmed although it may destroy the last
	// recoverable copy of a faulted volume. It never lets an automatic
	// purge through.
	LastCopyOverride map[string]bool

	// EvidenceRequired says the Candidates are not a complete inventory
	// but a host's own judgement (see Judged): every group (kind and data
	// engine) of a scope must then have its guard evidence stated in the
	// scope's ScopeStatus.Groups, or no purge goes on in that group
	// (GuardNoEvidence).
	EvidenceRequired bool
}

// Plan is what Decide wants done, as data. Every record within the input's
// authority appears exactly once in Forget, Purge or Keep; Create holds new
// records. Lists are sorted by record name. A plan is read-only: entries
// may share their Conditions slices and Labels maps with each other, new
// records share their Parameters with the Input's items (and their names
// are pieces of strings of 64 names), and kept,
// forgotten and purged records share everything with the Input's
// records; Clone a record before changing it.
type Plan struct {
	// Create are new records to store.
	Create []Record
	// Forget are records to drop without touching their data.
	Forget []Forget
	// Purge are records whose data is to be deleted, then the record.
	Purge []Purge
	// Keep are records left as they are, with why.
	Keep []Keep
	// Conditions are status conditions to write on kept records: on
	// those of a Ready scope, Longhorn's DataCleanable=True, Error=False
	// and, for instance kinds, InstanceExist=True where they are missing,
	// and caretaker's PurgeGuarded and Recoverable (ConditionRecoverable,
	// the verdict of this cycle's inspection of the record's item,
	// Item.Copy); on held and dismissed records,
	// DataCleanable=False with the reason. (A Forget carries its own
	// DataCleanable=False; the Sweeper writes Error=True when a purge
	// fails.) Each record appears at most once, with every condition that
	// changes, each type once; their order within an entry means nothing.
	Conditions []SetConditions
	// Refused are purges that were due (requested, or by the policy) but
	// that the Guard stopped, and deletions requested of dismissed
	// records, of records whose item is undecided (RuleUndecided), of
	// records whose scope was not scanned completely (RuleScopeUnknown)
	// and of records whose name another record of the input holds
	// (RuleDuplicateName, once per name): a requested deletion that
	// cannot go on is never silent. Their records are in Keep too;
	// RuleUndecided and RuleScopeUnknown ones are marked Error=True
	// (ReasonPurgeRefused) with why for as long as the request stands.
	Refused []Refusal
	// Rejected are candidates that could have mattered (judged orphan, or
	// possibly a record's item) but could not be named, lacking a field;
	// they are neither created nor matched. They are in input order.
	Rejected []Rejected
	// AutoPurges is the guard's ledger after this plan: the entries of
	// Input.AutoPurges still inside Guard.BudgetWindow, in their order,
	// then this plan's automatic purges, stamped Input.Now, in name
	// order. Hand it to the next cycle's Input.AutoPurges.
	AutoPurges []AutoPurge
	// RequeueAt is when the plan changes by the passing of time alone (an
	// auto-deletion grace period ending), or Now when a due purge waits
	// only for this plan's conditions to be written; zero if never.
	RequeueAt time.Time

	conds condLists // while Decide runs: shared condition lists
}

// ForgetReason says why a record is forgotten. Apart from ReasonGone,
// ReasonOwned and ReasonMismatch, the values are the scope healths that
// forget, which are Longhorn's DataCleanable=False reasons.
type ForgetReason string

// Reasons to forget a record that are not a scope's health.
const (
	ReasonGone     ForgetReason = "Gone"     // the scope was scanned and the candidate was not seen
	ReasonOwned    ForgetReason = "Owned"    // the candidate is owned now
	ReasonMismatch ForgetReason = "Mismatch" // the record's name is not the one its parameters give, or they name no valid item (Item.Name)
	// ReasonNotCleanable: a purge is due, but the record says its data is
	// not cleanable (DataCleanable=False), as a forget that was cut short,
	// or a host, left it. Longhorn drops such a record and keeps the data.
	ReasonNotCleanable ForgetReason = "NotCleanable"
)

// Forget is a record to drop while its data stays. For a record whose
// deletion was requested it is Longhorn's release without purge: the
// record goes (in Kubernetes, its finalizer is removed) and the data
// stays.
type Forget struct {
	Record  Record
	Reason  ForgetReason
	Message string
	// Conditions are written on the record before it is dropped:
	// DataCleanable=False with Reason as the reason, so a host whose
	// deletion path purges (a finalizer) knows to keep the data even if
	// the drop itself fails halfway.
	Conditions []metav1.Condition
}

// Purge is a record whose data is to be deleted. What to delete is the
// Record's (its parameters name the data); a host that applies plans
// itself must delete by the Record, as the Sweeper does, never by the
// Candidate.
type Purge struct {
	Record Record
	// Candidate is this cycle's observation that made the purge due: an
	// item of the record's name and scope. It is not always the record's
	// own data: Longhorn's names join fields with dashes, so two items
	// can share a name (disk "a-b" with data "c", and disk "a" with data
	// "b-c"), and duplicates merge into one candidate. Use it for logging
	// and metrics, not to choose what to delete.
	Candidate Candidate
	// Auto is true when the policy asked for the deletion, false when the
	// record's deletion was requested.
	Auto bool
}

// Keep is a record left as it is.
type Keep struct {
	Record Record
	Reason string
}

// SetConditions is a kept record's conditions to write. Conditions carry
// no LastTransitionTime: the writer stamps it (the Sweeper with its clock)
// and keeps the old one where the status did not change, as
// meta.SetStatusCondition does.
type SetConditions struct {
	Record     Record
	Conditions []metav1.Condition
}

// Rejected is a candidate Decide could not use.
type Rejected struct {
	Item Item
	Err  error
}

// Decide makes the plan for one cycle. It is a pure function: no I/O, no
// clock, no goroutines, and the input is not modified.
//
// # Scopes
//
// A record's or candidate's scope is its node, and for replica data also
// its disk. Its health is resolved from Input.Scopes with the node first,
// because a node's health dominates its disks':
//
//   - the node's health forgets (NodeEvicted, NodeDeleted, ...): that
//     health, whatever any disk of the node says;
//   - else the disk's own health forgets (DiskChanged, DiskEvicted,
//     DiskRemoved): that health;
//   - else the disk is not listed: DiskRemoved if the node is Ready (the
//     disk is no longer part of it), the node's health if it is listed,
//     and outside the input's authority if the node is not listed either;
//   - else the node holds (NodeUnavailable): that health, whatever the
//     disk scan says;
//   - else the node is Unknown or not listed: Unknown (a disk scan says
//     nothing about whether its node is down or being evicted, so a disk
//     is only ever Ready under a node the host listed as Ready);
//   - else the disk's health (Ready, Unknown or DiskInvalid).
//
// A node scope (instances, backups) is simply the node's listed health.
// An empty health is Unknown. A host that learns a node's Kubernetes Ready
// condition is Unknown, or that its manager pod is missing, reports
// HealthNodeUnavailable, as Longhorn does; HealthUnknown means only "could
// not tell this cycle" and keeps records as they are.
//
// # Records
//
// The rules, in the order they apply to a record in its authority (a
// record of a kind the table does not hold is kept as it is, with a
// reason, before any of them: see Kind.Valid; so is a record whose name
// another record of the input holds, as no store holds two objects of one
// name: neither is purged or forgotten, a deletion requested of them is
// reported once in Refused, RuleDuplicateName, and neither gets
// conditions):
//  1. its scope's health forgets: forget, with that health as the reason;
//  2. it is dismissed (Record.Dismissed) and its scope is not Ready: keep
//     it as dismissed (see 8);
//  3. its scope's health holds (a node down, a disk that cannot be read;
//     longhorn/longhorn#7795): if its deletion was requested, forget
//     (with the health as the reason: the record goes, the data stays, as
//     Longhorn does with an Orphan that is not cleanable); otherwise keep
//     it, marked DataCleanable=False with the health as the reason;
//  4. its scope is Unknown: keep, unless its deletion was requested and it
//     is marked DataCleanable=False: forget (ReasonNotCleanable; forgetting
//     never touches data, and the user's deletion completes); a requested
//     one kept is reported in Refused (RuleScopeUnknown) and marked
//     Error=True with the scope's message;
//  5. its name is not the one its parameters give, or they name no valid
//     item (a path-like data name, see Item.Name): forget (ReasonMismatch);
//  6. no candidate of that name was seen: forget (ReasonGone);
//  7. the candidate is owned: forget (ReasonOwned);
//  8. it is dismissed: keep, marked DataCleanable=False (ReasonDismissed),
//     whatever the policy says; a deletion requested of it is refused and
//     reported in Refused (forgetting it would let the next scan record
//     the data anew, undismissed);
//  9. the candidate is undecided: keep; if its deletion was requested,
//     reported in Refused (RuleUndecided) and marked Error=True with the
//     verdict's reason, which stays while the request stands;
//  10. the candidate is an orphan. If its purge is not due (its deletion
//     was not requested, and the policy does not auto-delete its kind or
//     the grace period since CreatedAt is not over, or CreatedAt is zero,
//     which leaves no grace period to count): keep (requeued for the end
//     of the grace period, if the policy auto-deletes its kind and
//     CreatedAt is set).
//     If it is due:
//     (a) marked DataCleanable=False by Decide itself (a hold of rule 3 or
//     a dismissal, now over) and not requested: keep; this plan marks it
//     DataCleanable=True and requeues at once, as for a new record;
//     (b) marked DataCleanable=False otherwise (a forget cut short, or a
//     host, left it), or requested while so marked: forget
//     (ReasonNotCleanable), as Longhorn does;
//     (c) not marked DataCleanable=True yet: keep; this plan marks it and
//     requeues at once, so the next cycle purges (Longhorn's rule: data is
//     purged only while DataCleanable is True);
//     (d) the Guard refuses its group (kind and data engine) of its scope:
//     keep, with a Refusal;
//     (e) the candidate of its name was observed in another scope (its
//     own scope's scan did not see its item): forget (ReasonGone);
//     (f) the last-copy guard refuses it (see VolumeState): keep, with a
//     Refusal;
//     (g) otherwise: purge, unless it is automatic and the Guard's
//     AutoShare or Budget rule refuses it (keep, with a Refusal).
//
// Every record kept in a Ready scope that is not marked DataCleanable=True
// gets it in Conditions (a dismissed one excepted); a record the Guard
// covers gets PurgeGuarded=True, and one that had it and is no longer
// covered PurgeGuarded=False. Error=True, which the Sweeper writes when a
// purge fails or is refused, is cleared by a plan that keeps the record,
// unless its deletion is still requested: then it stays until the record
// is purged or forgotten, so a deletion that cannot go on is never left
// with nothing to show. A record kept in a Ready scope (a dismissed one
// excepted) whose item this cycle has a Copy gets ConditionRecoverable as
// the inspection found it, unless it carries that condition already; new
// records are created with it.
//
// A candidate judged orphan in a Ready scope with no record gets one
// created, marked DataCleanable=True. Candidates seen more than once with
// different verdicts count as undecided. Nothing is ever purged that was
// not judged an orphan in this very input.
func Decide(in Input) Plan {
	return decide(&in, &scratch{})
}

// decide is Decide with its working arrays from sc. Everything the rules
// look up is indexed first, once (newIndex); then each record in the
// input's authority goes through the rules (decideRecord), in name order,
// so that the plan's lists come out sorted; then the Guard weighs the
// automatic purges together, and the orphans without a record get one
// (create).
func decide(in *Input, sc *scratch) Plan {
	var plan Plan
	ix := newIndex(in, &plan, sc)
	// Most records are kept, and most kept ones need a condition at most
	// once: room for all of them, so large plans never grow by copying.
	plan.Keep = make([]Keep, 0, len(in.Records))
	plan.Conditions = make([]SetConditions, 0, len(in.Records))
	plan.conds.vols, plan.conds.msg = in.Volumes, &sc.msg
	var dueAuto []int // indexes in plan.Purge of the automatic purges
	order := ix.recordsByName()
	for k, i := range order {
		if !ix.inAuthority(i) {
			continue
		}
		// Records of one name lie side by side in name order.
		name := in.Records[i].Name
		shared := k > 0 && in.Records[order[k-1]].Name == name || k+1 < len(order) && in.Records[order[k+1]].Name == name
		if plan.decideRecord(in, &ix, i, shared) {
			dueAuto = append(dueAuto, len(plan.Purge)-1)
		}
	}
	// Rule 10's last step: the Guard's AutoShare and Budget rules weigh
	// the automatic purges of a group together.
	resort := plan.applyAutoRules(ix.guard, dueAuto, *in)
	plan.create(in, &ix)
	plan.sort(resort)
	return plan
}

// decideRecord plans in.Records[i], a record in the input's authority, by
// the rules listed on Decide: its cases are the rules, in their order and
// with their numbers; shared says another record of the input has its
// name. It reports whether it planned an automatic purge, which the
// Guard's AutoShare and Budget rules weigh once every record is planned
// (see applyAutoRules).
func (p *Plan) decideRecord(in *Input, ix *index, i int, shared bool) (autoPurge bool) {
	r := in.Records[i]
	st, scope := ix.scopeOf(i)
	ready := st.Health == HealthReady
	var (
		hit guardHit // the Guard's stop of the record's group, if any
		cp  *Copy    // this cycle's inspection of its item, for ConditionRecoverable
		v   Verdict  // its candidate's verdict, merged over the observations of its name
	)
	if ready {
		hit, cp, v = ix.hit(i), ix.copy(i), ix.verdict(i)
	}
	due, auto := in.Policy.DueAt(r)
	// A record of no creation time has no grace period to count: time
	// alone never makes it due.
	ageless := auto && r.CreatedAt.IsZero()
	isDue := r.DeletionRequested || auto && !ageless && !in.Now.Before(due)

	switch {
	// Before the rules: another orphan type of Longhorn's (shard
	// instances...) is its owner's to handle; caretaker neither purges
	// nor forgets it.
	case specOf(r.Kind) == nil:
		p.Keep = append(p.Keep, Keep{Record: r, Reason: unknownKindReason(r.Kind)})
	// Nor a name that several records of the input hold: a store holds
	// one object of a name, and which one it is cannot be told.
	case shared:
		p.sharedName(r)

	// Rule 1: its scope's health forgets.
	case st.Health.Forgets():
		p.forget(r, ForgetReason(st.Health), st.Message)

	// Rule 2: it is dismissed and its scope is not Ready.
	case r.Dismissed && !ready:
		p.dismissed(r)

	// Rule 3: its scope's health holds. Longhorn's rule: deleting an
	// Orphan whose data is not cleanable removes the object and keeps the
	// data.
	case st.Health.Holds() && r.DeletionRequested:
		p.forget(r, ForgetReason(st.Health), "deletion requested while "+scope.String()+" is "+string(st.Health)+
			": the record goes, the data stays: "+st.Message)
	case st.Health.Holds():
		p.hold(r, st, scope)

	// Rule 4: its scope is Unknown (every health that is not Ready and
	// neither forgets nor holds). Forgetting keeps the data whatever the
	// scope holds; keeping would leave the user's deletion hanging until
	// the scope is known again.
	case !ready && r.DeletionRequested && r.NotCleanable():
		p.forget(r, ReasonNotCleanable, "deletion requested, but the record says its data is not cleanable")
	case !ready && r.DeletionRequested:
		p.requestKept(r, RuleScopeUnknown, "deletion requested, but scope "+scope.String()+" was not scanned completely: "+st.Message)
	case !ready:
		p.Keep = append(p.Keep, Keep{Record: r, Reason: "scope " + scope.String() + " was not scanned completely: " + st.Message})

	// Rule 5: its name is not the one its parameters give.
	case !ix.nameMatches(i):
		p.forget(r, ReasonMismatch, "the record's name does not match its parameters, or they name no valid item")

	// Rule 6: no candidate of its name was seen.
	case !ix.seen(i):
		p.forget(r, ReasonGone, "no longer seen in "+scope.String())

	// Rule 7: its candidate is owned.
	case v.Outcome == OutcomeOwned:
		p.forget(r, ReasonOwned, v.Reason)

	// Rule 8: it is dismissed.
	case r.Dismissed:
		p.dismissed(r)

	// Rule 9: its candidate is undecided.
	case v.Outcome != OutcomeOrphan && r.DeletionRequested:
		p.requestUndecided(r, hit, cp, v.Reason)
	case v.Outcome != OutcomeOrphan:
		p.keep(r, hit, cp, "undecided: "+v.Reason)

	// Rule 10: its candidate is an orphan. Not due (not requested, and
	// not auto-deleted with its grace period over): keep.
	case !isDue && ageless:
		p.keep(r, hit, cp, "auto-deletion waits: the record has no creation time, so its grace period cannot be counted")
	case !isDue && auto:
		p.requeue(due)
		p.keep(r, hit, cp, "auto-deletion due at "+due.UTC().Format(time.RFC3339))
	case !isDue:
		p.keep(r, hit, cp, "orphan; waiting for a deletion request")
	// Rule 10(a): Decide's own DataCleanable=False, of a hold or a
	// dismissal that is over: cleanable again, as a new record is.
	case r.NotCleanable() && !r.DeletionRequested && heldMark(r):
		p.requeue(in.Now)
		p.keep(r, hit, cp, "purge due once DataCleanable=True is recorded again")
	// Rule 10(b): a DataCleanable=False of another's (a forget cut short, a
	// host), or any while requested: forget, as Longhorn does.
	case r.NotCleanable():
		what := "auto-deletion due"
		if r.DeletionRequested {
			what = "deletion requested"
		}
		p.forget(r, ReasonNotCleanable, what+", but the record says its data is not cleanable")
	// Rule 10(c): DataCleanable=True not recorded yet: the next cycle purges.
	case !r.Cleanable():
		p.requeue(in.Now)
		p.keep(r, hit, cp, "purge due once DataCleanable=True is recorded")
	// Rule 10(d): the Guard refuses its group.
	case hit.rule != "":
		p.refuse(r, hit, cp)
	// Rule 10(e): its name was observed in another scope only (an instance
	// seen on another node: the node is not in Longhorn's formula; node
	// and disk names that dash-join alike). That vouches for nothing in
	// this record's scope, whose scan did not see its item.
	case !ix.seenInScope(i):
		p.forget(r, ReasonGone, "no longer seen in "+scope.String()+"; its name was seen in "+ix.candidateScope(i).String())
	default:
		// Rule 10(f): the last-copy guard.
		if lc := lastCopyHit(in, &r, ix.item(i)); lc.rule != "" {
			p.refuse(r, lc, cp)
			return false
		}
		// Rule 10(g): purge; an automatic one is weighed by the Guard's
		// AutoShare and Budget rules once every record is planned.
		p.Purge = append(p.Purge, Purge{Record: r, Candidate: ix.candidate(i), Auto: !r.DeletionRequested})
		return !r.DeletionRequested
	}
	return false
}

// create plans a record for every orphan candidate of a Ready scope that
// no record in the input's authority names, in name order.
func (p *Plan) create(in *Input, ix *index) {
	n := ix.unrecordedOrphans()
	p.Create = make([]Record, 0, n)
	var labels labelCache
	for j := range n {
		o := ix.newOrphan(j)
		it := o.item
		rec := Record{Name: o.name, Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine,
			Parameters: it.Parameters, Labels: labels.of(*it), CreatedAt: in.Now}
		rec.Conditions = p.newConditions(rec, o.hit, it.Copy)
		p.Create = append(p.Create, rec)
		if due, auto := in.Policy.DueAt(rec); auto {
			p.requeue(due)
		}
	}
}

// ReasonDismissed is the reason of the DataCleanable=False condition
// Decide writes on a dismissed record (Record.Dismissed).
const ReasonDismissed = "Dismissed"

// RefusalDismissed is the Reason of the Refusal Decide plans for a
// deletion requested of a dismissed record. The Sweeper reports it to its
// Hooks as EventRefused, not EventGuarded: it is a user's choice, not the
// Guard reading a broken view.
const RefusalDismissed = "dismissed: deletion requested, but the data of a dismissed orphan is never purged"

// sharedName keeps a record whose name another record of the input
// holds, and refuses a deletion requested of it, once per name.
func (p *Plan) sharedName(r Record) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: "several records share the name " + r.Name +
		": the input's records are inconsistent (a store holds one object of a name), so none of them is purged or forgotten"})
	if n := len(p.Refused); r.DeletionRequested && (n == 0 || p.Refused[n-1].Name != r.Name) {
		p.Refused = append(p.Refused, Refusal{Name: r.Name, Rule: RuleDuplicateName,
			Reason: "deletion requested, but several records of the input share the name " + r.Name + ": none of them is purged until one remains"})
	}
}

// hold keeps a record of a scope whose health holds (a node down, a disk
// that cannot be read) and marks it DataCleanable=False with the health as
// the reason, unless it is marked so already. The mark is Decide's own:
// once the scope is Ready again, Decide marks the record
// DataCleanable=True (see heldMark).
func (p *Plan) hold(r Record, st ScopeStatus, scope Scope) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: "scope " + scope.String() + " is " + string(st.Health) +
		": kept, not cleanable until it is Ready: " + st.Message})
	p.markNotCleanable(r, string(st.Health), st.Message)
}

// dismissed keeps a dismissed record and marks it DataCleanable=False
// (ReasonDismissed). A deletion requested of it is refused visibly: the
// data of a dismissed orphan is never purged, and forgetting the record
// would let the next scan record the data anew, undismissed.
func (p *Plan) dismissed(r Record) {
	reason := "dismissed: its data is kept"
	if r.DeletionRequested {
		reason = RefusalDismissed
		p.Refused = append(p.Refused, Refusal{Name: r.Name, Rule: RuleDismissed, Reason: reason})
	}
	p.Keep = append(p.Keep, Keep{Record: r, Reason: reason})
	p.markNotCleanable(r, ReasonDismissed, "a user dismissed this orphan: its data is never purged")
}

// markNotCleanable plans DataCleanable=False with reason on a kept record
// that is not marked so already.
func (p *Plan) markNotCleanable(r Record, reason, msg string) {
	if c := meta.FindStatusCondition(r.Conditions, ConditionDataCleanable); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == reason {
		return
	}
	p.Conditions = append(p.Conditions, SetConditions{Record: r, Conditions: []metav1.Condition{
		{Type: ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}})
}

// heldMark reports whether r's DataCleanable=False is a mark Decide sets
// while a record is held (a health that holds) or dismissed, rather than
// a host's: such a mark ends with the hold, and a due auto-deletion waits
// for DataCleanable=True instead of forgetting the record.
func heldMark(r Record) bool {
	c := meta.FindStatusCondition(r.Conditions, ConditionDataCleanable)
	return c != nil && c.Status == metav1.ConditionFalse && !r.Dismissed &&
		(Health(c.Reason).Holds() || c.Reason == ReasonDismissed)
}

// keep keeps a record of a Ready scope and plans the conditions it lacks;
// hit is the guard's for its scope.
func (p *Plan) keep(r Record, hit guardHit, cp *Copy, reason string) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: reason})
	p.setConditions(r, hit, cp)
}

// refuse keeps a record whose due purge the guard stopped.
func (p *Plan) refuse(r Record, hit guardHit, cp *Copy) {
	p.Keep = append(p.Keep, Keep{Record: r, Reason: "purge refused: " + hit.String()})
	p.Refused = append(p.Refused, Refusal{Name: r.Name, Rule: string(hit.rule), Reason: hit.String()})
	p.setConditions(r, hit, cp)
}

// forget plans dropping a record, and the DataCleanable=False its
// writer sets first.
func (p *Plan) forget(r Record, reason ForgetReason, msg string) {
	p.Forget = append(p.Forget, Forget{Record: r, Reason: reason, Message: msg,
		Conditions: []metav1.Condition{{Type: ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: string(reason), Message: msg}}})
}

// newConditions are the conditions a new record is created with: what
// setConditions would plan for it (and, like them, shared between records
// that need the same).
func (p *Plan) newConditions(r Record, hit guardHit, cp *Copy) []metav1.Condition {
	k := conditionsNeeded(r, hit, cp, p.conds.vols, p.conds.msg)
	if k.set == 0 {
		return nil
	}
	return p.conds.of(k)
}

// labelCache shares one labels map between the new records whose labels
// are equal: a plan is read-only, and stores copy what they keep.
type labelCache struct {
	last  labelKey
	m     map[string]string
	cache map[labelKey]map[string]string
}

type labelKey struct {
	kind  Kind
	node  string
	extra string // the kind's label parameters' values, when it has one
}

func (lc *labelCache) of(it Item) map[string]string {
	k := labelKey{kind: it.Kind, node: it.NodeID}
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
			lc.cache = map[labelKey]map[string]string{}
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
// PurgeGuarded as the guard's hit says (zero: not guarded); and
// Recoverable as this cycle's inspection of its item says (cp; nil: left
// as it is).
func (p *Plan) setConditions(r Record, hit guardHit, cp *Copy) {
	if k := conditionsNeeded(r, hit, cp, p.conds.vols, p.conds.msg); k.set != 0 {
		p.Conditions = append(p.Conditions, SetConditions{Record: r, Conditions: p.conds.of(k)})
	}
}

// conditionsNeeded is the key of the conditions setConditions plans; a
// zero set when there are none. New records take it without a
// SetConditions entry, so Plan.Conditions never grows past its room for
// the kept records.
func conditionsNeeded(r Record, hit guardHit, cp *Copy, vols map[string]VolumeState, msg *[]byte) condKey {
	var k condKey
	if cc, ok := copyCondNeeded(&r, cp, vols, msg); ok {
		k.set |= setCopy
		k.copy = cc
	}
	if !r.Cleanable() {
		k.set |= setCleanable
	}
	if clearsError(r) {
		k.set |= setNoError
	}
	if s := specOf(r.Kind); s != nil && s.InstanceExist && !meta.IsStatusConditionTrue(r.Conditions, ConditionInstanceExist) {
		k.set |= setInstanceExist
	}
	switch {
	case hit.rule != "":
		if c := meta.FindStatusCondition(r.Conditions, ConditionPurgeGuarded); c == nil ||
			c.Status != metav1.ConditionTrue || c.Reason != string(hit.rule) || c.Message != hit.msg {
			k.set |= setGuarded
			k.hit = hit
		}
	case meta.IsStatusConditionTrue(r.Conditions, ConditionPurgeGuarded):
		k.set |= setGuardClear
	}
	return k
}

// clearsError reports whether a kept record gets Error=False: when it has
// no Error condition, or Error=True from a purge that failed or was
// refused, unless its deletion is still requested. A requested record
// keeps its Error=True until it is purged or forgotten, so a deletion that
// cannot go on (its directory replaced since the scan, say) never sits
// requested with nothing to show.
func clearsError(r Record) bool {
	c := meta.FindStatusCondition(r.Conditions, ConditionError)
	return c == nil || c.Status != metav1.ConditionFalse && !(c.Status == metav1.ConditionTrue && r.DeletionRequested)
}

// condLists shares one slice of conditions between the records that need
// the same. A plan needs few different ones (a few sets, times the
// guard's hits), so the first are found by a linear search, without
// hashing the hits' messages; the map holds them all.
type condLists struct {
	recent []condList
	all    map[condKey][]metav1.Condition

	vols map[string]VolumeState // the Input's, for ConditionRecoverable
	msg  *[]byte                // where ConditionRecoverable's messages are spelled
}

type condList struct {
	key condKey
	cs  []metav1.Condition
}

const recentCondLists = 16

func (cl *condLists) of(k condKey) []metav1.Condition {
	for _, e := range cl.recent {
		if e.key == k {
			return e.cs
		}
	}
	cs, ok := cl.all[k]
	if !ok {
		cs = k.conditions()
		if cl.all == nil {
			cl.all = map[condKey][]metav1.Condition{}
		}
		cl.all[k] = cs
	}
	if len(cl.recent) < recentCondLists {
		cl.recent = append(cl.recent, condList{k, cs})
	}
	return cs
}

// condKey says which conditions a record needs; records that need the
// same share one slice of them (a plan is read-only).
type condKey struct {
	set  uint8
	hit  guardHit
	copy copyCond
}

const (
	setCleanable uint8 = 1 << iota
	setNoError
	setInstanceExist
	setGuarded
	setGuardClear
	setCopy
)

func (k condKey) conditions() []metav1.Condition {
	var cs []metav1.Condition
	if k.set&setCleanable != 0 {
		cs = append(cs, cleanableTrue())
	}
	if k.set&setNoError != 0 {
		cs = append(cs, metav1.Condition{Type: ConditionError, Status: metav1.ConditionFalse, Reason: ReasonNoError,
			Message: "no purge of this record has failed since it was last planned"})
	}
	if k.set&setInstanceExist != 0 {
		cs = append(cs, metav1.Condition{Type: ConditionInstanceExist, Status: metav1.ConditionTrue, Reason: ReasonInstanceObserved,
			Message: "the runtime instance was observed on its node"})
	}
	if k.set&setGuarded != 0 {
		cs = append(cs, guardedTrue(k.hit))
	}
	if k.set&setGuardClear != 0 {
		cs = append(cs, metav1.Condition{Type: ConditionPurgeGuarded, Status: metav1.ConditionFalse, Reason: ReasonGuardClear,
			Message: "the mass-deletion guard no longer covers this record's scope"})
	}
	if k.set&setCopy != 0 {
		cs = append(cs, k.copy.condition())
	}
	return slices.Clip(cs)
}

func cleanableTrue() metav1.Condition {
	return metav1.Condition{Type: ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: ReasonCleanable,
		Message: "the record's node and disk are ready"}
}

func guardedTrue(hit guardHit) metav1.Condition {
	return metav1.Condition{Type: ConditionPurgeGuarded, Status: metav1.ConditionTrue, Reason: string(hit.rule), Message: hit.msg}
}

// resolveScope finds the status that applies to s, node first; see Decide.
func resolveScope(scopes map[Scope]ScopeStatus, s Scope) (ScopeStatus, bool) {
	node, nodeListed := scopes[Scope{NodeID: s.NodeID}]
	node = normalise(node)
	if s.Disk == "" {
		return node, nodeListed
	}
	disk, diskListed := scopes[s]
	disk = normalise(disk)
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
func normalise(st ScopeStatus) ScopeStatus {
	if st.Health == "" {
		st.Health = HealthUnknown
	}
	return st
}

func (p *Plan) requeue(at time.Time) {
	if p.RequeueAt.IsZero() || at.Before(p.RequeueAt) {
		p.RequeueAt = at
	}
}

// sort puts every list in name order. Decide builds them sorted (records
// are planned in name order, new records are sorted by name) except when
// the guard's share rule refused purges after the fact (resort): then
// each list is checked, and sorted if it is not.
func (p *Plan) sort(resort bool) {
	p.conds = condLists{}
	if !resort {
		return
	}
	sortBy(p.Create, func(r Record) string { return r.Name })
	sortBy(p.Forget, func(f Forget) string { return f.Record.Name })
	sortBy(p.Purge, func(pu Purge) string { return pu.Record.Name })
	sortBy(p.Keep, func(k Keep) string { return k.Record.Name })
	sortBy(p.Conditions, func(c SetConditions) string { return c.Record.Name })
	sortBy(p.Refused, func(r Refusal) string { return r.Name })
}

func sortBy[T any](s []T, name func(T) string) {
	cmpName := func(a, b T) int { return cmp.Compare(name(a), name(b)) }
	if !slices.IsSortedFunc(s, cmpName) {
		slices.SortStableFunc(s, cmpName)
	}
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Forget) == 0 && len(p.Purge) == 0 && len(p.Conditions) == 0
}
