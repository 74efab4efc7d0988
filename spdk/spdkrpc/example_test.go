package spdkrpc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// ExampleNewClient: NewClient does not dial, so it fails only on options
// it cannot use, and names the option.
func ExampleNewClient() {
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{}) // DefaultSocketPath
	fmt.Println(client.SocketPath(), err)
	defer client.Close()

	_, err = spdkrpc.NewClient(spdkrpc.ClientOptions{MaxReplySize: -1})
	fmt.Println(errors.Is(err, spdkrpc.ErrInvalidOptions), err)
	_, err = spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: "/var/tmp/" + strings.Repeat("x", 200) + ".sock"})
	fmt.Println(errors.Is(err, spdkrpc.ErrInvalidOptions))
	// Output:
	// /var/tmp/spdk.sock <nil>
	// true spdkrpc: invalid client options: MaxReplySize -1 is negative (0 means DefaultMaxReplySize)
	// true
}

// ExampleClient_Call: SPDK's error reply is an *RPCError with its code and
// message; -19 (ENODEV) also matches ErrNotFound.
func ExampleClient_Call() {
	dir, err := os.MkdirTemp("", "spdk-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	_, _ = srv.AddLvstore("disk-1")
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	err = spdkrpc.BdevLvolDelete(context.Background(), client, "disk-1/no-such-lvol")
	var rerr *spdkrpc.RPCError
	fmt.Println(errors.As(err, &rerr), rerr.Code, rerr.Message, errors.Is(err, spdkrpc.ErrNotFound))
	// Output:
	// true -19 No such device true
}

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
	_ = srv.AddListener(nqn, spdkrpc.NvmfListenAddress{Trtype: "tcp", Traddr: "10.0.0.5", Trsvcid: "20001"})
	_, _ = srv.AttachController("vol-r-99999999", spdkrpc.NvmeTransportID{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.6",
		Trsvcid: "20002", Subnqn: "nqn.2023-01.io.longhorn.spdk:vol-r-99999999"})

	ctx := context.Background()
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	subs, err := spdkrpc.NvmfGetSubsystems(ctx, client, "")
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
	ctrls, err := spdkrpc.BdevNvmeGetControllers(ctx, client, "")
	if err != nil {
		panic(err)
	}
	for _, c := range ctrls {
		fmt.Printf("controller %s (bdev %s) -> %s, %s\n", c.Name, spdkrpc.NvmeBdevName(c.Name, 1), c.Ctrlrs[0].Trid.Subnqn, c.Ctrlrs[0].State)
	}

	if err := spdkrpc.NvmfSubsystemRemoveNs(ctx, client, nqn, 1); err != nil {
		panic(err)
	}
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, client, nqn); err != nil {
		panic(err)
	}
	// Detach only the path judged: at the address it had when listed.
	if err := spdkrpc.BdevNvmeDetachController(ctx, client, "vol-r-99999999", ctrls[0].Ctrlrs[0].Trid); err != nil {
		panic(err)
	}
	subs, _ = spdkrpc.NvmfGetSubsystems(ctx, client, "")
	ctrls, _ = spdkrpc.BdevNvmeGetControllers(ctx, client, "")
	fmt.Println(len(subs), "subsystem,", len(ctrls), "controllers")
	// Output:
	// Discovery nqn.2014-08.org.nvmexpress.discovery
	// NVMe nqn.2023-01.io.longhorn.spdk:vol-r-0a1b2c3d
	//   listens on TCP 10.0.0.5:20001
	//   nsid 1 exposes bdev 49f6ef6e-336f-5876-a28d-d46d33ccbfe1
	// controller vol-r-99999999 (bdev vol-r-99999999n1) -> nqn.2023-01.io.longhorn.spdk:vol-r-99999999, enabled
	// 1 subsystem, 0 controllers
}
