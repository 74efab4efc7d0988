package orphan

import "github.com/caretaker-storage/caretaker/internal/lhreplica"

// VolumeOfDataName returns the volume a Longhorn v1 replica data directory
// (ParamDataName) is named after: longhorn-manager names it
// <volume>-<8 letters or digits> (scheduler/replica_scheduler.go,
// util.RandomID), and volume.meta does not name the volume. It returns ""
// for a name not of that form (or unsafe as a path component): such a
// directory's volume cannot be told, and the last-copy guard then treats
// its volume as unknown. diskscan.ValidDataName is the same rule.
func VolumeOfDataName(name string) string { return lhreplica.VolumeOfDataName(name) }
