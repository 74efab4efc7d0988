package orphan_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// nodeOfDisks is a Ready node n1 with disks disk-0.. of perDisk replica
// directories each, of which the first orphansPerDisk[d] of disk d are
// judged orphans and carry cleanable records due for automatic purging.
func nodeOfDisks(perDisk int, orphansPerDisk []int) orphan.Input {
	in := orphan.Input{Now: testEpoch.Add(24 * time.Hour), Scopes: ready(),
		Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}}}
	for d, orphans := range orphansPerDisk {
		disk := fmt.Sprintf("disk-%d", d)
		in.Scopes[orphan.Scope{NodeID: "n1", Disk: disk}] = orphan.ScopeStatus{Health: orphan.HealthReady}
		for i := range perDisk {
			data := fmt.Sprintf("pvc-%d-%d-0123abcd", d, i)
			v := orphan.Owned("expected")
			if i < orphans {
				v = orphan.Orphan("not expected")
				in.Records = append(in.Records, markCleanable(orphanRecord("n1", disk, data)))
			}
			in.Candidates = append(in.Candidates, orphan.Candidate{Item: notRecoverable(replicaItem("n1", disk, data)), Verdict: v})
		}
	}
	in.Scopes[orphan.Scope{NodeID: "n1"}] = orphan.ScopeStatus{Health: orphan.HealthReady}
	return in
}

// TestGuardWeighsTheNodeAcrossDisks is issue 32's fourth point: a node of
// four disks with three replicas each, whose view lost 8 of the 12 (2 per
// disk). Each disk alone is under MinItems for WholeScope and within its
// share (2 of 3, allowance 2); the node as a whole has 8 of 12 due, more
// than half: every automatic purge is refused, naming the node level.
func TestGuardWeighsTheNodeAcrossDisks(t *testing.T) {
	in := nodeOfDisks(3, []int{2, 2, 2, 2})
	p := orphan.Decide(in)
	if len(p.Purge) != 0 || len(p.Refused) != 8 {
		t.Fatalf("purged %d, refused %d; want none purged and the 8 refused", len(p.Purge), len(p.Refused))
	}
	for _, r := range p.Refused {
		if !strings.HasPrefix(r.Reason, string(orphan.GuardAutoShare)+":") || !strings.Contains(r.Reason, "node n1 (all disks)") {
			t.Fatalf("refusal %q: want AutoShare at the node level", r.Reason)
		}
	}
	// The next cycles refuse them the same way: the share is weighed each
	// cycle, so the loss never trickles through either.
	for cycle := range 3 {
		in.Now = in.Now.Add(time.Hour)
		in.AutoPurges = p.AutoPurges
		if p = orphan.Decide(in); len(p.Purge) != 0 {
			t.Fatalf("cycle %d: purged %d", cycle, len(p.Purge))
		}
	}
	// A person's request is not held.
	for i := range in.Records {
		in.Records[i].DeletionRequested = true
	}
	if p := orphan.Decide(in); len(p.Purge) != 8 {
		t.Fatalf("requested: purged %d, refused %v; want the 8 purged", len(p.Purge), p.Refused)
	}
}

// TestGuardNodeWholeScopeAcrossDisks: every valid item of a node's disks
// is an orphan, one per disk, so no disk alone reaches MinItems; the node
// level's WholeScope refuses even the requested purges, as it does for
// one disk.
func TestGuardNodeWholeScopeAcrossDisks(t *testing.T) {
	in := nodeOfDisks(1, []int{1, 1, 1, 1})
	for i := range in.Records {
		in.Records[i].DeletionRequested = true
	}
	p := orphan.Decide(in)
	if len(p.Purge) != 0 || len(p.Refused) != 4 {
		t.Fatalf("purged %d, refused %v; want the 4 refused", len(p.Purge), p.Refused)
	}
	for _, r := range p.Refused {
		if !strings.HasPrefix(r.Reason, string(orphan.GuardWholeScope)+":") || !strings.Contains(r.Reason, "node n1 (all disks)") {
			t.Fatalf("refusal %q: want WholeScope at the node level", r.Reason)
		}
	}
}

