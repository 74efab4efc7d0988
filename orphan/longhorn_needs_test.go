package orphan_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestLonghornVolumeNeedsReplicasSaysWhenReplicasCount: for every
// robustness and state, when LonghornVolumeNeedsReplicas is false the
// replicas change nothing in LonghornVolumeState (a host that skips
// listing them loses nothing), and when it is true they do (no replica is
// faulted, enough healthy ones are healthy).
func TestLonghornVolumeNeedsReplicasSaysWhenReplicasCount(t *testing.T) {
	healthy := orphan.ReplicaCopy{Name: "r", HealthyAt: "2025-01-01T00:00:00Z", Active: true}
	robust := []string{orphan.RobustnessHealthy, orphan.RobustnessDegraded, orphan.RobustnessFaulted, orphan.RobustnessUnknown, "", "other"}
	states := []string{orphan.VolumeStateDetached, "attached", "attaching", "detaching", "", "creating"}
	for _, r := range robust {
		for _, s := range states {
			none := orphan.LonghornVolumeState(r, s, 1, nil)
			one := orphan.LonghornVolumeState(r, s, 1, []orphan.ReplicaCopy{healthy})
			needs := orphan.LonghornVolumeNeedsReplicas(r, s)
			if needs != (none != one) {
				t.Errorf("robustness %q state %q: NeedsReplicas = %v, but no replica gives %q and one healthy gives %q", r, s, needs, none, one)
			}
		}
	}
}
