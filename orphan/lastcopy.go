package orphan

import "fmt"

// VolumeState is what the host knows of a volume, for the last-copy
// guard: a recoverable orphan may be the only copy of a volume's data
// left, and auto-deletion must not destroy it.
//
// The host passes the state of each volume it knows in Input.Volumes (and
// Cycle.Volumes); an orphan's volume and whether its data can be
// recovered come from Item.Copy, which an inspection of the data fills. A
// replica data item (KindReplicaData) that nobody inspected (Copy nil) is
// taken as possibly recoverable, of the volume its directory is named
// after (<volume>-<8 letters or digits>, Longhorn's replica directory
// name). Items of other kinds are covered only when their Inventory sets
// Copy. An orphan whose Copy says it is not recoverable is not covered.
//
// For a covered orphan whose purge is due, by its volume's state:
//
//	VolumeHealthy, VolumeDeleted: the purge goes on.
//	VolumeDegraded:  an automatic purge waits (GuardVolumeDegraded) until
//	                 the volume is healthy: the orphan may be reused as a
//	                 replica instead of a full rebuild (longhorn/longhorn
//	                 #10726); a requested purge goes on.
//	VolumeFaulted:   no purge (GuardLastCopy), requested or automatic,
//	                 unless the record is in Input.LastCopyOverride, which
//	                 lets a requested purge through (never an automatic
//	                 one). A host reports a volume faulted when it has no
//	                 healthy replica.
//	unknown:         a volume Input.Volumes does not list (unless
//	                 VolumesComplete: then it is deleted), a state that is
//	                 none of the above, or an orphan whose volume cannot be
//	                 told: an automatic purge waits (GuardVolumeUnknown),
//	                 as for a faulted volume; a requested purge goes on.
//
// So a host that passes no volumes keeps auto-deletion of replica data
// from purging anything (each refusal says why), and a host that passes a
// complete list gets deleted and healthy volumes' orphans auto-deleted.
// Guard.AllowLastCopy turns the guard off. Refusals are the guard's
// (Plan.Refused, Result.Refused, PurgeGuarded=True with the rule).
type VolumeState string

// The volume states. The first three are spelled as Longhorn's volume
// robustness (longhorn-manager's VolumeRobustness: healthy, degraded,
// faulted; its fourth, unknown, is what an unlisted volume is here);
// VolumeDeleted is caretaker's.
const (
	VolumeHealthy  VolumeState = "healthy"
	VolumeDegraded VolumeState = "degraded"
	VolumeFaulted  VolumeState = "faulted"
	VolumeDeleted  VolumeState = "deleted"
)

// The last-copy guard's rules (see VolumeState).
const (
	GuardLastCopy       GuardRule = "LastCopy"
	GuardVolumeDegraded GuardRule = "VolumeDegraded"
	GuardVolumeUnknown  GuardRule = "VolumeUnknown"
)

// lastCopyHit is the last-copy guard's refusal of r's due purge, whose
// observation this cycle is it; the zero guardHit when the purge may go
// on.
func lastCopyHit(in *Input, r *Record, it *Item) guardHit {
	if in.Guard.AllowLastCopy {
		return guardHit{}
	}
	volume, what := "", ""
	switch {
	case it.Copy != nil && !it.Copy.Recoverable:
		return guardHit{}
	case it.Copy != nil:
		volume, what = it.Copy.Volume, "a recoverable copy"
	case r.Kind == KindReplicaData:
		volume, what = volumeOfDataName(r.Param(ParamDataName)), "a copy not inspected, so possibly recoverable,"
	default:
		return guardHit{}
	}
	auto := !r.DeletionRequested
	state, listed := in.Volumes[volume]
	switch {
	case volume == "":
		state = ""
	case !listed && in.VolumesComplete:
		state = VolumeDeleted
	}
	switch state {
	case VolumeHealthy, VolumeDeleted:
		return guardHit{}
	case VolumeDegraded:
		if auto {
			return guardHit{GuardVolumeDegraded, fmt.Sprintf(
				"it holds %s of volume %s, which is degraded: it may be reused as a replica, so automatic deletion waits until the volume is healthy", what, volume)}
		}
	case VolumeFaulted:
		if auto || !in.LastCopyOverride[r.Name] {
			return guardHit{GuardLastCopy, fmt.Sprintf(
				"it holds %s of volume %s, which is faulted: it may be the last copy of the volume's data; only a person's override (Input.LastCopyOverride) lets a requested purge through", what, volume)}
		}
	default:
		if auto {
			name := volume
			if name == "" {
				name = "(not known)"
			}
			return guardHit{GuardVolumeUnknown, fmt.Sprintf(
				"it holds %s of volume %s, whose state the host did not give: automatic deletion waits until the volume is known healthy or deleted", what, name)}
		}
	}
	return guardHit{}
}

// volumeOfDataName is the volume a Longhorn replica directory is named
// after: Longhorn names a replica's data directory after its volume, a
// dash and 8 random letters or digits (the rule diskscan.ValidDataName
// checks). "" when the name is not of that form.
func volumeOfDataName(name string) string {
	const suffix = 8
	if len(name) < suffix+2 || name[len(name)-suffix-1] != '-' {
		return ""
	}
	for i := len(name) - suffix; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return ""
		}
	}
	return name[:len(name)-suffix-1]
}
