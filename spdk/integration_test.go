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
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/mocks"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// hostRecords is the cluster's engine and replica records.
type hostRecords struct {
	mu sync.Mutex
	m  map[string]orphan.InstanceView
}

func (h *hostRecords) set(name string, v orphan.InstanceView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[name] = v
}

func (h *hostRecords) remove(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, name)
}

func (h *hostRecords) LookupInstance(_ context.Context, _ orphan.Kind, name string) (orphan.InstanceView, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[name], nil
}

// TestEndToEndRejoinAndPurge runs the whole v2 loop against the fake SPDK:
// a node rejoins with the runtime objects of a volume deleted while it was
// away; they become records with their UUIDs; deleting the records purges
// the objects, and a recreated object is refused.
func TestEndToEndRejoinAndPurge(t *testing.T) {
	s := newScene(t)
	running := orphan.InstanceView{Exists: true, DesiredState: orphan.InstanceStateRunning, CurrentState: orphan.InstanceStateRunning, OwnerNodeID: nodeID, InstanceManager: imName}
	hosts := &hostRecords{m: map[string]orphan.InstanceView{}}
	for _, n := range []string{"vol1-e-0", "vol2-e-0", repA, repB, repC} {
		hosts.set(n, running)
	}
	client := s.client(t)
	inv := &spdk.Inventory{RPC: client, NodeID: nodeID, InstanceManager: imName}
	store := orphan.NewMemStore()
	sw := &orphan.Sweeper{
		Store:   store,
		Judge:   orphan.InstanceJudge{Lookup: hosts},
		Deleter: &spdk.Deleter{RPC: client, NodeID: nodeID, InstanceManager: imName},
		Clock:   clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)),
	}
	ctx := context.Background()
	cycle := func(health orphan.Health) orphan.Result {
		t.Helper()
		snap, err := inv.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := sw.Run(ctx, snap, orphan.Cycle{
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
	// Volume 1 is deleted while the node is away; volume 3's replica is
	// stopped but its lvol is still there.
	hosts.remove("vol1-e-0")
	hosts.remove(repA)
	hosts.set(repC, orphan.InstanceView{Exists: true, DesiredState: orphan.InstanceStateStopped, CurrentState: orphan.InstanceStateStopped, OwnerNodeID: nodeID})
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
	if want := []string{"vol1-e-0", repA, repC}; !slices.Equal(names, want) {
		t.Fatalf("records %v, want %v", names, want)
	}

	// The user deletes the records. Replica C's lvol is recreated right
	// after the next scan listed it: its purge must be refused by UUID.
	for _, r := range recs {
		if err := store.RequestDeletion(ctx, r.Name); err != nil {
			t.Fatal(err)
		}
	}
	s.srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Then: func() { _, _ = s.srv.RecreateLvol("disk-1", repC) }})
	res := cycle(orphan.HealthReady)
	slices.Sort(res.Purged)
	if len(res.Purged) != 2 || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, "UUID") {
		t.Fatalf("result %+v", res)
	}
	aliases := s.srv.LvolAliases()
	for _, a := range aliases {
		if strings.HasPrefix(a, "disk-1/"+repA) {
			t.Errorf("replica A's %s survived", a)
		}
	}
	if !slices.Contains(aliases, "disk-1/"+repC) || !slices.Contains(aliases, "disk-1/"+repB) {
		t.Errorf("live lvols deleted: %v", aliases)
	}
	if got := s.srv.RaidNames(); !slices.Equal(got, []string{"vol2-e-0"}) {
		t.Errorf("RAID bdevs %v", got)
	}
}

