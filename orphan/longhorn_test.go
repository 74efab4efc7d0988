package orphan_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestLonghornVolumeState covers each rule of LonghornVolumeState: the
// robustness Longhorn computed wins; a detached volume's state is counted
// from its replicas as Longhorn counts an attached one's; anything else
// is unknown.
func TestLonghornVolumeState(t *testing.T) {
	healthy := orphan.ReplicaCopy{Name: "r-ok", HealthyAt: "2026-01-01T00:00:00Z", Active: true}
	failed := orphan.ReplicaCopy{Name: "r-failed", HealthyAt: "2026-01-01T00:00:00Z", FailedAt: "2026-01-02T00:00:00Z", Active: true}
	neverHealthy := orphan.ReplicaCopy{Name: "r-new", Active: true}
	inactive := orphan.ReplicaCopy{Name: "r-old", HealthyAt: "2026-01-01T00:00:00Z"}
	deleting := orphan.ReplicaCopy{Name: "r-del", HealthyAt: "2026-01-01T00:00:00Z", Active: true, Deleting: true}
	for _, tc := range []struct {
		name       string
		robustness string
		state      string
		n          int
		replicas   []orphan.ReplicaCopy
		want       orphan.VolumeState
	}{
		// Rule 1: Longhorn's robustness, whatever the replicas.
		{"attached healthy", "healthy", "attached", 3, nil, orphan.VolumeHealthy},
		{"attached degraded", "degraded", "attached", 3, []orphan.ReplicaCopy{healthy, healthy, healthy}, orphan.VolumeDegraded},
		{"detached faulted stays faulted", "faulted", "detached", 1, []orphan.ReplicaCopy{healthy}, orphan.VolumeFaulted},
		// Rule 2: detached, counted from the replicas.
		{"detached, all healthy", "unknown", "detached", 2, []orphan.ReplicaCopy{healthy, healthy}, orphan.VolumeHealthy},
		{"detached, more healthy than asked", "unknown", "detached", 2, []orphan.ReplicaCopy{healthy, healthy, healthy}, orphan.VolumeHealthy},
		{"detached, one of two", "unknown", "detached", 2, []orphan.ReplicaCopy{healthy, failed}, orphan.VolumeDegraded},
		{"detached, empty robustness", "", "detached", 1, []orphan.ReplicaCopy{healthy}, orphan.VolumeHealthy},
		{"detached, none healthy", "unknown", "detached", 2, []orphan.ReplicaCopy{failed, neverHealthy, inactive, deleting}, orphan.VolumeFaulted},
		{"detached, no Replica objects at all", "unknown", "detached", 3, nil, orphan.VolumeFaulted},
		{"detached, replica count not read", "unknown", "detached", 0, []orphan.ReplicaCopy{healthy, healthy}, orphan.VolumeDegraded},
		{"detached, inactive and deleting do not count", "unknown", "detached", 2, []orphan.ReplicaCopy{healthy, inactive, deleting}, orphan.VolumeDegraded},
		// Rule 3: anything else is unknown.
		{"attached, engine unknown", "unknown", "attached", 1, []orphan.ReplicaCopy{healthy}, ""},
		{"detaching", "unknown", "detaching", 1, []orphan.ReplicaCopy{healthy}, ""},
		{"attaching", "", "attaching", 1, []orphan.ReplicaCopy{healthy}, ""},
		{"creating", "", "creating", 1, nil, ""},
		{"a robustness Longhorn does not have", "Healthy", "detached", 1, []orphan.ReplicaCopy{healthy}, ""},
	} {
		if got := orphan.LonghornVolumeState(tc.robustness, tc.state, tc.n, tc.replicas); got != tc.want {
			t.Errorf("%s: LonghornVolumeState(%q, %q, %d, ...) = %q, want %q", tc.name, tc.robustness, tc.state, tc.n, got, tc.want)
		}
	}
}

