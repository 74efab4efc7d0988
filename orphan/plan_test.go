package orphan_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

var testEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func orphanRecord(node, disk, dataName string) orphan.Record {
	r, err := orphan.NewRecord(replicaItem(node, disk, dataName), testEpoch)
	if err != nil {
		panic(err)
	}
	return r
}

// ready lists the scopes as Ready, and the node of each disk scope too: a
// disk is Ready only under a Ready node.
func ready(scopes ...orphan.Scope) map[orphan.Scope]orphan.ScopeStatus {
	m := map[orphan.Scope]orphan.ScopeStatus{}
	for _, s := range scopes {
		m[s] = orphan.ScopeStatus{Health: orphan.HealthReady}
		m[orphan.Scope{NodeID: s.NodeID}] = orphan.ScopeStatus{Health: orphan.HealthReady}
	}
	return m
}

// hostReady is a host's Cycle.Scopes saying its node is Ready.
func hostReady(node string) map[orphan.Scope]orphan.ScopeStatus {
	return map[orphan.Scope]orphan.ScopeStatus{{NodeID: node}: {Health: orphan.HealthReady}}
}

// markCleanable returns r marked DataCleanable=True, as a cycle in a Ready
// scope marks it.
func markCleanable(r orphan.Record) orphan.Record {
	r = r.Clone()
	r.Conditions = append(r.Conditions, metav1.Condition{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable})
	return r
}

// actions flattens a plan to name → action, the shape the table compares.
func actions(p orphan.Plan) map[string]string {
	out := map[string]string{}
	for _, r := range p.Create {
		out[r.Name] = "create"
	}
	for _, f := range p.Forget {
		out[f.Record.Name] = "forget:" + string(f.Reason)
	}
	for _, pu := range p.Purge {
		if pu.Auto {
			out[pu.Record.Name] = "purge:auto"
		} else {
			out[pu.Record.Name] = "purge"
		}
	}
	for _, k := range p.Keep {
		out[k.Record.Name] = "keep"
	}
	return out
}

