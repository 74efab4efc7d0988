package spdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// uuidMismatch says a runtime object was recreated, in errors and verdicts.
const uuidMismatch = "runtime UUID does not match the record"

// ErrUUIDMismatch: the runtime object named in the record exists but its
// UUID is not the recorded one (it was deleted and recreated, or belongs
// to another lifecycle). Nothing was deleted. It wraps
// orphan.ErrPreconditionFailed.
var ErrUUIDMismatch error = &refusal{uuidMismatch}

// ErrReplicaRecordExists: a replica record of the purged replica's name
// exists (in any state), so its lvols are the replica's data and are kept.
// Nothing more was deleted. It wraps orphan.ErrPreconditionFailed.
var ErrReplicaRecordExists error = &refusal{"a replica record of that name exists"}

// ErrNoLongerEmpty: a replica that a scan reported as holding no data
// (Copy.NoData) has allocated clusters at the moment of its purge, or SPDK
// no longer reports them. Nothing was deleted; the next scan reports it as
// a copy that may hold data. It wraps orphan.ErrPreconditionFailed.
var ErrNoLongerEmpty error = &refusal{"the replica's lvols hold data now"}

// Delete implements orphan.Deleter for v2 engine-instance and
// replica-instance records. It re-reads the runtime object named by the
// record and deletes only if its UUID equals the record's InstanceUUID
// (the delete-time validation longhorn/longhorn#10933 proposes, which Longhorn does not have
// today).
//
// What each purge deletes, and what it re-checks first:
//
//	record kind        deletes                                    re-checks at the moment of deletion
//	engine-instance    the RAID bdev (no data: its base bdevs     RAID bdev UUID = InstanceUUID;
//	                   are the replicas' lvols, never touched)    instance.Verdict over the records says orphan
//	replica-instance   the head lvol and the lvols SPDK reports   no replica record of that name exists
//	                   descending from the replica's chain        (asked again before every lvol); head UUID =
//	                   (PurgeOrder), each by UUID, head last      InstanceUUID; every lvol of the tree has a
//	                                                              name of that replica and no RAID bdev uses it;
//	                                                              if a scan reported it holding no data
//	                                                              (Copy.NoData), none of them has an allocated
//	                                                              cluster (else ErrNoLongerEmpty)
//
// Before deleting, a purge stops exposing what it deletes: it removes the
// namespaces and then the subsystems that are wholly the engine's or
// replica's (LonghornNQN of its name, or of the exposed lvol's), and
// after an engine's RAID bdev it detaches the Longhorn controllers the
// RAID bdev was built on. Each step re-reads what it removes and asks the
// records again; a subsystem or controller that changed, or a subsystem
// caretaker cannot attribute exposing a bdev to be deleted, stops the
// purge with ErrExposureChanged before anything more is removed.
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
// A record that is not a v2 instance, lacks InstanceName or a usable
// InstanceUUID, or belongs to another node or instance manager, is
// refused with orphan.ErrPreconditionFailed before any call, as is a
// replica whose record exists (ErrReplicaRecordExists), an object
// recreated under a new UUID (ErrUUIDMismatch), an engine the records
// no longer make an orphan, and a replica tree that holds an lvol that
// is not the replica's or that a RAID bdev is built on. An object that is
// already gone is success. RPC and connection errors, results of the
// wrong shape (ErrUnexpectedResult) and failed record lookups are
// returned as they are and are retryable; on them nothing more is
// deleted.
func (o *Orphans) Delete(ctx context.Context, r orphan.Record) (err error) {
	defer func() { err = withPrefix(err) }()
	name, uuid, err := o.check(r)
	if err != nil {
		return err
	}
	if r.Kind == orphan.KindEngineInstance {
		return o.deleteEngine(ctx, r, name, uuid)
	}
	return o.deleteReplica(ctx, name, uuid)
}

// check refuses a record this adapter cannot re-check, before any call.
func (o *Orphans) check(r orphan.Record) (name, uuid string, err error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errRefused, r.Name, fmt.Sprintf(format, args...))
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
	if r.NodeID != o.node {
		return "", "", refuse("record is for node %q, this adapter reaches %q", r.NodeID, o.node)
	}
	if im := r.Param(orphan.ParamInstanceManager); im != o.im {
		return "", "", refuse("record is for instance manager %q, this adapter reaches %q", im, o.im)
	}
	return name, uuid, nil
}

