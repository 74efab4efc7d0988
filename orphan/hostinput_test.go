package orphan

import (
	"math/rand/v2"
	"testing"
)

// TestVolumesAskedCoversEveryVolumeTheGuardAsksAbout: whatever the items
// and records, every volume the last-copy guard reads for a record and an
// item (lastCopyCovers, for any pairing of the two) is in VolumesAsked.
// A host that reads only these and sets VolumesComplete would otherwise
// hand the guard a faulted volume as deleted.
func TestVolumesAskedCoversEveryVolumeTheGuardAsksAbout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"", "pvc-a-0123abcd", "pvc-b-zz99yy88", "no-suffix", "x-1234567", "../x-12345678", "pvc-c-ABCD1234"}
	vols := []string{"", "pvc-a", "pvc-b", "other"}
	kinds := []Kind{KindReplicaData, KindReplicaInstance, KindEngineInstance}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for round := range 2000 {
		var snap Snapshot
		var recs []Record
		for range rng.IntN(4) {
			it := Item{Kind: kinds[rng.IntN(len(kinds))], Parameters: map[string]string{ParamDataName: pick(names)}}
			if rng.IntN(2) == 0 {
				it.Copy = &Copy{Volume: pick(vols), NoData: rng.IntN(4) == 0}
			}
			snap.Items = append(snap.Items, it)
		}
		for range rng.IntN(4) {
			recs = append(recs, Record{Kind: kinds[rng.IntN(len(kinds))], Parameters: map[string]string{ParamDataName: pick(names)}})
		}
		asked := VolumesAsked(snap, recs)
		for i := range recs {
			for j := range snap.Items {
				vs, covered := lastCopyCovers(&recs[i], &snap.Items[j])
				for _, v := range vs {
					if covered && v != "" && !asked[v] {
						t.Fatalf("round %d: the guard asks about %q for record %+v and item %+v; VolumesAsked = %v", round, v, recs[i], snap.Items[j], asked)
					}
				}
			}
		}
		if asked[""] {
			t.Fatalf("round %d: VolumesAsked names the empty volume", round)
		}
	}
}

// TestVolumesAskedNamesCopiesAndDirectories: the inspection's volume and
// the directory's volume both count, and a name that does not tell its
// volume adds nothing.
func TestVolumesAskedNamesCopiesAndDirectories(t *testing.T) {
	snap := Snapshot{Items: []Item{
		{Kind: KindReplicaData, Parameters: map[string]string{ParamDataName: "pvc-a-0123abcd"}, Copy: &Copy{Volume: "restored"}},
		{Kind: KindReplicaData, Parameters: map[string]string{ParamDataName: "not-a-replica"}},
	}}
	recs := []Record{{Kind: KindReplicaData, Parameters: map[string]string{ParamDataName: "pvc-b-9876zyxw"}}}
	got := VolumesAsked(snap, recs)
	want := map[string]bool{"pvc-a": true, "restored": true, "pvc-b": true}
	if len(got) != len(want) {
		t.Fatalf("VolumesAsked = %v, want %v", got, want)
	}
	for v := range want {
		if !got[v] {
			t.Errorf("VolumesAsked = %v, lacks %q", got, v)
		}
	}
}

// TestLastCopyOverridesReadsTheLabel: only the label with its one value
// is an override; other values, other labels and no labels are not.
func TestLastCopyOverridesReadsTheLabel(t *testing.T) {
	recs := []Record{
		{Name: "yes", Labels: map[string]string{LabelLastCopyOverride: LabelValueLastCopyOverride}},
		{Name: "false", Labels: map[string]string{LabelLastCopyOverride: "false"}},
		{Name: "empty", Labels: map[string]string{LabelLastCopyOverride: ""}},
		{Name: "other", Labels: map[string]string{LabelDismissed: LabelValueDismissed}},
		{Name: "none"},
	}
	got := LastCopyOverrides(recs)
	if len(got) != 1 || !got["yes"] {
		t.Errorf("LastCopyOverrides = %v, want only yes", got)
	}
	if LastCopyOverrides(recs[1:]) != nil {
		t.Error("LastCopyOverrides of records without an override is not nil")
	}
}
