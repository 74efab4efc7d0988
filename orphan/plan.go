package orphan

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Input is everything Decide looks at. It is plain data: the host gathers
// it (an Inventory snapshot judged by a Judge, the records in its Store,
// the health of its nodes and disks) and Decide never does I/O.
type Input struct {
	// Now is the time the plan is made at. Records created by the plan get
	// it as CreatedAt, and the grace period is measured against it.
	Now time.Time

	// Scopes are the scopes this input speaks for, with their health. A
	// record or candidate is looked up by its exact scope; a disk scope
	// that is not listed falls back to its node's scope (Disk ""): if the
	// node is listed and Ready, the disk is no longer part of the node and
	// its records are forgotten with HealthDiskInvalid; if the node's
	// health forgets (down, evicted), so does the disk's. Records and
	// candidates whose scope resolves to nothing are outside this input's
	// authority and are left alone: a node's planner never touches another
	// node's records.
	Scopes map[Scope]ScopeStatus

	// Candidates are the items observed, with their verdicts.
	Candidates []Candidate

	// Records are the existing orphan records (typically Store.List of
	// the node's records).
	Records []Record

	// Policy is the auto-deletion policy.
	Policy Policy
}

// Plan is what Decide wants done, as data. Every record within the input's
// authority appears exactly once in Forget, Purge or Keep; Create holds new
// records. Lists are sorted by record name.
type Plan struct {
	// Create are new records to store.
	Create []Record
	// Forget are records to drop without touching their data.
	Forget []Forget
	// Purge are records whose data is to be deleted, then the record.
	Purge []Purge
	// Keep are records left as they are, with why.
	Keep []Keep
	// Rejected are candidates that could have mattered (judged orphan, or
	// possibly a record's item) but could not be named, lacking a field;
	// they are neither created nor matched.
	Rejected []Rejected
	// RequeueAt is when the plan changes by the passing of time alone (an
	// auto-deletion grace period ending); zero if never.
	RequeueAt time.Time
}

// ForgetReason says why a record is forgotten. Apart from ReasonGone,
// ReasonOwned and ReasonMismatch, the values are the scope healths that
// forget, which are Longhorn's DataCleanable=False reasons.
type ForgetReason string

// Reasons to forget a record that are not a scope's health.
const (
	ReasonGone     ForgetReason = "Gone"     // the scope was scanned and the candidate was not seen
	ReasonOwned    ForgetReason = "Owned"    // the candidate is owned now
	ReasonMismatch ForgetReason = "Mismatch" // the record's name is not the one its parameters give
	// ReasonNotCleanable: a purge is due, but the record says its data is
	// not cleanable (DataCleanable=False), as a forget that was cut short,
	// or a host, left it. Longhorn drops such a record and keeps the data.
	ReasonNotCleanable ForgetReason = "NotCleanable"
)

// Forget is a record to drop while its data stays.
type Forget struct {
	Record  Record
	Reason  ForgetReason
	Message string
}

