package orphan

import (
	"context"
	"fmt"
	"time"
)

// JudgeAll judges every item in order. It stops at the first error, which
// means the judge is broken; a judge that cannot tell returns undecided
// verdicts instead.
func JudgeAll(ctx context.Context, j Judge, items []Item) ([]Candidate, error) {
	out := make([]Candidate, 0, len(items))
	for _, it := range items {
		v, err := j.Judge(ctx, it)
		if err != nil {
			return nil, fmt.Errorf("orphan: judging %s item on %s: %w", it.Kind, it.Scope(), err)
		}
		out = append(out, Candidate{Item: it, Verdict: v})
	}
	return out, nil
}

// MergeScopes combines scope statuses from several sources (an Inventory's
// snapshot, the host's view of node and disk eviction) into one map. For a
// scope present in several, the graver health wins: any health that
// forgets beats one that holds, which beats Unknown, which beats Ready;
// between two of one sort, the later source wins. The guard's evidence is
// kept from every source: NoneExpected if any source says so, the largest
// OwnedUnlisted, and so for each group in ScopeStatus.Groups. The inputs
// are not modified.
//
// MergeScopes cannot tell which items a status's own OwnedUnlisted and
// NoneExpected speak for: two Inventories reporting them for one scope
// (a node) vouch for each other's items. Combine moves each adapter's
// into ScopeStatus.Groups first; a host merging snapshots of several
// adapters itself does the same with AttributeEvidence.
func MergeScopes(sources ...map[Scope]ScopeStatus) map[Scope]ScopeStatus {
	out := map[Scope]ScopeStatus{}
	for _, src := range sources {
		for s, st := range src {
			st = normalise(st)
			cur, ok := out[s]
			if ok {
				st.NoneExpected = st.NoneExpected || cur.NoneExpected
				st.OwnedUnlisted = max(st.OwnedUnlisted, cur.OwnedUnlisted)
				if gravity(st.Health) < gravity(cur.Health) {
					st.Health, st.Message = cur.Health, cur.Message
				}
			}
			st.Groups = mergeGroups(cur.Groups, st.Groups)
			out[s] = st
		}
	}
	return out
}

// mergeGroups merges two scopes' evidence by group into a new map; nil
// when both are empty.
func mergeGroups(a, b map[Group]Evidence) map[Group]Evidence {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[Group]Evidence, len(a)+len(b))
	for g, e := range a {
		out[g] = e
	}
	for g, e := range b {
		out[g] = out[g].merge(e)
	}
	return out
}

// AttributeEvidence returns scopes with each status's own OwnedUnlisted
// and NoneExpected moved into its Groups, for each of kinds of each of
// engines (nil: every data engine), so that merged with another
// Inventory's scopes they speak only for the items of the adapter that
// reported them. Combine calls it on each adapter's snapshot. The input
// is not modified.
func AttributeEvidence(scopes map[Scope]ScopeStatus, kinds []Kind, engines []DataEngine) map[Scope]ScopeStatus {
	if engines == nil {
		engines = []DataEngine{""}
	}
	out := make(map[Scope]ScopeStatus, len(scopes))
	for s, st := range scopes {
		if st.OwnedUnlisted != 0 || st.NoneExpected {
			ev := Evidence{OwnedUnlisted: st.OwnedUnlisted, NoneExpected: st.NoneExpected}
			groups := mergeGroups(st.Groups, nil)
			if groups == nil {
				groups = map[Group]Evidence{}
			}
			for _, k := range kinds {
				for _, e := range engines {
					g := Group{Kind: k, DataEngine: e}
					groups[g] = groups[g].merge(ev)
				}
			}
			st.OwnedUnlisted, st.NoneExpected, st.Groups = 0, false, groups
		}
		out[s] = st
	}
	return out
}

func gravity(h Health) int {
	switch {
	case h == HealthReady:
		return 0
	case h.Forgets():
		return 3
	case h.Holds():
		return 2
	}
	return 1
}

