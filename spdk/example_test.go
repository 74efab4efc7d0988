package spdk_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// exampleServer starts a fake SPDK with one replica (with a snapshot) and
// one engine.
func exampleServer() (*spdktest.Server, func()) {
	dir, err := os.MkdirTemp("", "spdk-example")
	if err != nil {
		panic(err)
	}
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		panic(err)
	}
	_, _ = srv.AddLvstore("disk-1")
	_, _ = srv.AddLvol("disk-1", "vol-r-0a1b2c3d")
	_, _ = srv.Snapshot("disk-1", "vol-r-0a1b2c3d", "vol-r-0a1b2c3d-snap-daily")
	_, _ = srv.AddRaid("vol-e-0", "vol-r-0a1b2c3d")
	return srv, func() { srv.Close(); os.RemoveAll(dir) }
}

// ExampleNewOrphans builds the adapter and scans: every engine (RAID
// bdev) and replica (head lvol) is an item, whatever the records say.
func ExampleNewOrphans() {
	srv, stop := exampleServer()
	defer stop()
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	// The cluster has no engine or replica records at all.
	records := instance.LookupFunc(func(context.Context, orphan.Kind, string) (instance.View, error) {
		return instance.View{}, nil
	})
	orphans, err := spdk.NewOrphans(client, records, spdk.Options{NodeID: "node-1", InstanceManager: "instance-manager-v2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	snap, err := orphans.Scan(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range snap.Items {
		v, _ := orphans.Judge(context.Background(), it)
		fmt.Println(it.Kind, it.Param(orphan.ParamInstanceName), it.Param(orphan.ParamInstanceUUID) != "", v.Outcome)
	}
	// Output:
	// engine-instance vol-e-0 true orphan
	// replica-instance vol-r-0a1b2c3d true orphan
}

// ExampleOrphans_Delete shows the re-checks at the moment of deletion.
func ExampleOrphans_Delete() {
	srv, stop := exampleServer()
	defer stop()
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()

	// noRecords: the cluster has no engine or replica records for this
	// volume (see ExampleNewOrphans for such a lookup).
	orphans, err := spdk.NewOrphans(client, noRecords, spdk.Options{NodeID: "node-1", InstanceManager: "im"})
	if err != nil {
		fmt.Println(err)
		return
	}
	snap, _ := orphans.Scan(ctx)
	engine, _ := orphan.NewRecord(snap.Items[0], time.Unix(0, 0))
	replica, _ := orphan.NewRecord(snap.Items[1], time.Unix(0, 0))

	// The engine is recreated after the scan: its purge is refused.
	_, _ = srv.RecreateRaid("vol-e-0")
	err = orphans.Delete(ctx, engine)
	fmt.Println("engine refused:", errors.Is(err, spdk.ErrUUIDMismatch), errors.Is(err, orphan.ErrPreconditionFailed))

	// The RAID bdev is still built on the replica's head: refused too.
	err = orphans.Delete(ctx, replica)
	fmt.Println("replica refused:", errors.Is(err, orphan.ErrPreconditionFailed))

	// A new scan records the engine's new UUID; once its RAID bdev is
	// gone, the replica's whole tree goes.
	snap, _ = orphans.Scan(ctx)
	engine, _ = orphan.NewRecord(snap.Items[0], time.Unix(0, 0))
	fmt.Println("engine purged:", orphans.Delete(ctx, engine) == nil)
	fmt.Println("replica purged:", orphans.Delete(ctx, replica) == nil)
	fmt.Println("lvols left:", len(srv.LvolAliases()))
	// Output:
	// engine refused: true true
	// replica refused: true
	// engine purged: true
	// replica purged: true
	// lvols left: 0
}

func ExampleClassify() {
	lvs := spdkrpc.LvolStoreRef{Name: "disk-1", UUID: "lvs-uuid"}
	rt := spdk.Classify([]spdkrpc.Lvol{
		{Name: "vol-r-1", UUID: "u1", Lvs: lvs},
		{Name: "vol-r-1-snap-s1", UUID: "u2", IsSnapshot: true, Lvs: lvs},
		{Name: "vol-r-1-rebuilding", UUID: "u3", Lvs: lvs},
		{Name: "bi-image-disk-1", UUID: "u4", IsSnapshot: true, Lvs: lvs},
		{Name: "vol-r-2", UUID: "", Lvs: lvs},
	}, []spdkrpc.RaidBdev{{Name: "vol-e-0", BdevRaidInfo: spdkrpc.BdevRaidInfo{UUID: "u5"}}})
	for _, r := range rt.Replicas {
		fmt.Println("replica", r.Name(), "owns", len(r.Derived), "derived lvols")
	}
	fmt.Println("engines", len(rt.Engines), "backing images", len(rt.BackingImages))
	for _, s := range rt.Skipped {
		fmt.Println("skipped", s.Name+":", s.Reason)
	}
	// Output:
	// replica vol-r-1 owns 2 derived lvols
	// engines 1 backing images 1
	// skipped disk-1/vol-r-2: head lvol has an empty UUID; cannot be judged or deleted safely
}

// Example shows the host loop of one cycle: the adapter goes to
// orphan.NewSweeper (and, in a host, to orphan.NewMonitor), and a record
// whose deletion a user requested is purged on the next cycle.
func Example() {
	srv, stop := exampleServer()
	defer stop()
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()

	// The volume was deleted: no engine or replica record (noRecords).
	orphans, err := spdk.NewOrphans(client, noRecords, spdk.Options{NodeID: "node-1", InstanceManager: "im"})
	if err != nil {
		fmt.Println(err)
		return
	}
	store := orphan.NewMemStore()
	s, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cycle := func() orphan.Result {
		started := time.Now()
		snap, err := orphans.Scan(ctx) // a host reads orphan.Monitor.Latest instead
		if err != nil {
			fmt.Println(err)
			return orphan.Result{}
		}
		_, res, err := s.Reconcile(ctx, snap, orphan.Cycle{Selector: orphan.Selector{NodeID: "node-1"},
			Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}}, ObservedAt: started})
		if err != nil {
			fmt.Println(err)
		}
		return res
	}
	fmt.Println("records created:", len(cycle().Created))
	recs, _ := store.List(ctx, orphan.Selector{})
	for _, r := range recs {
		_ = store.RequestDeletion(ctx, r.Name) // a user deletes the orphan records
	}
	// The next cycles mark the records DataCleanable and purge them. The
	// engine and the replica are purged concurrently: the replica's purge
	// is refused while the engine's RAID bdev is still built on it, and
	// goes on a later cycle.
	for range 4 {
		cycle()
	}
	recs, _ = store.List(ctx, orphan.Selector{})
	fmt.Println("records left:", len(recs), "lvols left:", len(srv.LvolAliases()), "RAID bdevs left:", len(srv.RaidNames()))
	// Output:
	// records created: 2
	// records left: 0 lvols left: 0 RAID bdevs left: 0
}

