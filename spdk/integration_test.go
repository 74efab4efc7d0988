package spdk_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc/mocks"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// hostRecords is the cluster's engine and replica records.
type hostRecords struct {
	mu sync.Mutex
	m  map[string]instance.View
}

func (h *hostRecords) set(name string, v instance.View) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[name] = v
}

func (h *hostRecords) remove(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, name)
}

func (h *hostRecords) LookupInstance(_ context.Context, _ orphan.Kind, name string) (instance.View, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[name], nil
}

// TestEndToEndRejoinAndPurge runs the whole v2 loop against the fake SPDK:
// a node rejoins with the runtime objects of a volume deleted while it was
// away and of a volume detached meanwhile; the deleted volume's objects
// and the detached volume's engine become records with their UUIDs, the
// detached volume's replica (a stopped record) does not; deleting every
// record purges what it should, a recreated object is kept, and a
// replica whose record reappears before its purge keeps its lvols.
func TestEndToEndRejoinAndPurge(t *testing.T) {
	s := newScene(t)
	running := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: nodeID, InstanceManager: imName}
	stopped := instance.View{Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped, OwnerNodeID: nodeID}
	hosts := &hostRecords{m: map[string]instance.View{}}
	for _, n := range []string{"vol1-e-0", "vol2-e-0", repA, repB, repC} {
		hosts.set(n, running)
	}
	client := s.client(t)
	inv := newOrphans(t, client, hosts)
	store := orphan.NewMemStore()
	sw := newSweeper(t, store, inv)
	ctx := context.Background()
	cycle := func(health orphan.Health) orphan.Result {
		t.Helper()
		snap, err := inv.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := sw.Reconcile(ctx, snap, orphan.Cycle{
			Selector: orphan.Selector{NodeID: nodeID},
			Scopes:   map[orphan.Scope]orphan.ScopeStatus{{NodeID: nodeID}: {Health: health}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := cycle(orphan.HealthReady); len(res.Created) != 0 {
		t.Fatalf("orphans on a healthy node: %+v", res)
	}
	// Volume 1 is deleted while the node is away; volume 2 is detached
	// (engine and replica records stopped); volume 3's replica record is
	// deleted.
	hosts.remove("vol1-e-0")
	hosts.remove(repA)
	hosts.set("vol2-e-0", stopped)
	hosts.set(repB, stopped)
	hosts.remove(repC)
	if res := cycle(orphan.HealthNodeUnavailable); len(res.Created) != 0 {
		t.Fatalf("records created while the node is away: %+v", res)
	}
	cycle(orphan.HealthReady)
	recs, _ := store.List(ctx, orphan.Selector{})
	var names []string
	for _, r := range recs {
		if r.Param(orphan.ParamInstanceUUID) != s.uuids["disk-1/"+r.Param(orphan.ParamInstanceName)] && r.Param(orphan.ParamInstanceUUID) != s.uuids[r.Param(orphan.ParamInstanceName)] {
			t.Errorf("record %s has UUID %q", r.Param(orphan.ParamInstanceName), r.Param(orphan.ParamInstanceUUID))
		}
		names = append(names, r.Param(orphan.ParamInstanceName))
	}
	slices.Sort(names)
	if want := []string{"vol1-e-0", repA, "vol2-e-0", repC}; !slices.Equal(names, want) {
		t.Fatalf("records %v, want %v (never the detached volume's replica)", names, want)
	}

	// The user deletes every record. Replica C's lvol is recreated right
	// after the next scan listed it: its item's UUID is gone, so it is no
	// orphan now, and nothing of the new lvol is deleted.
	for _, r := range recs {
		if err := store.RequestDeletion(ctx, r.Name); err != nil {
			t.Fatal(err)
		}
	}
	s.srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Then: func() { _, _ = s.srv.RecreateLvol("disk-1", repC) }})
	res := cycle(orphan.HealthReady)
	if len(res.Purged) != 3 || len(res.Failed) != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, rf := range res.Refused {
		if !strings.Contains(rf.Reason, "UUID") {
			t.Errorf("refused for another reason than the UUID: %+v", rf)
		}
	}
	recs, _ = store.List(ctx, orphan.Selector{})
	if len(recs) != 1 || recs[0].Param(orphan.ParamInstanceName) != repC {
		t.Fatalf("records left %+v, want only replica C's", recs)
	}
	aliases := s.srv.LvolAliases()
	for _, a := range aliases {
		if strings.HasPrefix(a, "disk-1/"+repA) {
			t.Errorf("replica A's %s survived", a)
		}
	}
	for _, a := range []string{repB, repB + "-rebuilding", repC} {
		if !slices.Contains(aliases, "disk-1/"+a) {
			t.Errorf("live lvol %s deleted: %v", a, aliases)
		}
	}
	if got := s.srv.RaidNames(); len(got) != 0 {
		t.Errorf("RAID bdevs %v: the deleted and the detached volume's engines should be gone", got)
	}
}

// TestReplicaRecordReappearingStopsPurge: the Sweeper judged the replica an
// orphan, and a replica record of that name appears before the Deleter
// acts (a restore, a user recreating it). The Deleter asks again before
// every lvol and deletes nothing.
func TestReplicaRecordReappearingStopsPurge(t *testing.T) {
	for _, after := range []int{0, 1, 2} { // lookups that still say "no record"
		s := newScene(t)
		var n int
		lookup := instance.LookupFunc(func(_ context.Context, k orphan.Kind, name string) (instance.View, error) {
			if k != orphan.KindReplicaInstance || name != repA {
				t.Errorf("looked up %s %s", k, name)
			}
			n++
			if n > after {
				return instance.View{Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped}, nil
			}
			return instance.View{}, nil
		})
		d := newOrphans(t, s.client(t), lookup)
		err := d.Delete(context.Background(), record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]))
		if !errors.Is(err, spdk.ErrReplicaRecordExists) || !errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Fatalf("after %d: err = %v, want ErrReplicaRecordExists", after, err)
		}
		// Each "no record" answer allows at most one lvol to go, and the
		// head (the last) is never reached.
		if got := s.srv.CallCount("bdev_lvol_delete"); got != max(after-1, 0) {
			t.Fatalf("after %d: %d lvols deleted", after, got)
		}
		if !slices.Contains(s.srv.LvolAliases(), "disk-1/"+repA) {
			t.Fatalf("after %d: head deleted", after)
		}
	}
}

