package orphan_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"sort"
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

// TestDecideAgreesWithReference checks Decide against referenceDecide, a
// deliberately naive restatement of the rules, on random inputs with many
// name collisions, overlapping scopes, every health, the guard's evidence
// and options.
func TestDecideAgreesWithReference(t *testing.T) {
	for seed := range uint64(5000) {
		rng := rand.New(rand.NewPCG(seed, 99))
		in := randomInput(rng)
		checkAgainstReference(t, seed, in)
	}
}

// checkAgainstReference fails t unless Decide plans in exactly as
// referenceDecide does.
func checkAgainstReference(t *testing.T, seed uint64, in orphan.Input) {
	t.Helper()
	{
		got := orphan.Decide(in)
		want := referenceDecide(in)
		if g := actions(got); !reflect.DeepEqual(g, want.actions) {
			t.Fatalf("seed %d: actions differ\n got  %v\n want %v\ninput %+v", seed, g, want.actions, in)
		}
		if g := marks(got); !reflect.DeepEqual(g, want.marks) {
			t.Fatalf("seed %d: conditions differ\n got  %v\n want %v\ninput %+v", seed, g, want.marks, in)
		}
		if g := refusals(got); !reflect.DeepEqual(g, want.refused) {
			t.Fatalf("seed %d: refusals differ\n got  %v\n want %v\ninput %+v", seed, g, want.refused, in)
		}
		if !got.RequeueAt.Equal(want.requeue) {
			t.Fatalf("seed %d: RequeueAt = %v, want %v", seed, got.RequeueAt, want.requeue)
		}
		purged, created := map[string]string{}, map[string]string{}
		for _, pu := range got.Purge {
			purged[pu.Record.Name] = fmt.Sprint(pu.Candidate.Item)
		}
		for _, r := range got.Create {
			created[r.Name] = fmt.Sprint(r.Item())
		}
		if !reflect.DeepEqual(purged, want.purged) {
			t.Fatalf("seed %d: purges' candidates differ\n got  %v\n want %v\ninput %+v", seed, purged, want.purged, in)
		}
		if !reflect.DeepEqual(created, want.created) {
			t.Fatalf("seed %d: created records' items differ\n got  %v\n want %v\ninput %+v", seed, created, want.created, in)
		}
		var rejected []string
		for _, r := range got.Rejected {
			rejected = append(rejected, fmt.Sprint(r.Item))
		}
		if !reflect.DeepEqual(rejected, want.rejected) {
			t.Fatalf("seed %d: rejected differ\n got  %v\n want %v\ninput %+v", seed, rejected, want.rejected, in)
		}
		var ledger []string
		for _, e := range got.AutoPurges {
			ledger = append(ledger, fmt.Sprint(e))
		}
		if !reflect.DeepEqual(ledger, want.ledger) {
			t.Fatalf("seed %d: ledgers differ\n got  %v\n want %v\ninput %+v", seed, ledger, want.ledger, in)
		}
		checkPlanInvariants(t, seed, in, got)
	}
}

// marks flattens a plan's conditions to name → "Type=Status:Reason,...".
func marks(p orphan.Plan) map[string]string {
	out := map[string]string{}
	for _, sc := range p.Conditions {
		var parts []string
		for _, c := range sc.Conditions {
			parts = append(parts, c.Type+"="+string(c.Status)+":"+c.Reason)
		}
		sort.Strings(parts)
		out[sc.Record.Name] = fmt.Sprint(parts)
	}
	return out
}

// refusals flattens a plan's refusals to name → rule.
func refusals(p orphan.Plan) map[string]string {
	out := map[string]string{}
	for _, r := range p.Refused {
		out[r.Name] = r.Rule
	}
	return out
}

