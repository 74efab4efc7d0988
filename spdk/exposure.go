package spdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Longhorn's names for what a v2 volume exposes over NVMe-oF and what it
// attaches from other nodes:
//
//   - every subsystem Longhorn creates is named LonghornNQN(name): the
//     prefix "nqn.2023-01.io.longhorn.spdk:" and a name (go-spdk-helper
//     pkg/types/types.go, GetNQN);
//   - an engine exposes its RAID bdev, named after the engine, under
//     LonghornNQN(<engine>) (longhorn-spdk-engine pkg/spdk/engine.go,
//     Engine.Create and its frontend handling; the newest engine frontend
//     may also use LonghornNQN("volume-<volume>") for the same RAID bdev,
//     pkg/spdk/enginefrontend.go, getStableVolumeNQN);
//   - a replica exposes its head lvol, by the lvol's UUID (its bdev name),
//     under LonghornNQN(<replica>) (pkg/spdk/replica.go, Replica.Create and
//     NewReplica's Nqn); a backup exposes a snapshot lvol under
//     LonghornNQN(<replica>-snap-<snapshot>) (pkg/spdk/backup.go); a
//     rebuilding or cloning replica exposes "<replica>-rebuilding" and
//     "<replica>-cloning" lvols the same way;
//   - go-spdk-helper creates the subsystem with nvmf_create_subsystem
//     {"nqn", "allow_any_host": true} and no serial number, adds one
//     namespace (nvmf_subsystem_add_ns) and a TCP listener
//     (pkg/spdk/client/advanced.go, StartExposeBdev and
//     StartExposeBdevWithANAState), and stops exposing by removing the
//     listeners and namespaces and deleting the subsystem (StopExposeBdev);
//   - an engine attaches each remote replica as an NVMe bdev controller
//     named after the remote lvol (the replica's name, or
//     "<replica>-rebuilding"...) with subnqn LonghornNQN(<that name>)
//     (pkg/spdk/util.go, connectNVMfBdev, called by Engine.Create and the
//     rebuilding and cloning paths); SPDK names the namespace's bdev
//     "<controller>n1" (SPDK module/bdev/nvme/bdev_nvme.c; go-spdk-helper
//     pkg/spdk/types/nvme.go, GetNvmeNamespaceNameFromControllerName),
//     and the engine builds its RAID bdev on those bdevs;
//   - an engine deletes in this order: stop exposing (StopExposeBdev), delete
//     the RAID bdev, then detach each replica's controller
//     (pkg/spdk/engine.go, Engine.Delete).
//
// Longhorn's engine names are "<volume>-e-<n>" (longhorn-manager
// types/types.go, GenerateEngineNameForVolume; older releases used an
// 8-character random ID for <n>) and its replica names "<volume>-r-<8>"
// (GenerateReplicaNameForVolume, util.RandomID).

// LonghornNQNPrefix starts the NQN of every NVMe-oF subsystem Longhorn's
// v2 data engine creates.
const LonghornNQNPrefix = "nqn.2023-01.io.longhorn.spdk:"

// LonghornNQN returns the NQN Longhorn exposes the engine, replica or lvol
// named name under.
func LonghornNQN(name string) string { return LonghornNQNPrefix + name }

// Attribution says how an exposure or a controller was related to an
// engine or replica.
type Attribution string

// The attributions.
const (
	// AttributedByRelation: SPDK's own relations tie it to the object (a
	// namespace's bdev is the object's RAID bdev or one of its lvols; a
	// controller's bdev is a base bdev of the engine's RAID bdev), and
	// its Longhorn name agrees.
	AttributedByRelation Attribution = "relation"
	// AttributedByName: nothing in SPDK ties it to a runtime object; its
	// Longhorn NQN (or controller name and subnqn) names an engine or a
	// replica.
	AttributedByName Attribution = "name"
)

