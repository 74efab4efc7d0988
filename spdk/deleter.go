package spdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/orphan"
)

// ErrUUIDMismatch: the runtime object named in the record exists but its
// UUID is not the recorded one (it was deleted and recreated, or belongs
// to another lifecycle). Nothing was deleted. It wraps
// orphan.ErrPreconditionFailed.
var ErrUUIDMismatch = fmt.Errorf("%w: runtime UUID does not match the record", orphan.ErrPreconditionFailed)

// Deleter is an orphan.Deleter for v2 engine-instance and replica-instance
// records, with seed 001's delete-time validation: it re-reads the runtime
// object named by the record and deletes only if its UUID equals the
// record's InstanceUUID.
//
// A replica purge removes the lvol tree the head owns (its derived lvols,
// see Classify): each lvol after the lvols that depend on it, the head
// last, each deleted by UUID so a recreated object is never hit. The head
// goes last so that a purge interrupted half-way leaves the replica still
// listed under the same UUID, and the next sweep finishes it. Deleting a
// snapshot whose only clone is the head relies on SPDK accepting a delete
// of a snapshot with one clone (it merges the snapshot into the clone);
// older SPDK refuses it, and the purge then fails without harm.
//
// An engine purge deletes the RAID bdev after the UUID check.
// bdev_raid_delete takes a name, not a UUID, so a RAID bdev recreated
// under the same name between the check and the delete (a window of one
// RPC round trip) is not detected; the Sweeper's re-judgement right before
// makes that a recreate by an owner the cluster does not know.
//
// Fill the fields and use it. Delete may be called concurrently.
type Deleter struct {
	// RPC reaches the node's SPDK. Required.
	RPC Caller
	// NodeID and InstanceManager, when set, must equal the record's: this
	// Deleter only reaches its own node's runtime.
	NodeID          string
	InstanceManager string
}

var _ orphan.Deleter = (*Deleter)(nil)

// Delete implements orphan.Deleter. A record that is not a v2 instance, or
// lacks InstanceName or InstanceUUID, or belongs to another node or
// instance manager, is refused with ErrPreconditionFailed. An object that
// is already gone is success. RPC and connection errors are returned as
// they are and are retryable; on them nothing more is deleted.
func (d *Deleter) Delete(ctx context.Context, r orphan.Record) error {
	name, uuid, err := d.check(r)
	if err != nil {
		return err
	}
	switch r.Kind {
	case orphan.KindEngineInstance:
		return d.deleteEngine(ctx, name, uuid)
	default:
		return d.deleteReplica(ctx, name, uuid)
	}
}

func (d *Deleter) check(r orphan.Record) (name, uuid string, err error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", orphan.ErrPreconditionFailed, r.Name, fmt.Sprintf(format, args...))
	}
	if d.RPC == nil {
		return "", "", errors.New("spdk: Deleter has no RPC")
	}
	if r.Kind != orphan.KindEngineInstance && r.Kind != orphan.KindReplicaInstance {
		return "", "", refuse("kind %q is not a runtime instance", r.Kind)
	}
	if r.DataEngine != orphan.DataEngineV2 {
		return "", "", refuse("data engine %q is not v2", r.DataEngine)
	}
	name, uuid = r.Param(orphan.ParamInstanceName), r.Param(orphan.ParamInstanceUUID)
	if name == "" || uuid == "" {
		return "", "", refuse("record lacks InstanceName or InstanceUUID")
	}
	if d.NodeID != "" && r.NodeID != d.NodeID {
		return "", "", refuse("record is for node %q, this deleter reaches %q", r.NodeID, d.NodeID)
	}
	if im := r.Param(orphan.ParamInstanceManager); d.InstanceManager != "" && im != d.InstanceManager {
		return "", "", refuse("record is for instance manager %q, this deleter reaches %q", im, d.InstanceManager)
	}
	return name, uuid, nil
}

func (d *Deleter) deleteEngine(ctx context.Context, name, uuid string) error {
	raids, err := BdevRaidGetBdevs(ctx, d.RPC, RaidCategoryAll)
	if err != nil {
		return fmt.Errorf("re-reading engine %s: %w", name, err)
	}
	i := slices.IndexFunc(raids, func(r RaidBdev) bool { return r.Name == name })
	if i < 0 {
		return nil
	}
	if raids[i].UUID != uuid {
		return fmt.Errorf("%w: engine %s: RAID bdev UUID is %q, record has %q", ErrUUIDMismatch, name, raids[i].UUID, uuid)
	}
	if err := BdevRaidDelete(ctx, d.RPC, name); err != nil && !errors.Is(err, ErrNoSuchDevice) {
		return fmt.Errorf("deleting engine %s: %w", name, err)
	}
	return nil
}

