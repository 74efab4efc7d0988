package orphan_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/caretaker-storage/caretaker/orphan"
)

// A host that judged its disk itself (Longhorn's disk monitor) passes its
// orphans with the guard's evidence. Without the evidence, the guard
// refuses every purge of the group; with it, the guard weighs the group
// as it weighs a scanned one.
func TestReconcileJudgedRefusesWithoutEvidence(t *testing.T) {
	ctx := context.Background()
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	group := orphan.Group{Kind: orphan.KindReplicaData, DataEngine: orphan.DataEngineV1}
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	name, _ := item.Name()
	judged := func(ev *orphan.Evidence) orphan.Judged {
		st := orphan.ScopeStatus{Health: orphan.HealthReady}
		if ev != nil {
			st.Groups = map[orphan.Group]orphan.Evidence{group: *ev}
		}
		return orphan.Judged{
			Candidates: []orphan.Candidate{{Item: item, Verdict: orphan.Orphan("no replica on the disk expects it")}},
			Scopes:     map[orphan.Scope]orphan.ScopeStatus{d1: st},
		}
	}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"),
		Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, VolumesComplete: true}

	for _, tc := range []struct {
		name     string
		evidence *orphan.Evidence
		rule     orphan.GuardRule // "": purged
	}{
		{"no evidence", nil, orphan.GuardNoEvidence},
		{"nothing was expected", &orphan.Evidence{OwnedUnlisted: 4, NoneExpected: true}, orphan.GuardNoneExpected},
		{"owned replicas beside it", &orphan.Evidence{OwnedUnlisted: 4}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSweepHarness() // its judge answers orphan for the re-judgement at the purge
			if _, res, err := h.sweeper.ReconcileJudged(ctx, judged(tc.evidence), cycle); err != nil || len(res.Created) != 1 {
				t.Fatalf("ReconcileJudged created %v, %v", res.Created, err)
			}
			r, _ := h.store.Get(ctx, name)
			guarded := meta.FindStatusCondition(r.Conditions, orphan.ConditionPurgeGuarded)
			if tc.rule != "" && (guarded == nil || guarded.Reason != string(tc.rule)) {
				t.Fatalf("new record's PurgeGuarded = %+v, want %s", guarded, tc.rule)
			}
			must(t, h.store.RequestDeletion(ctx, name))
			_, res, err := h.sweeper.ReconcileJudged(ctx, judged(tc.evidence), cycle)
			must(t, err)
			if tc.rule == "" {
				if len(res.Purged) != 1 {
					t.Fatalf("with evidence: %+v", res)
				}
				return
			}
			if len(res.Purged) != 0 || !refusedAs(res.Refused, name, string(tc.rule), "") {
				t.Fatalf("result %+v, want refused by %s", res, tc.rule)
			}

			// PurgeRecord, the finalizer's call, refuses alike.
			_, err = h.sweeper.PurgeRecord(ctx, name, cycle, orphan.PurgeRecordOptions{Judged: ptr(judged(tc.evidence))})
			var ref *orphan.Refusal
			if !errors.As(err, &ref) || ref.Rule != string(tc.rule) || len(h.deleter.Deleted()) != 0 {
				t.Fatalf("PurgeRecord = %v, want refused by %s", err, tc.rule)
			}
		})
	}
}

// Evidence stated for the kind of every data engine counts, and a
// whole disk judged orphaned is refused even with evidence stated.
func TestDecideEvidenceRequired(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	var cands []orphan.Candidate
	var recs []orphan.Record
	for _, data := range []string{"pvc-a-0123abcd", "pvc-b-0123abcd", "pvc-c-0123abcd"} {
		it := replicaItem("n1", "disk-1", data)
		cands = append(cands, orphan.Candidate{Item: it, Verdict: orphan.Orphan("o")})
		r := markCleanable(orphanRecord("n1", "disk-1", data))
		r.DeletionRequested = true
		recs = append(recs, r)
	}
	in := orphan.Input{Now: testEpoch, Candidates: cands, Records: recs, EvidenceRequired: true, AutoPurges: nil,
		Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy, "pvc-b": orphan.VolumeHealthy, "pvc-c": orphan.VolumeHealthy}}
	scopes := func(groups map[orphan.Group]orphan.Evidence) map[orphan.Scope]orphan.ScopeStatus {
		s := ready(d1)
		st := s[d1]
		st.Groups = groups
		s[d1] = st
		return s
	}
	in.Scopes = scopes(map[orphan.Group]orphan.Evidence{{Kind: orphan.KindReplicaData}: {OwnedUnlisted: 3}})
	if p := orphan.Decide(in); len(p.Purge) != 3 {
		t.Fatalf("evidence for the kind of every engine: %+v", p.Refused)
	}
	in.Scopes = scopes(map[orphan.Group]orphan.Evidence{{Kind: orphan.KindReplicaData}: {}})
	if p := orphan.Decide(in); len(p.Purge) != 0 || len(p.Refused) != 3 || p.Refused[0].Rule != string(orphan.GuardWholeScope) {
		t.Fatalf("a whole disk judged orphaned: %+v", p.Refused)
	}
	in.Scopes = scopes(map[orphan.Group]orphan.Evidence{{Kind: orphan.KindEngineInstance}: {OwnedUnlisted: 3}})
	if p := orphan.Decide(in); len(p.Purge) != 0 || len(p.Refused) != 3 || p.Refused[0].Rule != string(orphan.GuardNoEvidence) {
		t.Fatalf("evidence of another kind vouched: %+v", p.Refused)
	}
	// Without EvidenceRequired, a scanned inventory needs none.
	in.EvidenceRequired = false
	in.Scopes = ready(d1)
	if p := orphan.Decide(in); len(p.Refused) != 3 || p.Refused[0].Rule != string(orphan.GuardWholeScope) {
		t.Fatalf("a scan's plan: %+v", p.Refused)
	}
}
