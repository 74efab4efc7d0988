package rebuild

import (
	"math"
	"time"

	"github.com/caretaker-storage/caretaker/internal/longhorn"
)

// DataEngine is Longhorn's data engine (the one type caretaker shares
// across packages). Offline rebuilding exists for engines that cannot
// rebuild a replica while the volume serves I/O.
type DataEngine = longhorn.DataEngine

const (
	// DataEngineV1 is the iSCSI/TCP engine. Volumes created before the v2
	// engine existed have no engine recorded; hosts pass DataEngineV1 for them.
	DataEngineV1 = longhorn.DataEngineV1
	// DataEngineV2 is the SPDK engine, the one longhorn/longhorn#6071 was written for.
	DataEngineV2 = longhorn.DataEngineV2
)

// Volume is what the decision needs to know about one volume, as the host
// sees it right now. The host builds it from its own objects (in Longhorn:
// the Volume, its Replicas, and the replica scheduler's answer); the package
// never reads the cluster itself, so "healthy" and "schedulable" mean what
// the host says they mean.
type Volume struct {
	Name       string
	OwnerNode  string        // node that owns the volume; the rebuilding ticket asks to attach there
	DataEngine DataEngine    // which engine serves the volume
	Setting    VolumeSetting // the volume's own override; "" means VolumeSettingIgnored
	// State is the attachment state. The view does not say which ticket an
	// attachment serves: while the rebuilding ticket exists, an attachment
	// for an equal-priority ticket counts as the rebuild's, and
	// Options.StallTimeout ends it if nothing progresses.
	State      AttachState
	Robustness Robustness // only RobustnessFaulted changes the decision
	Deleting   bool       // a deletion was requested (deletion timestamp set)

	// DesiredReplicas is how many healthy replicas the volume should have.
	DesiredReplicas int
	// Replicas are the volume's replicas with the state the host judged.
	Replicas []Replica

	// CanReuseFailedReplica: a failed replica could be brought back and
	// rebuilt (its node and disk are usable again).
	CanReuseFailedReplica bool
	// CanScheduleReplica: a new replica could be placed on some disk now.
	CanScheduleReplica bool
}

// Replica is one replica of a volume.
type Replica struct {
	Name  string
	State ReplicaState
	// LastFailedAt is when the replica last failed (Longhorn's
	// Spec.LastFailedAt), zero if never or unknown. A newer time seen while
	// the rebuilding ticket holds the volume counts as a failed rebuild;
	// hosts that leave it zero get failures counted from rebuilds that end
	// without a new healthy replica, which an observation can miss.
	LastFailedAt time.Time
	// RebuildProgress is how far this replica's current rebuild has come,
	// as the host measures it, in any unit that grows while data is copied:
	// in Longhorn, the engine's Status.RebuildStatus[<replica address>].
	// Progress (a percentage), or bytes copied where the host knows them.
	// Only a ReplicaRebuilding replica's value is read, and only growth
	// matters (see Volume.RebuildProgress and Options.StallTimeout). Zero
	// means unknown or not started; negative values count as zero. The
	// unit must move within StallTimeout while data flows: with a
	// percentage, 1% of a 10 TiB replica at 100 MiB/s takes 17 minutes, so
	// prefer bytes for large volumes, or raise StallTimeout.
	//
	// Being "rebuilding" is not progress by itself: a replica that stays
	// ReplicaRebuilding while this value does not grow is a hung rebuild,
	// and the ticket is released Options.StallTimeout after the last
	// progress. Hosts that cannot measure it leave it zero; their rebuilds
	// then get StallTimeout from the attachment or from the last replica
	// that became healthy, so they should set StallTimeout above their
	// longest rebuild of one replica.
	RebuildProgress int64
}

// ReplicaState is the host's judgement of a replica.
type ReplicaState string

const (
	// ReplicaHealthy replicas count towards DesiredReplicas.
	ReplicaHealthy ReplicaState = "healthy"
	// ReplicaRebuilding replicas are receiving data; they do not count yet.
	ReplicaRebuilding ReplicaState = "rebuilding"
	// ReplicaFailed replicas hold no usable data, or cannot be reached.
	ReplicaFailed ReplicaState = "failed"
)

