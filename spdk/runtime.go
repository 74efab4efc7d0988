package spdk

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Runtime is what one node's SPDK holds, in Longhorn's terms: engines (RAID
// bdevs) and replicas (head lvols with the lvols derived from them).
// Classify builds it; it is pure and does no I/O.
type Runtime struct {
	Engines  []Engine
	Replicas []Replica
	// BackingImages are lvols named "bi-...": shared by replicas, owned by
	// no replica, never purged with one.
	BackingImages []spdkrpc.Lvol
	// Skipped are objects seen but not listed, with the reason.
	Skipped []SkippedObject
}

// Engine is a RAID bdev: Longhorn names it after the engine, and its UUID
// is the engine's runtime identity.
type Engine struct {
	Name  string
	UUID  string
	State string
}

// Replica is a head lvol: Longhorn names it after the replica, and its UUID
// (never the lvstore's) is the replica's runtime identity. Derived are the
// lvols named after it in the same lvstore: snapshot lvols
// "<replica>-snap-<snapshot>", "<replica>-rebuilding",
// "<replica>-expired-<8>", "<replica>-cloning" and "<replica>-cloning-tmp".
//
// Derived only groups lvols for listing, so that none of them is judged as
// a replica of its own; it never decides what a purge deletes. A purge
// follows SPDK's own snapshot and clone relations (PurgeOrder).
type Replica struct {
	Head    spdkrpc.Lvol
	Derived []spdkrpc.Lvol
}

// Name returns the replica's name (the head lvol's name).
func (r Replica) Name() string { return r.Head.Name }

// UUID returns the head lvol's UUID.
func (r Replica) UUID() string { return r.Head.UUID }

// SkippedObject is a runtime object Classify did not list, and why.
type SkippedObject struct {
	Kind   string // "engine" or "replica" (or "lvol" for headless lvols)
	Name   string // RAID bdev name or lvol alias
	Reason string
	// NoUUID says the object was skipped for lack of a usable UUID: it
	// exists, but cannot be named as an orphan or told from its successor.
	NoUUID bool
}

// BackingImagePrefix starts the name of Longhorn's backing image lvols.
const BackingImagePrefix = "bi-"

// Classify sorts lvols and RAID bdevs into a Runtime:
//
//   - each RAID bdev is an engine; one with an empty (or all-zero) UUID is
//     skipped;
//   - an lvol named "bi-..." is a backing image;
//   - a snapshot lvol named "<r>-snap-<s>", or any lvol named
//     "<r>-rebuilding", "<r>-expired-<8>", "<r>-cloning" or
//     "<r>-cloning-tmp", is attributed to the head lvol named <r> in the
//     same lvstore; if no such head exists it is skipped (a purge
//     interrupted half-way, or a head being recreated: not a replica, and
//     not safe to guess about);
//   - a snapshot lvol with no derived form is skipped: a head is never a
//     snapshot;
//   - any other lvol is a replica head; one with an empty (or all-zero)
//     UUID is skipped.
//
// Longhorn's snapshot lvols are SPDK snapshots, so a "-snap-" name counts
// only on an lvol SPDK reports as a snapshot: a head whose replica name
// contains "-snap-" (a replica of volume "x-r-11111111-snap") is a head of
// its own and is judged on its own. Output is sorted by lvstore and name.
func Classify(lvols []spdkrpc.Lvol, raids []spdkrpc.RaidBdev) Runtime {
	var rt Runtime
	for _, r := range raids {
		if !usableUUID(r.UUID) {
			rt.Skipped = append(rt.Skipped, SkippedObject{Kind: "engine", Name: r.Name, Reason: "RAID bdev has an empty UUID; cannot be judged or deleted safely", NoUUID: true})
			continue
		}
		rt.Engines = append(rt.Engines, Engine{Name: r.Name, UUID: r.UUID, State: r.State})
	}
	slices.SortFunc(rt.Engines, func(a, b Engine) int { return strings.Compare(a.Name, b.Name) })

	type key struct{ lvs, name string }
	names := make(map[key]struct{}, len(lvols))
	for _, l := range lvols {
		names[key{l.Lvs.UUID, l.Name}] = struct{}{}
	}
	heads := make(map[key]int) // index into rt.Replicas
	var derived []struct {
		l     spdkrpc.Lvol
		owner string
	}
	for _, l := range lvols {
		if strings.HasPrefix(l.Name, BackingImagePrefix) {
			rt.BackingImages = append(rt.BackingImages, l)
			continue
		}
		owner, ok := derivedOwner(l, func(n string) bool { _, ok := names[key{l.Lvs.UUID, n}]; return ok })
		if ok {
			derived = append(derived, struct {
				l     spdkrpc.Lvol
				owner string
			}{l, owner})
			continue
		}
		switch {
		case l.IsSnapshot:
			rt.Skipped = append(rt.Skipped, SkippedObject{Kind: "lvol", Name: aliasOf(l), Reason: "snapshot lvol not named after any replica"})
		case !usableUUID(l.UUID):
			rt.Skipped = append(rt.Skipped, SkippedObject{Kind: "replica", Name: aliasOf(l), Reason: "head lvol has an empty UUID; cannot be judged or deleted safely", NoUUID: true})
		default:
			heads[key{l.Lvs.UUID, l.Name}] = len(rt.Replicas)
			rt.Replicas = append(rt.Replicas, Replica{Head: l})
		}
	}
	for _, d := range derived {
		i, ok := heads[key{d.l.Lvs.UUID, d.owner}]
		if !ok {
			rt.Skipped = append(rt.Skipped, SkippedObject{Kind: "lvol", Name: aliasOf(d.l), Reason: "derived lvol of replica " + d.owner + " whose head lvol is missing"})
			continue
		}
		rt.Replicas[i].Derived = append(rt.Replicas[i].Derived, d.l)
	}
	byStoreName := func(a, b spdkrpc.Lvol) int {
		return cmp.Or(strings.Compare(a.Lvs.Name, b.Lvs.Name), strings.Compare(a.Lvs.UUID, b.Lvs.UUID), strings.Compare(a.Name, b.Name))
	}
	slices.SortFunc(rt.Replicas, func(a, b Replica) int { return byStoreName(a.Head, b.Head) })
	for i := range rt.Replicas {
		slices.SortFunc(rt.Replicas[i].Derived, byStoreName)
	}
	slices.SortFunc(rt.BackingImages, byStoreName)
	slices.SortFunc(rt.Skipped, func(a, b SkippedObject) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return rt
}

// ReadRuntime lists lvols and RAID bdevs through c and classifies them.
func ReadRuntime(ctx context.Context, c spdkrpc.Caller) (_ Runtime, err error) {
	defer func() { err = withPrefix(err) }()
	lvols, err := spdkrpc.BdevLvolGetLvols(ctx, c, "")
	if err != nil {
		return Runtime{}, fmt.Errorf("listing lvols: %w", err)
	}
	raids, err := spdkrpc.BdevRaidGetBdevs(ctx, c, spdkrpc.RaidCategoryAll)
	if err != nil {
		return Runtime{}, fmt.Errorf("listing RAID bdevs: %w", err)
	}
	return Classify(lvols, raids), nil
}

// Longhorn's derived lvol name forms.
const (
	snapInfix       = "-snap-"
	rebuildingSufx  = "-rebuilding"
	cloningSufx     = "-cloning"
	cloningTmpSufx  = "-cloning-tmp"
	expiredInfix    = "-expired-"
	expiredRandSize = 8
)

// derivedOwner returns the replica an lvol is derived from, if its name
// has one of Longhorn's derived forms. exists reports whether an lvol of
// that name is in the same lvstore.
func derivedOwner(l spdkrpc.Lvol, exists func(string) bool) (string, bool) {
	n := l.Name
	for _, suf := range []string{cloningTmpSufx, cloningSufx, rebuildingSufx} {
		if owner, ok := strings.CutSuffix(n, suf); ok && owner != "" {
			return owner, true
		}
	}
	if i := strings.LastIndex(n, expiredInfix); i > 0 && len(n)-i-len(expiredInfix) == expiredRandSize {
		return n[:i], true
	}
	if !l.IsSnapshot {
		// Longhorn's snapshot lvols are SPDK snapshots; anything else
		// named "-snap-" is somebody's head.
		return "", false
	}
	// Prefer the longest prefix that names an existing lvol: a replica
	// name may itself contain "-snap-".
	owner := ""
	for i := strings.LastIndex(n, snapInfix); i > 0; i = strings.LastIndex(n[:i], snapInfix) {
		if len(n)-i-len(snapInfix) == 0 {
			continue
		}
		if exists(n[:i]) {
			return n[:i], true
		}
		owner = n[:i]
	}
	if owner != "" {
		return owner, true
	}
	return "", false
}

// nilUUID is how SPDK prints an unset UUID.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// usableUUID reports whether id can identify one runtime object: not
// empty and not SPDK's all-zero UUID, which every object without a UUID
// shares.
func usableUUID(id string) bool { return id != "" && id != nilUUID }

// aliasOf returns the lvol's alias, built from its lvstore and name when
// the listing left it out.
func aliasOf(l spdkrpc.Lvol) string {
	if l.Alias != "" {
		return l.Alias
	}
	return l.Lvs.Name + "/" + l.Name
}