// TestDetachedVolumeWithoutHealthyCopyKeepsItsOrphan runs Decide with a
// detached volume's state as LonghornVolumeState gives it: the orphan of
// a detached volume with a healthy replica is auto-deleted, that of one
// with none is refused by the last-copy guard.
func TestDetachedVolumeWithoutHealthyCopyKeepsItsOrphan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas []orphan.ReplicaCopy
		purged   bool
	}{
		{"a healthy replica left", []orphan.ReplicaCopy{{Name: "r1", HealthyAt: "t", Active: true}}, true},
		{"every replica failed", []orphan.ReplicaCopy{{Name: "r1", HealthyAt: "t", FailedAt: "t2", Active: true}}, false},
		{"no replica at all", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := replicaItem("node-1", "disk-1", "pvc-1-0123abcd")
			r, err := orphan.NewRecord(it, testEpoch)
			if err != nil {
				t.Fatal(err)
			}
			r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
			state := orphan.LonghornVolumeState("unknown", "detached", 1, tc.replicas)
			in := orphan.Input{
				Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("no replica")}},
				Records:    []orphan.Record{r},
				Scopes:     map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}, {NodeID: "node-1", Disk: "disk-1"}: {Health: orphan.HealthReady}},
				Policy:     orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
				Now:        testEpoch.Add(time.Hour),
				Volumes:    map[string]orphan.VolumeState{"pvc-1": state},
				Guard:      orphan.Guard{AllowWholeScope: true, AllowAnyShare: true, AllowOverBudget: true},
			}
			plan := orphan.Decide(in)
			if got := len(plan.Purge) == 1; got != tc.purged {
				t.Fatalf("volume %s: purged %v, want %v (plan %+v)", state, got, tc.purged, plan)
			}
		})
	}
}

// TestNameFunctionsAreItemName holds ReplicaDataName and InstanceName to
// Item.Name for items with every field set, white space included, and to
// Longhorn's formula for every input.
func TestNameFunctionsAreItemName(t *testing.T) {
	fields := []string{"node-1", " n ", "\tx", "y\n", "a-b", "/var/lib/longhorn", "\u2003u"}
	longhorn := func(f ...string) string {
		sum := sha256.Sum256([]byte(strings.TrimSpace(strings.Join(f, "-"))))
		return "orphan-" + hex.EncodeToString(sum[:])
	}
	for i, a := range fields {
		b, c, d, e := fields[(i+1)%len(fields)], fields[(i+2)%len(fields)], fields[(i+3)%len(fields)], fields[(i+4)%len(fields)]
		it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: a, Parameters: map[string]string{
			orphan.ParamDiskName: b, orphan.ParamDiskPath: c, orphan.ParamDiskUUID: d, orphan.ParamDataName: e}}
		want, err := it.Name()
		switch {
		case strings.Contains(e, "/"):
			// A path-like data name: Item.Name refuses it, the name
			// function still gives Longhorn's.
			if !errors.Is(err, orphan.ErrInvalidItem) {
				t.Fatalf("Item.Name of data named %q: %v, want ErrInvalidItem", e, err)
			}
			want = longhorn(a, b, c, d, e)
		case err != nil:
			t.Fatal(err)
		}
		if got := orphan.ReplicaDataName(a, b, c, d, e); got != want || got != longhorn(a, b, c, d, e) {
			t.Errorf("ReplicaDataName(%q, %q, %q, %q, %q) = %s, Item.Name %s", a, b, c, d, e, got, want)
		}
		for _, kind := range []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance, orphan.KindShardInstance, orphan.KindShardGroupInstance} {
			it := orphan.Item{Kind: kind, DataEngine: orphan.DataEngine(d), Parameters: map[string]string{
				orphan.ParamInstanceName: a, orphan.ParamInstanceUUID: b, orphan.ParamInstanceManager: c}}
			want, err := it.Name()
			switch {
			case strings.Contains(a, "/"):
				if !errors.Is(err, orphan.ErrInvalidItem) {
					t.Fatalf("%s: Item.Name of an instance named %q: %v, want ErrInvalidItem", kind, a, err)
				}
				want = longhorn(a, b, c, d)
			case err != nil:
				t.Fatalf("%s: %v", kind, err)
			}
			if got := orphan.InstanceName(a, b, c, d); got != want || got != longhorn(a, b, c, d) {
				t.Errorf("%s: InstanceName(%q, %q, %q, %q) = %s, Item.Name %s", kind, a, b, c, d, got, want)
			}
		}
	}
	// Empty fields: Item.Name refuses, the name functions give Longhorn's.
	if got := orphan.InstanceName("e-0", "", "im", "v1"); got != longhorn("e-0", "", "im", "v1") {
		t.Errorf("InstanceName with an empty UUID = %s", got)
	}
	if got := orphan.ReplicaDataName("", "d", "/p", "u", "x"); got != longhorn("", "d", "/p", "u", "x") {
		t.Errorf("ReplicaDataName with an empty node = %s", got)
	}
}

