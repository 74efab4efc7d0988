package orphan_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestDecideNeverPurgesADuplicatedName: two records of one name in one
// input (two lists merged, a cache that holds an object twice) cannot
// both be the store's one object of that name. A dismissed copy beside a
// requested one must not let the data go: no purge, no forget, and the
// request is refused visibly.
func TestDecideNeverPurgesADuplicatedName(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	requested := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-0123abcd"))
	requested.DeletionRequested = true
	dismissed := requested.Clone()
	dismissed.DeletionRequested, dismissed.Dismissed = false, true
	auto := requested.Clone()
	auto.DeletionRequested = false
	for _, tc := range []struct {
		name    string
		records []orphan.Record
		refused bool
	}{
		{"dismissed and requested", []orphan.Record{dismissed, requested}, true},
		{"requested and dismissed", []orphan.Record{requested, dismissed}, true},
		{"requested twice", []orphan.Record{requested, requested.Clone()}, true},
		{"auto-deleted twice", []orphan.Record{auto, auto.Clone()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := orphan.Input{Now: testEpoch.Add(time.Hour), Scopes: ready(d1),
				Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("x")}},
				Records:    tc.records, Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
				Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, Guard: orphan.Guard{AllowAnyShare: true, AllowWholeScope: true}}
			p := orphan.Decide(in)
			if len(p.Purge) != 0 || len(p.Forget) != 0 || len(p.Create) != 0 {
				t.Fatalf("a name held by two records: purges %v, forgets %v, creates %v; want all kept", p.Purge, p.Forget, p.Create)
			}
			if len(p.Keep) != 2 {
				t.Fatalf("kept %d records, want both", len(p.Keep))
			}
			for _, k := range p.Keep {
				if !strings.Contains(k.Reason, "records share the name") {
					t.Errorf("keep reason %q does not say why", k.Reason)
				}
			}
			if got := len(p.Refused) == 1 && p.Refused[0].Rule == orphan.RuleDuplicateName; got != tc.refused {
				t.Fatalf("refused %v, want one %s refusal: %v", p.Refused, orphan.RuleDuplicateName, tc.refused)
			}
			checkAgainstReference(t, 0, in)
		})
	}
}

// TestDecideAutoDeletionWaitsForACreationTime: a record with no creation
// time (a store that does not keep it, a plan made with a zero Now) has
// no grace period to count: auto-deletion must not take it for over,
// while a person's request still goes on.
func TestDecideAutoDeletionWaitsForACreationTime(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
	rec := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-0123abcd"))
	rec.CreatedAt = time.Time{}
	in := orphan.Input{Now: testEpoch, Scopes: ready(d1),
		Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("x")}},
		Records:    []orphan.Record{rec}, Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}, GracePeriod: orphan.DefaultGracePeriod},
		Volumes: map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, Guard: orphan.Guard{AllowAnyShare: true, AllowWholeScope: true}}
	p := orphan.Decide(in)
	if len(p.Purge) != 0 {
		t.Fatalf("a record of unknown age was auto-purged: %+v", p.Purge)
	}
	if len(p.Keep) != 1 || !strings.Contains(p.Keep[0].Reason, "no creation time") {
		t.Fatalf("keep %+v, want the record kept saying it has no creation time", p.Keep)
	}
	if !p.RequeueAt.IsZero() {
		t.Errorf("RequeueAt = %v: time alone never makes it due", p.RequeueAt)
	}
	checkAgainstReference(t, 0, in)

	// A plan made with no Now creates records of no age: they wait too.
	in.Now, in.Records = time.Time{}, nil
	p = orphan.Decide(in)
	if len(p.Create) != 1 {
		t.Fatalf("created %d records, want 1", len(p.Create))
	}
	in.Records, in.Now = []orphan.Record{p.Create[0]}, testEpoch
	if p = orphan.Decide(in); len(p.Purge) != 0 {
		t.Fatalf("a record created at a zero Now was auto-purged: %+v", p.Purge)
	}

	// A person's request goes on.
	in.Records = []orphan.Record{rec}
	in.Records[0].DeletionRequested = true
	if p = orphan.Decide(in); len(p.Purge) != 1 {
		t.Fatalf("a requested purge of a record of unknown age was not planned: %+v", p)
	}
}

