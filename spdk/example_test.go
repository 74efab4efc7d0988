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

func ExampleInventory() {
	srv, stop := exampleServer()
	defer stop()
	client := spdk.NewClient(spdk.Options{SocketPath: srv.SocketPath()})
	defer client.Close()

	inv := &spdk.Inventory{RPC: client, NodeID: "node-1", InstanceManager: "instance-manager-v2"}
	snap, err := inv.Scan(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range snap.Items {
		fmt.Println(it.Kind, it.Param(orphan.ParamInstanceName), it.Param(orphan.ParamInstanceUUID) != "")
	}
	// Output:
	// engine-instance vol-e-0 true
	// replica-instance vol-r-0a1b2c3d true
}

func ExampleDeleter() {
	srv, stop := exampleServer()
	defer stop()
	client := spdk.NewClient(spdk.Options{SocketPath: srv.SocketPath()})
	defer client.Close()
	ctx := context.Background()

	inv := &spdk.Inventory{RPC: client, NodeID: "node-1", InstanceManager: "im"}
	snap, _ := inv.Scan(ctx)
	engine, _ := orphan.NewRecord(snap.Items[0], time.Unix(0, 0))
	replica, _ := orphan.NewRecord(snap.Items[1], time.Unix(0, 0))

	// The cluster has no engine or replica records for this volume.
	records := instance.LookupFunc(func(context.Context, orphan.Kind, string) (instance.View, error) {
		return instance.View{}, nil
	})
	d := &spdk.Deleter{RPC: client, NodeID: "node-1", InstanceManager: "im", Records: records}

	// The engine is recreated after the scan: its purge is refused.
	_, _ = srv.RecreateRaid("vol-e-0")
	err := d.Delete(ctx, engine)
	fmt.Println("engine refused:", errors.Is(err, spdk.ErrUUIDMismatch), errors.Is(err, orphan.ErrPreconditionFailed))

	// The RAID bdev is still built on the replica's head: refused too.
	err = d.Delete(ctx, replica)
	fmt.Println("replica refused:", errors.Is(err, orphan.ErrPreconditionFailed))

	// A new scan records the engine's new UUID; once its RAID bdev is
	// gone, the replica's whole tree goes.
	snap, _ = inv.Scan(ctx)
	engine, _ = orphan.NewRecord(snap.Items[0], time.Unix(0, 0))
	fmt.Println("engine purged:", d.Delete(ctx, engine) == nil)
	fmt.Println("replica purged:", d.Delete(ctx, replica) == nil)
	fmt.Println("lvols left:", len(srv.LvolAliases()))
	// Output:
	// engine refused: true true
	// replica refused: true
	// engine purged: true
	// replica purged: true
	// lvols left: 0
}

func ExampleClassify() {
	lvs := spdk.LvolStoreRef{Name: "disk-1", UUID: "lvs-uuid"}
	rt := spdk.Classify([]spdk.Lvol{
		{Name: "vol-r-1", UUID: "u1", Lvs: lvs},
		{Name: "vol-r-1-snap-s1", UUID: "u2", IsSnapshot: true, Lvs: lvs},
		{Name: "vol-r-1-rebuilding", UUID: "u3", Lvs: lvs},
		{Name: "bi-image-disk-1", UUID: "u4", IsSnapshot: true, Lvs: lvs},
		{Name: "vol-r-2", UUID: "", Lvs: lvs},
	}, []spdk.RaidBdev{{Name: "vol-e-0", UUID: "u5"}})
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

func ExampleClient_Call() {
	srv, stop := exampleServer()
	defer stop()
	client := spdk.NewClient(spdk.Options{SocketPath: srv.SocketPath()})
	defer client.Close()

	err := spdk.BdevLvolDelete(context.Background(), client, "disk-1/no-such-lvol")
	var rerr *spdk.RPCError
	fmt.Println(errors.As(err, &rerr), rerr.Code, rerr.Message, errors.Is(err, spdk.ErrNoSuchDevice))
	// Output:
	// true -19 No such device true
}
