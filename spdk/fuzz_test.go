package spdk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// FuzzClassify decodes arbitrary bytes as a bdev_lvol_get_lvols result and
// classifies it: every lvol must land in exactly one place.
func FuzzClassify(f *testing.F) {
	f.Add([]byte(`[{"alias":"d/r","uuid":"u1","name":"r","lvs":{"name":"d","uuid":"L"}},{"alias":"d/r-snap-s","uuid":"u2","name":"r-snap-s","is_snapshot":true,"lvs":{"name":"d","uuid":"L"}}]`))
	f.Add([]byte(`[{"name":"x-snap-y-snap-z","is_snapshot":true},{"name":"x-snap-y"},{"name":"bi-img"},{"name":"a-expired-12345678"},{"name":""}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var lvols []spdkrpc.Lvol
		if json.Unmarshal(data, &lvols) != nil {
			return
		}
		rt := Classify(lvols, nil)
		n := len(rt.BackingImages) + len(rt.Skipped)
		for _, r := range rt.Replicas {
			n += 1 + len(r.Derived)
			if r.Head.UUID == "" || r.Head.IsSnapshot {
				t.Fatalf("bad head %+v", r.Head)
			}
		}
		if n != len(lvols) {
			t.Fatalf("%d lvols in, %d accounted for: %+v", len(lvols), n, rt)
		}
	})
}

// FuzzPurgeOrder decodes arbitrary bytes as a bdev_get_bdevs result and
// plans a purge: it must not panic, a plan must end with the head, never
// include an lvol twice, and never include an lvol that SPDK's relations
// do not put under the head's chain (a descendant of the head or of one of
// its ancestors, in its lvstore), whatever the names say.
func FuzzPurgeOrder(f *testing.F) {
	f.Add([]byte(`[{"name":"u1","aliases":["d/r"],"product_name":"Logical Volume","uuid":"u1","driver_specific":{"lvol":{"lvol_store_uuid":"L","base_snapshot":"r-snap-s"}}},{"name":"u2","aliases":["d/r-snap-s"],"product_name":"Logical Volume","uuid":"u2","driver_specific":{"lvol":{"lvol_store_uuid":"L","snapshot":true,"clones":["r","r-snap-s"]}}}]`), "r", "u1")
	f.Add([]byte(`[{"name":"u1","aliases":["d/r"],"product_name":"Logical Volume","uuid":"u1","driver_specific":{"lvol":{"lvol_store_uuid":"L"}}},{"name":"u3","aliases":["d/r-snap-r-2"],"product_name":"Logical Volume","uuid":"u3","driver_specific":{"lvol":{"lvol_store_uuid":"L"}}},{"name":"u4","aliases":["d/r-snap-x"],"product_name":"Logical Volume","uuid":"u4","driver_specific":{"lvol":{"lvol_store_uuid":"L","snapshot":true}}}]`), "r", "u1")
	f.Fuzz(func(t *testing.T, data []byte, name, uuid string) {
		var bdevs []spdkrpc.Bdev
		if json.Unmarshal(data, &bdevs) != nil || uuid == "" {
			return
		}
		order, err := PurgeOrder(bdevs, name, uuid)
		if err != nil || len(order) == 0 {
			return
		}
		head := order[len(order)-1]
		if head.Name != name || head.UUID != uuid {
			t.Fatalf("plan does not end with the head: %+v", order)
		}
		seen := map[string]bool{}
		for _, l := range order {
			if seen[l.Alias] {
				t.Fatalf("%s twice in %+v", l.Alias, order)
			}
			seen[l.Alias] = true
		}
		related := relatedToChain(bdevs, head)
		for _, l := range order {
			if !related[l.UUID] {
				t.Fatalf("%s (%s) planned but SPDK does not relate it to %s's chain: %+v", l.Alias, l.UUID, name, order)
			}
		}
	})
}

// relatedToChain is the naive reference: the UUIDs of the head's
// ancestors (by base_snapshot) and of everything descending from them or
// from the head (by clones and base_snapshot), in the head's lvstore,
// names ignored.
func relatedToChain(bdevs []spdkrpc.Bdev, head spdkrpc.Lvol) map[string]bool {
	type node struct {
		uuid, parent string
		clones       []string
	}
	byName := map[string][]node{}
	for _, b := range bdevs {
		info := b.DriverSpecific.Lvol
		if info == nil || info.LvolStoreUUID != head.Lvs.UUID {
			continue
		}
		for _, a := range b.Aliases {
			if lvs, n, ok := strings.Cut(a, "/"); ok && lvs == head.Lvs.Name {
				byName[n] = append(byName[n], node{b.UUID, info.BaseSnapshot, info.Clones})
				break
			}
		}
	}
	children := map[string][]string{}
	for n, ns := range byName {
		for _, x := range ns {
			children[n] = append(children[n], x.clones...)
			if x.parent != "" {
				children[x.parent] = append(children[x.parent], n)
			}
		}
	}
	roots := []string{head.Name}
	for cur, hops := head.Name, 0; hops <= len(byName); hops++ {
		ns := byName[cur]
		if len(ns) == 0 || ns[0].parent == "" {
			break
		}
		cur = ns[0].parent
		roots = append(roots, cur)
	}
	out := map[string]bool{}
	visited := map[string]bool{}
	for stack := roots; len(stack) > 0; {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if visited[n] {
			continue
		}
		visited[n] = true
		for _, x := range byName[n] {
			out[x.uuid] = true
		}
		stack = append(stack, children[n]...)
	}
	return out
}