// AttachState is the attachment state of a volume. The values are Longhorn's
// Volume.Status.State strings.
type AttachState string

const (
	StateDetached  AttachState = "detached"  // no attachment; the only state in which the ticket is created
	StateAttaching AttachState = "attaching" // being attached for the highest-priority ticket
	StateAttached  AttachState = "attached"  // attached; with the ticket present, rebuilding should run
	StateDetaching AttachState = "detaching" // on the way to StateDetached
)

// Robustness is Longhorn's Volume.Status.Robustness.
type Robustness string

const (
	RobustnessHealthy  Robustness = "healthy"  // every replica healthy
	RobustnessDegraded Robustness = "degraded" // some replicas lost; the decision counts them itself
	RobustnessFaulted  Robustness = "faulted"  // no usable replica: nothing to rebuild from, the ticket goes
	RobustnessUnknown  Robustness = "unknown"  // not known yet (detached volumes in Longhorn)
)

// HealthyReplicas counts the replicas in ReplicaHealthy.
func (v Volume) HealthyReplicas() int {
	n := 0
	for _, r := range v.Replicas {
		if r.State == ReplicaHealthy {
			n++
		}
	}
	return n
}

// Rebuilding reports whether any replica is in ReplicaRebuilding.
func (v Volume) Rebuilding() bool {
	for _, r := range v.Replicas {
		if r.State == ReplicaRebuilding {
			return true
		}
	}
	return false
}

// RebuildProgress is the sum of RebuildProgress over the replicas in
// ReplicaRebuilding, with negative values counted as zero and the sum
// capped at math.MaxInt64. The decision counts a rise of this sum above
// its highest value since the last other progress as progress.
func (v Volume) RebuildProgress() int64 {
	var sum int64
	for _, r := range v.Replicas {
		if r.State != ReplicaRebuilding || r.RebuildProgress <= 0 {
			continue
		}
		if sum > math.MaxInt64-r.RebuildProgress {
			return math.MaxInt64
		}
		sum += r.RebuildProgress
	}
	return sum
}

// lastFailure is the newest LastFailedAt of any replica.
func (v Volume) lastFailure() time.Time {
	var newest time.Time
	for _, r := range v.Replicas {
		if r.LastFailedAt.After(newest) {
			newest = r.LastFailedAt
		}
	}
	return newest
}

// Degraded reports whether fewer replicas are healthy than desired: the
// volume needs a rebuild. A volume that wants no replicas is never degraded.
func (v Volume) Degraded() bool {
	return v.DesiredReplicas > 0 && v.HealthyReplicas() < v.DesiredReplicas
}

// Ticket is one attachment ticket of a volume: a request by some attacher
// that the volume be attached to a node. The attachment controller attaches
// the volume for the ticket with the highest priority.
type Ticket struct {
	ID              string
	Type            string // attacher type, for example AttacherType or "csi-attacher"
	NodeID          string
	Priority        int  // higher wins; workloads are at or above DefaultWorkloadPriority
	DisableFrontend bool // attach in maintenance mode: no block device for workloads
}

// Longhorn's attacher type and priority levels, so hosts can map tickets
// without their own table.
const (
	// AttacherType is the attacher type of the rebuilding ticket.
	AttacherType = "volume-rebuilding-controller"
	// DefaultPriority is the rebuilding ticket's priority: Longhorn's level
	// for background attachers (snapshot, backup, clone, eviction).
	DefaultPriority = 800
	// DefaultWorkloadPriority is the lowest priority of a workload attacher
	// (Longhorn's CSI attacher, 900; the Longhorn API is 1000).
	DefaultWorkloadPriority = 900
)

// maxTicketID is Longhorn's limit for attachment IDs, which it enforces by
// truncation; we truncate the same way so the IDs match.
const maxTicketID = 253

// TicketID returns the ID of the rebuilding ticket of a volume:
// "volume-rebuilding-controller-<volume>", cut to 253 bytes as Longhorn does.
func TicketID(volume string) string {
	id := AttacherType + "-" + volume
	if len(id) > maxTicketID {
		id = id[:maxTicketID]
	}
	return id
}