// Owner is the engine or replica an exposure or a controller belongs
// to. The zero Owner is "cannot attribute".
type Owner struct {
	// Kind is orphan.KindEngineInstance or orphan.KindReplicaInstance.
	Kind orphan.Kind
	// Name is the engine's or replica's name.
	Name string
	// By says how the owner was found.
	By Attribution
}

// Attributed reports whether the owner is known.
func (o Owner) Attributed() bool { return o.Name != "" }

// Exposure is one NVMe-oF subsystem (nvmf_get_subsystems) with its
// namespaces, related to the engine or replica it exposes.
type Exposure struct {
	NQN          string
	SerialNumber string
	Namespaces   []ExposedNamespace
	// Owner is the engine or replica the subsystem exposes; zero when
	// caretaker cannot attribute it (Note says why).
	Owner Owner
	// Note says why the subsystem is not attributed, or anything odd
	// about it.
	Note string
}

// ExposedNamespace is one namespace of a subsystem and the bdev behind
// it.
type ExposedNamespace struct {
	NSID     uint32
	BdevName string
	// BdevUUID is the UUID of the bdev behind it as the inventory saw it
	// ("" when the bdev is not an engine or an lvol SPDK listed).
	BdevUUID string
	// Object names what the bdev is: "engine <name>", "lvol <alias>",
	// or "" when it is neither.
	Object string
}

// AttachedController is one NVMe bdev controller (bdev_nvme_get_controllers):
// a connection from this node to a subsystem elsewhere, whose namespaces
// are bdevs here.
type AttachedController struct {
	Name string
	// Paths are the controller's connections; Longhorn makes one.
	Paths []ControllerPath
	// Bdevs are the bdevs SPDK made of its namespaces
	// ("<controller>n<nsid>") that bdev_get_bdevs lists.
	Bdevs []string
	// UsedBy are the RAID bdevs built on one of Bdevs.
	UsedBy []string
	// Owner is the engine whose RAID bdev is built on it (by relation),
	// or the remote replica its Longhorn name and subnqn name (by
	// name); zero when caretaker cannot attribute it.
	Owner Owner
	// Remote is the replica the controller connects to when its name and
	// subnqn are Longhorn's ("<replica>" or one of the replica's lvol
	// names), "" otherwise.
	Remote string
	Note   string
}

// ControllerPath is one connection of a controller: the remote
// subsystem's NQN and address.
type ControllerPath struct {
	SubNQN  string
	Traddr  string
	Trsvcid string
}

// ExposureInventory is what a node's SPDK exposes and attaches.
type ExposureInventory struct {
	Subsystems  []Exposure
	Controllers []AttachedController
}

// ExposuresOf returns the subsystems attributed to the engine or replica
// named name by SPDK's relations.
func (inv ExposureInventory) ExposuresOf(kind orphan.Kind, name string) []Exposure {
	var out []Exposure
	for _, s := range inv.Subsystems {
		if s.Owner.Kind == kind && s.Owner.Name == name && s.Owner.By == AttributedByRelation {
			out = append(out, s)
		}
	}
	return out
}

// The bdev kinds a namespace may point at.
type bdevObject struct {
	kind  orphan.Kind // owner kind, "" when owned by none
	owner string      // owner name
	name  string      // the RAID bdev's or the lvol's own name
	uuid  string
	what  string // "engine <name>" or "lvol <alias>"
}

// objectIndex finds the runtime object a bdev name (a RAID bdev's name
// or UUID, an lvol's UUID or alias) stands for.
type objectIndex map[string]bdevObject

func newObjectIndex(rt Runtime) objectIndex {
	idx := objectIndex{}
	for _, e := range rt.Engines {
		o := bdevObject{kind: orphan.KindEngineInstance, owner: e.Name, name: e.Name, uuid: e.UUID, what: "engine " + e.Name}
		idx[e.Name], idx[e.UUID] = o, o
	}
	add := func(owner string, l spdkrpc.Lvol) {
		o := bdevObject{owner: owner, name: l.Name, uuid: l.UUID, what: "lvol " + aliasOf(l)}
		if owner != "" {
			o.kind = orphan.KindReplicaInstance
		}
		idx[aliasOf(l)] = o
		if usableUUID(l.UUID) {
			idx[l.UUID] = o
		}
	}
	for _, r := range rt.Replicas {
		add(r.Name(), r.Head)
		for _, d := range r.Derived {
			add(r.Name(), d)
		}
	}
	for _, b := range rt.BackingImages {
		add("", b)
	}
	return idx
}

