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

// ErrExposureChanged: a subsystem or controller a purge was about to
// remove is no longer the one it judged (its serial number, namespaces,
// the bdev behind a namespace, or a controller's paths changed), or a
// bdev the purge deletes is exposed or used by something caretaker
// cannot attribute to the purged engine or replica. Nothing more was
// removed. It wraps orphan.ErrPreconditionFailed.
var ErrExposureChanged error = &refusal{"NVMe-oF exposure changed or not attributable"}

// bdevTarget is a bdev a purge deletes: its UUID as judged and its own
// name (the RAID bdev's, or the lvol's).
type bdevTarget struct {
	uuid string
	name string
}

// exposurePlan picks, out of every subsystem, those a purge must remove
// before deleting the bdevs in targets (keyed by every name SPDK may use
// for them: a RAID bdev's name and UUID, an lvol's UUID and alias) of the
// engine or replica (kind) named name. The NQN of one of its subsystems
// is LonghornNQN of one of its names (namesOf).
//
// A subsystem with a namespace on a target must be wholly the object's:
// a Longhorn NQN of one of names, and every namespace on a target.
// Anything else exposing a target (a foreign NQN, a subsystem named after
// another object, one exposing other bdevs too) refuses the purge with
// ErrExposureChanged: caretaker neither removes what it cannot attribute
// nor deletes a bdev out from under it. An empty subsystem whose NQN is
// LonghornNQN of one of its own names (ownNames: not the stable volume
// NQN an engine shares with its volume's other engines) is the object's
// too and goes with it.
func exposurePlan(subs []Exposure, targets map[string]bdevTarget, kind orphan.Kind, name string) ([]Exposure, error) {
	names, own := namesOf(kind, name), ownNames(kind, name)
	var out []Exposure
	for _, s := range subs {
		suffix, longhorn := strings.CutPrefix(s.NQN, LonghornNQNPrefix)
		ours := longhorn && names(suffix)
		touched := 0
		for i, ns := range s.Namespaces {
			if t, ok := targets[ns.BdevName]; ok {
				s.Namespaces[i].BdevUUID = t.uuid
				touched++
			}
		}
		switch {
		case touched == 0 && len(s.Namespaces) == 0 && longhorn && own(suffix):
			out = append(out, s)
		case touched == 0:
		case !ours:
			return nil, fmt.Errorf("%w: subsystem %s exposes a bdev to be deleted but is not named after it (%s)", ErrExposureChanged, s.NQN, LonghornNQNPrefix+"<name>")
		case touched != len(s.Namespaces):
			return nil, fmt.Errorf("%w: subsystem %s exposes a bdev to be deleted and other bdevs too", ErrExposureChanged, s.NQN)
		default:
			out = append(out, s)
		}
	}
	return out, nil
}