// checkPlanInvariants states the safety rules directly.
func checkPlanInvariants(t *testing.T, seed uint64, in orphan.Input, p orphan.Plan) {
	t.Helper()
	seen := map[string]int{}
	for name := range actions(p) {
		seen[name]++
	}
	for _, pu := range p.Purge {
		if pu.Candidate.Verdict.Outcome != orphan.OutcomeOrphan {
			t.Fatalf("seed %d: purge of %s whose candidate is %v", seed, pu.Record.Name, pu.Candidate.Verdict.Outcome)
		}
		if !pu.Auto && !pu.Record.DeletionRequested {
			t.Fatalf("seed %d: purge of %s that nobody requested", seed, pu.Record.Name)
		}
		if !hasTrueCleanable(pu.Record) {
			t.Fatalf("seed %d: purge of %s, which is not marked cleanable", seed, pu.Record.Name)
		}
		if pu.Auto && !in.Policy.AutoDeletes(pu.Record.Kind) {
			t.Fatalf("seed %d: auto purge of a kind the policy does not delete", seed)
		}
		node := in.Scopes[orphan.Scope{NodeID: pu.Record.NodeID}]
		if node.Health != orphan.HealthReady {
			t.Fatalf("seed %d: purge of %s on node %s whose health is %q", seed, pu.Record.Name, pu.Record.NodeID, node.Health)
		}
		if vol, covered := copyOf(pu); covered && !in.Guard.AllowLastCopy {
			state, listed := in.Volumes[vol]
			if !listed && in.VolumesComplete && vol != "" {
				state = orphan.VolumeDeleted
			}
			switch {
			case state == orphan.VolumeFaulted && (pu.Auto || !in.LastCopyOverride[pu.Record.Name]):
				t.Fatalf("seed %d: purge of %s, a copy of faulted volume %q that may hold data, without an override", seed, pu.Record.Name, vol)
			case pu.Auto && state != orphan.VolumeHealthy && state != orphan.VolumeDeleted:
				t.Fatalf("seed %d: automatic purge of %s, a copy of volume %q that may hold data, which is %q", seed, pu.Record.Name, vol, state)
			}
		}
		if st := in.Scopes[pu.Record.Scope()]; st.NoneExpected && !in.Guard.AllowNoneExpected {
			t.Fatalf("seed %d: purge of %s in a scope where nothing is expected", seed, pu.Record.Name)
		}
	}
	for _, list := range [][]string{names(p.Create), forgetNames(p.Forget), purgeNames(p.Purge), keepNames(p.Keep)} {
		if !sort.StringsAreSorted(list) {
			t.Fatalf("seed %d: plan list not sorted: %v", seed, list)
		}
	}
	total := len(p.Create) + len(p.Forget) + len(p.Purge) + len(p.Keep)
	if total != len(seen) {
		t.Fatalf("seed %d: a record appears in more than one list", seed)
	}
}

// copyOf is a purge's volume and whether it may hold the volume's data,
// as the last-copy guard sees it: its observation's Copy (every one but a
// NoData one, recoverable or not), or for replica data nobody inspected,
// the volume its directory is named after.
func copyOf(pu orphan.Purge) (string, bool) {
	if c := pu.Candidate.Item.Copy; c != nil {
		return c.Volume, !c.NoData
	}
	if pu.Record.Kind != orphan.KindReplicaData {
		return "", false
	}
	name := pu.Record.Param(orphan.ParamDataName)
	if m := regexp.MustCompile(`^(.+)-[a-zA-Z0-9]{8}$`).FindStringSubmatch(name); m != nil {
		return m[1], true
	}
	return "", true
}

type referencePlan struct {
	actions map[string]string
	marks   map[string]string
	refused map[string]string
	requeue time.Time
	// purged and created are the item each purge and new record is of;
	// rejected the candidates that could not be named, in input order.
	purged, created map[string]string
	rejected        []string
	// ledger is the plan's AutoPurges, each printed.
	ledger []string
}