func TestDecideTable(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	n1 := orphan.Scope{NodeID: "n1"}
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	rec := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-0123abcd"))
	requested := rec.Clone()
	requested.DeletionRequested = true
	unmarked := requested.Clone()
	unmarked.Conditions = nil
	unmarkedAuto := unmarked.Clone()
	unmarkedAuto.DeletionRequested = false
	notCleanable := requested.Clone()
	notCleanable.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: "DiskEvicted"}}
	cleanable := requested.Clone()
	cleanable.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: "Cleanable"}}
	autoNotCleanable := notCleanable.Clone()
	autoNotCleanable.DeletionRequested = false
	name := rec.Name
	autoNow := orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}, GracePeriod: time.Minute}
	later := testEpoch.Add(time.Hour)

	cases := []struct {
		name     string
		scopes   map[orphan.Scope]orphan.ScopeStatus
		verdict  *orphan.Verdict // nil: the item was not seen
		record   *orphan.Record  // nil: no record
		policy   orphan.Policy
		now      time.Time
		want     string // "" means the item is not in the plan at all
		requeue  time.Time
		rejected int
	}{
		{name: "orphan without record is created", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), want: "create"},
		{name: "owned without record is ignored", scopes: ready(d1), verdict: ptr(orphan.Owned("x"))},
		{name: "undecided without record is ignored", scopes: ready(d1), verdict: ptr(orphan.Undecided("x"))},
		{name: "zero verdict is undecided", scopes: ready(d1), verdict: &orphan.Verdict{}},
		{name: "orphan in unknown scope is not created", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthUnknown}}, verdict: ptr(orphan.Orphan("x"))},
		{name: "orphan in a scope nobody listed is not created", scopes: ready(orphan.Scope{NodeID: "n2"}), verdict: ptr(orphan.Orphan("x"))},
		{name: "orphan with record is kept", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &rec, want: "keep"},
		{name: "requested orphan is purged", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &requested, want: "purge"},
		{name: "requested but not cleanable is forgotten", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &notCleanable, want: "forget:NotCleanable"},
		{name: "requested and marked cleanable is purged", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &cleanable, want: "purge"},
		{name: "requested but never marked cleanable waits a cycle", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &unmarked, want: "keep", requeue: later},
		{name: "auto-deletion due but never marked cleanable waits a cycle", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &unmarkedAuto, policy: autoNow, now: later, want: "keep", requeue: later},
		{name: "disk ready under a node nobody listed is unknown", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthReady}}, verdict: ptr(orphan.Orphan("x")), record: &requested, want: "keep"},
		{name: "orphan on a disk under a node nobody listed is not created", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthReady}}, verdict: ptr(orphan.Orphan("x"))},
		{name: "auto-deletion of a not cleanable record forgets", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &autoNotCleanable, policy: autoNow, now: later, want: "forget:NotCleanable"},
		{name: "not cleanable without a request is kept", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &autoNotCleanable, want: "keep"},
		{name: "requested but undecided is kept", scopes: ready(d1), verdict: ptr(orphan.Undecided("x")), record: &requested, want: "keep"},
		{name: "requested but owned is forgotten", scopes: ready(d1), verdict: ptr(orphan.Owned("x")), record: &requested, want: "forget:Owned"},
		{name: "requested but gone is forgotten", scopes: ready(d1), record: &requested, want: "forget:Gone"},
		{name: "record in unknown scope is kept, not purged", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthUnknown}}, verdict: ptr(orphan.Orphan("x")), record: &requested, want: "keep"},
		{name: "requested, not cleanable, in an unknown scope is forgotten", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthReady}, d1: {Health: orphan.HealthUnknown}}, verdict: ptr(orphan.Orphan("x")), record: &notCleanable, want: "forget:NotCleanable"},
		{name: "empty health counts as unknown", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {}}, verdict: ptr(orphan.Orphan("x")), record: &requested, want: "keep"},
		{name: "disk evicted forgets even if requested", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthDiskEvicted}}, verdict: ptr(orphan.Orphan("x")), record: &requested, want: "forget:DiskEvicted"},
		{name: "disk changed forgets", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthDiskChanged}}, record: &rec, want: "forget:DiskChanged"},
		{name: "disk invalid keeps", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthReady}, d1: {Health: orphan.HealthDiskInvalid}}, record: &rec, want: "keep"},
		{name: "disk invalid under an unlisted node keeps", scopes: map[orphan.Scope]orphan.ScopeStatus{d1: {Health: orphan.HealthDiskInvalid}}, record: &rec, want: "keep"},
		{name: "node down keeps its disks' records", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthNodeUnavailable}}, verdict: ptr(orphan.Orphan("x")), record: &rec, want: "keep"},
		{name: "node down keeps records due for auto-deletion", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthNodeUnavailable}}, verdict: ptr(orphan.Orphan("x")), record: &rec, policy: autoNow, now: later, want: "keep"},
		{name: "node down forgets a requested record, keeping its data", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthNodeUnavailable}}, verdict: ptr(orphan.Orphan("x")), record: &requested, want: "forget:NodeUnavailable"},
		{name: "node evicted forgets", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthNodeEvicted}}, record: &rec, want: "forget:NodeEvicted"},
		{name: "node deleted forgets", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthNodeDeleted}}, record: &rec, want: "forget:NodeDeleted"},
		{name: "disk evicted under a down node forgets", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthNodeUnavailable}, d1: {Health: orphan.HealthDiskEvicted}}, record: &rec, want: "forget:DiskEvicted"},
		{name: "disk gone from a ready node forgets", scopes: ready(n1), verdict: ptr(orphan.Orphan("x")), record: &requested, want: "forget:DiskRemoved"},
		{name: "disk missing on an unknown node keeps", scopes: map[orphan.Scope]orphan.ScopeStatus{n1: {Health: orphan.HealthUnknown}}, record: &requested, want: "keep"},
		{name: "another node's record is left alone", scopes: ready(orphan.Scope{NodeID: "n2", Disk: "disk-1"}), record: &requested},
		{name: "auto-deletion before grace is kept with requeue", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &rec, policy: autoNow, now: testEpoch.Add(30 * time.Second), want: "keep", requeue: testEpoch.Add(time.Minute)},
		{name: "auto-deletion at grace end purges", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &rec, policy: autoNow, now: testEpoch.Add(time.Minute), want: "purge:auto"},
		{name: "auto-deletion of another kind keeps", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &rec, policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindBackup}}, now: later, want: "keep"},
		{name: "manual deletion ignores the grace period", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), record: &requested, policy: autoNow, now: testEpoch, want: "purge"},
		{name: "created under auto-deletion requeues at grace end", scopes: ready(d1), verdict: ptr(orphan.Orphan("x")), policy: autoNow, now: later, want: "create", requeue: later.Add(time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = later
			}
			in := orphan.Input{Now: now, Scopes: tc.scopes, Policy: tc.policy, VolumesComplete: true}
			if tc.verdict != nil {
				in.Candidates = []orphan.Candidate{{Item: item, Verdict: *tc.verdict}}
			}
			if tc.record != nil {
				in.Records = []orphan.Record{*tc.record}
			}
			p := orphan.Decide(in)
			got := actions(p)[name]
			if got != tc.want {
				t.Fatalf("action = %q, want %q (plan %+v)", got, tc.want, p)
			}
			if !p.RequeueAt.Equal(tc.requeue) {
				t.Fatalf("RequeueAt = %v, want %v", p.RequeueAt, tc.requeue)
			}
			if tc.want == "create" && !p.Create[0].CreatedAt.Equal(now) {
				t.Fatalf("created record's CreatedAt = %v, want %v", p.Create[0].CreatedAt, now)
			}
		})
	}
}

