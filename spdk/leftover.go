package spdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// ErrNoRecordCount: PurgeLeftoverExposures was called on an Orphans whose
// instance.Lookup is not a RecordCounter, so it cannot tell an empty
// records view from a node of leftovers. Nothing was removed. It wraps
// orphan.ErrPreconditionFailed.
var ErrNoRecordCount error = &refusal{"the records lookup cannot count its records (spdk.RecordCounter)"}

// LeftoverReport is what PurgeLeftoverExposures did: every subsystem and
// controller that no engine's or replica's purge removes, either removed
// or kept with the reason.
type LeftoverReport struct {
	Removed []LeftoverObject
	Kept    []LeftoverObject
}

// LeftoverObject is one subsystem or controller of a LeftoverReport.
type LeftoverObject struct {
	// Object is "subsystem <nqn>" or "controller <name>".
	Object string
	// Owner is the engine or replica its Longhorn name names (By is
	// AttributedByName); zero when it names none.
	Owner Owner
	// Reason says why it was removed or kept.
	Reason string
}

// leftover is a candidate of PurgeLeftoverExposures.
type leftover struct {
	sub   *Exposure
	ctrl  *AttachedController
	trids []spdkrpc.NvmeTransportID // the controller's full transport IDs, as listed
	owner Owner
}

func (l leftover) object() string {
	if l.sub != nil {
		return "subsystem " + l.sub.NQN
	}
	return "controller " + l.ctrl.Name
}

