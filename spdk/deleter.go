package spdk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
)

// ErrUUIDMismatch: the runtime object named in the record exists but its
// UUID is not the recorded one (it was deleted and recreated, or belongs
// to another lifecycle). Nothing was deleted. It wraps
// orphan.ErrPreconditionFailed.
var ErrUUIDMismatch = fmt.Errorf("%w: runtime UUID does not match the record", orphan.ErrPreconditionFailed)

// ErrReplicaRecordExists: a replica record of the purged replica's name
// exists (in any state), so its lvols are the replica's data and are kept.
// Nothing more was deleted. It wraps orphan.ErrPreconditionFailed.
var ErrReplicaRecordExists = fmt.Errorf("%w: a replica record of that name exists", orphan.ErrPreconditionFailed)

// Deleter is an orphan.Deleter for v2 engine-instance and replica-instance
// records. It re-reads the runtime object named by the record and deletes
// only if its UUID equals the record's InstanceUUID (seed 001's delete-time
// validation, which Longhorn does not have today).
//
// What each purge deletes, and what it re-checks first:
//
//	record kind        deletes                                    re-checks at the moment of deletion
//	engine-instance    the RAID bdev (no data: its base bdevs     RAID bdev UUID = InstanceUUID; when Records
//	                   are the replicas' lvols, never touched)    is set, instance.Verdict says orphan
//	replica-instance   the head lvol and the lvols SPDK reports   no replica record of that name exists
//	                   descending from the replica's chain        (Records, before every lvol); head UUID =
//	                   (PurgeOrder), each by UUID, head last      InstanceUUID; every lvol of the tree has a
//	                                                              name of that replica and no RAID bdev uses it
//
// Records is required for replica purges: without it every replica purge
// is refused, because a v2 replica's lvols may only go when no replica
// record of that name exists, in any state.
//
// The head goes last so that a purge interrupted half-way leaves the
// replica still listed under the same UUID, and the next sweep finishes
// it. Deleting a snapshot whose only clone is the head relies on SPDK
// accepting a delete of a snapshot with one clone (it merges the snapshot
// into the clone); older SPDK refuses it, and the purge then fails without
// harm.
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
	// Records is the host's view of its engine and replica records, usually
	// the same lookup the instance.Judge uses. The Deleter asks it,
	// right before each lvol it deletes, whether a replica record of the
	// purged name exists. Required for replica purges; for engine purges it
	// is optional and, when set, the engine is judged again.
	Records instance.Lookup
}

var _ orphan.Deleter = (*Deleter)(nil)