// TestGuardNodeLevelStillCleansAHealthyNode is what the node level still
// allows: with the defaults, a node of N valid replica directories may
// lose max(2, ⌊N/2⌋) of them automatically per cycle and per hour, and
// each of its disks of n max(2, ⌊n/2⌋). Four disks of ten with two real
// orphans each (8 of 40) are all purged in the first cycle, and 12 more
// within the hour fill both levels' budgets exactly (5 per disk, 20 for
// the node).
func TestGuardNodeLevelStillCleansAHealthyNode(t *testing.T) {
	in := nodeOfDisks(10, []int{2, 2, 2, 2})
	p := orphan.Decide(in)
	if len(p.Purge) != 8 || len(p.Refused) != 0 {
		t.Fatalf("purged %d, refused %v; want all 8 purged", len(p.Purge), p.Refused)
	}
	// A few orphans on several disks of a small node go too: 3 of 12.
	small := nodeOfDisks(3, []int{1, 1, 1, 0})
	if p := orphan.Decide(small); len(p.Purge) != 3 || len(p.Refused) != 0 {
		t.Fatalf("small node: purged %d, refused %v; want all 3 purged", len(p.Purge), p.Refused)
	}
	// Ten minutes later 3 more per disk are orphans: 5 per disk and 20
	// for the node within the hour, each level's allowance exactly.
	next := nodeOfDisks(10, []int{5, 5, 5, 5})
	next.Now = in.Now.Add(10 * time.Minute)
	next.AutoPurges = p.AutoPurges
	var recs []orphan.Record
	for _, r := range next.Records {
		if !purgedIn(p, r.Name) {
			recs = append(recs, r)
		}
	}
	next.Records = recs
	p2 := orphan.Decide(next)
	if len(p2.Purge) != 12 || len(p2.AutoPurges) != 20 {
		t.Fatalf("second cycle: purged %d, ledger %d, refused %v; want 12 purged, 20 in the ledger", len(p2.Purge), len(p2.AutoPurges), p2.Refused)
	}
}

func purgedIn(p orphan.Plan, name string) bool {
	for _, pu := range p.Purge {
		if pu.Record.Name == name {
			return true
		}
	}
	return false
}

// TestGuardNodeBudgetAcrossDisks: the node level's budget counts the
// automatic purges of every disk. Eight disks of 4 replicas with a share
// of a quarter: each disk may lose 2 an hour, the node (32) 8. A first
// cycle purges one orphan per disk; ten minutes later each disk has one
// more, within each disk's budget (1 of 2 spent) but over the node's (8
// of 8 spent): all are refused, naming the node level.
func TestGuardNodeBudgetAcrossDisks(t *testing.T) {
	g := orphan.Guard{MaxAutoShare: 0.25} // node: 32 valid → 8 an hour; each disk: 4 valid → 2
	in := nodeOfDisks(4, []int{1, 1, 1, 1, 1, 1, 1, 1})
	in.Guard = g
	p := orphan.Decide(in)
	if len(p.Purge) != 8 {
		t.Fatalf("first cycle: purged %d, refused %v; want 8", len(p.Purge), p.Refused)
	}
	// The same disks, each with another orphan: every disk alone has
	// spent 1 of its 2, the node 8 of its 8.
	next := nodeOfDisks(4, []int{2, 2, 2, 2, 2, 2, 2, 2})
	next.Guard, next.Now, next.AutoPurges = g, in.Now.Add(10*time.Minute), p.AutoPurges
	var recs []orphan.Record
	for _, r := range next.Records {
		if !purgedIn(p, r.Name) {
			recs = append(recs, r)
		}
	}
	next.Records = recs
	p2 := orphan.Decide(next)
	if len(p2.Purge) != 0 || len(p2.Refused) != 8 {
		t.Fatalf("second cycle: purged %d, refused %d; want the 8 refused by the node's budget", len(p2.Purge), len(p2.Refused))
	}
	for _, r := range p2.Refused {
		if !strings.HasPrefix(r.Reason, string(orphan.GuardBudget)+":") || !strings.Contains(r.Reason, "node n1 (all disks)") {
			t.Fatalf("refusal %q: want Budget at the node level", r.Reason)
		}
	}
}