func TestDecideMismatchedRecordIsForgottenNotPurged(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	forged := orphanRecord("n1", "disk-1", "pvc-b-0123abcd") // parameters of another directory...
	forged.Name, _ = item.Name()                             // ...under the name of this one
	forged.DeletionRequested = true
	p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(d1),
		Candidates: []orphan.Candidate{{Item: item, Verdict: orphan.Orphan("x")}},
		Records:    []orphan.Record{forged}})
	if got := actions(p)[forged.Name]; got != "forget:Mismatch" {
		t.Fatalf("action = %q, want forget:Mismatch", got)
	}
}

func TestDecideConflictingDuplicatesAreUndecided(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	item := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	rec := orphanRecord("n1", "disk-1", "pvc-a-0123abcd")
	rec.DeletionRequested = true
	for _, order := range [][]orphan.Verdict{{orphan.Orphan("a"), orphan.Owned("b")}, {orphan.Owned("b"), orphan.Orphan("a")}} {
		p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(d1), Records: []orphan.Record{rec},
			Candidates: []orphan.Candidate{{Item: item, Verdict: order[0]}, {Item: item, Verdict: order[1]}}})
		if got := actions(p)[rec.Name]; got != "keep" {
			t.Fatalf("verdicts %v: action = %q, want keep", order, got)
		}
	}
}

func TestDecideRejectsUnnamableCandidates(t *testing.T) {
	bad := replicaItem("n1", "disk-1", "")
	p := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: ready(orphan.Scope{NodeID: "n1", Disk: "disk-1"}),
		Candidates: []orphan.Candidate{{Item: bad, Verdict: orphan.Orphan("x")}}})
	if len(p.Rejected) != 1 || len(p.Create) != 0 {
		t.Fatalf("plan = %+v, want one rejected candidate and nothing created", p)
	}
}

func TestDecideDoesNotModifyInput(t *testing.T) {
	in := randomInput(rand.New(rand.NewPCG(1, 2)))
	before := fmt.Sprintf("%+v", in)
	orphan.Decide(in)
	if after := fmt.Sprintf("%+v", in); after != before {
		t.Fatalf("Decide modified its input")
	}
}