// Purge is a record whose data is to be deleted.
type Purge struct {
	Record Record
	// Candidate is this cycle's observation of the data.
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

// Rejected is a candidate Decide could not use.
type Rejected struct {
	Item Item
	Err  error
}

// Decide makes the plan for one cycle. It is a pure function: no I/O, no
// clock, no goroutines, and the input is not modified.
//
// The rules, in the order they apply to a record in its authority:
//  1. its scope's health forgets (node down or evicted, disk invalid,
//     changed or evicted, or a disk gone from a Ready node): forget;
//  2. its scope is Unknown (the scan could not finish): keep;
//  3. its name is not the one its parameters give: forget (ReasonMismatch);
//  4. no candidate of that name was seen: forget (ReasonGone);
//  5. the candidate is owned: forget (ReasonOwned);
//  6. the candidate is undecided: keep;
//  7. the candidate is an orphan and deletion was requested, or the policy
//     auto-deletes its kind and the grace period since CreatedAt is over:
//     purge, unless the record is marked not cleanable (DataCleanable=False,
//     as a forget cut short leaves it): then forget (ReasonNotCleanable);
//     otherwise keep.
//
// A candidate judged orphan in a Ready scope with no record gets one
// created. Candidates seen more than once with different verdicts count as
// undecided. Nothing is ever purged that was not judged an orphan in this
// very input.
func Decide(in Input) Plan {
	var plan Plan
	cands := indexCandidates(in.Candidates, in.Records, &plan)

	recorded := make(map[string]bool, len(in.Records))
	for _, r := range in.Records {
		st, ok := resolveScope(in.Scopes, r.Scope())
		if !ok {
			continue
		}
		recorded[r.Name] = true
		switch {
		case st.Health.Forgets():
			plan.Forget = append(plan.Forget, Forget{Record: r, Reason: ForgetReason(st.Health), Message: st.Message})
			continue
		case st.Health != HealthReady:
			plan.Keep = append(plan.Keep, Keep{Record: r, Reason: "scope " + r.Scope().String() + " was not scanned completely: " + st.Message})
			continue
		}
		if name, err := r.Item().Name(); err != nil || name != r.Name {
			plan.Forget = append(plan.Forget, Forget{Record: r, Reason: ReasonMismatch,
				Message: "the record's name does not match its parameters"})
			continue
		}
		c, seen := cands[r.Name]
		switch {
		case !seen:
			plan.Forget = append(plan.Forget, Forget{Record: r, Reason: ReasonGone, Message: "no longer seen in " + r.Scope().String()})
		case c.Verdict.Outcome == OutcomeOwned:
			plan.Forget = append(plan.Forget, Forget{Record: r, Reason: ReasonOwned, Message: c.Verdict.Reason})
		case c.Verdict.Outcome != OutcomeOrphan:
			plan.Keep = append(plan.Keep, Keep{Record: r, Reason: "undecided: " + c.Verdict.Reason})
		case r.DeletionRequested && r.NotCleanable():
			plan.Forget = append(plan.Forget, Forget{Record: r, Reason: ReasonNotCleanable, Message: "deletion requested, but the record says its data is not cleanable"})
		case r.DeletionRequested:
			plan.Purge = append(plan.Purge, Purge{Record: r, Candidate: c.Candidate})
		default:
			due, auto := in.Policy.DueAt(r)
			switch {
			case auto && !in.Now.Before(due) && r.NotCleanable():
				plan.Forget = append(plan.Forget, Forget{Record: r, Reason: ReasonNotCleanable, Message: "auto-deletion due, but the record says its data is not cleanable"})
			case auto && !in.Now.Before(due):
				plan.Purge = append(plan.Purge, Purge{Record: r, Candidate: c.Candidate, Auto: true})
			case auto:
				plan.requeue(due)
				plan.Keep = append(plan.Keep, Keep{Record: r, Reason: "auto-deletion due at " + due.UTC().Format(time.RFC3339)})
			default:
				plan.Keep = append(plan.Keep, Keep{Record: r, Reason: "orphan; waiting for a deletion request"})
			}
		}
	}

	for name, c := range cands {
		if recorded[name] || c.Verdict.Outcome != OutcomeOrphan {
			continue
		}
		st, ok := resolveScope(in.Scopes, c.Item.Scope())
		if !ok || st.Health != HealthReady {
			continue
		}
		rec, err := NewRecord(c.Item, in.Now)
		if err != nil { // unreachable: indexCandidates named it
			plan.Rejected = append(plan.Rejected, Rejected{Item: c.Item, Err: err})
			continue
		}
		plan.Create = append(plan.Create, rec)
		if due, auto := in.Policy.DueAt(rec); auto {
			plan.requeue(due)
		}
	}

	plan.sort()
	return plan
}

// namedCandidate is a candidate with its computed record name.
type namedCandidate struct {
	Candidate
	name string
}

// indexCandidates names the candidates that can matter and merges
// duplicates; conflicting verdicts for one name become undecided, because
// "orphan" must be unanimous.
//
// A candidate matters if it is judged orphan (it may need a record) or if
// a record or an orphan candidate shares its matchKey (it may be the
// record's item, or a conflicting observation of an orphan). Naming means
// hashing, and most candidates of a large disk are owned directories with
// no record: skipping them is what lets Decide plan a million items a
// second.
func indexCandidates(cs []Candidate, recs []Record, plan *Plan) map[string]namedCandidate {
	needed := make(map[matchKey]struct{}, len(recs)+len(cs)/64)
	for _, r := range recs {
		needed[keyOf(r.Item())] = struct{}{}
	}
	for _, c := range cs {
		if c.Verdict.Outcome == OutcomeOrphan {
			needed[keyOf(c.Item)] = struct{}{}
		}
	}
	out := make(map[string]namedCandidate, len(needed))
	for _, c := range cs {
		if _, ok := needed[keyOf(c.Item)]; !ok {
			continue
		}
		name, err := c.Item.Name()
		if err != nil {
			plan.Rejected = append(plan.Rejected, Rejected{Item: c.Item, Err: err})
			continue
		}
		prev, dup := out[name]
		if dup && prev.Verdict.Outcome != c.Verdict.Outcome {
			c.Verdict = Undecided("conflicting verdicts for one item: " + prev.Verdict.Outcome.String() + " and " + c.Verdict.Outcome.String())
		}
		out[name] = namedCandidate{Candidate: c, name: name}
	}
	return out
}

// matchKey is a cheap stand-in for a record name, built from the field that
// names the data (directory, instance, backup), trimmed at least as much as
// the name trims it: two observations of the same data share a key, so an
// item whose key is not needed is not the item of any record or orphan
// candidate. (Longhorn's dash-joined names can collide for different
// items, e.g. disk UUID "a-b" with data "c" and "a" with "b-c"; such
// collisions are not merged here, which only ever keeps two different
// directories apart.)
type matchKey struct {
	class   string // "replica", "instance", "backup"; engine and replica instances share a name formula
	primary string // the data, instance or backup name, trimmed
}

func keyOf(it Item) matchKey {
	switch it.Kind {
	case KindReplicaData:
		return matchKey{"replica", strings.TrimSpace(it.Param(ParamDataName))}
	case KindEngineInstance, KindReplicaInstance:
		return matchKey{"instance", strings.TrimSpace(it.Param(ParamInstanceName))}
	case KindBackup:
		return matchKey{"backup", strings.TrimSpace(it.Param(ParamBackupName))}
	}
	return matchKey{class: string(it.Kind)} // unknown kinds: all share a key, and fail naming
}

// resolveScope finds the status that applies to s; see Input.Scopes.
func resolveScope(scopes map[Scope]ScopeStatus, s Scope) (ScopeStatus, bool) {
	if st, ok := scopes[s]; ok {
		return normalise(st), true
	}
	if s.Disk == "" {
		return ScopeStatus{}, false
	}
	node, ok := scopes[Scope{NodeID: s.NodeID}]
	if !ok {
		return ScopeStatus{}, false
	}
	node = normalise(node)
	if node.Health == HealthReady {
		return ScopeStatus{Health: HealthDiskInvalid, Message: "disk " + s.Disk + " is no longer part of node " + s.NodeID}, true
	}
	return node, true
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

func (p *Plan) sort() {
	slices.SortFunc(p.Create, func(a, b Record) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(p.Forget, func(a, b Forget) int { return cmp.Compare(a.Record.Name, b.Record.Name) })
	slices.SortFunc(p.Purge, func(a, b Purge) int { return cmp.Compare(a.Record.Name, b.Record.Name) })
	slices.SortFunc(p.Keep, func(a, b Keep) int { return cmp.Compare(a.Record.Name, b.Record.Name) })
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Forget) == 0 && len(p.Purge) == 0
}
