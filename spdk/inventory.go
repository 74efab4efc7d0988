package spdk

import (
	"context"
	"fmt"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Inventory is an orphan.Inventory of one node's v2 runtime objects:
// engines (RAID bdevs) and replicas (head lvols), as items of kind
// orphan.KindEngineInstance and orphan.KindReplicaInstance with data engine
// v2 and the parameters InstanceName, InstanceUUID and InstanceManager.
//
// Fill the fields and use it; there is no constructor.
type Inventory struct {
	// RPC reaches the node's SPDK, usually a *Client. Required.
	RPC Caller
	// NodeID is the node the SPDK runs on; it becomes Item.NodeID and the
	// scope. Required.
	NodeID string
	// InstanceManager is the name of this node's v2 instance manager; it
	// becomes the InstanceManager parameter. Required.
	InstanceManager string
}

var _ orphan.Inventory = (*Inventory)(nil)

// Scan lists RAID bdevs and lvols once and returns the engines and replicas
// as items, in a stable order. Objects with an empty UUID, and lvols that
// cannot be attributed, are reported in Snapshot.Skipped. Any RPC failure
// is an error, and so is a result of the wrong shape (null, not a list,
// elements that are not objects or have no name: ErrUnexpectedResult): a
// partial or unreadable listing would make present objects look gone.
// Scan may be called concurrently with itself.
func (inv *Inventory) Scan(ctx context.Context) (orphan.Snapshot, error) {
	if inv.RPC == nil || inv.NodeID == "" || inv.InstanceManager == "" {
		return orphan.Snapshot{}, fmt.Errorf("spdk: Inventory needs RPC, NodeID and InstanceManager")
	}
	rt, err := ReadRuntime(ctx, inv.RPC)
	if err != nil {
		return orphan.Snapshot{}, err
	}
	return inv.Snapshot(rt), nil
}

// Snapshot turns a Runtime into the items and skipped entries Scan returns.
// It is pure.
//
// The node's scope is HealthReady, unless an engine or head lvol was
// skipped for lack of a usable UUID: then it is HealthUnknown, so that the
// cycle keeps every record of the node (one of them may be that object's),
// creates none and purges none, until SPDK reports the UUID. Seed 001
// skips such objects; caretaker also refuses to read their absence as
// "gone".
func (inv *Inventory) Snapshot(rt Runtime) orphan.Snapshot {
	scope := orphan.Scope{NodeID: inv.NodeID}
	status := orphan.ScopeStatus{Health: orphan.HealthReady}
	for _, s := range rt.Skipped {
		if s.NoUUID {
			status = orphan.ScopeStatus{Health: orphan.HealthUnknown, Message: s.Kind + " " + s.Name + " has no usable UUID: its record cannot be matched this cycle"}
			break
		}
	}
	snap := orphan.Snapshot{
		Items:  make([]orphan.Item, 0, len(rt.Engines)+len(rt.Replicas)),
		Scopes: map[orphan.Scope]orphan.ScopeStatus{scope: status},
	}
	for _, e := range rt.Engines {
		snap.Items = append(snap.Items, inv.item(orphan.KindEngineInstance, e.Name, e.UUID))
	}
	for _, r := range rt.Replicas {
		snap.Items = append(snap.Items, inv.item(orphan.KindReplicaInstance, r.Name(), r.UUID()))
	}
	for _, s := range rt.Skipped {
		snap.Skipped = append(snap.Skipped, orphan.Skipped{Scope: scope, Name: s.Name, Reason: s.Kind + ": " + s.Reason})
	}
	return snap
}

func (inv *Inventory) item(kind orphan.Kind, name, uuid string) orphan.Item {
	return orphan.Item{
		Kind:       kind,
		NodeID:     inv.NodeID,
		DataEngine: orphan.DataEngineV2,
		Parameters: map[string]string{
			orphan.ParamInstanceName:    name,
			orphan.ParamInstanceUUID:    uuid,
			orphan.ParamInstanceManager: inv.InstanceManager,
		},
	}
}

// ReadRuntime lists lvols and RAID bdevs through c and classifies them.
func ReadRuntime(ctx context.Context, c Caller) (Runtime, error) {
	lvols, err := BdevLvolGetLvols(ctx, c, "")
	if err != nil {
		return Runtime{}, fmt.Errorf("listing lvols: %w", err)
	}
	raids, err := BdevRaidGetBdevs(ctx, c, RaidCategoryAll)
	if err != nil {
		return Runtime{}, fmt.Errorf("listing RAID bdevs: %w", err)
	}
	return Classify(lvols, raids), nil
}