var healths = []orphan.Health{"", orphan.HealthReady, orphan.HealthReady, orphan.HealthReady, orphan.HealthUnknown,
	orphan.HealthNodeUnavailable, orphan.HealthNodeEvicted, orphan.HealthDiskInvalid, orphan.HealthDiskChanged, orphan.HealthDiskEvicted,
	orphan.HealthNodeDeleted, orphan.HealthDiskRemoved}

func randomItem(rng *rand.Rand) orphan.Item {
	node := fmt.Sprintf("n%d", rng.IntN(3))
	if rng.IntN(10) == 0 {
		return orphan.Item{Kind: orphan.KindBackup, NodeID: node, Parameters: map[string]string{
			orphan.ParamBackupTarget: "t", orphan.ParamBackupVolume: fmt.Sprintf("pvc-%d", rng.IntN(2)),
			orphan.ParamBackupName: fmt.Sprintf("backup-%d", rng.IntN(3)),
		}}
	}
	if rng.IntN(4) == 0 {
		kind := orphan.KindEngineInstance
		if rng.IntN(2) == 0 {
			kind = orphan.KindReplicaInstance
		}
		return orphan.Item{Kind: kind, NodeID: node, DataEngine: orphan.DataEngineV2, Parameters: map[string]string{
			orphan.ParamInstanceName:    fmt.Sprintf("inst-%d", rng.IntN(3)),
			orphan.ParamInstanceUUID:    fmt.Sprintf("uuid-%d", rng.IntN(2)),
			orphan.ParamInstanceManager: "im-" + node,
		}}
	}
	dataName := fmt.Sprintf("pvc-%d-0000000%d", rng.IntN(3), rng.IntN(2))
	if rng.IntN(40) == 0 {
		dataName = "" // unnamable
	}
	return replicaItem(node, fmt.Sprintf("disk-%d", rng.IntN(2)), dataName)
}

func randomInput(rng *rand.Rand) orphan.Input {
	in := orphan.Input{Now: testEpoch.Add(time.Duration(rng.IntN(600)) * time.Second), Scopes: map[orphan.Scope]orphan.ScopeStatus{}}
	for n := range 3 {
		if rng.IntN(3) == 0 {
			in.Scopes[orphan.Scope{NodeID: fmt.Sprintf("n%d", n)}] = orphan.ScopeStatus{Health: healths[rng.IntN(len(healths))]}
		}
		for d := range 2 {
			if rng.IntN(3) != 0 {
				st := orphan.ScopeStatus{Health: healths[rng.IntN(len(healths))]}
				if rng.IntN(6) == 0 {
					st.NoneExpected = true
				}
				if rng.IntN(3) == 0 {
					st.OwnedUnlisted = rng.IntN(5) - 1 // now and then a count gone negative
				}
				in.Scopes[orphan.Scope{NodeID: fmt.Sprintf("n%d", n), Disk: fmt.Sprintf("disk-%d", d)}] = st
			}
		}
	}
	switch rng.IntN(5) {
	case 0:
		in.Guard = orphan.Guard{AllowNoneExpected: rng.IntN(2) == 0, AllowWholeScope: rng.IntN(2) == 0, AllowAnyShare: rng.IntN(2) == 0}
	case 1:
		in.Guard = orphan.Guard{MinItems: 1 + rng.IntN(3), MaxAutoShare: []float64{0, 0.3, 0.5, 0.9, 1.5, -1}[rng.IntN(6)]}
	}
	verdicts := []orphan.Verdict{orphan.Orphan("o"), orphan.Orphan("o"), orphan.Owned("w"), orphan.Undecided("u"), {}}
	for range rng.IntN(20) {
		in.Candidates = append(in.Candidates, orphan.Candidate{Item: randomItem(rng), Verdict: verdicts[rng.IntN(len(verdicts))]})
	}
	seenRec := map[string]bool{}
	for range rng.IntN(10) {
		it := randomItem(rng)
		r, err := orphan.NewRecord(it, testEpoch.Add(time.Duration(rng.IntN(300))*time.Second))
		// Now and then a name held twice (two lists merged), a record
		// of no creation time, or one of Longhorn's kinds caretaker
		// leaves to its owner.
		if err != nil || seenRec[r.Name] && rng.IntN(4) != 0 {
			continue
		}
		seenRec[r.Name] = true
		if rng.IntN(20) == 0 {
			r.CreatedAt = time.Time{}
		}
		if rng.IntN(30) == 0 {
			r.Kind = orphan.KindShardInstance
		}
		r.DeletionRequested = rng.IntN(3) == 0
		r.Dismissed = rng.IntN(8) == 0
		switch rng.IntN(4) {
		case 0:
			reason := []string{"DiskEvicted", "NodeUnavailable", "DiskInvalid", "Dismissed"}[rng.IntN(4)]
			r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: reason}}
		case 1, 2:
			r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: "Cleanable"}}
		}
		if rng.IntN(5) == 0 {
			r.Conditions = append(r.Conditions, metav1.Condition{Type: orphan.ConditionError, Status: metav1.ConditionTrue, Reason: "PurgeRefused"})
		}
		if rng.IntN(6) == 0 {
			r.Conditions = append(r.Conditions, metav1.Condition{Type: orphan.ConditionPurgeGuarded, Status: metav1.ConditionTrue, Reason: "WholeScope", Message: "stale"})
		}
		if rng.IntN(15) == 0 {
			r.Parameters[orphan.ParamInstanceUUID] = "tampered" // name no longer matches
		}
		in.Records = append(in.Records, r)
	}
	if rng.IntN(2) == 0 {
		in.Policy.Kinds = []orphan.Kind{orphan.Kinds()[rng.IntN(len(orphan.Kinds()))]}
		in.Policy.GracePeriod = time.Duration(rng.IntN(400)) * time.Second
		in.Policy.FailedBackups = rng.IntN(3) == 0
	}
	randomGuardExtras(rng, &in)
	// Sometimes the candidates are a host's own judgement (Judged).
	in.EvidenceRequired = rng.IntN(5) == 0
	return in
}