// RelateExposures relates subsystems and controllers to the engines and
// replicas of rt, given every bdev SPDK listed (bdev_get_bdevs). It is
// pure.
//
// A subsystem belongs to an engine or replica by SPDK's relations when
// every namespace's bdev is that object's RAID bdev or one of its lvols
// (by UUID or alias) and, if its NQN is Longhorn's, the name in it is
// the exposed bdev's own, the object's, one of a replica's lvol names, or
// an engine's volume's stable "volume-<volume>".
// A subsystem without namespaces belongs by name to the engine or
// replica its Longhorn NQN names ("<replica>-snap-..." and the other lvol
// forms name their replica). Anything else (namespaces of two objects, a
// bdev that is no engine or replica lvol, a backing image, a Longhorn NQN
// naming another object than the bdev behind it, a foreign NQN) is not
// attributed.
//
// A controller belongs to the engine whose RAID bdev is built on one of
// its bdevs. One that no RAID bdev uses belongs by name to the replica
// its name names, when its name is a Longhorn replica or replica-lvol
// name and every path's subnqn is LonghornNQN(<its name>), which is how
// Longhorn attaches. Anything else is not attributed.
func RelateExposures(subsystems []Exposure, controllers []AttachedController, bdevs []spdkrpc.Bdev, rt Runtime) ExposureInventory {
	idx := newObjectIndex(rt)
	inv := ExposureInventory{Subsystems: make([]Exposure, 0, len(subsystems)), Controllers: make([]AttachedController, 0, len(controllers))}
	for _, s := range subsystems {
		s.Namespaces = slices.Clone(s.Namespaces)
		s.Owner, s.Note = Owner{}, ""
		for i := range s.Namespaces {
			if o, ok := idx[s.Namespaces[i].BdevName]; ok {
				s.Namespaces[i].BdevUUID, s.Namespaces[i].Object = o.uuid, o.what
			}
		}
		s.Owner, s.Note = relateSubsystem(s, idx, rt)
		inv.Subsystems = append(inv.Subsystems, s)
	}
	slices.SortFunc(inv.Subsystems, func(a, b Exposure) int { return strings.Compare(a.NQN, b.NQN) })

	engines := make(map[string]bool, len(rt.Engines))
	for _, e := range rt.Engines {
		engines[e.Name] = true
	}
	for _, c := range controllers {
		c.Paths = slices.Clone(c.Paths)
		c.Bdevs, c.UsedBy = controllerBdevs(c.Name, bdevs), nil
		c.Owner, c.Remote, c.Note = Owner{}, "", ""
		for _, b := range bdevs {
			if b.DriverSpecific.Raid == nil {
				continue
			}
			for _, base := range b.DriverSpecific.Raid.BaseBdevsList {
				if base.Name != "" && (slices.Contains(c.Bdevs, base.Name) || isControllerBdev(c.Name, base.Name)) && !slices.Contains(c.UsedBy, b.Name) {
					c.UsedBy = append(c.UsedBy, b.Name)
				}
			}
		}
		slices.Sort(c.UsedBy)
		c.Remote = longhornRemote(c)
		switch {
		case len(c.UsedBy) > 1:
			c.Note = "used by several RAID bdevs: " + strings.Join(c.UsedBy, ", ")
		case len(c.UsedBy) == 1 && !engines[c.UsedBy[0]]:
			c.Note = "used by RAID bdev " + c.UsedBy[0] + ", which is not a listed engine"
		case len(c.UsedBy) == 1:
			c.Owner = Owner{Kind: orphan.KindEngineInstance, Name: c.UsedBy[0], By: AttributedByRelation}
		case c.Remote == "":
			c.Note = "not a Longhorn controller: its name is no replica's, or a path's subnqn is not " + LonghornNQN(c.Name)
		default:
			c.Owner = Owner{Kind: orphan.KindReplicaInstance, Name: c.Remote, By: AttributedByName}
		}
		inv.Controllers = append(inv.Controllers, c)
	}
	slices.SortFunc(inv.Controllers, func(a, b AttachedController) int { return strings.Compare(a.Name, b.Name) })
	return inv
}

