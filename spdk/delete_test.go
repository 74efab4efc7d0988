package spdk_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

func record(t *testing.T, kind orphan.Kind, name, uuid string) orphan.Record {
	t.Helper()
	r, err := orphan.NewRecord(instanceItem(kind, name, uuid), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// deletedParams returns the "name" of every delete request, in order.
func deletedParams(srv *spdktest.Server, method string) []string {
	var out []string
	for _, c := range srv.Calls() {
		if c.Method == method {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(string(c.Params), `{"name":"`), `"}`))
		}
	}
	return out
}

// noRecords is a host with no engine or replica records at all.
var noRecords = instance.LookupFunc(func(context.Context, orphan.Kind, string) (instance.View, error) {
	return instance.View{}, nil
})

func (s *scene) deleter(t *testing.T) *spdk.Orphans {
	return newOrphans(t, s.client(t), noRecords)
}

func TestReplicaPurgeDeletesTreeClonesFirstHeadLast(t *testing.T) {
	s := newScene(t)
	err := s.deleter(t).Delete(context.Background(), record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		s.uuids["disk-1/"+repA+"-expired-0000abcd"], // a clone of s1
		s.uuids["disk-1/"+repA+"-snap-s2"],          // its only clone is the head
		s.uuids["disk-1/"+repA+"-snap-s1"],
		s.uuids["disk-1/"+repA],
	}
	if got := deletedParams(s.srv, "bdev_lvol_delete"); !slices.Equal(got, want) {
		t.Fatalf("deleted %v, want %v (by UUID, head last)", got, want)
	}
	for _, a := range s.srv.LvolAliases() {
		if strings.HasPrefix(a, "disk-1/"+repA) {
			t.Errorf("%s survived the purge", a)
		}
	}
	if len(s.srv.LvolAliases()) != 6 {
		t.Errorf("other lvols touched: %v", s.srv.LvolAliases())
	}
}

func TestReplicaPurgeKeepsBackingImage(t *testing.T) {
	s := newScene(t)
	if err := s.deleter(t).Delete(context.Background(), record(t, orphan.KindReplicaInstance, repC, s.uuids["disk-1/"+repC])); err != nil {
		t.Fatal(err)
	}
	if got := deletedParams(s.srv, "bdev_lvol_delete"); !slices.Equal(got, []string{s.uuids["disk-1/"+repC]}) {
		t.Fatalf("deleted %v", got)
	}
	aliases := s.srv.LvolAliases()
	for _, a := range []string{"disk-1/bi-img1-disk-1", "disk-1/bi-img1-disk-1-temp-head"} {
		if !slices.Contains(aliases, a) {
			t.Errorf("backing image lvol %s deleted", a)
		}
	}
}

func TestPurgeRefusesOnUUIDMismatch(t *testing.T) {
	s := newScene(t)
	oldA, oldE := s.uuids["disk-1/"+repA], s.uuids["vol1-e-0"]
	fixture.Must(s.srv.RecreateLvol("disk-1", repA))(t)
	fixture.Must(s.srv.RecreateRaid("vol1-e-0"))(t)
	d := s.deleter(t)
	for _, r := range []orphan.Record{
		record(t, orphan.KindReplicaInstance, repA, oldA),
		record(t, orphan.KindEngineInstance, "vol1-e-0", oldE),
	} {
		err := d.Delete(context.Background(), r)
		if !errors.Is(err, spdk.ErrUUIDMismatch) || !errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Fatalf("%s: err = %v, want ErrUUIDMismatch", r.Param(orphan.ParamInstanceName), err)
		}
	}
	if n := s.srv.CallCount("bdev_lvol_delete") + s.srv.CallCount("bdev_raid_delete"); n != 0 {
		t.Fatalf("%d delete calls after a mismatch", n)
	}
}