// TestLabelsWithEmptyValues: the node and instance labels are written
// with an empty value, as Longhorn's GetOrphanLabelsFor* functions do.
func TestLabelsWithEmptyValues(t *testing.T) {
	it := orphan.Item{Kind: orphan.KindEngineInstance, DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{orphan.ParamInstanceName: "e-0", orphan.ParamInstanceUUID: "u"}}
	want := map[string]string{
		"longhorn.io/component":   "orphan",
		"longhorn.io/managed-by":  "longhorn-manager",
		"longhorn.io/orphan-type": "engine-instance",
		"longhornnode":            "",
		"longhorninstancemanager": "",
		"longhornengine":          "e-0",
	}
	if got := it.Labels(); !reflect.DeepEqual(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
}

// TestEveryLabelParamIsWrittenWhenEmpty: for every kind of the table,
// an item whose label parameters are all empty still carries each of the
// kind's LabelParams labels, with an empty value, as KindSpec.LabelParams
// says and Longhorn's GetOrphanLabelsFor* functions write them.
func TestEveryLabelParamIsWrittenWhenEmpty(t *testing.T) {
	checked := 0
	for _, k := range orphan.Kinds() {
		spec, _ := orphan.Spec(k)
		got := orphan.Item{Kind: k, NodeID: "node-1"}.Labels()
		for label := range spec.LabelParams {
			v, ok := got[label]
			if !ok || v != "" {
				t.Errorf("%s: label %s = %q (present %v), want present and empty", k, label, v, ok)
			}
			checked++
		}
		if got["longhornnode"] != "node-1" || got["longhorn.io/orphan-type"] != string(k) {
			t.Errorf("%s: labels %v", k, got)
		}
	}
	if checked == 0 {
		t.Fatal("no kind of the table has label parameters: nothing was checked")
	}
}

// TestShardKindsAreNamedAndLabelledNeverHandled: Longhorn's shard orphan
// types get Longhorn's names and labels, and stay outside the kind table,
// so Decide keeps their records whatever a deletion request says.
func TestShardKindsAreNamedAndLabelledNeverHandled(t *testing.T) {
	for _, tc := range []struct {
		kind  orphan.Kind
		label string
	}{
		{orphan.KindShardInstance, "longhornshard"},
		{orphan.KindShardGroupInstance, "longhornshardgroup"},
	} {
		it := orphan.Item{Kind: tc.kind, NodeID: "node-1", DataEngine: orphan.DataEngineV2, Parameters: map[string]string{
			orphan.ParamInstanceName: "sv-1-s-0", orphan.ParamInstanceUUID: "u-1", orphan.ParamInstanceManager: "im-1"}}
		r, err := orphan.NewRecord(it, testEpoch)
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		if r.Name != orphan.InstanceName("sv-1-s-0", "u-1", "im-1", "v2") {
			t.Errorf("%s: name %s", tc.kind, r.Name)
		}
		if r.Labels[tc.label] != "sv-1-s-0" || r.Labels["longhorninstancemanager"] != "im-1" || r.Labels["longhorn.io/orphan-type"] != string(tc.kind) {
			t.Errorf("%s: labels %v", tc.kind, r.Labels)
		}
		if tc.kind.Valid() {
			t.Errorf("%s is in the kind table", tc.kind)
		}
		if _, ok := orphan.Spec(tc.kind); ok {
			t.Errorf("Spec(%s) found", tc.kind)
		}
		r.DeletionRequested = true
		r.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
		plan := orphan.Decide(orphan.Input{Records: []orphan.Record{r},
			Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}},
			Policy: orphan.Policy{Kinds: orphan.AutoDeletionInstance.Kinds()}, Now: testEpoch.Add(time.Hour)})
		if len(plan.Purge) != 0 || len(plan.Forget) != 0 || len(plan.Keep) != 1 {
			t.Errorf("%s: plan %+v, want the record kept", tc.kind, plan)
		}
	}
}