// Cycle is one whole pass, for hosts that want caretaker's default loop:
// judge a snapshot, list the records, decide, and sync.
type Cycle struct {
	// Selector picks the records this cycle is responsible for, normally
	// Selector{NodeID: thisNode}.
	Selector Selector
	// Scopes are the host's own scope statuses, merged over the
	// snapshot's with MergeScopes. They must give the health of every
	// node the cycle covers (Ready, NodeUnavailable, NodeEvicted,
	// NodeDeleted) and each evicted disk. A disk is Ready only under a node listed here:
	// an adapter's node-level Ready (SPDK answered, the backupstore
	// listed) means only that its own scan of the node was complete, so
	// under Combine it must not vouch for another adapter's disks, and
	// says nothing about eviction, which only the host knows.
	Scopes map[Scope]ScopeStatus
	// Policy is the auto-deletion policy.
	Policy Policy
	// Guard is the mass-deletion guard; the zero value is on. Its Budget
	// rule counts automatic purges across Reconcile calls and Sweepers in the
	// Store's ledger (see LedgerStore).
	Guard Guard
	// Volumes, VolumesComplete and LastCopyOverride are the last-copy
	// guard's input (see VolumeState and Input): without them, no
	// automatic purge of replica data goes on.
	Volumes          map[string]VolumeState
	VolumesComplete  bool
	LastCopyOverride map[string]bool
	// LookupVolume, if set, gives a volume's state at the moment of a
	// purge: the state Volumes gave when the cycle started may be stale
	// by then (a volume faulted since loses its last copy). Right before
	// each purge the last-copy guard covers, Reconcile asks it for the record's
	// volume and judges the purge anew by the guard's rules (see
	// VolumeState) with that state, VolumesComplete and LastCopyOverride:
	// a purge they refuse does not happen and is in Result.Refused with
	// the guard's rule. known false means the host has no such volume
	// (deleted when VolumesComplete, else unknown). An error refuses the
	// purge. It is called from several goroutines at once (up to the
	// Sweeper's Concurrency) and must honour ctx. Nil: no re-check, the
	// states in Volumes decide.
	LookupVolume func(ctx context.Context, volume string) (state VolumeState, known bool, err error)
	// ObservedAt is when the snapshot's scan started (Observation.StartedAt),
	// by the Sweeper's clock. A snapshot taken before a purge still shows
	// the purged data; with ObservedAt set, Reconcile creates no record for data
	// this Sweeper purged after that time. Zero turns the check off.
	ObservedAt time.Time
}

// Reconcile judges snap's items with the Sweeper's Adapter, lists the records
// c.Selector picks from its Store, decides with the merged scopes and the
// ledger of automatic purges (its Store's if it is a LedgerStore, saved
// before anything is done; else the Sweeper's own), and syncs the plan, re-checking each purge's volume with
// c.LookupVolume when it is set. It returns the plan it carried out and the sync's
// result. A failure before the sync (judging, listing) changes nothing.
func (s *Sweeper) Reconcile(ctx context.Context, snap Snapshot, c Cycle) (Plan, Result, error) {
	cands, err := JudgeAll(ctx, s.adapter, snap.Items)
	if err != nil {
		return Plan{}, Result{}, err
	}
	return s.run(ctx, cands, snap.Scopes, c, false)
}

// run is Reconcile and ReconcileJudged after judging: scopes are the observation's.
func (s *Sweeper) run(ctx context.Context, cands []Candidate, scopes map[Scope]ScopeStatus, c Cycle, evidenceRequired bool) (Plan, Result, error) {
	recs, err := s.store.List(ctx, c.Selector)
	if err != nil {
		return Plan{}, Result{}, fmt.Errorf("orphan: listing records: %w", err)
	}
	plan, err := s.planWithLedger(ctx, func(ledger []AutoPurge, since time.Time) Plan {
		in := c.input(s.clock.Now(), cands, scopes, recs, ledger, evidenceRequired)
		in.AutoPurgesSince = since
		return Decide(in)
	})
	if err != nil {
		return Plan{}, Result{}, err
	}
	plan.Create = s.dropPurgedSince(c.ObservedAt, plan.Create)
	if s.maxCreates > 0 && len(plan.Create) > s.maxCreates {
		plan.Create = plan.Create[:s.maxCreates:s.maxCreates]
		if now := s.clock.Now(); plan.RequeueAt.IsZero() || now.Before(plan.RequeueAt) {
			plan.RequeueAt = now
		}
	}
	res, err := s.sync(ctx, plan, c.recheck())
	return plan, res, err
}

// input is the Input of a cycle over an observation's judged candidates
// and scopes.
func (c *Cycle) input(now time.Time, cands []Candidate, scopes map[Scope]ScopeStatus, recs []Record, ledger []AutoPurge, evidenceRequired bool) Input {
	return Input{
		Now:              now,
		Scopes:           hostNodeHealth(MergeScopes(scopes, c.Scopes), c.Scopes),
		Candidates:       cands,
		Records:          recs,
		Policy:           c.Policy,
		Guard:            c.Guard,
		AutoPurges:       ledger,
		Volumes:          c.Volumes,
		VolumesComplete:  c.VolumesComplete,
		LastCopyOverride: c.LastCopyOverride,
		EvidenceRequired: evidenceRequired,
	}
}

// recheck is the last-copy guard's re-check at the moment of each purge;
// nil without Cycle.LookupVolume.
func (c *Cycle) recheck() *volumeRecheck {
	if c.LookupVolume == nil {
		return nil
	}
	return &volumeRecheck{lookup: c.LookupVolume, guard: c.Guard, complete: c.VolumesComplete, override: c.LastCopyOverride}
}

// hostNodeHealth makes every Ready disk scope Unknown whose node the host
// did not list: see Cycle.Scopes.
func hostNodeHealth(merged, host map[Scope]ScopeStatus) map[Scope]ScopeStatus {
	for s, st := range merged {
		if _, listed := host[Scope{NodeID: s.NodeID}]; s.Disk == "" || listed || st.Health != HealthReady {
			continue
		}
		st.Health, st.Message = HealthUnknown, "the host gave no health for node "+s.NodeID+" (Cycle.Scopes): a disk is Ready only under a node the host lists"
		merged[s] = st
	}
	return merged
}
