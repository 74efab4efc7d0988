package spdk

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

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
// lvol of the tree that a RAID bdev is built on:
// orphan.ErrPreconditionFailed. An lvol bdev without a UUID or an
// "lvstore/lvol" alias, two lvols of one name in one lvstore, a clone edge
// to an lvol not listed, or a parent loop: an error matching
// ErrUnexpectedResult, because such a listing cannot prove what the tree
// is.
func PurgeOrder(bdevs []spdkrpc.Bdev, name, uuid string) ([]spdkrpc.Lvol, error) {
	ix, err := newLvolIndex(bdevs)
	if err != nil {
		return nil, err
	}
	st, tree, err := ix.tree(name, uuid)
	if err != nil || tree == nil {
		return nil, err
	}
	children := st.children
	if user, ok := raidUser(bdevs, tree); ok {
		return nil, fmt.Errorf("%w: replica %s: %s", errRefused, name, user)
	}

	// Post-order over clone edges, in name order for determinism.
	names := slices.Sorted(maps.Keys(tree))
	visited := make(map[string]bool, len(tree))
	order := make([]spdkrpc.Lvol, 0, len(tree))
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
	return append(order, tree[name].Lvol), nil
}

// lvolIndex is the lvols of one bdev_get_bdevs listing, indexed once, so
// that the trees of every replica of a node are found in one pass over
// the listing (Scan finds them all) rather than one pass per replica.
type lvolIndex struct {
	heads  map[string][]*lvolNode // lvols that are no snapshot, by name, in listing order
	stores map[lvsKey]*lvstoreIndex
}

// lvsKey names an lvstore by UUID and name.
type lvsKey struct{ uuid, name string }

// lvstoreIndex is one lvstore's lvols by name, with clone edges from both
// sides (SPDK may leave a name out of one of them); dup is set when two
// lvols of the lvstore share a name, which makes any tree in it unknown.
type lvstoreIndex struct {
	byName   map[string]*lvolNode
	children map[string][]string
	dup      error
}

// newLvolIndex indexes the lvol bdevs of bdevs; it fails as lvolsOf does.
func newLvolIndex(bdevs []spdkrpc.Bdev) (*lvolIndex, error) {
	lvols, err := lvolsOf(bdevs)
	if err != nil {
		return nil, err
	}
	ix := &lvolIndex{heads: make(map[string][]*lvolNode), stores: make(map[lvsKey]*lvstoreIndex)}
	for i := range lvols {
		l := &lvols[i]
		if !l.IsSnapshot {
			ix.heads[l.Name] = append(ix.heads[l.Name], l)
		}
		k := lvsKey{l.Lvs.UUID, l.Lvs.Name}
		st := ix.stores[k]
		if st == nil {
			st = &lvstoreIndex{byName: make(map[string]*lvolNode), children: make(map[string][]string)}
			ix.stores[k] = st
		}
		if _, dup := st.byName[l.Name]; dup {
			if st.dup == nil {
				st.dup = badListing("two lvols named %s in lvstore %s", l.Name, l.Lvs.Name)
			}
			continue
		}
		st.byName[l.Name] = l
	}
	for _, st := range ix.stores {
		addEdge := func(parent, child string) {
			if !slices.Contains(st.children[parent], child) {
				st.children[parent] = append(st.children[parent], child)
			}
		}
		for n, l := range st.byName {
			for _, c := range l.clones {
				addEdge(n, c)
			}
			if l.parent != "" {
				addEdge(l.parent, n)
			}
		}
	}
	return ix, nil
}

// tree returns the lvols a purge of the replica whose head lvol is named
// name and has UUID uuid deletes (see PurgeOrder), by name, and the index
// of their lvstore; a nil tree and no error when no head of that name is
// listed. Its errors are PurgeOrder's, but for the RAID bdev rule.
func (ix *lvolIndex) tree(name, uuid string) (*lvstoreIndex, map[string]*lvolNode, error) {
	var head *lvolNode
	var seen []string
	for _, l := range ix.heads[name] {
		if l.UUID == uuid {
			head = l
			break
		}
		seen = append(seen, l.UUID)
	}
	if head == nil {
		if len(seen) == 0 {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("%w: replica %s: head lvol UUID is %s, record has %q", ErrUUIDMismatch, name, strings.Join(seen, ","), uuid)
	}
	st := ix.stores[lvsKey{head.Lvs.UUID, head.Lvs.Name}]
	if st.dup != nil {
		return nil, nil, st.dup
	}
	byName, children := st.byName, st.children

	// Climb the chain through the replica's own snapshots.
	top := head
	for climbed := map[string]bool{head.Name: true}; top.parent != ""; {
		p, ok := byName[top.parent]
		if !ok || !p.IsSnapshot || !ownedLvolName(name, p.Name, true) {
			break // not listed here, not a snapshot, or not this replica's: kept
		}
		if climbed[p.Name] {
			return nil, nil, badListing("snapshot chain of %s loops at %s", name, p.Name)
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
			return nil, nil, badListing("lvol %s of replica %s's tree is named as a clone but not listed", n, name)
		}
		if n != name && !ownedLvolName(name, n, l.IsSnapshot) {
			return nil, nil, fmt.Errorf("%w: replica %s: lvol %s descends from the replica's chain but is not one of its lvols (another volume's clone, or a look-alike name)", errRefused, name, l.Alias)
		}
		tree[n] = l
		stack = append(stack, children[n]...)
	}
	if _, ok := tree[name]; !ok {
		return nil, nil, badListing("head %s is not a descendant of its own chain", name)
	}
	return st, tree, nil
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
func raidUser(bdevs []spdkrpc.Bdev, tree map[string]*lvolNode) (string, bool) {
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
	spdkrpc.Lvol
	parent string   // base_snapshot, "" if none or not resolvable
	clones []string // clones, for a snapshot
}

// lvolsOf picks the lvol bdevs out of a bdev_get_bdevs listing. An lvol
// bdev is named by its UUID and has the alias "<lvstore>/<lvol>". One
// without a usable UUID or without that alias cannot be told apart or
// placed: the listing is refused rather than the lvol skipped, so that a
// head never looks gone because SPDK described it badly.
func lvolsOf(bdevs []spdkrpc.Bdev) ([]lvolNode, error) {
	var out []lvolNode
	for _, b := range bdevs {
		info := b.DriverSpecific.Lvol
		if info == nil && b.ProductName != spdkrpc.ProductLogicalVolume {
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
			Lvol: spdkrpc.Lvol{
				Alias:      alias,
				UUID:       b.UUID,
				Name:       lname,
				IsSnapshot: info.Snapshot,
				IsClone:    info.Clone,
				Lvs:        spdkrpc.LvolStoreRef{Name: lvs, UUID: info.LvolStoreUUID},
			},
			parent: info.BaseSnapshot,
			clones: info.Clones,
		})
	}
	return out, nil
}

func badListing(format string, args ...any) error {
	return fmt.Errorf("%w: bdev_get_bdevs: %s", ErrUnexpectedResult, fmt.Sprintf(format, args...))
}