// Delete implements orphan.Deleter. A record that is not a v2 instance, or
// lacks InstanceName or InstanceUUID, or belongs to another node or
// instance manager, is refused with ErrPreconditionFailed, as is a replica
// record when Records is nil or says a replica record of that name exists
// (ErrReplicaRecordExists). An object that is already gone is success. RPC
// and connection errors, results of the wrong shape (ErrUnexpectedResult)
// and failed record lookups are returned as they are and are retryable; on
// them nothing more is deleted.
func (d *Deleter) Delete(ctx context.Context, r orphan.Record) error {
	name, uuid, err := d.check(r)
	if err != nil {
		return err
	}
	switch r.Kind {
	case orphan.KindEngineInstance:
		return d.deleteEngine(ctx, r, name, uuid)
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
	if name == "" || !usableUUID(uuid) {
		return "", "", refuse("record lacks InstanceName or a usable InstanceUUID")
	}
	if d.NodeID != "" && r.NodeID != d.NodeID {
		return "", "", refuse("record is for node %q, this deleter reaches %q", r.NodeID, d.NodeID)
	}
	if im := r.Param(orphan.ParamInstanceManager); d.InstanceManager != "" && im != d.InstanceManager {
		return "", "", refuse("record is for instance manager %q, this deleter reaches %q", im, d.InstanceManager)
	}
	if r.Kind == orphan.KindReplicaInstance && d.Records == nil {
		return "", "", refuse("no replica record lookup (Deleter.Records): a v2 replica's lvols are deleted only when no replica record of that name exists")
	}
	return name, uuid, nil
}

func (d *Deleter) deleteEngine(ctx context.Context, r orphan.Record, name, uuid string) error {
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
	if d.Records != nil {
		view, err := d.Records.LookupInstance(ctx, orphan.KindEngineInstance, name)
		if err != nil {
			return fmt.Errorf("looking up engine record %s: %w", name, err)
		}
		if v := instance.Verdict(r.Item(), view); v.Outcome != orphan.OutcomeOrphan {
			return fmt.Errorf("%w: engine %s is %s: %s", orphan.ErrPreconditionFailed, name, v.Outcome, v.Reason)
		}
	}
	if err := BdevRaidDelete(ctx, d.RPC, name); err != nil && !errors.Is(err, ErrNoSuchDevice) {
		return fmt.Errorf("deleting engine %s: %w", name, err)
	}
	return nil
}

func (d *Deleter) deleteReplica(ctx context.Context, name, uuid string) error {
	if err := d.noReplicaRecord(ctx, name); err != nil {
		return err
	}
	bdevs, err := BdevGetBdevs(ctx, d.RPC, "")
	if err != nil {
		return fmt.Errorf("re-reading replica %s: %w", name, err)
	}
	order, err := PurgeOrder(bdevs, name, uuid)
	if err != nil || len(order) == 0 {
		return err
	}
	for _, l := range order {
		// A replica record may appear at any time (a restore, a user
		// recreating it): ask again right before each lvol goes.
		if err := d.noReplicaRecord(ctx, name); err != nil {
			return err
		}
		if err := BdevLvolDelete(ctx, d.RPC, l.UUID); err != nil && !errors.Is(err, ErrNoSuchDevice) {
			return fmt.Errorf("deleting lvol %s of replica %s: %w", l.Alias, name, err)
		}
	}
	return nil
}

// noReplicaRecord returns nil only if the host says no replica record named
// name exists now.
func (d *Deleter) noReplicaRecord(ctx context.Context, name string) error {
	view, err := d.Records.LookupInstance(ctx, orphan.KindReplicaInstance, name)
	if err != nil {
		return fmt.Errorf("looking up replica record %s: %w", name, err)
	}
	if view.Exists {
		return fmt.Errorf("%w: replica %s (record state %q): its lvols are its data", ErrReplicaRecordExists, name, view.CurrentState)
	}
	return nil
}

// PurgeOrder returns the lvols to delete, in order, to purge the replica
// whose head lvol is named name and has UUID uuid, given every bdev SPDK
// listed (bdev_get_bdevs). It is pure.
//
// The tree is found through SPDK's relations, never through names alone:
// starting at the head, it climbs the base_snapshot chain while the parent
// is a snapshot named "<name>-snap-..." (a backing image or another
// replica's snapshot ends the climb and is kept), then takes everything
// SPDK reports as descending from the topmost such snapshot (its clones,
// their clones...). Every lvol of that tree must carry one of the
// replica's own names (a snapshot "<name>-snap-<s>", or "<name>-rebuilding",
// "-cloning", "-cloning-tmp", "-expired-<8>"), else something else depends
// on the replica's data (another volume cloned from it, a head that only
// looks like one of its lvols) and the purge is refused. Lvols named after
// the replica that SPDK does not relate to its chain are not deleted.
// The order deletes each lvol after the lvols that are its clones, and the
// head last.
//
// No head of that name: nil, nil (already gone). Heads of that name but
// none with that UUID: ErrUUIDMismatch. A foreign lvol in the tree, or an
// lvol of the tree that a RAID bdev is built on: ErrPreconditionFailed. An
// lvol bdev without a UUID or an "lvstore/lvol" alias, two lvols of one
// name in one lvstore, a clone edge to an lvol not listed, or a parent
// loop: a *ResultError (ErrUnexpectedResult), because such a listing
// cannot prove what the tree is.
func PurgeOrder(bdevs []Bdev, name, uuid string) ([]Lvol, error) {
	lvols, err := lvolsOf(bdevs)
	if err != nil {
		return nil, err
	}
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

	// The head's lvstore, by name, with clone edges from both sides:
	// SPDK may leave a name out of one of them.
	byName := make(map[string]*lvolNode)
	for i := range lvols {
		l := &lvols[i]
		if l.Lvs.UUID != head.Lvs.UUID || l.Lvs.Name != head.Lvs.Name {
			continue
		}
		if _, dup := byName[l.Name]; dup {
			return nil, badListing("two lvols named %s in lvstore %s", l.Name, l.Lvs.Name)
		}
		byName[l.Name] = l
	}
	children := make(map[string][]string)
	addEdge := func(parent, child string) {
		if !slices.Contains(children[parent], child) {
			children[parent] = append(children[parent], child)
		}
	}
	for n, l := range byName {
		for _, c := range l.clones {
			addEdge(n, c)
		}
		if l.parent != "" {
			addEdge(l.parent, n)
		}
	}

	// Climb the chain through the replica's own snapshots.
	top := head
	for climbed := map[string]bool{head.Name: true}; top.parent != ""; {
		p, ok := byName[top.parent]
		if !ok || !p.IsSnapshot || !ownedLvolName(name, p.Name, true) {
			break // not listed here, not a snapshot, or not this replica's: kept
		}
		if climbed[p.Name] {
			return nil, badListing("snapshot chain of %s loops at %s", name, p.Name)
		}
		climbed[p.Name] = true
		top = p
	}

	// Everything SPDK reports as descending from the top.
	tree := map[string]*lvolNode{}
	for stack := []string{top.Name}; len(stack) > 0; {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, done := tree[n]; done {
			continue
		}
		l, ok := byName[n]
		if !ok {
			return nil, badListing("lvol %s of replica %s's tree is named as a clone but not listed", n, name)
		}
		if n != name && !ownedLvolName(name, n, l.IsSnapshot) {
			return nil, fmt.Errorf("%w: replica %s: lvol %s descends from the replica's chain but is not one of its lvols (another volume's clone, or a look-alike name)", orphan.ErrPreconditionFailed, name, l.Alias)
		}
		tree[n] = l
		stack = append(stack, children[n]...)
	}
	if _, ok := tree[name]; !ok {
		return nil, badListing("head %s is not a descendant of its own chain", name)
	}
	if user, ok := raidUser(bdevs, tree); ok {
		return nil, fmt.Errorf("%w: replica %s: %s", orphan.ErrPreconditionFailed, name, user)
	}

	// Post-order over clone edges, in name order for determinism.
	names := slices.Sorted(maps.Keys(tree))
	visited := make(map[string]bool, len(tree))
	order := make([]Lvol, 0, len(tree))
	var visit func(n string)
	visit = func(n string) {
		if visited[n] {
			return
		}
		visited[n] = true
		cs := slices.Clone(children[n])
		slices.Sort(cs)
		for _, c := range cs {
			visit(c)
		}
		if n != name {
			order = append(order, tree[n].Lvol)
		}
	}
	for _, n := range names {
		visit(n)
	}
	return append(order, head.Lvol), nil
}

// ownedLvolName reports whether an lvol named n, a snapshot or not, has one
// of the names Longhorn gives the lvols of replica r. A non-snapshot lvol
// named "<r>-snap-..." is not r's: Longhorn's snapshot lvols are SPDK
// snapshots, and such a head belongs to a replica whose name merely
// starts like one of r's snapshots.
func ownedLvolName(r, n string, snapshot bool) bool {
	rest, ok := strings.CutPrefix(n, r+"-")
	if !ok || rest == "" {
		return false
	}
	if s, ok := strings.CutPrefix(rest, "snap-"); ok {
		return snapshot && s != ""
	}
	switch {
	case "-"+rest == rebuildingSufx, "-"+rest == cloningSufx, "-"+rest == cloningTmpSufx:
		return true
	}
	rnd, ok := strings.CutPrefix("-"+rest, expiredInfix)
	return ok && len(rnd) == expiredRandSize
}

// raidUser names a RAID bdev built on an lvol of the tree, if any. A RAID
// base bdev names an lvol by its bdev name (the UUID) or its alias; a base
// bdev named like the bare lvol counts too, since refusing is the safe
// side of a doubt.
func raidUser(bdevs []Bdev, tree map[string]*lvolNode) (string, bool) {
	ids := make(map[string]string, 3*len(tree))
	for _, l := range tree {
		ids[l.UUID] = l.Alias
		ids[l.Alias] = l.Alias
		ids[l.Name] = l.Alias
	}
	for _, b := range bdevs {
		if b.DriverSpecific.Raid == nil {
			continue
		}
		for _, base := range b.DriverSpecific.Raid.BaseBdevsList {
			for _, id := range []string{base.Name, base.UUID} {
				if alias, ok := ids[id]; ok && id != "" {
					return fmt.Sprintf("RAID bdev %s is built on lvol %s", b.Name, alias), true
				}
			}
		}
	}
	return "", false
}

// lvolNode is an lvol with its relations, from bdev_get_bdevs.
type lvolNode struct {
	Lvol
	parent string   // base_snapshot, "" if none or not resolvable
	clones []string // clones, for a snapshot
}

// lvolsOf picks the lvol bdevs out of a bdev_get_bdevs listing. An lvol
// bdev is named by its UUID and has the alias "<lvstore>/<lvol>". One
// without a usable UUID or without that alias cannot be told apart or
// placed: the listing is refused rather than the lvol skipped, so that a
// head never looks gone because SPDK described it badly.
func lvolsOf(bdevs []Bdev) ([]lvolNode, error) {
	var out []lvolNode
	for _, b := range bdevs {
		info := b.DriverSpecific.Lvol
		if info == nil && b.ProductName != ProductLogicalVolume {
			continue
		}
		if info == nil {
			return nil, badListing("lvol bdev %s has no driver_specific.lvol", b.Name)
		}
		alias := ""
		for _, a := range b.Aliases {
			if lvs, l, ok := strings.Cut(a, "/"); ok && lvs != "" && l != "" {
				alias = a
				break
			}
		}
		if alias == "" {
			return nil, badListing("lvol bdev %s has no lvstore/lvol alias", b.Name)
		}
		if !usableUUID(b.UUID) {
			return nil, badListing("lvol %s has no usable uuid", alias)
		}
		lvs, lname, _ := strings.Cut(alias, "/")
		out = append(out, lvolNode{
			Lvol: Lvol{
				Alias:      alias,
				UUID:       b.UUID,
				Name:       lname,
				IsSnapshot: info.Snapshot,
				IsClone:    info.Clone,
				Lvs:        LvolStoreRef{Name: lvs, UUID: info.LvolStoreUUID},
			},
			parent: info.BaseSnapshot,
			clones: info.Clones,
		})
	}
	return out, nil
}

func badListing(format string, args ...any) error {
	return &ResultError{Method: "bdev_get_bdevs", Err: fmt.Errorf(format, args...)}
}
