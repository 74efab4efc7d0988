package orphan

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionRecoverable is caretaker's condition on a record whose item an
// inspection judged as a copy of a volume's data (Item.Copy): True when
// the volume's data can be read back from it by the tool (reason
// ReasonRecoverable, or ReasonReusable when its volume lacks replicas);
// False when the copy holds data the tool cannot export today (reason
// ReasonNotRecoverable, the message giving every reason and what to do
// about it) or when it is proven to hold none of the volume's data
// (reason ReasonNoData, Copy.NoData). The last-copy guard (see
// VolumeState) covers every copy but a NoData one, so a NotRecoverable
// copy of a faulted volume is kept too. Longhorn has no such condition.
//
// Decide writes it on every record it keeps in a Ready scope, and on new
// records, whose item this cycle has a Copy, when the record does not
// carry it already: a record whose condition is current is not
// rewritten. A cycle whose item has no Copy (nobody inspected it, or the
// inspection could not read it this time) leaves the condition as it
// was.
const ConditionRecoverable = "Recoverable"

// The reasons of ConditionRecoverable.
const (
	// ReasonRecoverable: the copy is recoverable. The message gives its
	// volume, revision counter and rank among the volume's copies seen.
	ReasonRecoverable = "Recoverable"
	// ReasonReusable: the copy is recoverable and its volume (listed in
	// Input.Volumes) is degraded or faulted, so it lacks replicas. The
	// message adds what a host needs to re-adopt the copy as a failed
	// replica instead of rebuilding one from scratch (longhorn/longhorn
	// #10726): dataDirectoryName, diskPath, head, size and revisionCounter.
	// caretaker itself never re-adopts a copy.
	ReasonReusable = "Reusable"
	// ReasonNotRecoverable: the copy holds the volume's data but the tool
	// cannot export it today; the message says so and gives every reason
	// (Copy.Reasons), with what a person can do (for a Longhorn v1 copy,
	// for example: a backing image missing on this disk is copied back
	// from another node, then the copy is exported). The data is still
	// on the disk: the last-copy guard keeps it while its volume needs it.
	ReasonNotRecoverable = "NotRecoverable"
	// ReasonNoData: an inspection proved that the copy holds none of the
	// volume's data (Copy.NoData; for a Longhorn v1 directory: no file
	// but its metadata holds data, and it has no backing image). It beats
	// the other reasons: an empty copy is no copy of the volume's data,
	// and the last-copy guard does not keep it.
	ReasonNoData = "NoData"
)

// copyCond is a planned ConditionRecoverable: comparable, so records that
// need the same conditions share them (condKey).
type copyCond struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func (c copyCond) condition() metav1.Condition {
	return metav1.Condition{Type: ConditionRecoverable, Status: c.status, Reason: c.reason, Message: c.message}
}

// copyCondNeeded is the ConditionRecoverable r needs for Copy cp of its
// item, and whether r lacks it. The message is spelled into *buf, which
// is reused, and copied into a string only when r's condition differs: a
// record whose condition is current costs no allocation.
func copyCondNeeded(r *Record, cp *Copy, vols map[string]VolumeState, buf *[]byte) (copyCond, bool) {
	if cp == nil {
		return copyCond{}, false
	}
	want := copyCond{status: metav1.ConditionFalse, reason: ReasonNotRecoverable}
	state := vols[cp.Volume]
	reuse := cp.Recoverable && !cp.NoData && cp.Volume != "" && (state == VolumeDegraded || state == VolumeFaulted)
	switch {
	case cp.NoData:
		want.reason = ReasonNoData
	case reuse:
		want.status, want.reason = metav1.ConditionTrue, ReasonReusable
	case cp.Recoverable:
		want.status, want.reason = metav1.ConditionTrue, ReasonRecoverable
	}
	b := appendCopyMessage((*buf)[:0], r, cp, state, reuse)
	*buf = b
	if c := meta.FindStatusCondition(r.Conditions, ConditionRecoverable); c != nil &&
		c.Status == want.status && c.Reason == want.reason && c.Message == string(b) {
		return copyCond{}, false
	}
	want.message = string(b)
	return want, true
}

// appendCopyMessage spells ConditionRecoverable's message, for example
//
//	volume pvc-a: a recoverable copy, revision counter 42, rank 1 among the copies of the volume seen (1 is the best)
//	volume pvc-a: a recoverable copy, ...; volume pvc-a is faulted: to re-adopt this copy as a failed replica: dataDirectoryName=pvc-a-1b2c3d4e diskPath=/var/lib/longhorn head=volume-head-002.img size=1073741824 revisionCounter=42
//	volume pvc-a: holds data the tool cannot export today: volume-meta: volume.meta: missing (...)
//	volume pvc-a: holds none of the volume's data, as its inspection proved: the last-copy guard does not keep it
func appendCopyMessage(b []byte, r *Record, cp *Copy, state VolumeState, reuse bool) []byte {
	if cp.Volume != "" {
		b = append(b, "volume "...)
		b = append(b, cp.Volume...)
		b = append(b, ": "...)
	}
	if cp.NoData {
		return append(b, "holds none of the volume's data, as its inspection proved: the last-copy guard does not keep it"...)
	}
	if !cp.Recoverable {
		b = append(b, "holds data the tool cannot export today"...)
		if len(cp.Reasons) > 0 {
			b = append(b, ": "...)
			b = appendReasons(b, cp.Reasons)
		}
		return append(b, "; its data is still on the disk: the last-copy guard keeps it while its volume is faulted, degraded or unknown"...)
	}
	b = append(b, "a recoverable copy, "...)
	if cp.Revision > 0 {
		b = append(b, "revision counter "...)
		b = strconv.AppendInt(b, cp.Revision, 10)
	} else {
		b = append(b, "no revision counter"...)
	}
	if cp.Rank > 0 {
		b = append(b, ", rank "...)
		b = strconv.AppendInt(b, int64(cp.Rank), 10)
		b = append(b, " among the copies of the volume seen (1 is the best)"...)
	}
	if !reuse {
		return b
	}
	b = append(b, "; volume "...)
	b = append(b, cp.Volume...)
	b = append(b, " is "...)
	b = append(b, state...)
	b = append(b, ": to re-adopt this copy as a failed replica:"...)
	field := func(k, v string) {
		if v != "" {
			b = append(b, ' ')
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, v...)
		}
	}
	field("dataDirectoryName", r.Param(ParamDataName))
	field("diskPath", r.Param(ParamDiskPath))
	field("head", cp.Head)
	if cp.Size > 0 {
		b = append(b, " size="...)
		b = strconv.AppendInt(b, cp.Size, 10)
	}
	b = append(b, " revisionCounter="...)
	b = strconv.AppendInt(b, cp.Revision, 10)
	return b
}
