package orphan_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// recoverableCondition is the ConditionRecoverable the plan gives name:
// on its new record, or in its SetConditions; nil when the plan writes
// none.
func recoverableCondition(p orphan.Plan, name string) *metav1.Condition {
	for _, r := range p.Create {
		if r.Name == name {
			return meta.FindStatusCondition(r.Conditions, orphan.ConditionRecoverable)
		}
	}
	for _, sc := range p.Conditions {
		if sc.Record.Name == name {
			return meta.FindStatusCondition(sc.Conditions, orphan.ConditionRecoverable)
		}
	}
	return nil
}

// TestDecideRecordShowsTheCopy: the inspection's verdict (Item.Copy)
// reaches the record as ConditionRecoverable, with the reuse hint when
// the volume lacks replicas, and a condition already current is not
// written again.
func TestDecideRecordShowsTheCopy(t *testing.T) {
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	item := replicaItem("n1", "disk-1", "pvc-a-1b2c3d4e")
	good := &orphan.Copy{Volume: "pvc-a", Recoverable: true, Revision: 42, Rank: 1, Head: "volume-head-002.img", Size: 1 << 30}
	bad := &orphan.Copy{Volume: "pvc-a", Reasons: []string{"layer volume-snap-s1.img is missing", "the replica was rebuilding"}}
	const (
		recoverableMsg = "volume pvc-a: a recoverable copy, revision counter 42, rank 1 among the copies of the volume seen (1 is the best)"
		stillThere     = "; its data is still on the disk: the last-copy guard keeps it while its volume is faulted, degraded or unknown"
		noDataMsg      = "volume pvc-a: holds none of the volume's data, as its inspection proved: the last-copy guard does not keep it"
		hint           = ": to re-adopt this copy as a failed replica: dataDirectoryName=pvc-a-1b2c3d4e diskPath=/var/lib/longhorn head=volume-head-002.img size=1073741824 revisionCounter=42"
	)
	cond := func(status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: orphan.ConditionRecoverable, Status: status, Reason: reason, Message: msg}
	}
	cases := []struct {
		name     string
		cp       *orphan.Copy
		volumes  map[string]orphan.VolumeState
		existing *metav1.Condition // on the record; no record when nil and create
		create   bool              // no record yet: the new record carries the condition
		want     *metav1.Condition // nil: none written
	}{
		{name: "new record, healthy volume", cp: good, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, create: true,
			want: cond(metav1.ConditionTrue, orphan.ReasonRecoverable, recoverableMsg)},
		{name: "kept record, volume not listed", cp: good,
			want: cond(metav1.ConditionTrue, orphan.ReasonRecoverable, recoverableMsg)},
		{name: "faulted volume: the reuse hint", cp: good, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted},
			want: cond(metav1.ConditionTrue, orphan.ReasonReusable, recoverableMsg+"; volume pvc-a is faulted"+hint)},
		{name: "degraded volume: the reuse hint", cp: good, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDegraded},
			want: cond(metav1.ConditionTrue, orphan.ReasonReusable, recoverableMsg+"; volume pvc-a is degraded"+hint)},
		{name: "not recoverable: every reason", cp: bad, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted},
			want: cond(metav1.ConditionFalse, orphan.ReasonNotRecoverable,
				"volume pvc-a: holds data the tool cannot export today: layer volume-snap-s1.img is missing; the replica was rebuilding"+stillThere)},
		{name: "not recoverable, no reason given: still holds data", cp: &orphan.Copy{Volume: "pvc-a"},
			want: cond(metav1.ConditionFalse, orphan.ReasonNotRecoverable, "volume pvc-a: holds data the tool cannot export today"+stillThere)},
		{name: "proven to hold no data: NoData beats NotRecoverable", cp: &orphan.Copy{Volume: "pvc-a", Reasons: []string{"rebuilding"}, NoData: true},
			volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}, want: cond(metav1.ConditionFalse, orphan.ReasonNoData, noDataMsg)},
		{name: "proven to hold no data: NoData beats Reusable", cp: &orphan.Copy{Volume: "pvc-a", Recoverable: true, NoData: true, Head: "volume-head-000.img", Size: 4096},
			volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}, want: cond(metav1.ConditionFalse, orphan.ReasonNoData, noDataMsg)},
		{name: "reasons are cut", cp: &orphan.Copy{Volume: "pvc-a", Reasons: []string{strings.Repeat("é", 3000)}},
			want: cond(metav1.ConditionFalse, orphan.ReasonNotRecoverable, "volume pvc-a: holds data the tool cannot export today: "+strings.Repeat("é", 1024)+"... (cut)"+stillThere)},
		{name: "no revision counter, not ranked", cp: &orphan.Copy{Volume: "pvc-a", Recoverable: true},
			want: cond(metav1.ConditionTrue, orphan.ReasonRecoverable, "volume pvc-a: a recoverable copy, no revision counter")},
		{name: "current condition is not rewritten", cp: good, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy},
			existing: cond(metav1.ConditionTrue, orphan.ReasonRecoverable, recoverableMsg)},
		{name: "the volume faulted since: rewritten", cp: good, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted},
			existing: cond(metav1.ConditionTrue, orphan.ReasonRecoverable, recoverableMsg),
			want:     cond(metav1.ConditionTrue, orphan.ReasonReusable, recoverableMsg+"; volume pvc-a is faulted"+hint)},
		{name: "the volume healed: hint dropped", cp: good, volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy},
			existing: cond(metav1.ConditionTrue, orphan.ReasonReusable, recoverableMsg+"; volume pvc-a is faulted"+hint),
			want:     cond(metav1.ConditionTrue, orphan.ReasonRecoverable, recoverableMsg)},
		{name: "not inspected this cycle: left as it is", cp: nil,
			existing: cond(metav1.ConditionFalse, orphan.ReasonNotRecoverable, "volume pvc-a: not a recoverable copy: x")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := item
			it.Copy = tc.cp
			in := orphan.Input{Now: testEpoch, Scopes: ready(d), Volumes: tc.volumes,
				Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("no replica expects it")}}}
			name, err := it.Name()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.create {
				r := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-1b2c3d4e"))
				r.Conditions = append(r.Conditions, metav1.Condition{Type: orphan.ConditionError, Status: metav1.ConditionFalse, Reason: orphan.ReasonNoError})
				if tc.existing != nil {
					r.Conditions = append(r.Conditions, *tc.existing)
				}
				in.Records = []orphan.Record{r}
			}
			p := orphan.Decide(in)
			if got := actions(p)[name]; tc.create && got != "create" || !tc.create && got != "keep" {
				t.Fatalf("action = %q", got)
			}
			got := recoverableCondition(p, name)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("condition written: %+v", *got)
			case tc.want == nil:
				if !tc.create && len(p.Conditions) != 0 {
					t.Fatalf("a record whose conditions are current got %+v", p.Conditions)
				}
			case got == nil:
				t.Fatalf("no %s condition, want %+v", orphan.ConditionRecoverable, *tc.want)
			case *got != *tc.want:
				t.Fatalf("condition\n got  %+v\n want %+v", *got, *tc.want)
			}
		})
	}
}