// PurgeLeftoverExposures removes the NVMe-oF subsystems and NVMe bdev
// controllers that outlived the engine or replica they belonged to (an
// interrupted purge, an instance-manager restart: longhorn/longhorn#13114)
// and that no purge of an engine or replica removes any more, because
// this node no longer runs that engine or replica. A host calls it after
// its cycle's purges. It reads the node once and removes, subsystems
// first and controllers after, only what satisfies all of the following,
// each checked again right before every call that removes something:
//
//   - a subsystem's NQN is LonghornNQN(<name>) and <name> has the shape of
//     a Longhorn engine name ("<volume>-e-<n>"), replica name
//     ("<volume>-r-<8>") or replica lvol name ("<replica>-snap-<s>",
//     "-rebuilding"...), not starting with "volume-" (an engine
//     frontend's volume-stable NQN, LonghornNQN("volume-<volume>") in
//     longhorn-spdk-engine pkg/spdk/enginefrontend.go,
//     getStableVolumeNQN, names no engine record, and can have a replica
//     name's shape: such names are always kept);
//   - a controller is named like a Longhorn replica or replica lvol, every
//     path's subnqn is LonghornNQN(<its name>), and no RAID bdev is built
//     on its bdevs;
//   - this node runs no engine (RAID bdev) or replica (lvol) of that name;
//   - the records (the lookup given to NewOrphans, asked again each time)
//     hold no engine or replica record of that name;
//   - a subsystem has no namespace, or each namespace's bdev no longer
//     exists: a namespace over any existing bdev keeps the subsystem;
//   - the records view holds at least one record of the owner's kind
//     (RecordCounter): an empty view beside leftovers is a broken view
//     far more often than a cleaned cluster, and then every leftover of
//     that kind is kept.
//
// A subsystem goes as an engine's or replica's purge removes one
// (namespaces, then the subsystem, each after re-reading it); a
// controller is detached path by path by its full transport ID (trtype,
// adrfam, traddr, trsvcid, subnqn), which SPDK compares at the moment it
// detaches. Everything else (a foreign NQN, a name of no Longhorn shape,
// a record that exists or cannot be read, an object that changed) is
// kept and listed in Kept with the reason.
//
// Without a RecordCounter it removes nothing and fails with
// ErrNoRecordCount. A listing or an RPC that fails, or a reply of the
// wrong shape (ErrUnexpectedResult), stops it with the error and the
// report of what was done so far; nothing is removed after an unreadable
// reply. It may be called concurrently with the other methods.
func (o *Orphans) PurgeLeftoverExposures(ctx context.Context) (_ LeftoverReport, err error) {
	defer func() { err = withPrefix(err) }()
	var rep LeftoverReport
	counter, ok := o.records.(RecordCounter)
	if !ok {
		return rep, ErrNoRecordCount
	}
	rt, err := ReadRuntime(ctx, o.rpc)
	if err != nil {
		return rep, err
	}
	subs, err := readSubsystems(ctx, o.rpc)
	if err != nil {
		return rep, err
	}
	raw, err := spdkrpc.BdevNvmeGetControllers(ctx, o.rpc, "")
	if err != nil && !methodMissing(err) {
		return rep, fmt.Errorf("listing NVMe bdev controllers: %w", err)
	}
	bdevs, err := spdkrpc.BdevGetBdevs(ctx, o.rpc, "")
	if err != nil {
		return rep, fmt.Errorf("listing bdevs: %w", err)
	}
	ctrls := make([]AttachedController, 0, len(raw))
	trids := make(map[string][]spdkrpc.NvmeTransportID, len(raw))
	for _, c := range raw {
		ctrls = append(ctrls, controllerOf(c))
		for _, p := range c.Ctrlrs {
			trids[c.Name] = append(trids[c.Name], p.Trid)
		}
	}
	inv := RelateExposures(subs, ctrls, bdevs, rt)
	exists := make(map[string]bool, 2*len(bdevs))
	for _, b := range bdevs {
		exists[b.Name] = true
		for _, a := range b.Aliases {
			exists[a] = true
		}
	}

	keep := func(l leftover, reason string) {
		rep.Kept = append(rep.Kept, LeftoverObject{Object: l.object(), Owner: l.owner, Reason: reason})
	}
	var cands []leftover
	for i := range inv.Subsystems {
		s := &inv.Subsystems[i]
		if _, here := runtimeUUID(rt, s.Owner); here && s.Owner.Attributed() {
			continue // goes with its engine's or replica's purge
		}
		l := leftover{sub: s}
		var why string
		l.owner, why = leftoverName(s.NQN)
		if why == "" {
			if _, here := runtimeUUID(rt, l.owner); here {
				continue // the NQN names an engine or replica this node runs: its purge decides
			}
			for _, ns := range s.Namespaces {
				if exists[ns.BdevName] {
					why = fmt.Sprintf("namespace %d exposes bdev %s, which exists", ns.NSID, ns.BdevName)
					break
				}
			}
		}
		if why != "" {
			keep(l, why)
			continue
		}
		cands = append(cands, l)
	}
	for i := range inv.Controllers {
		c := &inv.Controllers[i]
		if c.Owner.By == AttributedByRelation {
			continue // goes with its engine's purge
		}
		l := leftover{ctrl: c, trids: trids[c.Name], owner: c.Owner}
		switch {
		case len(c.UsedBy) > 0:
			keep(l, "a RAID bdev is built on it: "+c.Note)
		case !c.Owner.Attributed():
			keep(l, c.Note)
		default:
			cands = append(cands, l)
		}
	}

	// The judgement: no record of the owner. Asked again right before
	// every removal.
	judged := cands[:0]
	for _, l := range cands {
		view, err := o.records.LookupInstance(ctx, l.owner.Kind, l.owner.Name)
		switch {
		case ctx.Err() != nil:
			return rep, ctx.Err()
		case err != nil:
			keep(l, fmt.Sprintf("cannot look up %s record %s: %v", noun(l.owner.Kind), l.owner.Name, err))
		case view.Exists:
			keep(l, fmt.Sprintf("%s record %s exists", noun(l.owner.Kind), l.owner.Name))
		default:
			judged = append(judged, l)
		}
	}
	cands = judged

	// The empty-view rule, per kind.
	counts := map[orphan.Kind]int{}
	for _, l := range cands {
		if _, done := counts[l.owner.Kind]; done {
			continue
		}
		n, err := counter.CountInstances(ctx, l.owner.Kind)
		if err != nil {
			return rep, fmt.Errorf("counting %s records: %w", l.owner.Kind, err)
		}
		counts[l.owner.Kind] = n
	}
	for _, l := range cands {
		if counts[l.owner.Kind] == 0 {
			keep(l, fmt.Sprintf("the records view holds no %s record at all: an empty view beside leftovers is not trusted", l.owner.Kind))
			continue
		}
		var err error
		if l.sub != nil {
			err = unexpose(ctx, o.rpc, *l.sub, func(ctx context.Context) error { return o.leftoverStill(ctx, l.owner) })
		} else {
			err = o.detachLeftover(ctx, l)
		}
		switch {
		case err == nil:
			rep.Removed = append(rep.Removed, LeftoverObject{Object: l.object(), Owner: l.owner,
				Reason: fmt.Sprintf("no %s record %s exists and this node runs none", noun(l.owner.Kind), l.owner.Name)})
		case errors.Is(err, orphan.ErrPreconditionFailed):
			keep(l, err.Error())
		default:
			return rep, fmt.Errorf("%s: %w", l.object(), err)
		}
	}
	return rep, nil
}

func noun(k orphan.Kind) string {
	if k == orphan.KindEngineInstance {
		return "engine"
	}
	return "replica"
}