// relateSubsystem finds a subsystem's owner, or says why it has none.
func relateSubsystem(s Exposure, idx objectIndex, rt Runtime) (Owner, string) {
	suffix, longhorn := strings.CutPrefix(s.NQN, LonghornNQNPrefix)
	if len(s.Namespaces) == 0 {
		if !longhorn || suffix == "" {
			return Owner{}, "no namespace, and not a Longhorn NQN"
		}
		if k, name, ok := nameOwner(suffix, rt); ok {
			return Owner{Kind: k, Name: name, By: AttributedByName}, ""
		}
		return Owner{}, "no namespace, and its NQN names no Longhorn engine or replica"
	}
	var owner bdevObject
	for i, ns := range s.Namespaces {
		o, ok := idx[ns.BdevName]
		switch {
		case !ok:
			return Owner{}, fmt.Sprintf("namespace %d exposes bdev %q, which is no engine or replica lvol", ns.NSID, ns.BdevName)
		case o.owner == "":
			return Owner{}, fmt.Sprintf("namespace %d exposes %s, which belongs to no engine or replica", ns.NSID, o.what)
		case i > 0 && (o.kind != owner.kind || o.owner != owner.owner):
			return Owner{}, "its namespaces expose the bdevs of more than one engine or replica"
		}
		if longhorn && !nqnFits(suffix, o) {
			return Owner{}, fmt.Sprintf("its NQN names %q but namespace %d exposes %s", suffix, ns.NSID, o.what)
		}
		owner = o
	}
	if !longhorn {
		return Owner{}, fmt.Sprintf("exposes %s under an NQN that is not Longhorn's", owner.what)
	}
	return Owner{Kind: owner.kind, Name: owner.owner, By: AttributedByRelation}, ""
}

// nqnFits reports whether a Longhorn NQN naming suffix fits the object
// a namespace exposes: the NQN names the bdev's own object, or it is the
// stable volume NQN of an engine's volume.
func nqnFits(suffix string, o bdevObject) bool {
	return suffix == o.name || namesOf(o.kind, o.owner)(suffix)
}

// namesOf returns the test for the names of a Longhorn NQN that are the
// engine's or replica's named name: the engine's own and its volume's
// stable NQN "volume-<volume>"; the replica's own and its lvols'
// ("<replica>-snap-<s>", "-rebuilding", "-cloning", "-expired-<8>").
func namesOf(kind orphan.Kind, name string) func(string) bool {
	if kind == orphan.KindEngineInstance {
		vol, ok := engineVolume(name)
		return func(n string) bool { return n == name || ok && n == "volume-"+vol }
	}
	return ownNames(kind, name)
}

// ownNames is namesOf without the names an engine shares with the other
// engines of its volume: what an empty subsystem must be named to be the
// object's by its name alone.
func ownNames(kind orphan.Kind, name string) func(string) bool {
	if kind == orphan.KindEngineInstance {
		return func(n string) bool { return n == name }
	}
	return func(n string) bool { return n == name || ownedLvolName(name, n, true) }
}