// unexpose removes one judged subsystem: its namespaces, then the
// subsystem. Before each step it calls recheck (the record is still
// absent or still an orphan) and re-reads the subsystem: it must still
// have the judged serial number and namespaces, and each namespace's bdev
// must still have the judged UUID. A subsystem already gone is success.
func unexpose(ctx context.Context, c spdkrpc.Caller, s Exposure, recheck func(context.Context) error) error {
	cur, gone, err := rereadSubsystem(ctx, c, s.NQN)
	if err != nil || gone {
		return err
	}
	if err := sameSubsystem(s, cur, s.Namespaces); err != nil {
		return err
	}
	for _, ns := range s.Namespaces {
		if err := recheck(ctx); err != nil {
			return err
		}
		if err := sameBdev(ctx, c, s.NQN, ns); err != nil {
			return err
		}
		cur, gone, err := rereadSubsystem(ctx, c, s.NQN)
		if err != nil || gone {
			return err
		}
		// Namespaces may only have gone (removed here, or hot-removed
		// with their bdev); a new or changed one stops the purge.
		for _, n := range cur.Namespaces {
			if !slices.Contains(s.Namespaces, ExposedNamespace{NSID: n.NSID, BdevName: n.BdevName, BdevUUID: s.uuidOf(n.NSID)}) {
				return fmt.Errorf("%w: subsystem %s now has namespace %d=%s, judged %s", ErrExposureChanged, s.NQN, n.NSID, n.BdevName, nsList(s.Namespaces))
			}
		}
		if cur.SerialNumber != s.SerialNumber {
			return fmt.Errorf("%w: subsystem %s serial number is now %q, was %q", ErrExposureChanged, s.NQN, cur.SerialNumber, s.SerialNumber)
		}
		if !slices.ContainsFunc(cur.Namespaces, func(n ExposedNamespace) bool { return n.NSID == ns.NSID }) {
			continue // removed meanwhile
		}
		if err := spdkrpc.NvmfSubsystemRemoveNs(ctx, c, s.NQN, ns.NSID); err != nil {
			return fmt.Errorf("removing namespace %d of subsystem %s: %w", ns.NSID, s.NQN, err)
		}
	}
	if err := recheck(ctx); err != nil {
		return err
	}
	cur, gone, err = rereadSubsystem(ctx, c, s.NQN)
	if err != nil || gone {
		return err
	}
	if err := sameSubsystem(s, cur, nil); err != nil {
		return err
	}
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, c, s.NQN); err != nil {
		// SPDK answers an NQN it does not know with -32602, as it answers
		// bad params: only a re-read tells "already gone".
		if _, gone, rerr := rereadSubsystem(ctx, c, s.NQN); rerr == nil && gone {
			return nil
		}
		return fmt.Errorf("deleting subsystem %s: %w", s.NQN, err)
	}
	return nil
}

// uuidOf returns the judged bdev UUID of namespace nsid.
func (s Exposure) uuidOf(nsid uint32) string {
	for _, n := range s.Namespaces {
		if n.NSID == nsid {
			return n.BdevUUID
		}
	}
	return ""
}

// rereadSubsystem reads the one subsystem named nqn.
func rereadSubsystem(ctx context.Context, c spdkrpc.Caller, nqn string) (Exposure, bool, error) {
	subs, err := spdkrpc.NvmfGetSubsystems(ctx, c, nqn)
	if errors.Is(err, ErrNotFound) {
		return Exposure{}, true, nil
	}
	if err != nil {
		return Exposure{}, false, fmt.Errorf("re-reading subsystem %s: %w", nqn, err)
	}
	for _, s := range subs {
		if s.NQN == nqn {
			return exposureOf(s), false, nil
		}
	}
	return Exposure{}, true, nil
}

// sameSubsystem checks that cur is still the judged subsystem s, holding
// exactly the namespaces want (NSID and bdev).
func sameSubsystem(s, cur Exposure, want []ExposedNamespace) error {
	if cur.SerialNumber != s.SerialNumber {
		return fmt.Errorf("%w: subsystem %s serial number is now %q, was %q", ErrExposureChanged, s.NQN, cur.SerialNumber, s.SerialNumber)
	}
	same := len(cur.Namespaces) == len(want)
	for i := 0; same && i < len(want); i++ {
		same = cur.Namespaces[i].NSID == want[i].NSID && cur.Namespaces[i].BdevName == want[i].BdevName
	}
	if !same {
		return fmt.Errorf("%w: subsystem %s now has namespaces %s, judged %s", ErrExposureChanged, s.NQN, nsList(cur.Namespaces), nsList(want))
	}
	return nil
}

// sameBdev checks that the bdev behind ns still has the judged UUID.
func sameBdev(ctx context.Context, c spdkrpc.Caller, nqn string, ns ExposedNamespace) error {
	bdevs, err := spdkrpc.BdevGetBdevs(ctx, c, ns.BdevName)
	if errors.Is(err, ErrNotFound) {
		return nil // gone: SPDK drops the namespace with it
	}
	if err != nil {
		return fmt.Errorf("re-reading bdev %s of subsystem %s: %w", ns.BdevName, nqn, err)
	}
	for _, b := range bdevs {
		if b.UUID == ns.BdevUUID && usableUUID(b.UUID) {
			return nil
		}
	}
	return fmt.Errorf("%w: subsystem %s namespace %d: bdev %s no longer has UUID %s", ErrExposureChanged, nqn, ns.NSID, ns.BdevName, ns.BdevUUID)
}