// leftoverName returns the engine or replica a Longhorn NQN names by the
// shape of its name, or why it names none.
func leftoverName(nqn string) (Owner, string) {
	name, ok := strings.CutPrefix(nqn, LonghornNQNPrefix)
	switch {
	case !ok || name == "":
		return Owner{}, "not a Longhorn NQN"
	case strings.HasPrefix(name, "volume-"):
		return Owner{}, "a volume-stable frontend NQN (volume-<volume>) names no engine or replica record"
	}
	if _, ok := engineVolume(name); ok {
		return Owner{Kind: orphan.KindEngineInstance, Name: name, By: AttributedByName}, ""
	}
	if r, ok := replicaOfLvolName(name); ok {
		return Owner{Kind: orphan.KindReplicaInstance, Name: r, By: AttributedByName}, ""
	}
	return Owner{}, "its NQN names no Longhorn engine or replica"
}

// leftoverStill checks, right before a removal, that owner has no record
// and that this node runs no engine or replica of that name.
func (o *Orphans) leftoverStill(ctx context.Context, owner Owner) error {
	view, err := o.records.LookupInstance(ctx, owner.Kind, owner.Name)
	if err != nil {
		return fmt.Errorf("looking up %s record %s: %w", noun(owner.Kind), owner.Name, err)
	}
	if view.Exists {
		return fmt.Errorf("%w: %s record %s exists", errRefused, noun(owner.Kind), owner.Name)
	}
	if owner.Kind == orphan.KindEngineInstance {
		_, found, err := findEngine(ctx, o.rpc, owner.Name)
		if err != nil {
			return fmt.Errorf("re-reading RAID bdevs: %w", err)
		}
		if found {
			return fmt.Errorf("%w: engine %s runs on this node now", errRefused, owner.Name)
		}
		return nil
	}
	lvols, err := spdkrpc.BdevLvolGetLvols(ctx, o.rpc, "")
	if err != nil {
		return fmt.Errorf("re-reading lvols: %w", err)
	}
	for _, l := range lvols {
		if l.Name == owner.Name || ownedLvolName(owner.Name, l.Name, l.IsSnapshot) {
			return fmt.Errorf("%w: replica %s has lvol %s on this node now", errRefused, owner.Name, l.Alias)
		}
	}
	return nil
}

// detachLeftover detaches a leftover controller path by path: right
// before each, it still has only judged paths, no RAID bdev is built on
// it, and (asked last) the records hold no record of its replica; then
// the path goes by its full transport ID.
func (o *Orphans) detachLeftover(ctx context.Context, l leftover) error {
	name := l.ctrl.Name
	for _, want := range l.trids {
		cur, err := spdkrpc.BdevNvmeGetControllers(ctx, o.rpc, name)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("re-reading controller %s: %w", name, err)
		}
		i := slices.IndexFunc(cur, func(c spdkrpc.BdevNvmeController) bool { return c.Name == name })
		if i < 0 {
			return nil
		}
		for _, p := range cur[i].Ctrlrs {
			if !slices.Contains(l.trids, p.Trid) {
				return fmt.Errorf("%w: controller %s now connects to %+v, judged %+v", ErrExposureChanged, name, p.Trid, l.trids)
			}
		}
		if !slices.ContainsFunc(cur[i].Ctrlrs, func(p spdkrpc.NvmeCtrlr) bool { return p.Trid == want }) {
			continue // this path went meanwhile
		}
		raids, err := spdkrpc.BdevRaidGetBdevs(ctx, o.rpc, spdkrpc.RaidCategoryAll)
		if err != nil {
			return fmt.Errorf("re-reading RAID bdevs before detaching %s: %w", name, err)
		}
		for _, r := range raids {
			for _, b := range r.BaseBdevsList {
				if isControllerBdev(name, b.Name) {
					return fmt.Errorf("%w: RAID bdev %s is built on controller %s now", ErrExposureChanged, r.Name, name)
				}
			}
		}
		// The records last, right before the detach.
		view, err := o.records.LookupInstance(ctx, orphan.KindReplicaInstance, l.owner.Name)
		if err != nil {
			return fmt.Errorf("looking up replica record %s: %w", l.owner.Name, err)
		}
		if view.Exists {
			return fmt.Errorf("%w: replica record %s exists", errRefused, l.owner.Name)
		}
		err = spdkrpc.BdevNvmeDetachController(ctx, o.rpc, name, want)
		var rerr *spdkrpc.RPCError
		switch {
		case err == nil, errors.Is(err, ErrNotFound):
		case errors.As(err, &rerr) && rerr.Code == spdkrpc.CodeNoSuchPath:
			return fmt.Errorf("%w: controller %s no longer has path %+v", ErrExposureChanged, name, want)
		default:
			return fmt.Errorf("detaching controller %s: %w", name, err)
		}
	}
	return nil
}
