package spdk_test

import (
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// relateRuntime is a node with one engine (vol1-e-0) on replica repA's
// head and a remote replica's controller, replica repA with a snapshot,
// replica repB and a backing image.
func relateRuntime() (spdk.Runtime, []spdkrpc.Bdev) {
	lvs := spdkrpc.LvolStoreRef{Name: "disk-1", UUID: "lvs-uuid"}
	lvol := func(name, uuid string, snap bool) spdkrpc.Lvol {
		return spdkrpc.Lvol{Alias: "disk-1/" + name, UUID: uuid, Name: name, IsSnapshot: snap, Lvs: lvs}
	}
	lvols := []spdkrpc.Lvol{
		lvol(repA, "uuid-a", false),
		lvol(repA+"-snap-s1", "uuid-a-s1", true),
		lvol(repB, "uuid-b", false),
		lvol("bi-img1-disk-1", "uuid-bi", true),
	}
	raids := []spdkrpc.RaidBdev{
		{Name: "vol1-e-0", BdevRaidInfo: spdkrpc.BdevRaidInfo{UUID: "uuid-e1", BaseBdevsList: []spdkrpc.RaidBaseBdev{{Name: "uuid-a"}, {Name: "vol1-r-11111111n1"}}}},
		{Name: "stray-raid", BdevRaidInfo: spdkrpc.BdevRaidInfo{UUID: "", BaseBdevsList: []spdkrpc.RaidBaseBdev{{Name: "vol9-r-99999999n1"}}}},
	}
	var bdevs []spdkrpc.Bdev
	for _, r := range raids {
		info := r.BdevRaidInfo
		bdevs = append(bdevs, spdkrpc.Bdev{Name: r.Name, UUID: r.UUID, ProductName: spdkrpc.ProductRaidVolume, DriverSpecific: spdkrpc.BdevDriverSpecific{Raid: &info}})
	}
	for _, n := range []string{"vol1-r-11111111n1", "vol2-r-22222222n1", "vol9-r-99999999n1", "foreignn1"} {
		bdevs = append(bdevs, spdkrpc.Bdev{Name: n, UUID: "uuid-" + n, ProductName: "NVMe disk"})
	}
	return spdk.Classify(lvols, raids), bdevs
}

func TestRelateExposuresAttributesByRelationThenName(t *testing.T) {
	rt, bdevs := relateRuntime()
	ns := func(nsid uint32, bdev string) spdk.ExposedNamespace {
		return spdk.ExposedNamespace{NSID: nsid, BdevName: bdev}
	}
	subs := []spdk.Exposure{
		{NQN: spdk.LonghornNQN("vol1-e-0"), Namespaces: []spdk.ExposedNamespace{ns(1, "vol1-e-0")}},
		{NQN: spdk.LonghornNQN("volume-vol1"), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-e1")}},
		// The same under another volume's stable NQN: not vol1-e-0's.
		{NQN: spdk.LonghornNQN("volume-vol3"), Namespaces: []spdk.ExposedNamespace{ns(1, "vol1-e-0")}},
		{NQN: spdk.LonghornNQN(repA), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-a")}},
		{NQN: spdk.LonghornNQN(repA + "-snap-s1"), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-a-s1")}},
		{NQN: spdk.LonghornNQN(repB), Namespaces: []spdk.ExposedNamespace{ns(1, "disk-1/"+repB)}},
		// Named like another volume's replica, exposing repA's head.
		{NQN: spdk.LonghornNQN("vol7-r-77777777"), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-a")}},
		// A foreign target exposing repB.
		{NQN: "nqn.2016-06.io.spdk:cnode1", Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-b")}},
		// Empty, named after a replica SPDK no longer holds.
		{NQN: spdk.LonghornNQN("vol5-r-55555555")},
		// Empty, named like nothing of Longhorn's.
		{NQN: spdk.LonghornNQN("something-else")},
		{NQN: spdk.LonghornNQN("bi-img1-disk-1"), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-bi")}},
		{NQN: spdk.LonghornNQN(repA + "-two"), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-a"), ns(2, "uuid-b")}},
		{NQN: spdk.LonghornNQN("vol8-r-88888888"), Namespaces: []spdk.ExposedNamespace{ns(1, "Malloc0")}},
		// Empty, named after one of repA's lvols (a rebuilding left over).
		{NQN: spdk.LonghornNQN(repA + "-rebuilding")},
		// Empty, the stable volume NQN vol1's engines share: no one
		// engine's by name alone.
		{NQN: spdk.LonghornNQN("volume-vol4")},
		// repB's head under the NQN of one of its snapshots: still repB's.
		{NQN: spdk.LonghornNQN(repB + "-snap-s9"), Namespaces: []spdk.ExposedNamespace{ns(1, "uuid-b")}},
	}
	path := func(sub string) []spdk.ControllerPath {
		return []spdk.ControllerPath{{SubNQN: sub, Traddr: "10.0.0.2", Trsvcid: "20001"}}
	}
	ctrls := []spdk.AttachedController{
		{Name: "vol1-r-11111111", Paths: path(spdk.LonghornNQN("vol1-r-11111111"))},
		{Name: "vol2-r-22222222", Paths: path(spdk.LonghornNQN("vol2-r-22222222"))},
		{Name: "vol2-r-22222222-rebuilding", Paths: path(spdk.LonghornNQN("vol2-r-22222222-rebuilding"))},
		{Name: "vol3-r-33333333", Paths: path(spdk.LonghornNQN("vol4-r-44444444"))},
		{Name: "vol9-r-99999999", Paths: path(spdk.LonghornNQN("vol9-r-99999999"))},
		{Name: "foreign", Paths: path("nqn.2016-06.io.spdk:cnode1")},
	}
	inv := spdk.RelateExposures(subs, ctrls, bdevs, rt)

	rel := func(k orphan.Kind, n string) spdk.Owner {
		return spdk.Owner{Kind: k, Name: n, By: spdk.AttributedByRelation}
	}
	byName := func(k orphan.Kind, n string) spdk.Owner {
		return spdk.Owner{Kind: k, Name: n, By: spdk.AttributedByName}
	}
	wantSubs := map[string]spdk.Owner{
		spdk.LonghornNQN("vol1-e-0"):           rel(orphan.KindEngineInstance, "vol1-e-0"),
		spdk.LonghornNQN("volume-vol1"):        rel(orphan.KindEngineInstance, "vol1-e-0"),
		spdk.LonghornNQN(repA):                 rel(orphan.KindReplicaInstance, repA),
		spdk.LonghornNQN(repA + "-snap-s1"):    rel(orphan.KindReplicaInstance, repA),
		spdk.LonghornNQN(repB):                 rel(orphan.KindReplicaInstance, repB),
		spdk.LonghornNQN("vol7-r-77777777"):    {},
		"nqn.2016-06.io.spdk:cnode1":           {},
		spdk.LonghornNQN("vol5-r-55555555"):    byName(orphan.KindReplicaInstance, "vol5-r-55555555"),
		spdk.LonghornNQN("something-else"):     {},
		spdk.LonghornNQN("bi-img1-disk-1"):     {},
		spdk.LonghornNQN(repA + "-two"):        {},
		spdk.LonghornNQN("vol8-r-88888888"):    {},
		spdk.LonghornNQN(repA + "-rebuilding"): byName(orphan.KindReplicaInstance, repA),
		spdk.LonghornNQN("volume-vol4"):        {},
		spdk.LonghornNQN("volume-vol3"):        {},
		spdk.LonghornNQN(repB + "-snap-s9"):    rel(orphan.KindReplicaInstance, repB),
	}
	if len(inv.Subsystems) != len(wantSubs) {
		t.Fatalf("%d subsystems, want %d", len(inv.Subsystems), len(wantSubs))
	}
	for _, s := range inv.Subsystems {
		if s.Owner != wantSubs[s.NQN] {
			t.Errorf("subsystem %s: owner %+v (%s), want %+v", s.NQN, s.Owner, s.Note, wantSubs[s.NQN])
		}
		if !s.Owner.Attributed() && s.Note == "" {
			t.Errorf("subsystem %s: unattributed without a note", s.NQN)
		}
	}
	if got := inv.Subsystems[0]; got.NQN != "nqn.2016-06.io.spdk:cnode1" {
		t.Errorf("subsystems not sorted by NQN: first %s", got.NQN)
	}
	for _, s := range inv.Subsystems {
		if s.NQN == spdk.LonghornNQN(repB) && (s.Namespaces[0].BdevUUID != "uuid-b" || s.Namespaces[0].Object != "lvol disk-1/"+repB) {
			t.Errorf("namespace by alias not resolved: %+v", s.Namespaces[0])
		}
	}

	wantCtrls := map[string]struct {
		owner  spdk.Owner
		remote string
	}{
		"vol1-r-11111111":            {rel(orphan.KindEngineInstance, "vol1-e-0"), "vol1-r-11111111"},
		"vol2-r-22222222":            {byName(orphan.KindReplicaInstance, "vol2-r-22222222"), "vol2-r-22222222"},
		"vol2-r-22222222-rebuilding": {byName(orphan.KindReplicaInstance, "vol2-r-22222222"), "vol2-r-22222222"},
		"vol3-r-33333333":            {spdk.Owner{}, ""},                // subnqn names another replica
		"vol9-r-99999999":            {spdk.Owner{}, "vol9-r-99999999"}, // used by a RAID bdev that is no listed engine
		"foreign":                    {spdk.Owner{}, ""},
	}
	for _, c := range inv.Controllers {
		w := wantCtrls[c.Name]
		if c.Owner != w.owner || c.Remote != w.remote {
			t.Errorf("controller %s: owner %+v remote %q (%s), want %+v %q", c.Name, c.Owner, c.Remote, c.Note, w.owner, w.remote)
		}
		if !c.Owner.Attributed() && c.Note == "" {
			t.Errorf("controller %s: unattributed without a note", c.Name)
		}
	}
	if c := inv.Controllers[slicesIndex(inv.Controllers, "vol1-r-11111111")]; strings.Join(c.Bdevs, ",") != "vol1-r-11111111n1" || strings.Join(c.UsedBy, ",") != "vol1-e-0" {
		t.Errorf("controller relations: bdevs %v used by %v", c.Bdevs, c.UsedBy)
	}
	if got := inv.ExposuresOf(orphan.KindReplicaInstance, repA); len(got) != 2 {
		t.Errorf("ExposuresOf(%s) = %d subsystems, want 2", repA, len(got))
	}
}

func slicesIndex(cs []spdk.AttachedController, name string) int {
	for i, c := range cs {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// TestRelateExposuresDoesNotAliasInput: relating twice gives the same
// answer, and the caller's slices are not written.
func TestRelateExposuresDoesNotAliasInput(t *testing.T) {
	rt, bdevs := relateRuntime()
	subs := []spdk.Exposure{{NQN: spdk.LonghornNQN(repA), Namespaces: []spdk.ExposedNamespace{{NSID: 1, BdevName: "uuid-a"}}}}
	_ = spdk.RelateExposures(subs, nil, bdevs, rt)
	if subs[0].Namespaces[0].BdevUUID != "" || subs[0].Owner.Attributed() {
		t.Fatalf("input modified: %+v", subs[0])
	}
}