// The object is recreated between the scan that recorded its UUID and the
// purge: the purge must refuse and delete nothing.
func TestPurgeRefusesObjectRecreatedAfterScan(t *testing.T) {
	s := newScene(t)
	s.srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvols", Then: func() { _, _ = s.srv.RecreateLvol("disk-1", repB) }})
	s.srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Then: func() { _, _ = s.srv.RecreateRaid("vol2-e-0") }})
	snap, err := newOrphans(t, s.client(t), noRecords).Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := s.deleter(t)
	for _, it := range snap.Items {
		name := it.Param(orphan.ParamInstanceName)
		if name != repB && name != "vol2-e-0" {
			continue
		}
		r, err := orphan.NewRecord(it, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(context.Background(), r); !errors.Is(err, spdk.ErrUUIDMismatch) {
			t.Fatalf("%s: err = %v, want ErrUUIDMismatch", name, err)
		}
	}
	if n := s.srv.CallCount("bdev_lvol_delete") + s.srv.CallCount("bdev_raid_delete"); n != 0 {
		t.Fatalf("%d delete calls", n)
	}
}

// The head is recreated after the purge's own check: deleting by UUID
// means the new head survives.
func TestPurgeByUUIDSparesHeadRecreatedAfterCheck(t *testing.T) {
	s := newScene(t)
	var newUUID string
	s.srv.Inject(spdktest.Fault{Method: "bdev_get_bdevs", Then: func() { newUUID, _ = s.srv.RecreateLvol("disk-1", repB) }})
	if err := s.deleter(t).Delete(context.Background(), record(t, orphan.KindReplicaInstance, repB, s.uuids["disk-1/"+repB])); err != nil {
		t.Fatal(err)
	}
	var head *spdktest.LvolInfo
	for _, l := range s.srv.Lvols() {
		if l.Alias == "disk-1/"+repB {
			head = &l
		}
	}
	if head == nil || head.UUID != newUUID {
		t.Fatalf("recreated head deleted: %+v", s.srv.Lvols())
	}
}

func TestPurgeDeletesNothingOnUnreadableReply(t *testing.T) {
	for _, action := range []spdktest.FaultAction{spdktest.Garbage, spdktest.Truncate, spdktest.Drop} {
		s := newScene(t)
		s.srv.Inject(spdktest.Fault{Method: "bdev_get_bdevs", Action: action})
		s.srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Action: action})
		d := s.deleter(t)
		for _, r := range []orphan.Record{
			record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]),
			record(t, orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"]),
		} {
			err := d.Delete(context.Background(), r)
			if !errors.Is(err, spdkrpc.ErrConnection) || errors.Is(err, orphan.ErrPreconditionFailed) {
				t.Fatalf("action %d: err = %v, want a retryable connection error", action, err)
			}
		}
		if n := s.srv.CallCount("bdev_lvol_delete") + s.srv.CallCount("bdev_raid_delete"); n != 0 {
			t.Fatalf("action %d: %d delete calls", action, n)
		}
	}
}

