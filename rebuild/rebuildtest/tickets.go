package rebuildtest

import (
	"github.com/caretaker-storage/caretaker/rebuild"
)

// RebuildingTicket is the ticket the driver puts for volume: the
// rebuilding attacher at rebuild.DefaultPriority, frontend disabled.
func RebuildingTicket(volume, node string) rebuild.Ticket {
	return rebuild.Ticket{ID: rebuild.TicketID(volume), Type: rebuild.AttacherType, NodeID: node,
		Priority: rebuild.DefaultPriority, DisableFrontend: true}
}

// WorkloadTicket is a pod's CSI attachment ticket, at PriorityCSI.
func WorkloadTicket(id, node string) rebuild.Ticket {
	return rebuild.Ticket{ID: id, Type: "csi-attacher", NodeID: node, Priority: PriorityCSI}
}

// UserTicket is a user's attachment through the Longhorn API, at
// PriorityAPI.
func UserTicket(id, node string) rebuild.Ticket {
	return rebuild.Ticket{ID: id, Type: "longhorn-api", NodeID: node, Priority: PriorityAPI}
}