// TestInventoryWithMockCaller shows the generated mock standing in for
// SPDK: a failed listing fails the scan and nothing is listed.
func TestInventoryWithMockCaller(t *testing.T) {
	ctrl := gomock.NewController(t)
	rpc := mocks.NewMockCaller(ctrl)
	rpc.EXPECT().Call(gomock.Any(), "bdev_lvol_get_lvols", gomock.Any(), gomock.Any()).Return(nil)
	rpc.EXPECT().Call(gomock.Any(), "bdev_raid_get_bdevs", gomock.Any(), gomock.Any()).
		Return(&spdk.RPCError{Method: "bdev_raid_get_bdevs", Code: spdk.CodeInternalError, Message: "boom"})
	_, err := (&spdk.Inventory{RPC: rpc, NodeID: nodeID, InstanceManager: imName}).Scan(context.Background())
	var rerr *spdk.RPCError
	if !errors.As(err, &rerr) || rerr.Message != "boom" {
		t.Fatalf("err = %v", err)
	}
}

// TestSpdktestAnswersLikeSPDK checks the fake's protocol edges that the
// client never produces on its own.
func TestSpdktestAnswersLikeSPDK(t *testing.T) {
	srv := startServer(t)
	must(srv.AddLvstore("disk-1"))(t)
	c := newClient(t, srv, spdk.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		params any
		code   int
	}{
		{"bdev_lvol_delete", nil, spdk.CodeInvalidParams},
		{"bdev_lvol_delete", map[string]any{"name": "x", "bogus": 1}, spdk.CodeInvalidParams},
		{"bdev_raid_get_bdevs", map[string]string{"category": "weird"}, spdk.CodeInvalidParams},
		{"bdev_raid_delete", map[string]string{"name": "nope"}, spdk.CodeNoSuchDevice},
		{"bdev_get_bdevs", map[string]string{"name": "nope"}, spdk.CodeNoSuchDevice},
		{"bdev_lvol_get_lvols", map[string]string{"lvs_name": "nope"}, spdk.CodeNoSuchDevice},
		{"bdev_lvol_get_lvstores", map[string]string{"lvs_name": "nope"}, spdk.CodeNoSuchDevice},
		{"framework_get_reactors", nil, spdk.CodeMethodNotFound},
	} {
		err := c.Call(ctx, tc.method, tc.params, nil)
		var rerr *spdk.RPCError
		if !errors.As(err, &rerr) || rerr.Code != tc.code {
			t.Errorf("%s %v: err = %v, want code %d", tc.method, tc.params, err, tc.code)
		}
	}
	// A named bdev_get_bdevs finds an lvol by alias and by UUID.
	id := must(srv.AddLvol("disk-1", "r"))(t)
	for _, name := range []string{"disk-1/r", id} {
		bdevs, err := spdk.BdevGetBdevs(ctx, c, name)
		if err != nil || len(bdevs) != 1 || bdevs[0].UUID != id || bdevs[0].ProductName != spdk.ProductLogicalVolume || bdevs[0].DriverSpecific.Lvol == nil {
			t.Errorf("%s: %+v, %v", name, bdevs, err)
		}
	}
	// Snapshots and clones show up as SPDK reports them.
	snapID := must(srv.Snapshot("disk-1", "r", "r-snap-a"))(t)
	must(srv.Clone("disk-1", "r-snap-a", "r-cloning"))(t)
	bdevs := must(spdk.BdevGetBdevs(ctx, c, snapID))(t)
	if info := bdevs[0].DriverSpecific.Lvol; !info.Snapshot || !slices.Equal(info.Clones, []string{"r", "r-cloning"}) {
		t.Errorf("snapshot info %+v", info)
	}
	bdevs = must(spdk.BdevGetBdevs(ctx, c, "disk-1/r"))(t)
	if info := bdevs[0].DriverSpecific.Lvol; !info.Clone || info.BaseSnapshot != "r-snap-a" {
		t.Errorf("clone info %+v", info)
	}
}

// TestSpdktestAnswersGarbageRequests checks parse and request errors over
// a raw connection.
func TestSpdktestAnswersGarbageRequests(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1}`, `"code":-32600`},
		{`[1]`, `"code":-32600`},
		{`{"jsonrpc":"2.0","id":1,"method":"bdev_lvol_get_lvstores","params":[]}`, `"code":-32602`},
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