// TestReplicaPurgeNeedsRecordLookup: without a record lookup the adapter
// could not know whether a replica record exists, so NewOrphans refuses to
// build one; a lookup that fails is retryable and deletes nothing, for
// replicas and engines alike.
func TestReplicaPurgeNeedsRecordLookup(t *testing.T) {
	s := newScene(t)
	if _, err := spdk.NewOrphans(s.client(t), nil, spdk.Options{NodeID: nodeID, InstanceManager: imName}); !errors.Is(err, orphan.ErrIncomplete) {
		t.Fatalf("NewOrphans without records: err = %v, want ErrIncomplete", err)
	}
	failing := instance.LookupFunc(func(context.Context, orphan.Kind, string) (instance.View, error) {
		return instance.View{}, errors.New("cache not synced")
	})
	d := newOrphans(t, s.client(t), failing)
	err := d.Delete(context.Background(), record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]))
	if err == nil || errors.Is(err, orphan.ErrPreconditionFailed) || !strings.Contains(err.Error(), "cache not synced") {
		t.Fatalf("err = %v", err)
	}
	err = d.Delete(context.Background(), record(t, orphan.KindEngineInstance, "vol2-e-0", s.uuids["vol2-e-0"]))
	if err == nil || !strings.Contains(err.Error(), "cache not synced") {
		t.Fatalf("engine: err = %v", err)
	}
	if n := s.srv.CallCount("bdev_lvol_delete") + s.srv.CallCount("bdev_raid_delete"); n != 0 {
		t.Fatalf("%d deletions after failed lookups", n)
	}
}

