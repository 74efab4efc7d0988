package orphan_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// lvolItem is a v2 replica's head lvol on node n1.
func lvolItem(i int) orphan.Item {
	return orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: "n1", DataEngine: orphan.DataEngineV2, Parameters: map[string]string{
		orphan.ParamInstanceName:    fmt.Sprintf("pvc-%d-r-0000000%d", i, i),
		orphan.ParamInstanceUUID:    fmt.Sprintf("uuid-%d", i),
		orphan.ParamInstanceManager: "im-v2",
	}}
}

// requestedRecords are the items' records, cleanable and requested.
func requestedRecords(t *testing.T, items []orphan.Item) []orphan.Record {
	t.Helper()
	var recs []orphan.Record
	for _, it := range items {
		r, err := orphan.NewRecord(it, testEpoch)
		if err != nil {
			t.Fatal(err)
		}
		r = markCleanable(r)
		r.DeletionRequested = true
		recs = append(recs, r)
	}
	return recs
}

// TestGuardCombinedAdaptersKeepTheirEvidenceApart is issue 21's first
// case: a node whose engine and replica records view is empty has 4
// replica lvols, all judged orphans; alone, the WholeScope rule refuses
// their purges. Combined with the failed-backup adapter, whose 10
// completed backups are owned and unlisted in the same node scope, the
// backups must not vouch for the lvols, in either order.
func TestGuardCombinedAdaptersKeepTheirEvidenceApart(t *testing.T) {
	ctx := context.Background()
	node := orphan.Scope{NodeID: "n1"}
	var lvols []orphan.Item
	for i := range 4 {
		lvols = append(lvols, lvolItem(i))
	}
	for _, order := range []string{"spdk first", "backups first"} {
		t.Run(order, func(t *testing.T) {
			spdk := &engineAdapter{kindAdapter: kindAdapter{kinds: []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance},
				snap: orphan.Snapshot{Items: lvols, Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady}}}},
				engines: []orphan.DataEngine{orphan.DataEngineV2}}
			backups := &kindAdapter{kinds: []orphan.Kind{orphan.KindBackup},
				snap: orphan.Snapshot{Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady, OwnedUnlisted: 10}}}}
			adapters := []orphan.Adapter{spdk, backups}
			if order == "backups first" {
				adapters = []orphan.Adapter{backups, spdk}
			}
			c, err := orphan.Combine(adapters...)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := c.Scan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cands, err := orphan.JudgeAll(ctx, c, snap.Items)
			if err != nil {
				t.Fatal(err)
			}
			p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: snap.Scopes, Candidates: cands, Records: requestedRecords(t, lvols)})
			if len(p.Purge) != 0 || len(p.Refused) != 4 {
				t.Fatalf("purges %d, refused %+v; want the 4 lvols refused", len(p.Purge), p.Refused)
			}
			for _, r := range p.Refused {
				if !strings.HasPrefix(r.Reason, string(orphan.GuardWholeScope)+":") {
					t.Fatalf("refusal %q, want WholeScope", r.Reason)
				}
			}
		})
	}
}

// TestGuardDataEnginesOfOneKindAreApart: a host's v1 instance adapter
// and spdk's v2 one share a node scope and the kinds; the v1 adapter's
// owned replica instances must not vouch for the v2 lvols.
func TestGuardDataEnginesOfOneKindAreApart(t *testing.T) {
	node := orphan.Scope{NodeID: "n1"}
	var cands []orphan.Candidate
	var lvols []orphan.Item
	for i := range 4 {
		lvols = append(lvols, lvolItem(i))
		cands = append(cands, orphan.Candidate{Item: lvolItem(i), Verdict: orphan.Orphan("no replica record")})
	}
	for i := range 10 {
		v1 := lvolItem(10 + i)
		v1.DataEngine = orphan.DataEngineV1
		cands = append(cands, orphan.Candidate{Item: v1, Verdict: orphan.Owned("its replica record")})
	}
	p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(node), Candidates: cands, Records: requestedRecords(t, lvols)})
	if len(p.Purge) != 0 || len(p.Refused) != 4 {
		t.Fatalf("purges %d, refused %+v; want the 4 v2 lvols refused", len(p.Purge), p.Refused)
	}
}

// TestGuardGroupEvidence: evidence given for one group of a node (SPDK's
// empty replica records) stops that group's purges, even of one orphan,
// and leaves the node's backups alone; evidence for a kind with no data
// engine speaks for every engine of the kind.
func TestGuardGroupEvidence(t *testing.T) {
	node := orphan.Scope{NodeID: "n1"}
	backup := orphan.Item{Kind: orphan.KindBackup, NodeID: "n1", Parameters: map[string]string{
		orphan.ParamBackupTarget: "default", orphan.ParamBackupVolume: "v", orphan.ParamBackupName: "backup-0123456789abcdef"}}
	items := []orphan.Item{lvolItem(0), backup}
	recs := requestedRecords(t, items)
	lvolName, backupName := recs[0].Name, recs[1].Name
	cands := []orphan.Candidate{{Item: items[0], Verdict: orphan.Orphan("x")}, {Item: items[1], Verdict: orphan.Orphan("x")},
		{Item: lvolItem(1), Verdict: orphan.Owned("y")}}
	for _, key := range []orphan.Group{{Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV2}, {Kind: orphan.KindReplicaInstance}} {
		st := orphan.ScopeStatus{Health: orphan.HealthReady, Groups: map[orphan.Group]orphan.Evidence{key: {NoneExpected: true}}}
		p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: map[orphan.Scope]orphan.ScopeStatus{node: st}, Candidates: cands, Records: recs})
		if got := actions(p); got[lvolName] != "keep" || got[backupName] != "purge" {
			t.Fatalf("evidence for %v: actions %v; want the lvol kept and the backup purged", key, got)
		}
		if len(p.Refused) != 1 || !strings.HasPrefix(p.Refused[0].Reason, string(orphan.GuardNoneExpected)) {
			t.Fatalf("evidence for %v: refused %+v, want the lvol's NoneExpected", key, p.Refused)
		}
	}
}

// TestAttributeEvidence: an adapter's own evidence moves into the groups
// of its kinds and engines, and MergeScopes keeps groups apart.
func TestAttributeEvidence(t *testing.T) {
	node := orphan.Scope{NodeID: "n1"}
	in := map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady, OwnedUnlisted: 3, NoneExpected: true}}
	got := orphan.AttributeEvidence(in, []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}, []orphan.DataEngine{orphan.DataEngineV2})
	st := got[node]
	want := orphan.Evidence{OwnedUnlisted: 3, NoneExpected: true}
	if st.OwnedUnlisted != 0 || st.NoneExpected || len(st.Groups) != 2 ||
		st.Groups[orphan.Group{Kind: orphan.KindEngineInstance, DataEngine: orphan.DataEngineV2}] != want ||
		st.Groups[orphan.Group{Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV2}] != want {
		t.Fatalf("attributed = %+v", st)
	}
	if in[node].OwnedUnlisted != 3 || in[node].Groups != nil {
		t.Fatalf("the input was modified: %+v", in[node])
	}
	backups := orphan.AttributeEvidence(map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady, OwnedUnlisted: 10}},
		[]orphan.Kind{orphan.KindBackup}, nil)
	merged := orphan.MergeScopes(got, backups)[node]
	if len(merged.Groups) != 3 || merged.Groups[orphan.Group{Kind: orphan.KindBackup}].OwnedUnlisted != 10 ||
		merged.Groups[orphan.Group{Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV2}].OwnedUnlisted != 3 {
		t.Fatalf("merged = %+v", merged)
	}
}