// referenceDecide restates Decide's rules one record at a time, with linear
// searches and no shared helpers.
func referenceDecide(in orphan.Input) referencePlan {
	out := referencePlan{actions: map[string]string{}, marks: map[string]string{}, refused: map[string]string{},
		purged: map[string]string{}, created: map[string]string{}}
	find := func(s orphan.Scope) (orphan.Health, bool) {
		for sc, st := range in.Scopes {
			if sc == s {
				if st.Health == "" {
					return orphan.HealthUnknown, true
				}
				return st.Health, true
			}
		}
		return "", false
	}
	holds := func(h orphan.Health) bool { return h == orphan.HealthNodeUnavailable || h == orphan.HealthDiskInvalid }
	forgets := func(h orphan.Health) bool { return h != orphan.HealthReady && h != orphan.HealthUnknown && !holds(h) }
	// lookup ranks what applies: a forgetting node, a forgetting disk, a
	// missing disk, a node that is not Ready, then the disk itself.
	lookup := func(s orphan.Scope) (orphan.Health, bool) {
		nodeH, nodeOK := find(orphan.Scope{NodeID: s.NodeID})
		if s.Disk == "" {
			return nodeH, nodeOK
		}
		diskH, diskOK := find(s)
		switch {
		case nodeOK && forgets(nodeH):
			return nodeH, true
		case diskOK && forgets(diskH):
			return diskH, true
		case !diskOK && !nodeOK:
			return "", false
		case !diskOK && nodeH == orphan.HealthReady:
			return orphan.HealthDiskRemoved, true
		case holds(nodeH):
			return nodeH, true
		case !diskOK, !nodeOK, nodeH != orphan.HealthReady:
			return orphan.HealthUnknown, true
		}
		return diskH, true
	}
	// keyOf is an item's match key: its kind's name class and its
	// MatchParam trimmed of white space.
	keyOf := func(it orphan.Item) string {
		s, ok := orphan.Spec(it.Kind)
		if !ok {
			return "unknown:" + string(it.Kind) + "\x00"
		}
		return s.NameClass + "\x00" + strings.TrimSpace(it.Parameters[s.MatchParam])
	}
	// participates says whether Decide names a candidate: every orphan,
	// and another only when a record or an orphan candidate shares its
	// match key. (Two items whose dash-joined fields collide into one name
	// but whose match keys differ are kept apart unless both take part.)
	participates := func(c orphan.Candidate) bool {
		if c.Verdict.Outcome == orphan.OutcomeOrphan {
			return true
		}
		k := keyOf(c.Item)
		for _, r := range in.Records {
			if keyOf(r.Item()) == k {
				return true
			}
		}
		for _, o := range in.Candidates {
			if o.Verdict.Outcome == orphan.OutcomeOrphan && keyOf(o.Item) == k {
				return true
			}
		}
		return false
	}
	takesPart := make([]bool, len(in.Candidates))
	candName := make([]string, len(in.Candidates)) // "" when it cannot be named
	for i, c := range in.Candidates {
		takesPart[i] = participates(c)
		candName[i], _ = c.Item.Name()
		if _, err := c.Item.Name(); err != nil && takesPart[i] {
			out.rejected = append(out.rejected, fmt.Sprint(c.Item))
		}
	}
	// last returns the last candidate named name that takes part: the
	// observation a merged name keeps.
	last := func(name string) (orphan.Candidate, bool) {
		var found orphan.Candidate
		ok := false
		for i, c := range in.Candidates {
			if n := candName[i]; n != "" && n == name && takesPart[i] {
				found, ok = c, true
			}
		}
		return found, ok
	}
	// verdictFor returns the combined verdict of every candidate named name.
	verdictFor := func(name string) (orphan.Outcome, bool) {
		found := false
		var outcome orphan.Outcome
		var kind orphan.Kind
		for i, c := range in.Candidates {
			if n := candName[i]; n == "" || n != name || !takesPart[i] {
				continue
			}
			if !found {
				outcome, kind, found = c.Verdict.Outcome, c.Item.Kind, true
			} else if outcome != c.Verdict.Outcome || kind != c.Item.Kind {
				outcome = orphan.OutcomeUndecided
			}
		}
		return outcome, found
	}
	earliest := func(t time.Time) {
		if out.requeue.IsZero() || t.Before(out.requeue) {
			out.requeue = t
		}
	}
	condOf := func(r orphan.Record, typ string) *metav1.Condition {
		for i := range r.Conditions {
			if r.Conditions[i].Type == typ {
				return &r.Conditions[i]
			}
		}
		return nil
	}

	// The guard: count each scope's valid items and orphans by hand.
	minItems := in.Guard.MinItems
	if minItems <= 0 {
		minItems = 3
	}
	share := in.Guard.MaxAutoShare
	if share <= 0 || share >= 1 {
		share = 0.5
	}
	// Each group (kind and data engine) of a scope is counted on its own.
	type gk struct {
		s orphan.Scope
		g orphan.Group
	}
	keyOfItem := func(it orphan.Item) gk { return gk{it.Scope(), orphan.Group{Kind: it.Kind, DataEngine: it.DataEngine}} }
	valid := map[gk]int{}
	orphans := map[gk]int{}
	countedName := map[string]bool{}
	for _, c := range in.Candidates {
		if c.Verdict.Outcome != orphan.OutcomeOrphan {
			valid[keyOfItem(c.Item)]++
			continue
		}
		n, err := c.Item.Name()
		if err != nil || countedName[n] {
			continue
		}
		if outcome, _ := verdictFor(n); outcome == orphan.OutcomeOrphan {
			countedName[n] = true
			l, _ := last(n) // counted where its last observation is
			valid[keyOfItem(l.Item)]++
			orphans[keyOfItem(l.Item)]++
		}
	}
	evidence := func(k gk) (owned int, none bool) {
		st := in.Scopes[k.s]
		owned, none = st.OwnedUnlisted, st.NoneExpected
		for g, e := range st.Groups {
			if g == k.g || g.Kind == k.g.Kind && g.DataEngine == "" {
				owned, none = max(owned, e.OwnedUnlisted), none || e.NoneExpected
			}
		}
		return owned, none
	}
	validOf := func(k gk) int {
		owned, _ := evidence(k)
		return valid[k] + owned
	}
	guardRule := func(r orphan.Record) string {
		k := keyOfItem(r.Item())
		if in.EvidenceRequired {
			groups := in.Scopes[k.s].Groups
			_, stated := groups[k.g]
			_, ofKind := groups[orphan.Group{Kind: k.g.Kind}]
			if !stated && !(ofKind && k.g.DataEngine != "") {
				return "NoEvidence"
			}
		}
		if _, none := evidence(k); none && validOf(k) > 0 && !in.Guard.AllowNoneExpected {
			return "NoneExpected"
		}
		if orphans[k] == validOf(k) && orphans[k] >= minItems && !in.Guard.AllowWholeScope {
			return "WholeScope"
		}
		return ""
	}
	// lastCopy restates the last-copy guard.
	dataName := regexp.MustCompile(`^(.+)-[a-zA-Z0-9]{8}$`)
	lastCopy := func(r orphan.Record) string {
		if in.Guard.AllowLastCopy {
			return ""
		}
		l, _ := last(r.Name)
		vol := ""
		switch {
		case l.Item.Copy != nil && l.Item.Copy.NoData:
			return ""
		case l.Item.Copy != nil:
			vol = l.Item.Copy.Volume
		case r.Kind == orphan.KindReplicaData:
			if m := dataName.FindStringSubmatch(r.Parameters[orphan.ParamDataName]); m != nil {
				vol = m[1]
			}
		default:
			return ""
		}
		state := "unknown"
		if st, ok := in.Volumes[vol]; ok && vol != "" {
			state = string(st)
		} else if vol != "" && in.VolumesComplete {
			state = "deleted"
		}
		auto := !r.DeletionRequested
		switch {
		case state == "healthy" || state == "deleted":
			return ""
		case state == "faulted" && (auto || !in.LastCopyOverride[r.Name]):
			return "LastCopy"
		case state == "faulted":
			return ""
		case state == "degraded" && auto:
			return "VolumeDegraded"
		case state != "degraded" && auto:
			return "VolumeUnknown"
		}
		return ""
	}
	mark := func(r orphan.Record, rule string) {
		var parts []string
		if c := condOf(r, "DataCleanable"); c == nil || c.Status != "True" {
			parts = append(parts, "DataCleanable=True:Ready")
		}
		if c := condOf(r, "Error"); c == nil || c.Status != "False" && !(c.Status == "True" && r.DeletionRequested) {
			parts = append(parts, "Error=False:NoError")
		}
		if r.Kind == orphan.KindEngineInstance || r.Kind == orphan.KindReplicaInstance {
			if c := condOf(r, "InstanceExist"); c == nil || c.Status != "True" {
				parts = append(parts, "InstanceExist=True:Observed")
			}
		}
		pg := condOf(r, "PurgeGuarded")
		switch {
		case rule != "":
			parts = append(parts, "PurgeGuarded=True:"+rule) // random records never carry the same message
		case pg != nil && pg.Status == "True":
			parts = append(parts, "PurgeGuarded=False:Clear")
		}
		// The inspection's verdict, from the observation kept; random
		// records never carry a Recoverable condition of their own.
		if l, _ := last(r.Name); l.Item.Copy != nil {
			c := l.Item.Copy
			st := in.Volumes[c.Volume]
			switch {
			case c.NoData:
				parts = append(parts, "Recoverable=False:NoData")
			case !c.Recoverable:
				parts = append(parts, "Recoverable=False:NotRecoverable")
			case c.Volume != "" && (st == orphan.VolumeDegraded || st == orphan.VolumeFaulted):
				parts = append(parts, "Recoverable=True:Reusable")
			default:
				parts = append(parts, "Recoverable=True:Recoverable")
			}
		}
		if len(parts) > 0 {
			sort.Strings(parts)
			out.marks[r.Name] = fmt.Sprint(parts)
		}
	}

	// requestError adds Error=True:PurgeRefused to a requested record's
	// marks, in place of the ones in drop. (Random records never carry
	// its message.)
	requestError := func(r orphan.Record, drop []string) {
		var parts []string
		if m, ok := out.marks[r.Name]; ok {
			for _, p := range strings.Fields(strings.Trim(m, "[]")) {
				if !slices.Contains(drop, p) {
					parts = append(parts, p)
				}
			}
		}
		parts = append(parts, "Error=True:PurgeRefused")
		sort.Strings(parts)
		out.marks[r.Name] = fmt.Sprint(parts)
	}

	recorded := map[string]bool{}
	var purges []orphan.Record
	for _, r := range in.Records {
		h, ok := lookup(r.Scope())
		if !ok {
			continue
		}
		recorded[r.Name] = true
		if _, known := orphan.Spec(r.Kind); !known {
			out.actions[r.Name] = "keep" // another owner's kind: left as it is
			continue
		}
		if forgets(h) {
			out.actions[r.Name] = "forget:" + string(h)
			continue
		}
		cl := condOf(r, "DataCleanable")
		markFalse := func(reason string) {
			if cl == nil || cl.Status != "False" || cl.Reason != reason {
				out.marks[r.Name] = fmt.Sprint([]string{"DataCleanable=False:" + reason})
			}
		}
		dismiss := func() {
			out.actions[r.Name] = "keep"
			if r.DeletionRequested {
				out.refused[r.Name] = "Dismissed"
			}
			markFalse("Dismissed")
		}
		if h != orphan.HealthReady && r.Dismissed {
			dismiss()
			continue
		}
		if holds(h) {
			if r.DeletionRequested {
				out.actions[r.Name] = "forget:" + string(h)
			} else {
				out.actions[r.Name] = "keep"
				markFalse(string(h))
			}
			continue
		}
		if h == orphan.HealthUnknown {
			switch c := condOf(r, "DataCleanable"); {
			case r.DeletionRequested && c != nil && c.Status == "False":
				out.actions[r.Name] = "forget:NotCleanable"
			case r.DeletionRequested:
				// A requested deletion never sits silently (issue 32.6).
				out.actions[r.Name] = "keep"
				out.refused[r.Name] = "ScopeUnknown"
				requestError(r, nil)
			default:
				out.actions[r.Name] = "keep"
			}
			continue
		}
		if n, err := r.Item().Name(); err != nil || n != r.Name {
			out.actions[r.Name] = "forget:Mismatch"
			continue
		}
		outcome, seen := verdictFor(r.Name)
		switch {
		case !seen:
			out.actions[r.Name] = "forget:Gone"
			continue
		case outcome == orphan.OutcomeOwned:
			out.actions[r.Name] = "forget:Owned"
			continue
		case r.Dismissed:
			dismiss()
			continue
		case outcome == orphan.OutcomeUndecided && r.DeletionRequested:
			// A requested deletion never sits silently (issue 32.6).
			out.actions[r.Name] = "keep"
			out.refused[r.Name] = "Undecided"
			mark(r, guardRule(r))
			requestError(r, []string{"Error=False:NoError"})
			continue
		case outcome == orphan.OutcomeUndecided:
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
			continue
		}
		auto := false
		for _, k := range in.Policy.Kinds {
			auto = auto || k == r.Kind
		}
		due := r.CreatedAt.Add(in.Policy.GracePeriod)
		isDue := r.DeletionRequested || (auto && !in.Now.Before(due))
		heldMark := cl != nil && cl.Status == "False" && (holds(orphan.Health(cl.Reason)) || cl.Reason == "Dismissed")
		switch {
		case !isDue:
			if auto {
				earliest(due)
			}
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
		case cl != nil && cl.Status == "False" && !r.DeletionRequested && heldMark:
			earliest(in.Now)
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
		case cl != nil && cl.Status == "False":
			out.actions[r.Name] = "forget:NotCleanable"
		case cl == nil || cl.Status != "True":
			earliest(in.Now)
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
		case guardRule(r) != "":
			out.actions[r.Name] = "keep"
			out.refused[r.Name] = guardRule(r)
			mark(r, guardRule(r))
		default:
			if l, _ := last(r.Name); l.Item.Scope() != r.Scope() {
				out.actions[r.Name] = "forget:Gone" // an observation of another scope purges nothing here
				continue
			}
			if rule := lastCopy(r); rule != "" {
				out.actions[r.Name] = "keep"
				out.refused[r.Name] = rule
				mark(r, rule)
				continue
			}
			purges = append(purges, r)
		}
	}
	// The share and budget rules, in name order, over the ledger of the
	// window.
	sort.Slice(purges, func(i, j int) bool { return purges[i].Name < purges[j].Name })
	window := in.Guard.BudgetWindow
	if window <= 0 {
		window = time.Hour
	}
	inLedger := func(k gk) map[string]bool {
		names := map[string]bool{}
		for _, e := range in.AutoPurges {
			if e.At.After(in.Now.Add(-window)) && (gk{e.Scope, e.Group}) == k {
				names[e.Name] = true
			}
		}
		return names
	}
	for _, e := range in.AutoPurges {
		if e.At.After(in.Now.Add(-window)) {
			out.ledger = append(out.ledger, fmt.Sprint(e))
		}
	}
	spent := map[gk]int{}
	for _, r := range purges {
		k := keyOfItem(r.Item())
		inScope := 0
		for _, o := range purges {
			if keyOfItem(o.Item()) == k {
				inScope++
			}
		}
		if !r.DeletionRequested && !in.Guard.AllowAnyShare && inScope >= minItems && float64(inScope) > share*float64(validOf(k)) {
			out.actions[r.Name] = "keep"
			out.refused[r.Name] = "AutoShare"
			mark(r, "AutoShare")
			continue
		}
		if !r.DeletionRequested && !inLedger(k)[r.Name] {
			allowance := max(minItems-1, int(math.Floor(share*float64(validOf(k)))))
			if !in.Guard.AllowOverBudget && len(inLedger(k))+spent[k] >= allowance {
				out.actions[r.Name] = "keep"
				out.refused[r.Name] = "Budget"
				mark(r, "Budget")
				continue
			}
			spent[k]++
			out.ledger = append(out.ledger, fmt.Sprint(orphan.AutoPurge{Name: r.Name, Scope: k.s, Group: k.g, At: in.Now}))
		}
		if r.DeletionRequested {
			out.actions[r.Name] = "purge"
		} else {
			out.actions[r.Name] = "purge:auto"
		}
		l, _ := last(r.Name)
		out.purged[r.Name] = fmt.Sprint(l.Item)
	}
	for _, c := range in.Candidates {
		n, err := c.Item.Name()
		if err != nil || recorded[n] {
			continue
		}
		if outcome, _ := verdictFor(n); outcome != orphan.OutcomeOrphan {
			continue
		}
		c, _ = last(n) // a merged name is created as its last observation
		if h, ok := lookup(c.Item.Scope()); !ok || h != orphan.HealthReady {
			continue
		}
		c.Item.Copy = nil // a record carries no inspection
		out.created[n] = fmt.Sprint(c.Item)
		out.actions[n] = "create"
		for _, k := range in.Policy.Kinds {
			if k == c.Item.Kind {
				earliest(in.Now.Add(in.Policy.GracePeriod))
			}
		}
	}
	return out
}

var healths = []orphan.Health{"", orphan.HealthReady, orphan.HealthReady, orphan.HealthReady, orphan.HealthUnknown,
	orphan.HealthNodeUnavailable, orphan.HealthNodeEvicted, orphan.HealthDiskInvalid, orphan.HealthDiskChanged, orphan.HealthDiskEvicted,
	orphan.HealthNodeDeleted, orphan.HealthDiskRemoved}

func randomItem(rng *rand.Rand) orphan.Item {
	node := fmt.Sprintf("n%d", rng.IntN(3))
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
					st.OwnedUnlisted = rng.IntN(4)
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
		if err != nil || seenRec[r.Name] {
			continue
		}
		seenRec[r.Name] = true
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