func (d *Deleter) deleteReplica(ctx context.Context, name, uuid string) error {
	bdevs, err := BdevGetBdevs(ctx, d.RPC, "")
	if err != nil {
		return fmt.Errorf("re-reading replica %s: %w", name, err)
	}
	order, err := PurgeOrder(bdevs, name, uuid)
	if err != nil || len(order) == 0 {
		return err
	}
	for _, l := range order {
		if err := BdevLvolDelete(ctx, d.RPC, l.UUID); err != nil && !errors.Is(err, ErrNoSuchDevice) {
			return fmt.Errorf("deleting lvol %s of replica %s: %w", l.Alias, name, err)
		}
	}
	return nil
}

// PurgeOrder returns the lvols to delete, in order, to purge the replica
// whose head lvol is named name and has UUID uuid, given every bdev SPDK
// listed: the head's derived lvols, each after the lvols that are its
// clones, and the head last. It is pure.
//
// No head of that name: nil, nil (already gone). Heads of that name but
// none with that UUID: ErrUUIDMismatch. An lvol of the tree with a clone
// outside it (something else depends on it): ErrPreconditionFailed.
func PurgeOrder(bdevs []Bdev, name, uuid string) ([]Lvol, error) {
	lvols := lvolsOf(bdevs)
	var head *lvolNode
	var seen []string
	for i := range lvols {
		l := &lvols[i]
		if l.Name != name || l.IsSnapshot {
			continue
		}
		if l.UUID == uuid {
			head = l
			break
		}
		seen = append(seen, l.UUID)
	}
	if head == nil {
		if len(seen) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: replica %s: head lvol UUID is %s, record has %q", ErrUUIDMismatch, name, strings.Join(seen, ","), uuid)
	}

	// The tree: the head and what Classify attributes to it in its lvstore.
	byName := make(map[string]*lvolNode)
	for i := range lvols {
		if lvols[i].Lvs.UUID == head.Lvs.UUID {
			byName[lvols[i].Name] = &lvols[i]
		}
	}
	tree := map[string]*lvolNode{head.Name: head}
	for n, l := range byName {
		if strings.HasPrefix(n, BackingImagePrefix) {
			continue
		}
		owner, ok := derivedOwner(l.Lvol, func(s string) bool { _, ok := byName[s]; return ok })
		if ok && owner == name {
			tree[n] = l
		}
	}
	for _, l := range tree {
		for _, c := range l.clones {
			if _, ok := tree[c]; !ok {
				return nil, fmt.Errorf("%w: replica %s: lvol %s has clone %s, which the replica does not own", orphan.ErrPreconditionFailed, name, l.Alias, c)
			}
		}
	}

	// Post-order over clone edges, in name order for determinism.
	names := make([]string, 0, len(tree))
	for n := range tree {
		names = append(names, n)
	}
	slices.Sort(names)
	visited := make(map[string]bool, len(tree))
	order := make([]Lvol, 0, len(tree))
	var visit func(n string)
	visit = func(n string) {
		if visited[n] {
			return
		}
		visited[n] = true
		l := tree[n]
		cs := slices.Clone(l.clones)
		slices.Sort(cs)
		for _, c := range cs {
			if _, ok := tree[c]; ok {
				visit(c)
			}
		}
		if n != name {
			order = append(order, l.Lvol)
		}
	}
	for _, n := range names {
		visit(n)
	}
	return append(order, head.Lvol), nil
}

// lvolNode is an lvol with its clone edges, from bdev_get_bdevs.
type lvolNode struct {
	Lvol
	clones []string
}

// lvolsOf picks the lvol bdevs out of a bdev_get_bdevs listing. An lvol
// bdev's name is its UUID and its first alias "<lvstore>/<lvol>".
func lvolsOf(bdevs []Bdev) []lvolNode {
	var out []lvolNode
	for _, b := range bdevs {
		info := b.DriverSpecific.Lvol
		if info == nil || b.ProductName != ProductLogicalVolume {
			continue
		}
		alias := ""
		for _, a := range b.Aliases {
			if strings.Contains(a, "/") {
				alias = a
				break
			}
		}
		lvs, lname, ok := strings.Cut(alias, "/")
		if !ok {
			continue
		}
		uuid := b.UUID
		if uuid == "" {
			uuid = b.Name
		}
		out = append(out, lvolNode{
			Lvol: Lvol{
				Alias:      alias,
				UUID:       uuid,
				Name:       lname,
				IsSnapshot: info.Snapshot,
				IsClone:    info.Clone,
				Lvs:        LvolStoreRef{Name: lvs, UUID: info.LvolStoreUUID},
			},
			clones: info.Clones,
		})
	}
	return out
}