// TestLastCopyGuardWeighsTheDirectoryNameBesideTheInspection: a host's
// own inspection that could not tell a directory's volume, or that names
// another volume, must not let through the purge of a directory named
// after a faulted volume: both volumes are weighed, and a refusal for
// either stands.
func TestLastCopyGuardWeighsTheDirectoryNameBesideTheInspection(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	for _, tc := range []struct {
		name      string
		copy      *orphan.Copy
		volumes   map[string]orphan.VolumeState
		requested bool
		want      string // "purge" or the rule refusing
	}{
		{"no volume told, requested, directory's volume faulted", &orphan.Copy{Recoverable: true},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}, true, "LastCopy"},
		{"another volume, healthy, directory's faulted, automatic", &orphan.Copy{Volume: "pvc-b", Recoverable: true},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted, "pvc-b": orphan.VolumeHealthy}, false, "LastCopy"},
		{"another volume, healthy, directory's degraded, automatic", &orphan.Copy{Volume: "pvc-b"},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeDegraded, "pvc-b": orphan.VolumeHealthy}, false, "VolumeDegraded"},
		{"another volume, faulted, directory's healthy, requested", &orphan.Copy{Volume: "pvc-b", Recoverable: true},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy, "pvc-b": orphan.VolumeFaulted}, true, "LastCopy"},
		// What it still allows: both healthy, or a copy proven empty.
		{"another volume, both healthy, automatic", &orphan.Copy{Volume: "pvc-b", Recoverable: true},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy, "pvc-b": orphan.VolumeHealthy}, false, "purge"},
		{"no volume told, requested, directory's volume healthy", &orphan.Copy{Recoverable: true},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeHealthy}, true, "purge"},
		{"proven empty, directory's volume faulted", &orphan.Copy{NoData: true},
			map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}, false, "purge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := replicaItem("n1", "disk-1", "pvc-a-0123abcd")
			it.Copy = tc.copy
			rec := markCleanable(orphanRecord("n1", "disk-1", "pvc-a-0123abcd"))
			rec.DeletionRequested = tc.requested
			in := orphan.Input{Now: testEpoch.Add(time.Hour), Scopes: ready(d1),
				Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("x")}},
				Records:    []orphan.Record{rec}, Policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
				Volumes: tc.volumes, Guard: orphan.Guard{AllowAnyShare: true, AllowWholeScope: true, AllowOverBudget: true}}
			p := orphan.Decide(in)
			got := "purge"
			if len(p.Purge) == 0 {
				if len(p.Refused) != 1 {
					t.Fatalf("neither purged nor refused: %+v", p)
				}
				got = p.Refused[0].Rule
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s (refused %+v)", got, tc.want, p.Refused)
			}
			checkAgainstReference(t, 0, in)
		})
	}
}

