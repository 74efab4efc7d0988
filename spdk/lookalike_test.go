package spdk_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Replica A of volume "x", and replicas whose names start like A's lvols:
// B of volume "x-r-11111111-snap" has a head named like a snapshot of A.
const (
	lookA = "x-r-11111111"
	lookB = "x-r-11111111-snap-r-22222222" // a head of its own, no relation to A
	lookC = "x-r-11111111-snap-r-44444444" // a head SPDK reports as a clone of A's snapshot
)

// lookScene builds, in lvstore disk-1:
//
//	A:      A-snap-s1 <- A-snap-s2 <- A          (and A-expired-0000abcd, a clone of A-snap-s1)
//	B:      B-snap-b1 <- B                       (B = "x-r-11111111-snap-r-22222222")
//	stray:  A-snap-stray, a snapshot with no clone and no relation to A
//
// and in lvstore disk-2 an unrelated A with a snapshot of the same names.
func lookScene(t *testing.T) *scene {
	t.Helper()
	s := &scene{srv: fixture.Start(t), uuids: map[string]string{}}
	srv := s.srv
	add := func(key string) func(id string, err error) {
		return func(id string, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			s.uuids[key] = id
		}
	}
	for _, lvs := range []string{"disk-1", "disk-2"} {
		fixture.Must(srv.AddLvstore(lvs))(t)
		add(lvs + "/" + lookA)(srv.AddLvol(lvs, lookA))
		add(lvs + "/" + lookA + "-snap-s1")(srv.Snapshot(lvs, lookA, lookA+"-snap-s1"))
	}
	add("disk-1/" + lookA + "-snap-s2")(srv.Snapshot("disk-1", lookA, lookA+"-snap-s2"))
	add("disk-1/" + lookA + "-expired-0000abcd")(srv.Clone("disk-1", lookA+"-snap-s1", lookA+"-expired-0000abcd"))
	add("disk-1/" + lookB)(srv.AddLvol("disk-1", lookB))
	add("disk-1/" + lookB + "-snap-b1")(srv.Snapshot("disk-1", lookB, lookB+"-snap-b1"))
	// A snapshot named like A's, left by a deleted lvol: no clone, no parent.
	fixture.Must(srv.AddLvol("disk-1", "tmp-r-33333333"))(t)
	add("disk-1/" + lookA + "-snap-stray")(srv.Snapshot("disk-1", "tmp-r-33333333", lookA+"-snap-stray"))
	if err := spdkrpc.BdevLvolDelete(context.Background(), s.client(t), "disk-1/tmp-r-33333333"); err != nil {
		t.Fatal(err)
	}
	srv.ResetCalls()
	return s
}

func aliasesWithout(all []string, gone ...string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(a string) bool { return slices.Contains(gone, a) })
}

// TestLookAlikeHeadIsItsOwnReplica: B's head is named like a snapshot of A
// but is not a snapshot and descends from nothing of A's. It is listed as a
// replica of its own; purging A deletes A's tree only; purging B deletes
// B's tree only; the stray look-alike snapshot and the other lvstore's A
// are never touched.
func TestLookAlikeHeadIsItsOwnReplica(t *testing.T) {
	s := lookScene(t)
	snap, err := newOrphans(t, s.client(t), noRecords).Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for _, it := range snap.Items {
		replicas = append(replicas, it.Param(orphan.ParamInstanceName)+"@"+it.Param(orphan.ParamInstanceUUID))
	}
	for _, want := range []string{lookA + "@" + s.uuids["disk-1/"+lookA], lookA + "@" + s.uuids["disk-2/"+lookA], lookB + "@" + s.uuids["disk-1/"+lookB]} {
		if !slices.Contains(replicas, want) {
			t.Errorf("replica %s not listed: %v", want, replicas)
		}
	}

	all := s.srv.LvolAliases()
	d := s.deleter(t)
	if err := d.Delete(context.Background(), record(t, orphan.KindReplicaInstance, lookA, s.uuids["disk-1/"+lookA])); err != nil {
		t.Fatal(err)
	}
	want := aliasesWithout(all, "disk-1/"+lookA, "disk-1/"+lookA+"-snap-s1", "disk-1/"+lookA+"-snap-s2", "disk-1/"+lookA+"-expired-0000abcd")
	if got := s.srv.LvolAliases(); !slices.Equal(got, want) {
		t.Fatalf("after purging A:\n got %v\nwant %v", got, want)
	}
	if err := d.Delete(context.Background(), record(t, orphan.KindReplicaInstance, lookB, s.uuids["disk-1/"+lookB])); err != nil {
		t.Fatal(err)
	}
	want = aliasesWithout(want, "disk-1/"+lookB, "disk-1/"+lookB+"-snap-b1")
	if got := s.srv.LvolAliases(); !slices.Equal(got, want) {
		t.Fatalf("after purging B:\n got %v\nwant %v", got, want)
	}
	for _, keep := range []string{"disk-1/" + lookA + "-snap-stray", "disk-2/" + lookA, "disk-2/" + lookA + "-snap-s1"} {
		if !slices.Contains(want, keep) {
			t.Fatalf("test scene lost %s", keep)
		}
	}
}