func nsList(ns []ExposedNamespace) string {
	if len(ns) == 0 {
		return "none"
	}
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprintf("%d=%s", n.NSID, n.BdevName)
	}
	return strings.Join(parts, ",")
}

// engineControllers returns the Longhorn controllers the engine's RAID
// bdev (named engine, among raids) is built on and no other RAID bdev
// is: those a purge of the engine detaches after deleting it. Controllers
// that are not attached the way Longhorn attaches, or that another RAID
// bdev also uses, are left: the RAID bdev's deletion releases them, and
// Scan reports them.
func engineControllers(ctrls []AttachedController, raids []spdkrpc.RaidBdev, engine string) []AttachedController {
	var out []AttachedController
	for _, c := range ctrls {
		var users []string
		for _, r := range raids {
			if slices.ContainsFunc(r.BaseBdevsList, func(b spdkrpc.RaidBaseBdev) bool { return isControllerBdev(c.Name, b.Name) }) {
				users = append(users, r.Name)
			}
		}
		if slices.Equal(users, []string{engine}) && longhornRemote(c) != "" {
			out = append(out, c)
		}
	}
	return out
}

// detach detaches one judged controller, path by path. Right before, it
// calls recheck and re-reads the controller (its paths must be the judged
// ones) and the RAID bdevs: one built on its bdevs now makes it another
// engine's, and it is left.
// Each path is detached by its full transport ID, which SPDK compares at
// the moment it detaches. A controller already gone is success.
func detach(ctx context.Context, c spdkrpc.Caller, ctrl AttachedController, recheck func(context.Context) error) error {
	if err := recheck(ctx); err != nil {
		return err
	}
	cur, err := spdkrpc.BdevNvmeGetControllers(ctx, c, ctrl.Name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("re-reading controller %s: %w", ctrl.Name, err)
	}
	i := slices.IndexFunc(cur, func(x spdkrpc.BdevNvmeController) bool { return x.Name == ctrl.Name })
	if i < 0 {
		return nil
	}
	if now := controllerOf(cur[i]); !slices.Equal(now.Paths, ctrl.Paths) {
		return fmt.Errorf("%w: controller %s now connects to %v, judged %v", ErrExposureChanged, ctrl.Name, now.Paths, ctrl.Paths)
	}
	raids, err := spdkrpc.BdevRaidGetBdevs(ctx, c, spdkrpc.RaidCategoryAll)
	if err != nil {
		return fmt.Errorf("re-reading RAID bdevs before detaching %s: %w", ctrl.Name, err)
	}
	for _, r := range raids {
		for _, b := range r.BaseBdevsList {
			if isControllerBdev(ctrl.Name, b.Name) {
				// A RAID bdev built on it since (an engine being created
				// again reuses the replica's controller name): it is not
				// the purged engine's any more. Left, and not an error:
				// the engine is gone.
				return nil
			}
		}
	}
	for _, p := range ctrl.Paths {
		err := spdkrpc.BdevNvmeDetachController(ctx, c, ctrl.Name, spdkrpc.NvmeTransportID{Traddr: p.Traddr, Trsvcid: p.Trsvcid, Subnqn: p.SubNQN})
		var rerr *spdkrpc.RPCError
		switch {
		case err == nil, errors.Is(err, ErrNotFound):
		case errors.As(err, &rerr) && rerr.Code == spdkrpc.CodeNoSuchPath:
			return fmt.Errorf("%w: controller %s no longer has path %v", ErrExposureChanged, ctrl.Name, p)
		default:
			return fmt.Errorf("detaching controller %s: %w", ctrl.Name, err)
		}
	}
	return nil
}