// TestDecideRefusedCopyShowsBoth: a recoverable copy of a faulted volume
// whose auto-deletion is due is refused by the last-copy guard, and its
// record shows both the refusal (PurgeGuarded=True, LastCopy) and the
// verdict with the reuse hint.
func TestDecideRefusedCopyShowsBoth(t *testing.T) {
	d := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	it := replicaItem("n1", "disk-1", "pvc-a-1b2c3d4e")
	it.Copy = &orphan.Copy{Volume: "pvc-a", Recoverable: true, Revision: 7, Rank: 1, Head: "volume-head-000.img", Size: 4096}
	r := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-1b2c3d4e"))
	in := orphan.Input{Now: testEpoch.Add(time.Hour), Scopes: ready(d), Records: []orphan.Record{r},
		Policy:     orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
		Volumes:    map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted},
		Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("no replica expects it")}}}
	p := orphan.Decide(in)
	if len(p.Refused) != 1 || len(p.Purge) != 0 {
		t.Fatalf("refused %v, purged %v", p.Refused, p.Purge)
	}
	if len(p.Conditions) != 1 {
		t.Fatalf("conditions %+v", p.Conditions)
	}
	cs := p.Conditions[0].Conditions
	if g := meta.FindStatusCondition(cs, orphan.ConditionPurgeGuarded); g == nil || g.Reason != string(orphan.GuardLastCopy) {
		t.Fatalf("PurgeGuarded = %+v", g)
	}
	if c := meta.FindStatusCondition(cs, orphan.ConditionRecoverable); c == nil || c.Reason != orphan.ReasonReusable ||
		c.Message != "volume pvc-a: a recoverable copy, revision counter 7, rank 1 among the copies of the volume seen (1 is the best); volume pvc-a is faulted: to re-adopt this copy as a failed replica: dataDirectoryName=pvc-a-1b2c3d4e diskPath=/var/lib/longhorn head=volume-head-000.img size=4096 revisionCounter=7" {
		t.Fatalf("Recoverable = %+v", c)
	}
}

// TestDecideCurrentCopyConditionsCostNoAllocationPerRecord: in the steady
// state (every record's conditions current, copies inspected), a plan of
// many records allocates no more than a plan of few.
func TestDecideCurrentCopyConditionsCostNoAllocationPerRecord(t *testing.T) {
	input := func(n int) orphan.Input {
		scopes := ready(orphan.Scope{NodeID: "n1", Disk: "disk-1"})
		in := orphan.Input{Now: testEpoch, Scopes: scopes, Volumes: map[string]orphan.VolumeState{}}
		for i := range n {
			it := replicaItem("n1", "disk-1", fmt.Sprintf("pvc-%d-1b2c3d4e", i))
			vol := fmt.Sprintf("pvc-%d", i)
			it.Copy = &orphan.Copy{Volume: vol, Recoverable: true, Revision: int64(i + 1), Rank: 1, Head: "volume-head-001.img", Size: 1 << 20}
			in.Volumes[vol] = orphan.VolumeFaulted
			in.Candidates = append(in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Orphan("o")})
		}
		// One plan writes the conditions; the records carry them after.
		in.Records = append(in.Records, orphan.Decide(in).Create...)
		return in
	}
	allocs := func(n int) float64 {
		in := input(n)
		if p := orphan.Decide(in); len(p.Conditions) != 0 || len(p.Keep) != n {
			t.Fatalf("%d records: steady state plans %d conditions, keeps %d", n, len(p.Conditions), len(p.Keep))
		}
		return testing.AllocsPerRun(20, func() { orphan.Decide(in) })
	}
	few, many := allocs(10), allocs(1000)
	if many > few+8 {
		t.Fatalf("steady state: %v allocations for 10 records, %v for 1000", few, many)
	}
}
