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
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

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
	remote := func(name string) spdkrpc.NvmeTransportID {
		return spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.6", Trsvcid: "20002", Subnqn: spdk.LonghornNQN(name)}
	}
	_, _ = srv.AttachController("old-r-99999999", remote("old-r-99999999"))
	_, _ = srv.AttachController("live-r-88888888", remote("live-r-88888888"))

	// The host's records: only the live remote replica. MemLookup counts
	// its records (spdk.RecordCounter), which PurgeLeftoverExposures
	// requires.
	records := &instancetest.MemLookup{}
	records.Put(orphan.KindReplicaInstance, "live-r-88888888", instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: "node-2"})
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		panic(err)
	}
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