// randomGuardExtras adds what the guard weighs besides the scopes' own
// evidence: evidence by group (as Combine reports it), inspected copies,
// volume states and overrides, and a ledger of earlier automatic purges.
func randomGuardExtras(rng *rand.Rand, in *orphan.Input) {
	groups := []orphan.Group{{Kind: orphan.KindReplicaData, DataEngine: orphan.DataEngineV1}, {Kind: orphan.KindReplicaData},
		{Kind: orphan.KindEngineInstance, DataEngine: orphan.DataEngineV2}, {Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV2},
		{Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV1}, {Kind: orphan.KindBackup}}
	for sc, st := range in.Scopes {
		if rng.IntN(3) == 0 {
			st.Groups = map[orphan.Group]orphan.Evidence{}
			for range 1 + rng.IntN(2) {
				st.Groups[groups[rng.IntN(len(groups))]] = orphan.Evidence{OwnedUnlisted: rng.IntN(4), NoneExpected: rng.IntN(5) == 0}
			}
			in.Scopes[sc] = st
		}
	}
	for i := range in.Candidates {
		if rng.IntN(3) == 0 {
			c := &in.Candidates[i]
			c.Item.Copy = &orphan.Copy{Volume: fmt.Sprintf("pvc-%d", rng.IntN(4)), Recoverable: rng.IntN(3) != 0, NoData: rng.IntN(4) == 0}
			if rng.IntN(2) == 0 {
				// What an inspection reports besides: every word of it
				// reaches the Recoverable condition's message.
				c.Item.Copy.Revision, c.Item.Copy.Rank = int64(rng.IntN(3)), rng.IntN(3)
				c.Item.Copy.Head, c.Item.Copy.Size = []string{"", "volume-head-002.img"}[rng.IntN(2)], int64(rng.IntN(2))<<30
				for range rng.IntN(3) {
					c.Item.Copy.Reasons = append(c.Item.Copy.Reasons, []string{"volume-meta: missing", "backing image absent", strings.Repeat("é", 700)}[rng.IntN(3)])
				}
			}
		}
	}
	// Scopes' messages reach forget messages, keep reasons and
	// DataCleanable=False conditions.
	for sc, st := range in.Scopes {
		if rng.IntN(2) == 0 {
			st.Message = "why " + sc.String()
			in.Scopes[sc] = st
		}
	}
	states := []orphan.VolumeState{orphan.VolumeHealthy, orphan.VolumeDegraded, orphan.VolumeFaulted, orphan.VolumeDeleted, "unknown", ""}
	if rng.IntN(4) != 0 {
		in.Volumes = map[string]orphan.VolumeState{}
		for v := range 3 {
			if rng.IntN(4) != 0 {
				in.Volumes[fmt.Sprintf("pvc-%d", v)] = states[rng.IntN(len(states))]
			}
		}
		in.VolumesComplete = rng.IntN(2) == 0
	}
	if rng.IntN(4) == 0 {
		in.AutoPurgesSince = in.Now.Add(-time.Duration(rng.IntN(7200)) * time.Second)
	}
	for _, r := range in.Records {
		if rng.IntN(3) == 0 {
			if in.LastCopyOverride == nil {
				in.LastCopyOverride = map[string]bool{}
			}
			in.LastCopyOverride[r.Name] = true
		}
		if rng.IntN(4) == 0 {
			in.AutoPurges = append(in.AutoPurges, orphan.AutoPurge{Name: r.Name, Scope: r.Scope(),
				Group: orphan.Group{Kind: r.Kind, DataEngine: r.DataEngine}, At: in.Now.Add(-time.Duration(rng.IntN(7200)) * time.Second)})
		}
	}
	for range rng.IntN(4) {
		r := randomItem(rng)
		in.AutoPurges = append(in.AutoPurges, orphan.AutoPurge{Name: fmt.Sprintf("orphan-gone-%d", rng.IntN(100)), Scope: r.Scope(),
			Group: orphan.Group{Kind: r.Kind, DataEngine: r.DataEngine}, At: in.Now.Add(time.Duration(rng.IntN(7200)-6000) * time.Second)})
	}
	switch rng.IntN(6) {
	case 0:
		in.Guard.AllowLastCopy = true
	case 1:
		in.Guard.AllowOverBudget = true
	case 2:
		in.Guard.BudgetWindow = time.Duration(rng.IntN(3)) * 30 * time.Minute
	}
}