// TestLookAlikeBPurgedBeforeA: purging B first (its name starts like A's
// lvols, and A's names start no lvol of B) leaves A's tree whole.
func TestLookAlikeBPurgedBeforeA(t *testing.T) {
	s := lookScene(t)
	all := s.srv.LvolAliases()
	if err := s.deleter(t).Delete(context.Background(), record(t, orphan.KindReplicaInstance, lookB, s.uuids["disk-1/"+lookB])); err != nil {
		t.Fatal(err)
	}
	if got, want := s.srv.LvolAliases(), aliasesWithout(all, "disk-1/"+lookB, "disk-1/"+lookB+"-snap-b1"); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// TestLookAlikeCloneOfReplicaStopsPurge: C's head is named like a snapshot
// of A and SPDK reports it as a clone of A's snapshot (another volume
// built on A's data). Purging A would take C's data with it: refused,
// nothing deleted. Purging C deletes C's head only, never A's snapshot it
// is cloned from.
func TestLookAlikeCloneOfReplicaStopsPurge(t *testing.T) {
	s := lookScene(t)
	fixture.Must(s.srv.Clone("disk-1", lookA+"-snap-s1", lookC))(t)
	s.srv.ResetCalls()
	all := s.srv.LvolAliases()
	d := s.deleter(t)
	err := d.Delete(context.Background(), record(t, orphan.KindReplicaInstance, lookA, s.uuids["disk-1/"+lookA]))
	if !errors.Is(err, orphan.ErrPreconditionFailed) || errors.Is(err, spdk.ErrUUIDMismatch) || !strings.Contains(err.Error(), lookC) {
		t.Fatalf("err = %v, want a refusal naming %s", err, lookC)
	}
	if n := s.srv.CallCount("bdev_lvol_delete"); n != 0 {
		t.Fatalf("%d lvols deleted", n)
	}
	var cUUID string
	for _, l := range s.srv.Lvols() {
		if l.Alias == "disk-1/"+lookC {
			cUUID = l.UUID
		}
	}
	if err := d.Delete(context.Background(), record(t, orphan.KindReplicaInstance, lookC, cUUID)); err != nil {
		t.Fatal(err)
	}
	if got, want := s.srv.LvolAliases(), aliasesWithout(all, "disk-1/"+lookC); !slices.Equal(got, want) {
		t.Fatalf("purging C:\n got %v\nwant %v", got, want)
	}
}

// TestLookAlikeNamedLikeDerivedButUnrelated: lvols named exactly like A's
// rebuilding and expired lvols, but not related to A by SPDK, survive A's
// purge (Longhorn's own cleanup deletes every lvol whose name starts with
// "<replica>-").
func TestLookAlikeNamedLikeDerivedButUnrelated(t *testing.T) {
	s := lookScene(t)
	fixture.Must(s.srv.AddLvol("disk-1", lookA+"-rebuilding"))(t)
	fixture.Must(s.srv.AddLvol("disk-1", lookA+"-expired-12345678"))(t)
	s.srv.ResetCalls()
	if err := s.deleter(t).Delete(context.Background(), record(t, orphan.KindReplicaInstance, lookA, s.uuids["disk-1/"+lookA])); err != nil {
		t.Fatal(err)
	}
	got := s.srv.LvolAliases()
	for _, keep := range []string{lookA + "-rebuilding", lookA + "-expired-12345678", lookA + "-snap-stray"} {
		if !slices.Contains(got, "disk-1/"+keep) {
			t.Errorf("%s deleted by name: %v", keep, got)
		}
	}
}

// TestPurgeOrderRefusesListingsThatProveNothing checks PurgeOrder on
// listings SPDK would not send: each is an unreadable listing
// (ErrUnexpectedResult) or a refusal, never a plan and never "already gone".
func TestPurgeOrderRefusesListingsThatProveNothing(t *testing.T) {
	lv := func(name, uuid, parent string, snapshot bool, clones ...string) spdkrpc.Bdev {
		return spdkrpc.Bdev{Name: uuid, UUID: uuid, Aliases: []string{"d/" + name}, ProductName: spdkrpc.ProductLogicalVolume,
			DriverSpecific: spdkrpc.BdevDriverSpecific{Lvol: &spdkrpc.BdevLvolInfo{LvolStoreUUID: "L", Snapshot: snapshot, Clone: parent != "", BaseSnapshot: parent, Clones: clones}}}
	}
	head := lv("r", "u-r", "r-snap-a", false)
	snapA := lv("r-snap-a", "u-a", "", true, "r")
	for _, tc := range []struct {
		name    string
		bdevs   []spdkrpc.Bdev
		refused bool // ErrPreconditionFailed rather than an unreadable listing
	}{
		{"head without uuid", []spdkrpc.Bdev{{Name: "x", Aliases: []string{"d/r"}, ProductName: spdkrpc.ProductLogicalVolume, DriverSpecific: spdkrpc.BdevDriverSpecific{Lvol: &spdkrpc.BdevLvolInfo{}}}}, false},
		{"head with the all-zero uuid", []spdkrpc.Bdev{lv("r", "00000000-0000-0000-0000-000000000000", "", false)}, false},
		{"lvol without alias", []spdkrpc.Bdev{head, snapA, {Name: "u-x", UUID: "u-x", ProductName: spdkrpc.ProductLogicalVolume, DriverSpecific: spdkrpc.BdevDriverSpecific{Lvol: &spdkrpc.BdevLvolInfo{}}}}, false},
		{"lvol product without lvol info", []spdkrpc.Bdev{head, snapA, {Name: "u-x", UUID: "u-x", Aliases: []string{"d/x"}, ProductName: spdkrpc.ProductLogicalVolume}}, false},
		{"two lvols of one name", []spdkrpc.Bdev{head, snapA, lv("r-snap-a", "u-a2", "", true)}, false},
		{"clone not listed", []spdkrpc.Bdev{head, lv("r-snap-a", "u-a", "", true, "r", "r-expired-12345678")}, false},
		{"parent loop", []spdkrpc.Bdev{head, lv("r-snap-a", "u-a", "r-snap-b", true, "r"), lv("r-snap-b", "u-b", "r-snap-a", true, "r-snap-a")}, false},
		{"foreign clone of the chain", []spdkrpc.Bdev{head, lv("r-snap-a", "u-a", "", true, "r", "other-r-1"), lv("other-r-1", "u-o", "r-snap-a", false)}, true},
		{"look-alike head cloned from the chain", []spdkrpc.Bdev{head, lv("r-snap-a", "u-a", "", true, "r", "r-snap-x"), lv("r-snap-x", "u-x", "r-snap-a", false)}, true},
		{"RAID built on the head", []spdkrpc.Bdev{head, snapA, {Name: "e-0", UUID: "u-e", ProductName: spdkrpc.ProductRaidVolume, DriverSpecific: spdkrpc.BdevDriverSpecific{Raid: &spdkrpc.BdevRaidInfo{BaseBdevsList: []spdkrpc.RaidBaseBdev{{Name: "d/r"}}}}}}, true},
		{"RAID built on a snapshot by UUID", []spdkrpc.Bdev{head, snapA, {Name: "e-0", UUID: "u-e", ProductName: spdkrpc.ProductRaidVolume, DriverSpecific: spdkrpc.BdevDriverSpecific{Raid: &spdkrpc.BdevRaidInfo{BaseBdevsList: []spdkrpc.RaidBaseBdev{{UUID: "u-a"}}}}}}, true},
	} {
		order, err := spdk.PurgeOrder(tc.bdevs, "r", "u-r")
		if order != nil || err == nil {
			t.Errorf("%s: order %v, err %v", tc.name, order, err)
			continue
		}
		if got := errors.Is(err, orphan.ErrPreconditionFailed); got != tc.refused || got == errors.Is(err, spdk.ErrUnexpectedResult) {
			t.Errorf("%s: err = %v (refused %v, want %v)", tc.name, err, got, tc.refused)
		}
	}
	// The well-formed listing plans the snapshot, then the head.
	order, err := spdk.PurgeOrder([]spdkrpc.Bdev{head, snapA}, "r", "u-r")
	if err != nil || len(order) != 2 || order[0].UUID != "u-a" || order[1].UUID != "u-r" {
		t.Fatalf("order %+v, err %v", order, err)
	}
	// A parent SPDK could not name (a clone without base_snapshot) ends
	// the climb: the unnamed parent is kept.
	orphaned := lv("r", "u-r", "", false)
	orphaned.DriverSpecific.Lvol.Clone = true
	order, err = spdk.PurgeOrder([]spdkrpc.Bdev{orphaned, lv("r-snap-a", "u-a", "", true)}, "r", "u-r")
	if err != nil || len(order) != 1 || order[0].UUID != "u-r" {
		t.Fatalf("order %+v, err %v", order, err)
	}
}
