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
// between two of one sort, the later source wins. The guard's evidence is kept from every source:
// NoneExpected if any source says so, the largest OwnedUnlisted. The
// inputs are not modified.
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
			out[s] = st
		}
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
	// NodeDeleted) and each evicted disk. A disk is Ready to Run only under a node listed here:
	// an adapter's node-level Ready (SPDK answered, the backupstore
	// listed) means only that its own scan of the node was complete, so
	// under Combine it must not vouch for another adapter's disks, and
	// says nothing about eviction, which only the host knows.
	Scopes map[Scope]ScopeStatus
	// Policy is the auto-deletion policy.
	Policy Policy
	// Guard is the mass-deletion guard; the zero value is on.
	Guard Guard
	// ObservedAt is when the snapshot's scan started (Observation.StartedAt),
	// by the Sweeper's clock. A snapshot taken before a purge still shows
	// the purged data; with ObservedAt set, Run creates no record for data
	// this Sweeper purged after that time. Zero turns the check off.
	ObservedAt time.Time
}

// Run judges snap's items with the Sweeper's Adapter, lists the records
// c.Selector picks from its Store, decides with the merged scopes, and
// syncs the plan. It returns the plan it carried out and the sync's
// result. A failure before the sync (judging, listing) changes nothing.
func (s *Sweeper) Run(ctx context.Context, snap Snapshot, c Cycle) (Plan, Result, error) {
	cands, err := JudgeAll(ctx, s.adapter, snap.Items)
	if err != nil {
		return Plan{}, Result{}, err
	}
	recs, err := s.store.List(ctx, c.Selector)
	if err != nil {
		return Plan{}, Result{}, fmt.Errorf("orphan: listing records: %w", err)
	}
	plan := Decide(Input{
		Now:        s.clock.Now(),
		Scopes:     hostNodeHealth(MergeScopes(snap.Scopes, c.Scopes), c.Scopes),
		Candidates: cands,
		Records:    recs,
		Policy:     c.Policy,
		Guard:      c.Guard,
	})
	plan.Create = s.dropPurgedSince(c.ObservedAt, plan.Create)
	res, err := s.Sync(ctx, plan)
	return plan, res, err
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
