package spdk

import (
	"context"
	"fmt"
	"slices"

	"github.com/caretaker-storage/caretaker/orphan"
)

// ExposureFinding is the judgement of one subsystem or controller.
type ExposureFinding struct {
	// Object is "subsystem <nqn>" or "controller <name>".
	Object string
	Owner  Owner
	// Verdict is the owner's, as Longhorn would judge it: the owner's own
	// verdict when the owner is an engine or replica this node runs;
	// otherwise orphan only when the owner's record is gone and the
	// object is provably Longhorn's (by its NQN, or a controller's name
	// and subnqn), owned when the record exists, undecided when the
	// record cannot be read or the object cannot be attributed.
	Verdict orphan.Verdict
	// WithOwner says a purge of the owner's record removes it first (a
	// subsystem of an engine or replica this node runs, a controller an
	// engine's RAID bdev is built on). The others are not removed by any
	// purge of an engine or replica: Orphans.PurgeLeftoverExposures
	// removes those whose record is gone and that it can prove are
	// Longhorn's, and reports the rest.
	WithOwner bool
}

// JudgeExposures judges every subsystem and controller of inv, read with
// rt (ReadExposures). It never fails: an unreadable record is an
// undecided verdict. It may be called concurrently.
func (o *Orphans) JudgeExposures(ctx context.Context, inv ExposureInventory, rt Runtime) []ExposureFinding {
	return o.judgeExposures(ctx, inv, rt, true)
}

// judgeExposures judges inv; without withOwners, the findings that go
// with their owner carry no verdict (Scan judges their owners as items).
func (o *Orphans) judgeExposures(ctx context.Context, inv ExposureInventory, rt Runtime, withOwners bool) []ExposureFinding {
	out := make([]ExposureFinding, 0, len(inv.Subsystems)+len(inv.Controllers))
	for _, s := range inv.Subsystems {
		f := o.judgeOwner(ctx, s.Owner, s.Note, rt, true, withOwners)
		f.Object = "subsystem " + s.NQN
		out = append(out, f)
	}
	for _, c := range inv.Controllers {
		f := o.judgeOwner(ctx, c.Owner, c.Note, rt, c.Owner.By == AttributedByRelation, withOwners)
		f.Object = "controller " + c.Name
		out = append(out, f)
	}
	return out
}

func (o *Orphans) judgeOwner(ctx context.Context, owner Owner, note string, rt Runtime, goesWith, judge bool) ExposureFinding {
	f := ExposureFinding{Owner: owner}
	if !owner.Attributed() {
		f.Verdict = orphan.Undecided("cannot attribute it to an engine or replica: " + note)
		return f
	}
	if uuid, ok := runtimeUUID(rt, owner); ok && goesWith {
		f.WithOwner = true
		if !judge {
			return f
		}
		v, err := o.Judge(ctx, o.item(owner.Kind, owner.Name, uuid))
		if err != nil {
			v = orphan.Undecided(err.Error())
		}
		f.Verdict, f.WithOwner = v, true
		return f
	}
	noun := "engine"
	if owner.Kind == orphan.KindReplicaInstance {
		noun = "replica"
	}
	view, err := o.records.LookupInstance(ctx, owner.Kind, owner.Name)
	switch {
	case err != nil:
		f.Verdict = orphan.Undecided(fmt.Sprintf("cannot look up %s record %s: %v", noun, owner.Name, err))
	case view.Exists:
		f.Verdict = orphan.Verdict{Outcome: orphan.OutcomeOwned, Reason: fmt.Sprintf("%s record %s exists", noun, owner.Name)}
	default:
		f.Verdict = orphan.Verdict{Outcome: orphan.OutcomeOrphan, Reason: fmt.Sprintf("no %s record %s exists, and its Longhorn name says it is that %s's; no engine or replica here holds it, so no purge removes it (PurgeLeftoverExposures does, if SPDK agrees)", noun, owner.Name, noun)}
	}
	return f
}

// runtimeUUID returns the UUID of the engine or replica owner names, if
// this node runs it.
func runtimeUUID(rt Runtime, owner Owner) (string, bool) {
	if owner.Kind == orphan.KindEngineInstance {
		i := slices.IndexFunc(rt.Engines, func(e Engine) bool { return e.Name == owner.Name })
		if i >= 0 {
			return rt.Engines[i].UUID, true
		}
		return "", false
	}
	i := slices.IndexFunc(rt.Replicas, func(r Replica) bool { return r.Name() == owner.Name })
	if i >= 0 {
		return rt.Replicas[i].UUID(), true
	}
	return "", false
}

// exposureSkips reads the node's exposures and returns, as Skipped
// entries, every subsystem and controller a purge does not remove with
// its engine or replica, with its verdict. A failure to read them is one
// entry: it changes no item, and a purge re-reads them anyway.
func (o *Orphans) exposureSkips(ctx context.Context, rt Runtime) []orphan.Skipped {
	scope := orphan.Scope{NodeID: o.node}
	inv, err := readExposures(ctx, o.rpc, rt)
	if err != nil {
		return []orphan.Skipped{{Scope: scope, Name: "nvmf", Reason: "NVMe-oF exposures and controllers not readable: " + err.Error()}}
	}
	var out []orphan.Skipped
	for _, f := range o.judgeExposures(ctx, inv, rt, false) {
		if f.WithOwner {
			continue
		}
		out = append(out, orphan.Skipped{Scope: scope, Name: f.Object, Reason: fmt.Sprintf("nvmf: %s: %s", f.Verdict.Outcome, f.Verdict.Reason)})
	}
	return out
}