// TestDecideNeverPlansAPathLikeName: an item whose data name is path-like
// ("..", a slash, a NUL) is none a scan lists; a host's own Inventory or
// Judge may still hand one over judged orphan. Decide must neither record
// nor purge it (a host applying the plan with a deleter that joins the
// name to a path would leave the disk's replicas directory), and forgets
// a record of it, which keeps whatever is on disk.
func TestDecideNeverPlansAPathLikeName(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	for _, name := range []string{"..", ".", "../../n-d/replicas/pvc-lost-r-deadbeef", "pvc-a/b-0123abcd", "pvc-a\x00-0123abcd"} {
		t.Run(name, func(t *testing.T) {
			it := replicaItem("n1", "disk-1", name)
			rec := orphan.Record{Name: orphan.ReplicaDataName("n1", "disk-1", it.Param(orphan.ParamDiskPath), it.Param(orphan.ParamDiskUUID), name),
				Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine, Parameters: it.Parameters, CreatedAt: testEpoch}
			rec = markCleanable(rec)
			rec.DeletionRequested = true
			in := orphan.Input{Now: testEpoch.Add(time.Hour), Scopes: ready(d1),
				Candidates: []orphan.Candidate{{Item: it, Verdict: orphan.Orphan("a host's judge")}},
				Records:    []orphan.Record{rec}, Guard: orphan.Guard{AllowAnyShare: true, AllowWholeScope: true, AllowLastCopy: true}}
			p := orphan.Decide(in)
			if len(p.Purge) != 0 {
				t.Fatalf("purge planned of data named %q: %+v", name, p.Purge)
			}
			if len(p.Forget) != 1 || p.Forget[0].Reason != orphan.ReasonMismatch {
				t.Fatalf("forget %+v; want the record forgotten (Mismatch)", p.Forget)
			}
			if len(p.Rejected) != 1 || !errors.Is(p.Rejected[0].Err, orphan.ErrInvalidItem) || !strings.Contains(p.Rejected[0].Err.Error(), "path-like") {
				t.Fatalf("rejected %+v; want the candidate rejected as path-like", p.Rejected)
			}
			in.Records = nil
			if p = orphan.Decide(in); len(p.Create) != 0 {
				t.Fatalf("a record created for data named %q", name)
			}
			if _, err := orphan.NewRecord(it, testEpoch); !errors.Is(err, orphan.ErrInvalidItem) {
				t.Fatalf("NewRecord of data named %q: %v, want ErrInvalidItem", name, err)
			}
		})
	}
	// What it still allows: names with dots, spaces and dashes inside.
	for _, name := range []string{"pvc-a..b-0123abcd", "...", " .. ", "pvc-a-0123abcd"} {
		if _, err := replicaItem("n1", "disk-1", name).Name(); err != nil {
			t.Errorf("data named %q: %v", name, err)
		}
	}
	inst := orphan.Item{Kind: orphan.KindReplicaInstance, NodeID: "n1", DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{orphan.ParamInstanceName: "r/../x", orphan.ParamInstanceUUID: "u", orphan.ParamInstanceManager: "im"}}
	if _, err := inst.Name(); !errors.Is(err, orphan.ErrInvalidItem) {
		t.Errorf("instance named r/../x: %v, want ErrInvalidItem", err)
	}
}

// TestGuardTakesANegativeOwnedCountAsNone: a host's count of owned items
// it did not list that went negative (a subtraction gone wrong) must not
// shrink a scope's valid items below its orphans: WholeScope would never
// trip, and NoneExpected would see nothing valid. Counted as zero, every
// orphan of a disk is still the whole scope.
func TestGuardTakesANegativeOwnedCountAsNone(t *testing.T) {
	d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	for _, tc := range []struct {
		name string
		st   orphan.ScopeStatus
		rule orphan.GuardRule
	}{
		{"scope count", orphan.ScopeStatus{Health: orphan.HealthReady, OwnedUnlisted: -1}, orphan.GuardWholeScope},
		{"group count", orphan.ScopeStatus{Health: orphan.HealthReady, Groups: map[orphan.Group]orphan.Evidence{
			{Kind: orphan.KindReplicaData, DataEngine: orphan.DataEngineV1}: {OwnedUnlisted: -5}}}, orphan.GuardWholeScope},
		{"none expected", orphan.ScopeStatus{Health: orphan.HealthReady, OwnedUnlisted: -3, NoneExpected: true}, orphan.GuardNoneExpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := orphan.Input{Now: testEpoch.Add(time.Hour), Scopes: ready(d1), Volumes: map[string]orphan.VolumeState{}}
			in.Scopes[d1] = tc.st
			for _, data := range []string{"pvc-a-0123abcd", "pvc-b-0123abcd", "pvc-c-0123abcd"} {
				it := replicaItem("n1", "disk-1", data)
				rec := markCleanable(orphanRecord("n1", "disk-1", data))
				rec.DeletionRequested = true
				in.Candidates = append(in.Candidates, orphan.Candidate{Item: it, Verdict: orphan.Orphan("x")})
				in.Records = append(in.Records, rec)
				in.Volumes[data[:5]] = orphan.VolumeHealthy
			}
			p := orphan.Decide(in)
			if len(p.Purge) != 0 {
				t.Fatalf("%d purges of every item of a disk whose owned count is negative", len(p.Purge))
			}
			for _, r := range p.Refused {
				if r.Rule != string(tc.rule) {
					t.Fatalf("refused by %s, want %s: %+v", r.Rule, tc.rule, r)
				}
			}
			checkAgainstReference(t, 0, in)
		})
	}
}
