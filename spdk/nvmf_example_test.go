package spdk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// ExampleNvmfGetSubsystems lists what a node exposes and the controllers
// it holds to other nodes, then stops exposing a replica: first the
// namespace, then the subsystem, then the controller goes.
func ExampleNvmfGetSubsystems() {
	dir, _ := os.MkdirTemp("", "spdk-example")
	defer os.RemoveAll(dir)
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	_, _ = srv.AddLvstore("disk-1")
	_, _ = srv.AddLvol("disk-1", "vol-r-0a1b2c3d")
	nqn := "nqn.2023-01.io.longhorn.spdk:vol-r-0a1b2c3d"
	_ = srv.AddSubsystem(nqn, spdktest.SubsystemOptions{AllowAnyHost: true})
	_, _ = srv.AddNamespace(nqn, "disk-1/vol-r-0a1b2c3d")
	_ = srv.AddListener(nqn, spdk.NvmfListenAddress{Trtype: "tcp", Traddr: "10.0.0.5", Trsvcid: "20001"})
	_, _ = srv.AttachController("vol-r-99999999", spdk.NvmeTransportID{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.6",
		Trsvcid: "20002", Subnqn: "nqn.2023-01.io.longhorn.spdk:vol-r-99999999"})

	ctx := context.Background()
	client := spdk.NewClient(spdk.ClientOptions{SocketPath: srv.SocketPath()})
	defer client.Close()
	subs, err := spdk.NvmfGetSubsystems(ctx, client, "")
	if err != nil {
		panic(err)
	}
	for _, s := range subs {
		fmt.Println(s.Subtype, s.NQN)
		for _, a := range s.ListenAddresses {
			fmt.Printf("  listens on %s %s:%s\n", a.Trtype, a.Traddr, a.Trsvcid)
		}
		for _, n := range s.Namespaces {
			// An lvol bdev is named after its UUID.
			fmt.Printf("  nsid %d exposes bdev %s\n", n.NSID, n.Bdev())
		}
	}
	ctrls, err := spdk.BdevNvmeGetControllers(ctx, client, "")
	if err != nil {
		panic(err)
	}
	for _, c := range ctrls {
		fmt.Printf("controller %s (bdev %s) -> %s, %s\n", c.Name, spdk.NvmeBdevName(c.Name, 1), c.Ctrlrs[0].Trid.Subnqn, c.Ctrlrs[0].State)
	}

	if err := spdk.NvmfSubsystemRemoveNs(ctx, client, nqn, 1); err != nil {
		panic(err)
	}
	if err := spdk.NvmfDeleteSubsystem(ctx, client, nqn); err != nil {
		panic(err)
	}
	// Detach only the path judged: at the address it had when listed.
	if err := spdk.BdevNvmeDetachController(ctx, client, "vol-r-99999999", ctrls[0].Ctrlrs[0].Trid); err != nil {
		panic(err)
	}
	subs, _ = spdk.NvmfGetSubsystems(ctx, client, "")
	ctrls, _ = spdk.BdevNvmeGetControllers(ctx, client, "")
	fmt.Println(len(subs), "subsystem,", len(ctrls), "controllers")
	// Output:
	// Discovery nqn.2014-08.org.nvmexpress.discovery
	// NVMe nqn.2023-01.io.longhorn.spdk:vol-r-0a1b2c3d
	//   listens on TCP 10.0.0.5:20001
	//   nsid 1 exposes bdev 49f6ef6e-336f-5876-a28d-d46d33ccbfe1
	// controller vol-r-99999999 (bdev vol-r-99999999n1) -> nqn.2023-01.io.longhorn.spdk:vol-r-99999999, enabled
	// 1 subsystem, 0 controllers
}

// ExampleOrphans_PurgeLeftoverExposures removes what an interrupted purge
// left: the empty subsystem of a replica whose lvols and record are gone,
// and a controller to a remote replica whose record is gone and that no
// RAID bdev uses. The controller of a replica that has a record stays.
func ExampleOrphans_PurgeLeftoverExposures() {
	dir, _ := os.MkdirTemp("", "spdk-example")
	defer os.RemoveAll(dir)
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	_ = srv.AddSubsystem(spdk.LonghornNQN("old-r-0a1b2c3d"), spdktest.SubsystemOptions{AllowAnyHost: true})
	remote := func(name string) spdk.NvmeTransportID {
		return spdk.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.6", Trsvcid: "20002", Subnqn: spdk.LonghornNQN(name)}
	}
	_, _ = srv.AttachController("old-r-99999999", remote("old-r-99999999"))
	_, _ = srv.AttachController("live-r-88888888", remote("live-r-88888888"))

	// The host's records: only the live remote replica. MemLookup counts
	// its records (spdk.RecordCounter), which PurgeLeftoverExposures
	// requires.
	records := &instancetest.MemLookup{}
	records.Put(orphan.KindReplicaInstance, "live-r-88888888", instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2"})
	client := spdk.NewClient(spdk.ClientOptions{SocketPath: srv.SocketPath()})
	defer client.Close()
	orphans, err := spdk.NewOrphans(client, records, spdk.Options{NodeID: "node-1", InstanceManager: "instance-manager-v2-node-1"})
	if err != nil {
		panic(err)
	}
	rep, err := orphans.PurgeLeftoverExposures(context.Background())
	if err != nil {
		panic(err)
	}
	for _, r := range rep.Removed {
		fmt.Println("removed", r.Object)
	}
	for _, k := range rep.Kept {
		fmt.Println("kept", k.Object+":", k.Reason)
	}
	// Output:
	// removed subsystem nqn.2023-01.io.longhorn.spdk:old-r-0a1b2c3d
	// removed controller old-r-99999999
	// kept controller live-r-88888888: replica record live-r-88888888 exists
}