func TestPurgeDoesNotOutliveContext(t *testing.T) {
	s := newScene(t)
	s.srv.Inject(spdktest.Fault{Method: "bdev_get_bdevs", Delay: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.deleter(t).Delete(ctx, record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	if n := s.srv.CallCount("bdev_lvol_delete"); n != 0 {
		t.Fatalf("%d delete calls", n)
	}
}

func TestPurgeRefusesTreeWithForeignClone(t *testing.T) {
	s := newScene(t)
	fixture.Must(s.srv.Clone("disk-1", repA+"-snap-s1", "other-r-eeeeeeee"))(t)
	err := s.deleter(t).Delete(context.Background(), record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]))
	if !errors.Is(err, orphan.ErrPreconditionFailed) || errors.Is(err, spdk.ErrUUIDMismatch) {
		t.Fatalf("err = %v", err)
	}
	if n := s.srv.CallCount("bdev_lvol_delete"); n != 0 {
		t.Fatalf("%d delete calls", n)
	}
}

func TestPurgeOfGoneObjectSucceeds(t *testing.T) {
	s := newScene(t)
	d := s.deleter(t)
	for _, r := range []orphan.Record{
		record(t, orphan.KindReplicaInstance, "absent-r-00000000", "8a4f0e36-0000-4000-8000-000000000000"),
		record(t, orphan.KindEngineInstance, "absent-e-0", "8a4f0e36-0000-4000-8000-000000000001"),
	} {
		if err := d.Delete(context.Background(), r); err != nil {
			t.Fatalf("%s: %v", r.Param(orphan.ParamInstanceName), err)
		}
	}
	// An engine purge deletes the RAID bdev; a second purge finds it gone.
	r := record(t, orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"])
	for range 2 {
		if err := d.Delete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.srv.RaidNames(); !slices.Equal(got, []string{"vol2-e-0"}) {
		t.Fatalf("RAID bdevs left: %v", got)
	}
	if n := s.srv.CallCount("bdev_raid_delete"); n != 1 {
		t.Fatalf("%d bdev_raid_delete calls, want 1", n)
	}
}

func TestDeleteRefusesRecordsItCannotCheck(t *testing.T) {
	s := newScene(t)
	d := s.deleter(t)
	good := record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA])
	v1 := good.Clone()
	v1.DataEngine = orphan.DataEngineV1
	noUUID := good.Clone()
	delete(noUUID.Parameters, orphan.ParamInstanceUUID)
	otherNode := good.Clone()
	otherNode.NodeID = "node-2"
	otherIM := good.Clone()
	otherIM.Parameters[orphan.ParamInstanceManager] = "instance-manager-other"
	data := good.Clone()
	data.Kind = orphan.KindReplicaData
	for name, r := range map[string]orphan.Record{"v1": v1, "no uuid": noUUID, "other node": otherNode, "other im": otherIM, "replica data": data} {
		if err := d.Delete(context.Background(), r); !errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if n := len(s.srv.Calls()); n != 0 {
		t.Fatalf("%d calls for refused records", n)
	}
}

func TestSPDKRefusesSnapshotWithTwoClones(t *testing.T) {
	// The fake follows SPDK: an lvol with more than one clone cannot be
	// deleted; PurgeOrder never asks for that.
	s := newScene(t)
	err := spdkrpc.BdevLvolDelete(context.Background(), s.client(t), "disk-1/"+repA+"-snap-s1")
	var rerr *spdkrpc.RPCError
	if !errors.As(err, &rerr) || rerr.Code != spdkrpc.CodeInternalError || rerr.Message != "Operation not permitted" {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentPurgesOfDifferentRecords(t *testing.T) {
	s := newScene(t)
	d := s.deleter(t)
	recs := []orphan.Record{
		record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]),
		record(t, orphan.KindReplicaInstance, repB, s.uuids["disk-1/"+repB]),
		record(t, orphan.KindReplicaInstance, repC, s.uuids["disk-1/"+repC]),
		record(t, orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"]),
		record(t, orphan.KindEngineInstance, "vol2-e-0", s.uuids["vol2-e-0"]),
	}
	errs := make(chan error, len(recs))
	for _, r := range recs {
		go func() { errs <- d.Delete(context.Background(), r) }()
	}
	for range recs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// B's rebuilding lvol is named after B but SPDK does not relate it to
	// B's head: a purge by name alone would take it, this one keeps it.
	want := []string{"disk-1/" + repB + "-rebuilding", "disk-1/bi-img1-disk-1-temp-head", "disk-1/bi-img1-disk-1", "disk-1/gone-r-dddddddd-snap-x"}
	if got := s.srv.LvolAliases(); !slices.Equal(got, want) {
		t.Fatalf("lvols left %v, want %v", got, want)
	}
	if got := s.srv.RaidNames(); len(got) != 0 {
		t.Fatalf("RAID bdevs left %v", got)
	}
}