// ExampleReadExposures lists what a node exposes over NVMe-oF and what
// its engines attached, related to the engines and replicas.
func ExampleReadExposures() {
	srv, stop := exampleServer()
	defer stop()
	// The engine reaches a second replica on another node, as Longhorn
	// attaches it, and exposes its RAID bdev.
	_, _ = srv.AttachController("vol-r-9f8e7d6c", spdkrpc.NvmeTransportID{Trtype: "TCP", Traddr: "10.0.0.2", Trsvcid: "20001", Subnqn: spdk.LonghornNQN("vol-r-9f8e7d6c")})
	_ = srv.AddSubsystem(spdk.LonghornNQN("vol-e-0"), spdktest.SubsystemOptions{AllowAnyHost: true})
	_, _ = srv.AddNamespace(spdk.LonghornNQN("vol-e-0"), "vol-e-0")
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	inv, _, err := spdk.ReadExposures(context.Background(), client)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range inv.Subsystems {
		fmt.Println("subsystem", s.NQN, "->", s.Owner.Kind, s.Owner.Name, "by", s.Owner.By)
	}
	for _, c := range inv.Controllers {
		fmt.Println("controller", c.Name, "->", c.Owner.Kind, c.Owner.Name, "by", c.Owner.By)
	}
	// Output:
	// subsystem nqn.2023-01.io.longhorn.spdk:vol-e-0 -> engine-instance vol-e-0 by relation
	// controller vol-r-9f8e7d6c -> replica-instance vol-r-9f8e7d6c by name
}
