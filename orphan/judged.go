package orphan

import (
	"context"
	"fmt"
)

// GuardNoEvidence is the guard's rule for a host's own judgement (Judged,
// Input.EvidenceRequired) that does not state the guard's evidence for a
// group of a scope: no purge goes on in that group, requested or
// automatic.
const GuardNoEvidence GuardRule = "NoEvidence"

// Judged is an observation a host has judged itself, for a host whose
// own code already decides what is orphaned: Longhorn's disk monitor
// lists each disk's replica directories and the node controller takes
// those no replica on the disk expects as orphans
// (longhorn-manager controller/node_controller.go, the orphaned replica
// data of monitor/disk_monitor.go). Such a host passes those decisions
// as they are, with the evidence the mass-deletion guard needs, instead
// of inventing a Judge that repeats them.
//
// What the guard then sees is only what the host states:
//
//   - Candidates: the items the host judged, with its verdicts (an
//     orphan candidate per orphaned directory; owned items need not be
//     listed).
//   - Scopes: each scope's health, as in a Snapshot, and for every group
//     (kind and data engine) of every scope holding a candidate, an
//     entry in ScopeStatus.Groups: OwnedUnlisted, the owned valid items
//     the host did not list (for Longhorn, the replica directories of
//     the disk that a replica expects), and NoneExpected, whether the
//     host's list of what may own them was empty. A group without an
//     entry is refused every purge (GuardNoEvidence): a list of orphans
//     alone cannot tell a disk with one leftover from a disk whose whole
//     expected list was lost. An entry of its kind for every data
//     engine (an empty DataEngine in the key) counts too.
//
// With that, NoneExpected, WholeScope, AutoShare and Budget weigh the
// group as they weigh a scanned one. The guard cannot see what the host
// did not count: directories its monitor skipped (an unreadable meta, a
// bad name) are neither owned nor orphaned to it, and a count that is
// stale or wrong is believed. At the moment of each purge the Sweeper
// still re-judges the record's item with its Adapter's Judge, and the
// Deleter re-checks the data itself: a host that passes Judged still
// needs an Adapter whose Judge answers for one item from the cluster's
// state now (is a replica of that directory's name expected on that
// disk?), never one that echoes the host's earlier verdicts.
type Judged struct {
	// Candidates are the items with the host's verdicts.
	Candidates []Candidate
	// Scopes are the scopes the host's judgement covers, with their
	// health and, per group, the guard's evidence.
	Scopes map[Scope]ScopeStatus
}

// evidenceHit is the guard's hit of group k when evidence is required:
// GuardNoEvidence when the scope states none for the group, else h.
func evidenceHit(scopes map[Scope]ScopeStatus, k guardKey, h guardHit) guardHit {
	st := scopes[k.scope]
	if _, ok := st.Groups[k.group]; ok {
		return h
	}
	if _, ok := st.Groups[Group{Kind: k.group.Kind}]; ok && k.group.DataEngine != "" {
		return h
	}
	return guardHit{GuardNoEvidence, fmt.Sprintf(
		"the host judged %s itself and stated no evidence for it (its owned items and whether any was expected): without it a list of orphans cannot be told from a broken view", k)}
}

// ReconcileJudged is Reconcile for a host that judged its items itself (see
// Judged): it lists the records c.Selector picks, decides with
// Input.EvidenceRequired set, and syncs the plan, each purge re-judged
// with the Sweeper's Adapter and re-checked by its Deleter exactly as
// Reconcile's are. j's scopes stand where a Snapshot's would, under the host's
// c.Scopes.
func (s *Sweeper) ReconcileJudged(ctx context.Context, j Judged, c Cycle) (Plan, Result, error) {
	return s.run(ctx, j.Candidates, j.Scopes, c, true)
}