// TestNewOrphansNeedsEveryPart: each missing part is an error, never an
// adapter that would name items after an empty node or reach no SPDK.
func TestNewOrphansNeedsEveryPart(t *testing.T) {
	c := fixture.Must(spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: "/nonexistent"}))(t)
	defer c.Close()
	for name, tc := range map[string]struct {
		rpc     spdkrpc.Caller
		records instance.Lookup
		opts    spdk.Options
	}{
		"no caller":           {nil, noRecords, spdk.Options{NodeID: nodeID, InstanceManager: imName}},
		"no records":          {c, nil, spdk.Options{NodeID: nodeID, InstanceManager: imName}},
		"no node":             {c, noRecords, spdk.Options{InstanceManager: imName}},
		"no instance manager": {c, noRecords, spdk.Options{NodeID: nodeID}},
	} {
		if o, err := spdk.NewOrphans(tc.rpc, tc.records, tc.opts); o != nil || !errors.Is(err, orphan.ErrIncomplete) {
			t.Errorf("%s: %v, %v", name, o, err)
		}
	}
}

// TestEnginePurgeRejudgesWithRecords: with Records set, an engine whose
// record now runs on this instance manager is not deleted, whatever the
// record in the store says.
func TestEnginePurgeRejudgesWithRecords(t *testing.T) {
	s := newScene(t)
	hosts := &hostRecords{m: map[string]instance.View{
		"vol1-e-0": {Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: nodeID, InstanceManager: imName},
		"vol2-e-0": {Exists: true, DesiredState: instance.StateStopped, CurrentState: instance.StateStopped, OwnerNodeID: nodeID},
	}}
	d := newOrphans(t, s.client(t), hosts)
	if err := d.Delete(context.Background(), record(t, orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"])); !errors.Is(err, orphan.ErrPreconditionFailed) {
		t.Fatalf("running engine: err = %v", err)
	}
	if err := d.Delete(context.Background(), record(t, orphan.KindEngineInstance, "vol2-e-0", s.uuids["vol2-e-0"])); err != nil {
		t.Fatalf("stopped engine: %v", err)
	}
	if got := s.srv.RaidNames(); !slices.Equal(got, []string{"vol1-e-0"}) {
		t.Fatalf("RAID bdevs left %v", got)
	}
}

// TestInventoryWithMockCaller shows the generated mock standing in for
// SPDK: a failed listing fails the scan and nothing is listed.
func TestInventoryWithMockCaller(t *testing.T) {
	ctrl := gomock.NewController(t)
	rpc := mocks.NewMockCaller(ctrl)
	rpc.EXPECT().Call(gomock.Any(), "bdev_lvol_get_lvols", gomock.Any(), gomock.Any()).
		DoAndReturn(func(_ context.Context, _ string, _, result any) error {
			*result.(*[]spdkrpc.Lvol) = []spdkrpc.Lvol{} // an empty list, not a null result
			return nil
		})
	rpc.EXPECT().Call(gomock.Any(), "bdev_raid_get_bdevs", gomock.Any(), gomock.Any()).
		Return(&spdkrpc.RPCError{Method: "bdev_raid_get_bdevs", Code: spdkrpc.CodeInternalError, Message: "boom"})
	_, err := newOrphans(t, rpc, noRecords).Scan(context.Background())
	var rerr *spdkrpc.RPCError
	if !errors.As(err, &rerr) || rerr.Message != "boom" {
		t.Fatalf("err = %v", err)
	}
}

// TestSpdktestAnswersLikeSPDK checks the fake's protocol edges that the
// client never produces on its own.
func TestSpdktestAnswersLikeSPDK(t *testing.T) {
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		params any
		code   int
	}{
		// Params SPDK's decoder rejects: vbdev_lvol_rpc.c answers -32603.
		{"bdev_lvol_delete", nil, spdkrpc.CodeInternalError},
		{"bdev_lvol_delete", map[string]any{"name": "x", "bogus": 1}, spdkrpc.CodeInternalError},
		// An unknown category is -EINVAL (bdev_raid_rpc.c).
		{"bdev_raid_get_bdevs", map[string]string{"category": "weird"}, -22},
		{"bdev_raid_delete", map[string]string{"name": "nope"}, spdkrpc.CodeNoSuchDevice},
		{"bdev_get_bdevs", map[string]string{"name": "nope"}, spdkrpc.CodeNoSuchDevice},
		{"bdev_lvol_get_lvols", map[string]string{"lvs_name": "nope"}, spdkrpc.CodeNoSuchDevice},
		{"bdev_lvol_get_lvstores", map[string]string{"lvs_name": "nope"}, spdkrpc.CodeNoSuchDevice},
		{"framework_get_reactors", nil, spdkrpc.CodeMethodNotFound},
	} {
		err := c.Call(ctx, tc.method, tc.params, nil)
		var rerr *spdkrpc.RPCError
		if !errors.As(err, &rerr) || rerr.Code != tc.code {
			t.Errorf("%s %v: err = %v, want code %d", tc.method, tc.params, err, tc.code)
		}
	}
	// A named bdev_get_bdevs finds an lvol by alias and by UUID.
	id := fixture.Must(srv.AddLvol("disk-1", "r"))(t)
	for _, name := range []string{"disk-1/r", id} {
		bdevs, err := spdkrpc.BdevGetBdevs(ctx, c, name)
		if err != nil || len(bdevs) != 1 || bdevs[0].UUID != id || bdevs[0].ProductName != spdkrpc.ProductLogicalVolume || bdevs[0].DriverSpecific.Lvol == nil {
			t.Errorf("%s: %+v, %v", name, bdevs, err)
		}
	}
	// Snapshots and clones show up as SPDK reports them.
	snapID := fixture.Must(srv.Snapshot("disk-1", "r", "r-snap-a"))(t)
	fixture.Must(srv.Clone("disk-1", "r-snap-a", "r-cloning"))(t)
	bdevs := fixture.Must(spdkrpc.BdevGetBdevs(ctx, c, snapID))(t)
	if info := bdevs[0].DriverSpecific.Lvol; !info.Snapshot || !slices.Equal(info.Clones, []string{"r", "r-cloning"}) {
		t.Errorf("snapshot info %+v", info)
	}
	bdevs = fixture.Must(spdkrpc.BdevGetBdevs(ctx, c, "disk-1/r"))(t)
	if info := bdevs[0].DriverSpecific.Lvol; !info.Clone || info.BaseSnapshot != "r-snap-a" {
		t.Errorf("clone info %+v", info)
	}
}

// TestSpdktestAnswersGarbageRequests checks parse and request errors over
// a raw connection.
func TestSpdktestAnswersGarbageRequests(t *testing.T) {
	srv := fixture.Start(t)
	for _, tc := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1}`, `"code":-32600`},
		{`[1]`, `"code":-32600`},
		{`{"jsonrpc":"2.0","id":1,"method":"bdev_lvol_get_lvstores","params":[]}`, `"code":-32603`},
		{`{"jsonrpc":"2.0","id":1,"method":"bdev_lvol_get_lvstores","params":5}`, `"code":-32600`},
		{`}`, `"code":-32700`},
	} {
		reply := rawExchange(t, srv.SocketPath(), tc.send)
		if !strings.Contains(reply, tc.want) || !strings.Contains(reply, `"jsonrpc":"2.0"`) {
			t.Errorf("%s -> %s, want %s", tc.send, reply, tc.want)
		}
	}
}

// rawExchange sends one request on a fresh connection and returns the
// first reply line.
func rawExchange(t *testing.T, path, send string) string {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(send)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", send, err)
	}
	return line
}