// TestParseAutoDeletionItems: Longhorn's map by item, with the shard
// kinds under "instance", and every bad item named.
func TestParseAutoDeletionItems(t *testing.T) {
	got, err := orphan.ParseAutoDeletionItems(" instance ")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[orphan.AutoDeletionItem]bool{"replica-data": false, "instance": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("items = %v, want %v", got, want)
	}
	if got, want := orphan.AutoDeletionInstance.Kinds(), []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance,
		orphan.KindShardInstance, orphan.KindShardGroupInstance}; !reflect.DeepEqual(got, want) {
		t.Errorf("instance kinds = %v, want %v", got, want)
	}
	if got := orphan.AutoDeletionReplicaData.Kinds(); !reflect.DeepEqual(got, []orphan.Kind{orphan.KindReplicaData}) {
		t.Errorf("replica-data kinds = %v", got)
	}
	if got := orphan.AutoDeletionItem("backup").Kinds(); len(got) != 0 {
		t.Errorf("backup kinds = %v", got)
	}
	kinds, _ := orphan.ParseAutoDeletion("instance")
	if !reflect.DeepEqual(kinds, []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}) {
		t.Errorf("ParseAutoDeletion(instance) = %v: only the kinds caretaker handles", kinds)
	}
	_, err = orphan.ParseAutoDeletionItems("replica-data;volumes; ;Instance")
	var se *orphan.SettingError
	if !errors.As(err, &se) || !errors.Is(err, orphan.ErrInvalidSetting) {
		t.Fatalf("err = %v, want a *SettingError", err)
	}
	for _, bad := range []string{`"volumes"`, `" " (empty)`, `"Instance"`} {
		if !strings.Contains(se.Error(), bad) {
			t.Errorf("error %q does not name %s", se.Error(), bad)
		}
	}
	if se.Item != "volumes" || strings.Contains(se.Error(), `"replica-data" `) {
		t.Errorf("error %q: item %q", se.Error(), se.Item)
	}
}

// TestApplyLonghornConditions: caretaker's changes land in Longhorn's
// condition list as types.SetCondition would put them.
func TestApplyLonghornConditions(t *testing.T) {
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 2, 3, 4, 5, 6, 0, time.FixedZone("x", 3600))
	conds := []orphan.LonghornCondition{
		{Type: "DataCleanable", Status: "True", LastProbeTime: "probe", LastTransitionTime: old.Format(time.RFC3339)},
		{Type: "Error", Status: "False", LastTransitionTime: old.Format(time.RFC3339)},
	}
	got, changed := orphan.ApplyLonghornConditions(conds, []metav1.Condition{
		{Type: "DataCleanable", Status: metav1.ConditionFalse, Reason: "NodeUnavailable", Message: "node down"},
		{Type: "Error", Status: metav1.ConditionFalse, Reason: "NoError"},
		{Type: "PurgeGuarded", Status: metav1.ConditionFalse, Reason: "Clear"},
	}, now)
	want := []orphan.LonghornCondition{
		{Type: "DataCleanable", Status: "False", LastProbeTime: "probe", LastTransitionTime: "2026-02-03T03:05:06Z", Reason: "NodeUnavailable", Message: "node down"},
		{Type: "Error", Status: "False", LastTransitionTime: old.Format(time.RFC3339), Reason: "NoError"},
		{Type: "PurgeGuarded", Status: "False", LastTransitionTime: "2026-02-03T03:05:06Z", Reason: "Clear"},
	}
	if !changed || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v (changed %v), want %+v", got, changed, want)
	}
	if conds[0].Status != "True" {
		t.Fatalf("the input list was modified")
	}
	if _, changed := orphan.ApplyLonghornConditions(got, []metav1.Condition{{Type: "Error", Status: metav1.ConditionFalse, Reason: "NoError"}}, now.Add(time.Hour)); changed {
		t.Fatalf("an unchanged condition reported a change")
	}
	back := orphan.MetaConditions(got)
	if back[0].Status != metav1.ConditionFalse || back[0].Reason != "NodeUnavailable" || !back[0].LastTransitionTime.Time.Equal(now) {
		t.Fatalf("MetaConditions = %+v", back[0])
	}
}

