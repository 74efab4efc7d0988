package orphan

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// VolumeState is what the host knows of a volume, for the last-copy
// guard: an orphan that holds a volume's data may be the only copy of it
// left, and auto-deletion must not destroy it.
//
// The host passes the state of each volume it knows in Input.Volumes (and
// Cycle.Volumes); an orphan's volume and what it holds come from
// Item.Copy, which an inspection of the data fills. An orphan with a Copy
// is covered unless the Copy says NoData: the inspection proved that it
// holds none of the volume's data. Whether a tool can export the data
// today (Copy.Recoverable) does not matter: a copy whose backing image is
// missing from its disk or is qcow2, or whose volume.meta is lost, still
// holds the user's writes, which a person or Longhorn can recover, and
// each refusal says which of the two applies (with Copy.Reasons when the
// tool cannot export it). A replica data item (KindReplicaData) is
// covered, inspected or not, of the volume its directory is named after
// (<volume>-<8 letters or digits>, Longhorn's replica directory name)
// as well as of its Copy's volume: where the two differ (a host's own
// inspection that names no volume, or another one), both are weighed and
// a refusal for either stands. Items of other kinds are covered only
// when their Inventory sets Copy.
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
// from purging anything that may hold data (each refusal says why), and a
// host that passes a complete list gets deleted and healthy volumes'
// orphans auto-deleted, and any volume's orphans proven empty (NoData).
// Guard.AllowLastCopy turns the guard off. Refusals are the guard's
// (Plan.Refused, Result.Refused, PurgeGuarded=True with the rule).
//
// The states above are those of when the cycle started. A host that sets
// Cycle.LookupVolume has Sweeper.Reconcile look each covered orphan's volume up
// again right before its purge and apply the same rules to that state: a
// volume faulted since the plan (or one listed deleted that is back)
// keeps its copy, and a failed lookup refuses the purge. Sweeper.Sync
// alone does not re-check.
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
	volumes, covered := lastCopyCovers(r, it)
	if !covered {
		return guardHit{}
	}
	for _, v := range volumes {
		if h := lastCopyHitOf(in, r, it, v); h.rule != "" {
			return h
		}
	}
	return guardHit{}
}

// lastCopyHitOf is lastCopyHit for one volume the copy may be of ("":
// one that cannot be told).
func lastCopyHitOf(in *Input, r *Record, it *Item, volume string) guardHit {
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
				"it holds data of volume %s, which is degraded: it may be reused as a replica, so automatic deletion waits until the volume is healthy; %s", volume, copyHolds(it.Copy))}
		}
	case VolumeFaulted:
		if auto || !in.LastCopyOverride[r.Name] {
			return guardHit{GuardLastCopy, fmt.Sprintf(
				"it holds data of volume %s, which is faulted: it may be the last copy of the volume's data; only a person's override (the Orphan label "+LabelLastCopyOverride+"="+LabelValueLastCopyOverride+" where the host reads it, or the host's LastCopyOverride) lets a requested deletion through; %s", volume, copyHolds(it.Copy))}
		}
	default:
		if auto {
			name := volume
			if name == "" {
				name = "(not known)"
			}
			return guardHit{GuardVolumeUnknown, fmt.Sprintf(
				"it holds data of volume %s, whose state the host did not give: automatic deletion waits until the volume is known healthy or deleted; %s", name, copyHolds(it.Copy))}
		}
	}
	return guardHit{}
}

