package rebuild

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=host.go -destination=mocks/host.go -package=mocks

import (
	"context"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrNotFound is what a VolumeSource or TicketStore wraps, with the name of
// what is missing, when the volume or ticket does not exist, so the driver
// can tell "gone" from "failed". It is caretaker's one NotFound class, the
// same value as orphan.ErrNotFound and the others.
var ErrNotFound = errclass.ErrNotFound

// VolumeSource is the host's read side of volumes, plus the place the
// driver reports to. Implementations usually read from informer caches.
//
// Contract for every method, here and in TicketStore: implementations are
// safe for concurrent use, also for one volume (a host whose reconciles are
// not serialized makes such calls). ctx bounds the call; a call whose ctx
// is done may still complete, but if it fails for that reason its error
// must not wrap ErrNotFound, which would make the driver forget a volume
// or count a ticket as deleted. A nil error means the change was made.
// Returned values belong to the caller: slices are not shared with the
// implementation or with other callers. rebuildtest.RunConformanceTests
// checks this contract.
type VolumeSource interface {
	// Volume returns the current view of the named volume.
	// Called by Driver.Reconcile, concurrently for different volumes.
	// A volume that does not exist (deleted) returns an error wrapping
	// ErrNotFound; the driver then deletes the ticket and forgets the volume.
	// Any other error is treated as retryable: the driver changes nothing
	// and returns it.
	Volume(ctx context.Context, name string) (Volume, error)

	// GlobalSetting returns the raw value of the global setting SettingName
	// ("enabled", "disabled", "true" or "false"). The driver parses it; an
	// unknown value makes the driver treat rebuilding as disabled (releasing
	// any attachment) and return a *SettingError.
	// Called by Driver.Reconcile, concurrently. When the setting does not
	// exist, return the host's default (Longhorn's is "enabled"); there is
	// no NotFound here. Errors are retryable.
	GlobalSetting(ctx context.Context) (string, error)

	// UpdateStatus records the decision's outcome on the volume: Longhorn's
	// Status.OfflineReplicaRebuildingRequired and the OfflineRebuilding
	// condition. Merge the condition with meta.SetStatusCondition: it
	// replaces the stored condition of type ConditionType, leaves other
	// conditions alone, and keeps the stored LastTransitionTime while the
	// condition's Status does not change.
	// Called by Driver.Reconcile after the ticket change was applied,
	// concurrently for different volumes, at most once per call.
	// A volume that no longer exists returns an error wrapping ErrNotFound,
	// which the driver ignores. Other errors are retryable.
	UpdateStatus(ctx context.Context, volume string, status Status) error
}

// Status is what the driver reports on a volume.
type Status struct {
	Required  bool             // degraded and offline rebuilding applies
	Condition metav1.Condition // type ConditionType
}

// TicketStore holds a volume's attachment tickets (in Longhorn: the
// VolumeAttachment object's spec.attachmentTickets). The contract stated on
// VolumeSource (concurrency, ctx, ownership) holds here too.
type TicketStore interface {
	// Tickets returns every ticket of the volume, the rebuilding ticket and
	// everyone else's, in any order, each ID once. Each ticket's ID, Type,
	// NodeID, Priority and DisableFrontend are as PutTicket (or the host's
	// other attachers) stored them. Longhorn derives a ticket's priority
	// from its type; for the types of Longhorn's table at their priorities
	// (AttacherType at DefaultPriority, "csi-attacher" at 900,
	// "longhorn-api" at 1000) that is the same thing.
	// Called by Driver.Reconcile, concurrently for different volumes.
	// A volume without tickets, without a ticket object yet, or that does
	// not exist returns no tickets (a nil or empty slice) and no error.
	// Errors are retryable.
	Tickets(ctx context.Context, volume string) ([]Ticket, error)

	// PutTicket creates the ticket, or replaces the ticket with the same ID.
	// Called by Driver.Reconcile for the rebuilding ticket only, never
	// concurrently for one volume by a host that serializes each volume's
	// reconciles (as work queues do). It must not lose tickets written
	// concurrently by other calls or other attachers: update the ticket
	// object optimistically and report a conflict as an error.
	// A volume that does not exist returns an error wrapping ErrNotFound,
	// and no ticket is stored. Other errors are retryable (a conflicting
	// update is the usual one).
	PutTicket(ctx context.Context, volume string, t Ticket) error

	// DeleteTicket deletes the ticket with the given ID and no other.
	// Called by Driver.Reconcile for the rebuilding ticket only.
	// Deleting a ticket, or a volume, that does not exist is success: return
	// nil or an error wrapping ErrNotFound. Other errors are retryable.
	DeleteTicket(ctx context.Context, volume, id string) error
}