func ptr[T any](v T) *T { return &v }

// hasTrueCleanable looks for DataCleanable=True by hand.
func hasTrueCleanable(r orphan.Record) bool {
	for _, c := range r.Conditions {
		if c.Type == "DataCleanable" {
			return c.Status == "True"
		}
	}
	return false
}

func names(rs []orphan.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}
func forgetNames(fs []orphan.Forget) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Record.Name
	}
	return out
}
func purgeNames(ps []orphan.Purge) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Record.Name
	}
	return out
}
func keepNames(ks []orphan.Keep) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Record.Name
	}
	return out
}

func TestMergeScopesGraverWins(t *testing.T) {
	s := orphan.Scope{NodeID: "n1", Disk: "d"}
	got := orphan.MergeScopes(
		map[orphan.Scope]orphan.ScopeStatus{s: {Health: orphan.HealthReady}},
		map[orphan.Scope]orphan.ScopeStatus{s: {Health: orphan.HealthUnknown}},
	)
	if got[s].Health != orphan.HealthUnknown {
		t.Errorf("Ready+Unknown = %v", got[s].Health)
	}
	got = orphan.MergeScopes(
		map[orphan.Scope]orphan.ScopeStatus{s: {Health: orphan.HealthDiskEvicted}},
		map[orphan.Scope]orphan.ScopeStatus{s: {Health: orphan.HealthReady}},
	)
	if got[s].Health != orphan.HealthDiskEvicted {
		t.Errorf("DiskEvicted+Ready = %v", got[s].Health)
	}
	got = orphan.MergeScopes(map[orphan.Scope]orphan.ScopeStatus{s: {}}, nil)
	if got[s].Health != orphan.HealthUnknown {
		t.Errorf("empty health merged as %q, want Unknown", got[s].Health)
	}
}