// lastCopyCovers says whether the last-copy guard covers r, whose
// observation is it, and of which volumes the copy may be: the
// inspection's (Copy.Volume) and, for replica data, the volume its
// directory is named after, each once ("" for one that cannot be told:
// an inspection that could not tell its volume, a directory name not of
// Longhorn's form). Both are weighed, and a refusal for either stands: an
// inspection that names no volume, or another one (a host's own
// Inventory), must not let through the purge of a directory named after
// a faulted volume. Only a
// Copy that says NoData is outside the guard: a copy that holds data is
// covered whether or not a tool can export it.
func lastCopyCovers(r *Record, it *Item) (volumes []string, covered bool) {
	var named string
	if r.Kind == KindReplicaData {
		named = VolumeOfDataName(r.Param(ParamDataName))
	}
	switch {
	case it.Copy != nil && it.Copy.NoData:
		return nil, false
	case it.Copy != nil && named != "" && named != it.Copy.Volume:
		return []string{it.Copy.Volume, named}, true
	case it.Copy != nil:
		return []string{it.Copy.Volume}, true
	case r.Kind == KindReplicaData:
		return []string{named}, true
	}
	return nil, false
}

// maxReasonsText bounds the reasons a message repeats from a Copy: a
// condition's message is bounded (32768 bytes in Kubernetes), and the
// rule must stay readable.
const maxReasonsText = 2048

// copyHolds says, for a refusal, what the covered copy cp holds: data a
// tool can export, data it cannot export today and why, or (cp nil) data
// nobody inspected.
func copyHolds(cp *Copy) string {
	switch {
	case cp == nil:
		return "nobody inspected the copy, so it may hold the volume's data"
	case cp.Recoverable:
		return "the copy holds data the tool can export"
	case len(cp.Reasons) == 0:
		return "the copy holds data the tool cannot export today"
	}
	return "the copy holds data the tool cannot export today: " + joinReasons(cp.Reasons)
}

// joinReasons joins reasons with "; ", cut at maxReasonsText bytes.
func joinReasons(reasons []string) string {
	return string(appendReasons(nil, reasons))
}

// appendReasons appends reasons to b joined with "; ", cut at
// maxReasonsText bytes (on a UTF-8 boundary) with "... (cut)".
func appendReasons(b []byte, reasons []string) []byte {
	start := len(b)
	for i, reason := range reasons {
		if i > 0 {
			b = append(b, "; "...)
		}
		b = append(b, reason...)
		if len(b)-start > maxReasonsText {
			cut := start + maxReasonsText
			for cut > start && !utf8.RuneStart(b[cut]) {
				cut--
			}
			return append(b[:cut], "... (cut)"...)
		}
	}
	return b
}

// volumeRecheck is the last-copy guard's re-check at the moment of a
// purge (Cycle.LookupVolume): the cycle's guard input, with the volume's
// state looked up anew.
type volumeRecheck struct {
	lookup   func(ctx context.Context, volume string) (VolumeState, bool, error)
	guard    Guard
	complete bool
	override map[string]bool
}

// refusal is the last-copy guard's refusal of cur's purge, whose
// observation is it, by its volume's state now; "" when the purge may go
// on. The rule is lastCopyHit's, given an input of that one volume. A
// failed lookup refuses: the purge never goes on on an error.
func (vr *volumeRecheck) refusal(ctx context.Context, cur *Record, it *Item) string {
	if vr == nil || vr.lookup == nil || vr.guard.AllowLastCopy {
		return ""
	}
	volumes, covered := lastCopyCovers(cur, it)
	if !covered {
		return ""
	}
	in := Input{Guard: vr.guard, VolumesComplete: vr.complete, LastCopyOverride: vr.override}
	for _, volume := range volumes {
		if volume == "" {
			continue
		}
		state, known, err := vr.lookup(ctx, volume)
		if err != nil {
			return guardHit{GuardVolumeUnknown, fmt.Sprintf(
				"looking up the state of volume %s at the moment of deletion failed (%v): no purge goes on without it", volume, err)}.String()
		}
		if known {
			if in.Volumes == nil {
				in.Volumes = map[string]VolumeState{}
			}
			in.Volumes[volume] = state
		}
	}
	if hit := lastCopyHit(&in, cur, it); hit.rule != "" {
		return hit.String() + " (state looked up at the moment of deletion)"
	}
	return ""
}
