package orphan_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// TestVolumeReadsCompleteOnlyWhenEveryWantedVolumeRead: a wanted volume
// neither read nor known absent makes the states incomplete, so the
// guard takes it as unknown and never as deleted.
func TestVolumeReadsCompleteOnlyWhenEveryWantedVolumeRead(t *testing.T) {
	wanted := map[string]bool{"vol-a": true, "vol-b": true, "vol-gone": true}
	tests := []struct {
		name         string
		read         map[string]orphan.VolumeState
		absent       []string
		wantStates   map[string]orphan.VolumeState
		wantComplete bool
	}{
		{"nothing read", nil, nil, map[string]orphan.VolumeState{}, false},
		{"one missing", map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy}, []string{"vol-gone"},
			map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy}, false},
		{"absent is not read present", map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-b": orphan.VolumeFaulted}, nil,
			map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-b": orphan.VolumeFaulted}, false},
		{"every one read", map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-b": ""}, []string{"vol-gone"},
			map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-b": ""}, true},
		{"an unwanted volume is kept and proves nothing", map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-x": orphan.VolumeDegraded}, []string{"vol-gone", "vol-y"},
			map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-x": orphan.VolumeDegraded}, false},
		{"present beats absent", map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-b": orphan.VolumeFaulted}, []string{"vol-b", "vol-gone"},
			map[string]orphan.VolumeState{"vol-a": orphan.VolumeHealthy, "vol-b": orphan.VolumeFaulted}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := orphan.NewVolumeReads(wanted)
			for n, s := range tc.read {
				r.Read(n, s)
			}
			for _, n := range tc.absent {
				r.Absent(n)
			}
			states, complete := r.States()
			if complete != tc.wantComplete || !maps.Equal(states, tc.wantStates) {
				t.Fatalf("States() = %v, %v; want %v, %v", states, complete, tc.wantStates, tc.wantComplete)
			}
		})
	}
}

// TestVolumeReadsZeroValueNeverComplete: a host that forgot
// NewVolumeReads must not get "every volume that exists is listed".
func TestVolumeReadsZeroValueNeverComplete(t *testing.T) {
	var r orphan.VolumeReads
	r.Read("vol-a", orphan.VolumeHealthy)
	if states, complete := r.States(); complete || states["vol-a"] != orphan.VolumeHealthy {
		t.Fatalf("zero value: States() = %v, %v; want vol-a healthy, incomplete", states, complete)
	}
	if _, complete := orphan.NewVolumeReads(nil).States(); !complete {
		t.Fatal("NewVolumeReads(nil): nothing is wanted, so nothing is missing; want complete")
	}
}

// A host reads the volumes the cycle asks about, says which exist and
// which do not, and passes the result as the cycle's volume states.
func ExampleVolumeReads() {
	wanted := map[string]bool{"pvc-1": true, "pvc-2": true, "pvc-3": true}
	reads := orphan.NewVolumeReads(wanted)
	reads.Read("pvc-1", orphan.VolumeHealthy) // a GET answered
	reads.Absent("pvc-2")                     // NotFound
	// pvc-3's GET failed: it is not read.
	volumes, complete := reads.States()
	fmt.Println(volumes, complete)

	reads.Read("pvc-3", orphan.VolumeFaulted) // read again
	volumes, complete = reads.States()
	fmt.Println(volumes, complete)
	// Output:
	// map[pvc-1:healthy] false
	// map[pvc-1:healthy pvc-3:faulted] true
}
