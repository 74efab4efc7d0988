package spdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// TestDeletingAnExposedBdevHotRemovesItsNamespace holds the fake to what
// SPDK does when a bdev a namespace exposes is deleted: the delete does
// not fail (vbdev_lvol_destroy and raid_bdev_delete only unregister the
// bdev), and SPDK's remove event takes the namespace out of its
// subsystem (lib/nvmf/subsystem.c nvmf_ns_event -> nvmf_ns_hot_remove),
// which stays, with its listeners.
func TestDeletingAnExposedBdevHotRemovesItsNamespace(t *testing.T) {
	g := seedGolden(t)
	ctx := context.Background()
	// A second replica, exposed to a remote engine.
	other := "vol-r-5e5e5e5e"
	id, err := g.srv.AddLvol("disk-1", other)
	if err != nil {
		t.Fatal(err)
	}
	nqn := "nqn.2023-01.io.longhorn.spdk:" + other
	if err := g.srv.AddSubsystem(nqn, spdktest.SubsystemOptions{AllowAnyHost: true}); err != nil {
		t.Fatal(err)
	}
	var nsid uint32
	if err := g.c.Call(ctx, "nvmf_subsystem_add_ns", map[string]any{"nqn": nqn, "namespace": map[string]string{"bdev_name": "disk-1/" + other}}, &nsid); err != nil || nsid != 1 {
		t.Fatalf("add_ns: %d, %v", nsid, err)
	}
	subs, err := spdkrpc.NvmfGetSubsystems(ctx, g.c, nqn)
	if err != nil {
		t.Fatal(err)
	}
	// SPDK lists the namespace under the bdev's name, the lvol's UUID,
	// and gives it the bdev's UUID and NGUID.
	ns := subs[0].Namespaces
	if len(ns) != 1 || ns[0].BdevName != id || ns[0].Name != id || ns[0].UUID != id || len(ns[0].NGUID) != 32 {
		t.Fatalf("namespaces %+v, want the lvol %s", ns, id)
	}
	b, err := spdkrpc.BdevGetBdevs(ctx, g.c, id)
	if err != nil || !b[0].Claimed {
		t.Fatalf("an exposed lvol is claimed: %+v, %v", b, err)
	}
	// A claimed bdev cannot be exposed twice.
	err = g.c.Call(ctx, "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]string{"bdev_name": id}}, nil)
	if !isRPC(err, spdkrpc.CodeInvalidParams, "Invalid parameters") {
		t.Errorf("exposing a claimed bdev: %v", err)
	}

	if err := spdkrpc.BdevLvolDelete(ctx, g.c, id); err != nil {
		t.Fatalf("deleting an exposed lvol: %v (SPDK does not refuse it)", err)
	}
	subs, err = spdkrpc.NvmfGetSubsystems(ctx, g.c, nqn)
	if err != nil || len(subs) != 1 || len(subs[0].Namespaces) != 0 {
		t.Fatalf("after the delete: %+v, %v; want the subsystem without its namespace", subs, err)
	}

	// The same for the engine's RAID bdev.
	if err := spdkrpc.BdevRaidDelete(ctx, g.c, goldenEngine); err != nil {
		t.Fatalf("deleting an exposed RAID bdev: %v", err)
	}
	subs, err = spdkrpc.NvmfGetSubsystems(ctx, g.c, goldenNQN)
	if err != nil || len(subs[0].Namespaces) != 0 || len(subs[0].ListenAddresses) != 1 {
		t.Fatalf("after the RAID delete: %+v, %v", subs, err)
	}

	// And for an NVMe bdev: detaching the controller takes its bdev and
	// the namespace exposing it.
	nvmeNQN := "nqn.2023-01.io.longhorn.spdk:vol-e-2"
	if err := g.srv.AddSubsystem(nvmeNQN, spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.AddNamespace(nvmeNQN, goldenRemote); err != nil {
		t.Fatal(err)
	}
	if err := spdkrpc.BdevNvmeDetachController(ctx, g.c, goldenRemoteCtrl, spdkrpc.NvmeTransportID{}); err != nil {
		t.Fatal(err)
	}
	if _, err := spdkrpc.BdevGetBdevs(ctx, g.c, goldenRemote); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("the bdev of a detached controller: %v", err)
	}
	if subs, _ := spdkrpc.NvmfGetSubsystems(ctx, g.c, nvmeNQN); len(subs) != 1 || len(subs[0].Namespaces) != 0 {
		t.Errorf("after the detach: %+v", subs)
	}
}

// TestNvmfLifecycle builds what Longhorn builds through the RPCs the
// fake-spdk example uses and takes it down with package spdk's calls.
func TestNvmfLifecycle(t *testing.T) {
	g := seedGolden(t)
	ctx := context.Background()
	call := func(method string, params any, out any) {
		t.Helper()
		if err := g.c.Call(ctx, method, params, out); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	nqn := "nqn.2023-01.io.longhorn.spdk:vol-r-0a1b2c3d"
	call("nvmf_create_subsystem", map[string]any{"nqn": nqn, "allow_any_host": true, "serial_number": "SN-1", "model_number": "Longhorn"}, nil)
	addr := spdkrpc.NvmfListenAddress{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.5", Trsvcid: "20010"}
	call("nvmf_subsystem_add_listener", map[string]any{"nqn": nqn, "listen_address": addr}, nil)
	var names []string
	call("bdev_nvme_attach_controller", map[string]any{"name": "vol-r-12121212", "trtype": "tcp", "traddr": "10.0.0.8", "trsvcid": "20011",
		"adrfam": "ipv4", "subnqn": "nqn.2023-01.io.longhorn.spdk:vol-r-12121212"}, &names)
	if !slices.Equal(names, []string{"vol-r-12121212n1"}) {
		t.Fatalf("attach answered %v", names)
	}
	// A second path to the same controller adds no bdev.
	call("bdev_nvme_attach_controller", map[string]any{"name": "vol-r-12121212", "trtype": "tcp", "traddr": "10.0.0.9", "trsvcid": "20011",
		"adrfam": "ipv4", "subnqn": "nqn.2023-01.io.longhorn.spdk:vol-r-12121212", "multipath": "failover"}, &names)
	if len(names) != 0 {
		t.Fatalf("second path answered %v", names)
	}
	ctrls, err := spdkrpc.BdevNvmeGetControllers(ctx, g.c, "vol-r-12121212")
	if err != nil || len(ctrls) != 1 || len(ctrls[0].Ctrlrs) != 2 || ctrls[0].Ctrlrs[0].Trid.Trtype != "TCP" || ctrls[0].Ctrlrs[0].Trid.Adrfam != "IPv4" ||
		ctrls[0].Ctrlrs[0].State != spdkrpc.NvmeCtrlrEnabled || ctrls[0].Ctrlrs[0].Host == nil || ctrls[0].Ctrlrs[0].Host.NQN == "" {
		t.Fatalf("controllers %+v, %v", ctrls, err)
	}
	subs, err := spdkrpc.NvmfGetSubsystems(ctx, g.c, "")
	if err != nil || len(subs) != 3 || subs[0].Subtype != spdkrpc.SubtypeDiscovery || subs[2].SerialNumber != "SN-1" ||
		!slices.Equal(subs[2].ListenAddresses, []spdkrpc.NvmfListenAddress{{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.5", Trsvcid: "20010"}}) {
		t.Fatalf("subsystems %+v, %v", subs, err)
	}

	// Detaching one path by its address keeps the other and the bdev; a
	// path that no longer matches detaches nothing.
	if err := spdkrpc.BdevNvmeDetachController(ctx, g.c, "vol-r-12121212", spdkrpc.NvmeTransportID{Traddr: "10.0.0.9", Trsvcid: "20011"}); err != nil {
		t.Fatal(err)
	}
	err = spdkrpc.BdevNvmeDetachController(ctx, g.c, "vol-r-12121212", spdkrpc.NvmeTransportID{Traddr: "10.0.0.9"})
	if !isRPC(err, spdkrpc.CodeNoSuchPath, "No such device or address") {
		t.Errorf("detaching a path that is gone: %v", err)
	}
	if _, err := spdkrpc.BdevGetBdevs(ctx, g.c, "vol-r-12121212n1"); err != nil {
		t.Errorf("the bdev went with one of two paths: %v", err)
	}
	if err := spdkrpc.BdevNvmeDetachController(ctx, g.c, "vol-r-12121212", spdkrpc.NvmeTransportID{Subnqn: "nqn.2023-01.io.longhorn.spdk:vol-r-12121212"}); err != nil {
		t.Fatal(err)
	}
	if _, err := spdkrpc.BdevNvmeGetControllers(ctx, g.c, "vol-r-12121212"); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("a detached controller: %v, want ErrNotFound", err)
	}
	if err := spdkrpc.BdevNvmeDetachController(ctx, g.c, "vol-r-12121212", spdkrpc.NvmeTransportID{}); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("detaching it again: %v, want ErrNotFound", err)
	}

	if err := spdkrpc.NvmfSubsystemRemoveListener(ctx, g.c, nqn, spdkrpc.NvmfListenAddress{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.5", Trsvcid: "20010"}); err != nil {
		t.Fatal(err)
	}
	if err := spdkrpc.NvmfSubsystemRemoveNs(ctx, g.c, goldenNQN, 1); err != nil {
		t.Fatal(err)
	}
	if b, err := spdkrpc.BdevGetBdevs(ctx, g.c, goldenEngine); err != nil || b[0].Claimed {
		t.Errorf("a RAID bdev no namespace exposes: %+v, %v; want it released", b, err)
	}
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, g.c, nqn); err != nil {
		t.Fatal(err)
	}
	if _, err := spdkrpc.NvmfGetSubsystems(ctx, g.c, nqn); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("a deleted subsystem: %v, want ErrNotFound", err)
	}
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, g.c, nqn); !isRPC(err, spdkrpc.CodeInvalidParams, "Invalid parameters") {
		t.Errorf("deleting it again: %v", err)
	}
	if got := g.srv.ControllerNames(); !slices.Equal(got, []string{goldenRemoteCtrl}) {
		t.Errorf("controllers left %v", got)
	}
}

// TestNvmfErrorRepliesAreSPDKs checks the code and message of every error
// reply of the NVMe-oF methods, each against the SPDK handler it copies.
func TestNvmfErrorRepliesAreSPDKs(t *testing.T) {
	g := seedGolden(t)
	const (
		invalid      = "Invalid parameters"
		decodeFailed = "spdk_json_decode_object failed"
	)
	for _, tc := range []struct {
		why    string
		method string
		params any
		code   int
		msg    string
	}{
		// nvmf_rpc.c rpc_nvmf_get_subsystems.
		{"decoder: unknown member", "nvmf_get_subsystems", map[string]any{"name": "x"}, spdkrpc.CodeInvalidParams, invalid},
		{"decoder: wrong type", "nvmf_get_subsystems", map[string]any{"nqn": 1}, spdkrpc.CodeInvalidParams, invalid},
		{"spdk_nvmf_get_tgt: none", "nvmf_get_subsystems", map[string]any{"tgt_name": "other"}, spdkrpc.CodeInternalError, "Unable to find a target."},
		{"subsystem does not exist: -ENODEV", "nvmf_get_subsystems", map[string]any{"nqn": "nqn.2023-01.io.longhorn.spdk:nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},

		// nvmf_rpc.c rpc_nvmf_create_subsystem.
		{"decoder: nqn missing", "nvmf_create_subsystem", map[string]any{"allow_any_host": true}, spdkrpc.CodeInvalidParams, invalid},
		{"decoder: serial number too long", "nvmf_create_subsystem", map[string]any{"nqn": "nqn.2023-01.x:y", "serial_number": "123456789012345678901"}, spdkrpc.CodeInvalidParams, invalid},
		{"spdk_nvmf_subsystem_create_ext: exists", "nvmf_create_subsystem", map[string]any{"nqn": goldenNQN}, spdkrpc.CodeInternalError, "Unable to create subsystem " + goldenNQN},
		{"spdk_nvmf_subsystem_create_ext: invalid NQN", "nvmf_create_subsystem", map[string]any{"nqn": "vol-e-0"}, spdkrpc.CodeInternalError, "Unable to create subsystem vol-e-0"},

		// nvmf_rpc.c rpc_nvmf_delete_subsystem: an unknown NQN is
		// "Invalid parameters", like a decoder failure.
		{"decoder: no params", "nvmf_delete_subsystem", nil, spdkrpc.CodeInvalidParams, invalid},
		{"decoder: unknown member", "nvmf_delete_subsystem", map[string]any{"nqn": goldenNQN, "force": true}, spdkrpc.CodeInvalidParams, invalid},
		{"spdk_nvmf_tgt_find_subsystem: none", "nvmf_delete_subsystem", map[string]any{"nqn": "nqn.2023-01.io.longhorn.spdk:nope"}, spdkrpc.CodeInvalidParams, invalid},

		// nvmf_rpc.c rpc_nvmf_subsystem_add_ns / nvmf_rpc_ns_paused.
		{"decoder: bdev_name missing", "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]any{}}, spdkrpc.CodeInvalidParams, invalid},
		{"decoder: bad nguid", "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]any{"bdev_name": g.snap, "nguid": "xyz"}}, spdkrpc.CodeInvalidParams, invalid},
		{"no such subsystem", "nvmf_subsystem_add_ns", map[string]any{"nqn": "nqn.2023-01.x:nope", "namespace": map[string]any{"bdev_name": g.snap}}, spdkrpc.CodeInvalidParams, invalid},
		{"add_ns_ext: no such bdev", "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]any{"bdev_name": "nope"}}, spdkrpc.CodeInvalidParams, invalid},
		{"add_ns_ext: NSID in use", "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]any{"bdev_name": g.snap, "nsid": 1}}, spdkrpc.CodeInvalidParams, invalid},
		{"add_ns_ext: NSID past the maximum", "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]any{"bdev_name": g.snap, "nsid": 33}}, spdkrpc.CodeInvalidParams, invalid},
		{"add_ns_ext: claimed by the RAID bdev", "nvmf_subsystem_add_ns", map[string]any{"nqn": goldenNQN, "namespace": map[string]any{"bdev_name": g.head}}, spdkrpc.CodeInvalidParams, invalid},

		// nvmf_rpc.c rpc_nvmf_subsystem_remove_ns / nvmf_rpc_remove_ns_paused.
		{"decoder: nsid missing", "nvmf_subsystem_remove_ns", map[string]any{"nqn": goldenNQN}, spdkrpc.CodeInvalidParams, invalid},
		{"decoder: negative nsid", "nvmf_subsystem_remove_ns", map[string]any{"nqn": goldenNQN, "nsid": -1}, spdkrpc.CodeInvalidParams, invalid},
		{"no such subsystem", "nvmf_subsystem_remove_ns", map[string]any{"nqn": "nqn.2023-01.x:nope", "nsid": 1}, spdkrpc.CodeInvalidParams, invalid},
		{"remove_ns: no such nsid", "nvmf_subsystem_remove_ns", map[string]any{"nqn": goldenNQN, "nsid": 2}, spdkrpc.CodeInvalidParams, invalid},
		{"remove_ns: nsid 0", "nvmf_subsystem_remove_ns", map[string]any{"nqn": goldenNQN, "nsid": 0}, spdkrpc.CodeInvalidParams, invalid},

		// nvmf_rpc.c rpc_nvmf_subsystem_add_listener / _remove_listener.
		{"listener exists", "nvmf_subsystem_add_listener", map[string]any{"nqn": goldenNQN, "listen_address": map[string]any{"trtype": "tcp", "traddr": "10.0.0.5", "trsvcid": "20001"}}, spdkrpc.CodeInvalidParams, invalid},
		{"bad trtype", "nvmf_subsystem_add_listener", map[string]any{"nqn": goldenNQN, "listen_address": map[string]any{"trtype": "udp", "traddr": "10.0.0.5"}}, spdkrpc.CodeInvalidParams, invalid},
		{"no such listener", "nvmf_subsystem_remove_listener", map[string]any{"nqn": goldenNQN, "listen_address": map[string]any{"trtype": "tcp", "traddr": "10.0.0.5", "trsvcid": "1"}}, spdkrpc.CodeInvalidParams, invalid},
		{"get_listeners: no such subsystem", "nvmf_subsystem_get_listeners", map[string]any{"nqn": "nqn.2023-01.x:nope"}, spdkrpc.CodeInvalidParams, invalid},
		{"get_listeners: decoder", "nvmf_subsystem_get_listeners", map[string]any{}, spdkrpc.CodeInvalidParams, invalid},
		{"get_listeners: no such target", "nvmf_subsystem_get_listeners", map[string]any{"nqn": goldenNQN, "tgt_name": "x"}, spdkrpc.CodeInternalError, "Unable to find a target"},
		{"decoder: unknown member", "nvmf_subsystem_remove_listener", map[string]any{"nqn": goldenNQN, "sock_impl": "posix", "listen_address": map[string]any{"trtype": "tcp", "traddr": "10.0.0.5", "trsvcid": "20001"}}, spdkrpc.CodeInvalidParams, invalid},

		// bdev_nvme_rpc.c rpc_bdev_nvme_attach_controller.
		{"decoder: traddr missing", "bdev_nvme_attach_controller", map[string]any{"name": "n", "trtype": "tcp"}, spdkrpc.CodeInternalError, decodeFailed},
		{"bad trtype", "bdev_nvme_attach_controller", map[string]any{"name": "n", "trtype": "udp", "traddr": "10.0.0.1"}, -22, "Failed to parse trtype: udp"},
		{"bad adrfam", "bdev_nvme_attach_controller", map[string]any{"name": "n", "trtype": "tcp", "traddr": "10.0.0.1", "adrfam": "ipx"}, -22, "Failed to parse adrfam: ipx"},
		{"same path", "bdev_nvme_attach_controller", map[string]any{"name": goldenRemoteCtrl, "trtype": "tcp", "traddr": "10.0.0.6", "trsvcid": "20002", "subnqn": goldenRemoteNQN},
			-114, "A controller named " + goldenRemoteCtrl + " already exists with the specified network path\n"},
		{"multipath disabled", "bdev_nvme_attach_controller", map[string]any{"name": goldenRemoteCtrl, "trtype": "tcp", "traddr": "10.0.0.9", "subnqn": goldenRemoteNQN, "multipath": "disable"},
			-114, "A controller named " + goldenRemoteCtrl + " already exists and multipath is disabled\n"},
		{"other subnqn", "bdev_nvme_attach_controller", map[string]any{"name": goldenRemoteCtrl, "trtype": "tcp", "traddr": "10.0.0.9", "subnqn": "nqn.2023-01.x:other"},
			-22, "A controller named " + goldenRemoteCtrl + " already exists, but uses a different subnqn (" + goldenRemoteNQN + ")\n"},

		// bdev_nvme_rpc.c rpc_bdev_nvme_get_controllers: EINVAL, positive.
		{"decoder: wrong type", "bdev_nvme_get_controllers", map[string]any{"name": 1}, spdkrpc.CodeInternalError, decodeFailed},
		{"no such controller", "bdev_nvme_get_controllers", map[string]any{"name": "nope"}, 22, "Controller nope does not exist"},

		// bdev_nvme_rpc.c rpc_bdev_nvme_detach_controller / bdev_nvme_delete.
		{"decoder: name missing", "bdev_nvme_detach_controller", map[string]any{}, spdkrpc.CodeInternalError, decodeFailed},
		{"bad trtype", "bdev_nvme_detach_controller", map[string]any{"name": goldenRemoteCtrl, "trtype": "udp"}, -22, "Failed to parse trtype: udp"},
		{"no such controller: -ENODEV", "bdev_nvme_detach_controller", map[string]any{"name": "nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"no such path: -ENXIO", "bdev_nvme_detach_controller", map[string]any{"name": goldenRemoteCtrl, "traddr": "10.9.9.9"}, -6, "No such device or address"},
	} {
		err := g.c.Call(context.Background(), tc.method, tc.params, nil)
		if !isRPC(err, tc.code, tc.msg) {
			t.Errorf("%s %s: %v, want %d %q (%s)", tc.method, paramsString(tc.params), err, tc.code, tc.msg, tc.why)
		}
	}
	// None of the refused calls changed anything.
	subs := g.srv.Subsystems()
	if len(subs) != 2 || len(subs[1].Namespaces) != 1 || len(subs[1].ListenAddresses) != 1 || !slices.Equal(g.srv.ControllerNames(), []string{goldenRemoteCtrl}) {
		t.Errorf("after refused calls: %+v, controllers %v", subs, g.srv.ControllerNames())
	}
}

// TestGoSPDKHelperNvmfListings replays go-spdk-helper's listing calls
// (pkg/spdk/client/basic.go): NvmfGetSubsystems sends its request struct,
// all omitempty ({} for every subsystem), BdevNvmeGetControllers likewise,
// and each decodes into its types.
func TestGoSPDKHelperNvmfListings(t *testing.T) {
	g := seedGolden(t)
	ctx := context.Background()
	var subs []ghNvmfSubsystem
	if err := g.c.Call(ctx, "nvmf_get_subsystems", struct{}{}, &subs); err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].Subtype != "Discovery" || subs[1].Nqn != goldenNQN || len(subs[1].Namespaces) != 1 ||
		subs[1].Namespaces[0].BdevName != goldenEngine || subs[1].Namespaces[0].UUID != g.raid {
		t.Fatalf("subsystems %+v", subs)
	}
	var ctrls []ghBdevNvmeControllerInfo
	if err := g.c.Call(ctx, "bdev_nvme_get_controllers", struct{}{}, &ctrls); err != nil {
		t.Fatal(err)
	}
	if len(ctrls) != 1 || ctrls[0].Name != goldenRemoteCtrl || ctrls[0].Ctrlrs[0].Trid.Subnqn != goldenRemoteNQN || ctrls[0].Ctrlrs[0].State != "enabled" {
		t.Fatalf("controllers %+v", ctrls)
	}
	// Its BdevNvmeDetachController sends {"name"} and reads a bool.
	var ok bool
	if err := g.c.Call(ctx, "bdev_nvme_detach_controller", map[string]string{"name": goldenRemoteCtrl}, &ok); err != nil || !ok {
		t.Fatalf("detach: %v, %v", ok, err)
	}

	// Its StopExposeBdev (pkg/spdk/client/advanced.go): list the
	// subsystems, find the NQN, list its listeners and remove each (with
	// the names SPDK listed), remove each namespace, delete the subsystem.
	for _, s := range subs {
		if s.Nqn != goldenNQN {
			continue
		}
		var listeners []ghNvmfSubsystemListener
		if err := g.c.Call(ctx, "nvmf_subsystem_get_listeners", map[string]string{"nqn": s.Nqn}, &listeners); err != nil || len(listeners) != 1 {
			t.Fatalf("get_listeners: %+v, %v", listeners, err)
		}
		for _, l := range listeners {
			if err := g.c.Call(ctx, "nvmf_subsystem_remove_listener", map[string]any{"nqn": s.Nqn, "listen_address": l.Address}, &ok); err != nil || !ok {
				t.Fatalf("remove_listener %+v: %v, %v", l.Address, ok, err)
			}
		}
		for _, ns := range s.Namespaces {
			if err := g.c.Call(ctx, "nvmf_subsystem_remove_ns", map[string]any{"nqn": s.Nqn, "nsid": ns.Nsid}, &ok); err != nil || !ok {
				t.Fatalf("remove_ns %d: %v, %v", ns.Nsid, ok, err)
			}
		}
		if err := g.c.Call(ctx, "nvmf_delete_subsystem", map[string]string{"nqn": s.Nqn}, &ok); err != nil || !ok {
			t.Fatalf("delete: %v, %v", ok, err)
		}
	}
	if got := g.srv.Subsystems(); len(got) != 1 || got[0].NQN != spdktest.DiscoveryNQN {
		t.Errorf("after StopExposeBdev: %+v", got)
	}
}

// TestNvmfAnswerAndFaults checks that the NVMe-oF methods go through
// Answer and the fault hooks like the others.
func TestNvmfAnswerAndFaults(t *testing.T) {
	g := seedGolden(t)
	raw, err := g.srv.Answer("bdev_nvme_get_controllers", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ctrls []spdkrpc.BdevNvmeController
	if err := json.Unmarshal(raw, &ctrls); err != nil || len(ctrls) != 1 {
		t.Fatalf("Answer: %s, %v", raw, err)
	}
	if _, err := g.srv.Answer("nvmf_delete_subsystem", json.RawMessage(`{"nqn":"nqn.2023-01.x:nope"}`)); !isRPC(err, spdkrpc.CodeInvalidParams, "Invalid parameters") {
		t.Errorf("Answer of a refused delete: %v", err)
	}
	g.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Action: spdktest.Replace, Result: json.RawMessage(`[{"nqn":"x","subtype":"NVMe","namespaces":[null]}]`)})
	if _, err := spdkrpc.NvmfGetSubsystems(context.Background(), g.c, ""); !errors.Is(err, spdkrpc.ErrUnexpectedResult) {
		t.Errorf("a null namespace: %v", err)
	}
	// The fault's Then runs after the method, before the reply: the
	// subsystem is gone when the caller learns it was listed.
	g.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Then: func() {
		_, _ = g.srv.Answer("nvmf_delete_subsystem", json.RawMessage(`{"nqn":"`+goldenNQN+`"}`))
	}})
	if subs, err := spdkrpc.NvmfGetSubsystems(context.Background(), g.c, goldenNQN); err != nil || len(subs) != 1 {
		t.Fatalf("listing: %+v, %v", subs, err)
	}
	if _, err := spdkrpc.NvmfGetSubsystems(context.Background(), g.c, goldenNQN); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("after Then: %v", err)
	}
	if n := g.srv.CallCount("nvmf_delete_subsystem"); n != 2 {
		t.Errorf("CallCount = %d, want 2", n)
	}
}

func isRPC(err error, code int, msg string) bool {
	var rerr *spdkrpc.RPCError
	return errors.As(err, &rerr) && rerr.Code == code && rerr.Message == msg
}

// TestDeletingARaidMemberEmptiesItsSlot: deleting a RAID bdev's member
// does not fail either; SPDK's RAID module takes the member out
// (bdev_raid.c raid_bdev_event_base_bdev -> raid_bdev_remove_base_bdev)
// and keeps its slot, unnamed, with the nil UUID, not configured. A RAID1
// bdev stays online while a member is left.
func TestDeletingARaidMemberEmptiesItsSlot(t *testing.T) {
	g := seedGolden(t)
	ctx := context.Background()
	if err := spdkrpc.BdevNvmeDetachController(ctx, g.c, goldenRemoteCtrl, spdkrpc.NvmeTransportID{}); err != nil {
		t.Fatal(err)
	}
	raids, err := spdkrpc.BdevRaidGetBdevs(ctx, g.c, "")
	if err != nil || len(raids) != 1 {
		t.Fatal(raids, err)
	}
	r := raids[0]
	gone := spdkrpc.RaidBaseBdev{UUID: "00000000-0000-0000-0000-000000000000", DataSize: r.BaseBdevsList[1].DataSize}
	if r.State != "online" || r.NumBaseBdevs != 2 || r.NumBaseBdevsDiscovered != 1 || r.NumBaseBdevsOperational != 1 ||
		r.BaseBdevsList[0].Name != "disk-1/"+goldenHead || r.BaseBdevsList[1] != gone {
		t.Fatalf("after detaching the remote replica: %+v", r)
	}
	if err := spdkrpc.BdevLvolDelete(ctx, g.c, g.head); err != nil {
		t.Fatalf("deleting the local member: %v", err)
	}
	raids, _ = spdkrpc.BdevRaidGetBdevs(ctx, g.c, "")
	if r := raids[0]; r.State != "offline" || r.NumBaseBdevsDiscovered != 0 || r.BaseBdevsList[0].Name != "" {
		t.Fatalf("after deleting both members: %+v", r)
	}
}