func (o *Orphans) deleteEngine(ctx context.Context, r orphan.Record, name, uuid string) error {
	raid, found, err := findEngine(ctx, o.rpc, name)
	if err != nil {
		return fmt.Errorf("re-reading engine %s: %w", name, err)
	}
	if !found {
		return nil
	}
	if raid.UUID != uuid {
		return fmt.Errorf("%w: engine %s: RAID bdev UUID is %q, record has %q", ErrUUIDMismatch, name, raid.UUID, uuid)
	}
	stillOrphan := func(ctx context.Context) error {
		view, err := o.records.LookupInstance(ctx, orphan.KindEngineInstance, name)
		if err != nil {
			return fmt.Errorf("looking up engine record %s: %w", name, err)
		}
		if v := instance.Verdict(r.Item(), view); v.Outcome != orphan.OutcomeOrphan {
			return fmt.Errorf("%w: engine %s is %s: %s", errRefused, name, v.Outcome, v.Reason)
		}
		return nil
	}
	if err := stillOrphan(ctx); err != nil {
		return err
	}
	// Stop exposing the RAID bdev, delete it, then detach the controllers
	// it was built on: Longhorn's own order (Engine.Delete).
	subs, err := readSubsystems(ctx, o.rpc)
	if err != nil {
		return fmt.Errorf("engine %s: %w", name, err)
	}
	target := bdevTarget{uuid: uuid, name: name}
	exposed, err := exposurePlan(subs, map[string]bdevTarget{name: target, uuid: target}, orphan.KindEngineInstance, name)
	if err != nil {
		return fmt.Errorf("engine %s: %w", name, err)
	}
	ctrls, err := readControllers(ctx, o.rpc)
	if err != nil {
		return fmt.Errorf("engine %s: %w", name, err)
	}
	raids, err := spdkrpc.BdevRaidGetBdevs(ctx, o.rpc, spdkrpc.RaidCategoryAll)
	if err != nil {
		return fmt.Errorf("re-reading RAID bdevs for engine %s: %w", name, err)
	}
	attached := engineControllers(ctrls, raids, name)
	for _, s := range exposed {
		if err := unexpose(ctx, o.rpc, s, stillOrphan); err != nil {
			return fmt.Errorf("engine %s: %w", name, err)
		}
	}
	if err := stillOrphan(ctx); err != nil {
		return err
	}
	if raid, found, err := findEngine(ctx, o.rpc, name); err != nil {
		return fmt.Errorf("re-reading engine %s: %w", name, err)
	} else if found && raid.UUID != uuid {
		return fmt.Errorf("%w: engine %s: RAID bdev UUID is %q, record has %q", ErrUUIDMismatch, name, raid.UUID, uuid)
	}
	if err := spdkrpc.BdevRaidDelete(ctx, o.rpc, name); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("deleting engine %s: %w", name, err)
	}
	for _, c := range attached {
		if err := detach(ctx, o.rpc, c, stillOrphan); err != nil {
			return fmt.Errorf("engine %s: %w", name, err)
		}
	}
	return nil
}

func (o *Orphans) deleteReplica(ctx context.Context, name, uuid string) error {
	if err := o.noReplicaRecord(ctx, name); err != nil {
		return err
	}
	bdevs, err := spdkrpc.BdevGetBdevs(ctx, o.rpc, "")
	if err != nil {
		return fmt.Errorf("re-reading replica %s: %w", name, err)
	}
	order, err := PurgeOrder(bdevs, name, uuid)
	if err != nil || len(order) == 0 {
		return err
	}
	if err := o.stillEmpty(name, uuid, order, bdevs); err != nil {
		return err
	}
	// Stop exposing the replica's lvols before deleting them.
	subs, err := readSubsystems(ctx, o.rpc)
	if err != nil {
		return fmt.Errorf("replica %s: %w", name, err)
	}
	targets := make(map[string]bdevTarget, 2*len(order))
	for _, l := range order {
		t := bdevTarget{uuid: l.UUID, name: l.Name}
		targets[l.UUID], targets[l.Alias] = t, t
	}
	exposed, err := exposurePlan(subs, targets, orphan.KindReplicaInstance, name)
	if err != nil {
		return fmt.Errorf("replica %s: %w", name, err)
	}
	for _, s := range exposed {
		if err := unexpose(ctx, o.rpc, s, func(ctx context.Context) error { return o.noReplicaRecord(ctx, name) }); err != nil {
			return fmt.Errorf("replica %s: %w", name, err)
		}
	}
	for _, l := range order {
		// A replica record may appear at any time (a restore, a user
		// recreating it): ask again right before each lvol goes.
		if err := o.noReplicaRecord(ctx, name); err != nil {
			return err
		}
		if err := spdkrpc.BdevLvolDelete(ctx, o.rpc, l.UUID); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("deleting lvol %s of replica %s: %w", l.Alias, name, err)
		}
	}
	return nil
}

// stillEmpty re-checks, for a replica a scan reported as holding no data
// (the last-copy guard lets such a copy go whatever its volume's state),
// that the lvols order would delete still have no allocated cluster by
// bdevs, the listing the purge acts on. If they have, or SPDK no longer
// says, the purge is refused and the claim forgotten: the next scan
// reports the copy as holding data, and the guard judges it by its
// volume's state.
func (o *Orphans) stillEmpty(name, uuid string, order []spdkrpc.Lvol, bdevs []spdkrpc.Bdev) error {
	if !o.claimedEmpty(uuid, false) {
		return nil
	}
	byUUID := make(map[string]*spdkrpc.Bdev, len(bdevs))
	for i := range bdevs {
		if b := &bdevs[i]; b.DriverSpecific.Lvol != nil {
			byUUID[b.UUID] = b
		}
	}
	if why := allocatedOf(order, byUUID); why != "" {
		o.claimedEmpty(uuid, true)
		return fmt.Errorf("%w: replica %s was scanned as holding no data, which is why the last-copy guard let it go; now %s", ErrNoLongerEmpty, name, why)
	}
	return nil
}

// noReplicaRecord returns nil only if the host says no replica record named
// name exists now.
func (o *Orphans) noReplicaRecord(ctx context.Context, name string) error {
	view, err := o.records.LookupInstance(ctx, orphan.KindReplicaInstance, name)
	if err != nil {
		return fmt.Errorf("looking up replica record %s: %w", name, err)
	}
	if view.Exists {
		return fmt.Errorf("%w: replica %s (record state %q): its lvols are its data", ErrReplicaRecordExists, name, view.CurrentState)
	}
	return nil
}