// nameOwner finds the engine or replica a Longhorn name names: a listed
// engine or replica of that name, else one whose name has Longhorn's
// shape; a replica-lvol form ("-snap-", "-rebuilding"...) names its
// replica.
func nameOwner(name string, rt Runtime) (orphan.Kind, string, bool) {
	for _, e := range rt.Engines {
		if ownNames(orphan.KindEngineInstance, e.Name)(name) {
			return orphan.KindEngineInstance, e.Name, true
		}
	}
	for _, r := range rt.Replicas {
		if ownNames(orphan.KindReplicaInstance, r.Name())(name) {
			return orphan.KindReplicaInstance, r.Name(), true
		}
	}
	if _, ok := engineVolume(name); ok {
		return orphan.KindEngineInstance, name, true
	}
	if r, ok := replicaOfLvolName(name); ok {
		return orphan.KindReplicaInstance, r, true
	}
	return "", "", false
}

// replicaOfLvolName returns the replica a Longhorn replica name or
// replica-lvol name belongs to: the name itself when it has a replica's
// shape, else the replica whose derived form it is.
func replicaOfLvolName(name string) (string, bool) {
	if isReplicaName(name) {
		return name, true
	}
	for _, suf := range []string{cloningTmpSufx, cloningSufx, rebuildingSufx} {
		if r, ok := strings.CutSuffix(name, suf); ok && isReplicaName(r) {
			return r, true
		}
	}
	if i := strings.LastIndex(name, expiredInfix); i > 0 && len(name)-i-len(expiredInfix) == expiredRandSize && isReplicaName(name[:i]) {
		return name[:i], true
	}
	for i := strings.Index(name, snapInfix); i > 0; {
		if isReplicaName(name[:i]) && len(name) > i+len(snapInfix) {
			return name[:i], true
		}
		j := strings.Index(name[i+1:], snapInfix)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "", false
}

// isReplicaName reports whether name has the shape of a Longhorn replica
// name, "<volume>-r-<8 lowercase letters or digits>".
func isReplicaName(name string) bool {
	i := strings.LastIndex(name, "-r-")
	return i > 0 && isRandomID(name[i+3:])
}

// engineVolume returns the volume of a name shaped like a Longhorn engine
// name, "<volume>-e-<n>" (n decimal, or an 8-character random ID).
func engineVolume(name string) (string, bool) {
	i := strings.LastIndex(name, "-e-")
	if i <= 0 {
		return "", false
	}
	n := name[i+3:]
	if _, err := strconv.ParseUint(n, 10, 32); err == nil || isRandomID(n) {
		return name[:i], true
	}
	return "", false
}

func isRandomID(s string) bool {
	if len(s) != 8 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// controllerBdevs lists the listed bdevs SPDK made of controller name's
// namespaces.
func controllerBdevs(name string, bdevs []spdkrpc.Bdev) []string {
	var out []string
	for _, b := range bdevs {
		if isControllerBdev(name, b.Name) {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

// isControllerBdev reports whether bdev is named as SPDK names the bdev
// of one of controller's namespaces: "<controller>n<nsid>".
func isControllerBdev(controller, bdev string) bool {
	rest, ok := strings.CutPrefix(bdev, controller+"n")
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.ParseUint(rest, 10, 32)
	return err == nil
}

// longhornRemote returns the replica a controller connects to when it is
// attached the way Longhorn attaches: named after a replica or one of its
// lvols, every path's subnqn LonghornNQN(<name>).
func longhornRemote(c AttachedController) string {
	r, ok := replicaOfLvolName(c.Name)
	if !ok || len(c.Paths) == 0 {
		return ""
	}
	for _, p := range c.Paths {
		if p.SubNQN != LonghornNQN(c.Name) {
			return ""
		}
	}
	return r
}

// ReadExposures lists lvols, RAID bdevs, subsystems, controllers and
// (when there are controllers) every bdev through c, and relates them
// (RelateExposures); it returns the Runtime it related them to. A target
// without NVMe-oF (nvmf_get_subsystems or bdev_nvme_get_controllers
// answering -32601, method not found) exposes and attaches nothing. Any
// other failure, and a listing of the wrong shape, is an error: an
// exposure that could not be read is never "not exposed".
func ReadExposures(ctx context.Context, c spdkrpc.Caller) (_ ExposureInventory, _ Runtime, err error) {
	defer func() { err = withPrefix(err) }()
	rt, err := ReadRuntime(ctx, c)
	if err != nil {
		return ExposureInventory{}, Runtime{}, err
	}
	inv, err := readExposures(ctx, c, rt)
	return inv, rt, err
}

// readExposures reads subsystems and controllers and relates them to rt.
// It lists every bdev only when a controller needs it.
func readExposures(ctx context.Context, c spdkrpc.Caller, rt Runtime) (ExposureInventory, error) {
	subs, err := readSubsystems(ctx, c)
	if err != nil {
		return ExposureInventory{}, err
	}
	ctrls, err := readControllers(ctx, c)
	if err != nil {
		return ExposureInventory{}, err
	}
	var bdevs []spdkrpc.Bdev
	if len(ctrls) > 0 {
		if bdevs, err = spdkrpc.BdevGetBdevs(ctx, c, ""); err != nil {
			return ExposureInventory{}, fmt.Errorf("listing bdevs: %w", err)
		}
	}
	return RelateExposures(subs, ctrls, bdevs, rt), nil
}

// methodMissing reports whether err is SPDK's "method not found".
func methodMissing(err error) bool {
	var rerr *spdkrpc.RPCError
	return errors.As(err, &rerr) && rerr.Code == spdkrpc.CodeMethodNotFound
}

func sortNamespaces(ns []ExposedNamespace) {
	slices.SortFunc(ns, func(a, b ExposedNamespace) int { return cmp.Compare(a.NSID, b.NSID) })
}

// readSubsystems lists the NVMe subsystems (not the discovery subsystem)
// as Exposures, unrelated yet.
func readSubsystems(ctx context.Context, c spdkrpc.Caller) ([]Exposure, error) {
	subs, err := spdkrpc.NvmfGetSubsystems(ctx, c, "")
	if methodMissing(err) {
		return []Exposure{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing NVMe-oF subsystems: %w", err)
	}
	out := make([]Exposure, 0, len(subs))
	for _, s := range subs {
		if s.Subtype == spdkrpc.SubtypeDiscovery {
			continue
		}
		out = append(out, exposureOf(s))
	}
	return out, nil
}

// exposureOf turns a subsystem into an unrelated Exposure.
func exposureOf(s spdkrpc.NvmfSubsystem) Exposure {
	e := Exposure{NQN: s.NQN, SerialNumber: s.SerialNumber, Namespaces: make([]ExposedNamespace, 0, len(s.Namespaces))}
	for _, n := range s.Namespaces {
		e.Namespaces = append(e.Namespaces, ExposedNamespace{NSID: n.NSID, BdevName: n.Bdev()})
	}
	sortNamespaces(e.Namespaces)
	return e
}

// readControllers lists the NVMe bdev controllers as AttachedControllers,
// unrelated yet.
func readControllers(ctx context.Context, c spdkrpc.Caller) ([]AttachedController, error) {
	ctrls, err := spdkrpc.BdevNvmeGetControllers(ctx, c, "")
	if methodMissing(err) {
		return []AttachedController{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing NVMe bdev controllers: %w", err)
	}
	out := make([]AttachedController, 0, len(ctrls))
	for _, ctrl := range ctrls {
		out = append(out, controllerOf(ctrl))
	}
	return out, nil
}

func controllerOf(ctrl spdkrpc.BdevNvmeController) AttachedController {
	a := AttachedController{Name: ctrl.Name, Paths: make([]ControllerPath, 0, len(ctrl.Ctrlrs))}
	for _, p := range ctrl.Ctrlrs {
		a.Paths = append(a.Paths, ControllerPath{SubNQN: p.Trid.Subnqn, Traddr: p.Trid.Traddr, Trsvcid: p.Trid.Trsvcid})
	}
	return a
}