// TestRecordFromLonghorn: metadata, spec and conditions become the
// Record the core judges.
func TestRecordFromLonghorn(t *testing.T) {
	del := metav1.NewTime(testEpoch.Add(time.Minute))
	meta := metav1.ObjectMeta{Name: orphan.ReplicaDataName("node-1", "disk-1", "/var/lib/longhorn", "uuid-1", "pvc-1-0123abcd"),
		ResourceVersion: "42", CreationTimestamp: metav1.NewTime(testEpoch), DeletionTimestamp: &del,
		Labels: map[string]string{orphan.LabelDismissed: "true", orphan.LabelNode: "node-1"}}
	spec := orphan.LonghornOrphanSpec{NodeID: "node-1", OrphanType: "replica", DataEngine: "v1", Parameters: map[string]string{
		orphan.ParamDiskName: "disk-1", orphan.ParamDiskPath: "/var/lib/longhorn", orphan.ParamDiskUUID: "uuid-1", orphan.ParamDataName: "pvc-1-0123abcd"}}
	conds := []orphan.LonghornCondition{{Type: "DataCleanable", Status: "True", LastTransitionTime: testEpoch.Format(time.RFC3339)}}
	r, err := orphan.RecordFromLonghorn(meta, spec, conds)
	if err != nil {
		t.Fatal(err)
	}
	if !r.DeletionRequested || !r.Dismissed || !r.Cleanable() || r.ResourceVersion != "42" || !r.CreatedAt.Equal(testEpoch) ||
		r.Kind != orphan.KindReplicaData || r.DataEngine != orphan.DataEngineV1 || r.Scope() != (orphan.Scope{NodeID: "node-1", Disk: "disk-1"}) {
		t.Fatalf("record = %+v", r)
	}
	if name, err := r.Item().Name(); err != nil || name != r.Name {
		t.Fatalf("the record's item names %s (%v), the record is %s", name, err, r.Name)
	}
	spec.Parameters[orphan.ParamDataName] = "mutated"
	if r.Param(orphan.ParamDataName) != "pvc-1-0123abcd" {
		t.Fatalf("the record shares the spec's parameters")
	}
	// A dismissal keeps data: any value but a clear no dismisses.
	meta.DeletionTimestamp, meta.Labels = nil, map[string]string{orphan.LabelDismissed: "false"}
	if r, _ := orphan.RecordFromLonghorn(meta, spec, nil); r.DeletionRequested || r.Dismissed || r.Cleanable() {
		t.Fatalf("record = %+v", r)
	}
	for _, v := range []string{"yes", "True", "1"} {
		meta.Labels = map[string]string{orphan.LabelDismissed: v}
		if r, _ := orphan.RecordFromLonghorn(meta, spec, nil); !r.Dismissed {
			t.Errorf("dismissal label %q not read as a dismissal", v)
		}
	}
	if _, err := orphan.RecordFromLonghorn(metav1.ObjectMeta{}, spec, nil); !errors.Is(err, orphan.ErrInvalidItem) {
		t.Fatalf("nameless Orphan: %v", err)
	}
}

func ExampleLonghornVolumeState() {
	// A detached volume of two replicas, one of which failed while it was
	// attached: Longhorn says robustness "unknown".
	replicas := []orphan.ReplicaCopy{
		{Name: "pvc-1-r-a", HealthyAt: "2026-01-01T00:00:00Z", Active: true},
		{Name: "pvc-1-r-b", HealthyAt: "2026-01-01T00:00:00Z", FailedAt: "2026-01-02T00:00:00Z", Active: true},
	}
	fmt.Println(orphan.LonghornVolumeState("unknown", "detached", 2, replicas))
	fmt.Println(orphan.LonghornVolumeState("unknown", "detached", 2, nil))
	// Output:
	// degraded
	// faulted
}

// TestReasonsAreListedWithLonghorns: every reason caretaker writes on
// DataCleanable, Error and InstanceExist appears in the package doc's
// table beside Longhorn's, so a change of reasons cannot go unlisted.
func TestReasonsAreListedWithLonghorns(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, "// # Reasons")
	end := strings.Index(doc, "// # Errors")
	if start < 0 || end < start {
		t.Fatal("the package doc has no Reasons section before Errors")
	}
	table := doc[start:end]
	reasons := []string{orphan.ReasonCleanable, orphan.ReasonNoError, orphan.ReasonPurgeFailed, orphan.ReasonPurgeRefused,
		orphan.ReasonInstanceObserved, orphan.ReasonDismissed,
		string(orphan.ReasonGone), string(orphan.ReasonOwned), string(orphan.ReasonMismatch), string(orphan.ReasonNotCleanable)}
	for _, h := range []orphan.Health{orphan.HealthNodeUnavailable, orphan.HealthDiskInvalid, orphan.HealthNodeEvicted,
		orphan.HealthNodeDeleted, orphan.HealthDiskChanged, orphan.HealthDiskEvicted, orphan.HealthDiskRemoved} {
		reasons = append(reasons, string(h))
	}
	for _, r := range reasons {
		if !strings.Contains(table, " "+r) {
			t.Errorf("reason %q is not in the package doc's Reasons table", r)
		}
	}
}
