package spdkrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// jsonCaller is a Caller that answers every call with one raw result (or
// error), decoded as *Client decodes it: the decoders' table tests and
// fuzz target need no socket.
type jsonCaller struct {
	result string
	err    error
	calls  []string // "method params"
}

func (c *jsonCaller) Call(_ context.Context, method string, params, result any) error {
	p, _ := json.Marshal(params)
	c.calls = append(c.calls, method+" "+string(p))
	if c.err != nil {
		return c.err
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(c.result), result); err != nil {
		return &spdkrpc.ResultError{Method: method, Err: err}
	}
	return nil
}

// nvmfListings are the NVMe-oF list calls, by method.
var nvmfListings = map[string]func(context.Context, spdkrpc.Caller) (int, error){
	"nvmf_get_subsystems": func(ctx context.Context, c spdkrpc.Caller) (int, error) {
		l, err := spdkrpc.NvmfGetSubsystems(ctx, c, "")
		return len(l), err
	},
	"bdev_nvme_get_controllers": func(ctx context.Context, c spdkrpc.Caller) (int, error) {
		l, err := spdkrpc.BdevNvmeGetControllers(ctx, c, "")
		return len(l), err
	},
}

func TestNvmfListingsRejectWrongShapes(t *testing.T) {
	srv := fixture.Start(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	for method, call := range nvmfListings {
		for _, bad := range fixture.BadLists {
			f := bad.Fault
			f.Method = method
			srv.Inject(f)
			n, err := call(context.Background(), c)
			if !unreadable(err) || n != 0 {
				t.Errorf("%s, %s: %d elements, err = %v; want an unreadable-reply error", method, bad.Name, n, err)
			}
		}
		// An empty target: the discovery subsystem, no controller.
		want := map[string]int{"nvmf_get_subsystems": 1, "bdev_nvme_get_controllers": 0}[method]
		if n, err := call(context.Background(), c); err != nil || n != want {
			t.Errorf("%s after the faults: %d, %v; want %d", method, n, err, want)
		}
	}
}

// TestNvmfListingsRejectHollowElements lists what decodes without error
// but that SPDK never writes, each of which would read as "exposes
// nothing" or "connects nowhere" if let through.
func TestNvmfListingsRejectHollowElements(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, method, result string
	}{
		{"null namespace", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","namespaces":[null]}]`},
		{"no subtype", "nvmf_get_subsystems", `[{"nqn":"n","listen_addresses":[],"hosts":[],"namespaces":[]}]`},
		{"NVMe without namespaces", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","listen_addresses":[],"hosts":[]}]`},
		{"NVMe with null namespaces", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","listen_addresses":[],"hosts":[],"namespaces":null}]`},
		{"no hosts", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"Discovery","listen_addresses":[]}]`},
		{"null listen_addresses", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"Discovery","listen_addresses":null,"hosts":[]}]`},
		{"namespace without nsid", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","namespaces":[{"bdev_name":"b"}]}]`},
		{"namespace without bdev", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","namespaces":[{"nsid":1}]}]`},
		{"null host", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","hosts":[null]}]`},
		{"host without nqn", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","hosts":[{"dhchap_key":"k"}]}]`},
		{"null listener", "nvmf_get_subsystems", `[{"nqn":"n","subtype":"NVMe","listen_addresses":[null]}]`},
		{"nsid of the wrong type", "nvmf_get_subsystems", `[{"nqn":"n","namespaces":[{"nsid":"1","bdev_name":"b"}]}]`},
		{"negative nsid", "nvmf_get_subsystems", `[{"nqn":"n","namespaces":[{"nsid":-1,"bdev_name":"b"}]}]`},
		{"namespaces not a list", "nvmf_get_subsystems", `[{"nqn":"n","namespaces":{"nsid":1}}]`},
		{"controller without path", "bdev_nvme_get_controllers", `[{"name":"c"}]`},
		{"null ctrlrs, null trid", "bdev_nvme_get_controllers", `[{"name":"c","ctrlrs":null,"trid":null}]`},
		{"null path", "bdev_nvme_get_controllers", `[{"name":"c","ctrlrs":[null]}]`},
		{"path without transport", "bdev_nvme_get_controllers", `[{"name":"c","ctrlrs":[{"state":"enabled","trid":{"traddr":"10.0.0.1"}}]}]`},
		{"old shape without transport", "bdev_nvme_get_controllers", `[{"name":"c","trid":{}}]`},
		{"cntlid out of range", "bdev_nvme_get_controllers", `[{"name":"c","ctrlrs":[{"state":"enabled","cntlid":70000,"trid":{"trtype":"TCP"}}]}]`},
	} {
		c := &jsonCaller{result: tc.result}
		n, err := nvmfListings[tc.method](ctx, c)
		var rerr *spdkrpc.ResultError
		if !errors.As(err, &rerr) || rerr.Method != tc.method || n != 0 {
			t.Errorf("%s: %d elements, err = %v; want a *ResultError naming %s", tc.name, n, err, tc.method)
		}
	}
}

// TestBdevNvmeGetControllersShapes decodes both shapes SPDK writes: one
// trid per controller before multipath (the example of SPDK's
// doc/jsonrpc.md still shows it), ctrlrs since.
func TestBdevNvmeGetControllersShapes(t *testing.T) {
	ctx := context.Background()
	c := &jsonCaller{result: `[{"name":"Nvme0","trid":{"trtype":"PCIe","traddr":"0000:05:00.0"}},
		{"name":"vol-r-1","ctrlrs":[{"state":"failed","cntlid":3,"trid":{"trtype":"TCP","adrfam":"IPv4","traddr":"10.0.0.6","trsvcid":"20002","subnqn":"nqn.2023-01.io.longhorn.spdk:vol-r-1"},
		"host":{"nqn":"nqn.h","addr":"","svcid":""}}]}]`}
	got, err := spdkrpc.BdevNvmeGetControllers(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []spdkrpc.BdevNvmeController{
		{Name: "Nvme0", Ctrlrs: []spdkrpc.NvmeCtrlr{{Trid: spdkrpc.NvmeTransportID{Trtype: "PCIe", Traddr: "0000:05:00.0"}}}},
		{Name: "vol-r-1", Ctrlrs: []spdkrpc.NvmeCtrlr{{State: spdkrpc.NvmeCtrlrFailed, Cntlid: 3, Trid: spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4",
			Traddr: "10.0.0.6", Trsvcid: "20002", Subnqn: "nqn.2023-01.io.longhorn.spdk:vol-r-1"}, Host: &spdkrpc.NvmeHostID{NQN: "nqn.h"}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// TestBdevNvmeGetControllersNotFound: SPDK answers an unknown name with a
// positive EINVAL, which only this call, with a name, reads as
// ErrNotFound; the same code with another message is not.
func TestBdevNvmeGetControllersNotFound(t *testing.T) {
	ctx := context.Background()
	c := &jsonCaller{err: &spdkrpc.RPCError{Method: "bdev_nvme_get_controllers", Code: 22, Message: "Controller vol-r-1 does not exist"}}
	_, err := spdkrpc.BdevNvmeGetControllers(ctx, c, "vol-r-1")
	var rerr *spdkrpc.RPCError
	if !errors.Is(err, spdkrpc.ErrNotFound) || !errors.As(err, &rerr) || rerr.Code != 22 {
		t.Errorf("unknown name: %v, want ErrNotFound and the *RPCError", err)
	}
	if _, err := spdkrpc.BdevNvmeGetControllers(ctx, c, "vol-r-2"); errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("an EINVAL about another name is not a NotFound of this one: %v", err)
	}
	c.err = &spdkrpc.RPCError{Method: "bdev_nvme_get_controllers", Code: 22, Message: "Invalid argument"}
	if _, err := spdkrpc.BdevNvmeGetControllers(ctx, c, "vol-r-1"); errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("another EINVAL: %v", err)
	}
}

// TestNvmfCallsSendSPDKsParams checks each call's params against the
// decoder tables of nvmf_rpc.c and bdev_nvme_rpc.c.
func TestNvmfCallsSendSPDKsParams(t *testing.T) {
	ctx := context.Background()
	c := &jsonCaller{result: "true"}
	_ = spdkrpc.NvmfDeleteSubsystem(ctx, c, "nqn.a")
	_ = spdkrpc.NvmfSubsystemRemoveNs(ctx, c, "nqn.a", 2)
	_ = spdkrpc.NvmfSubsystemRemoveListener(ctx, c, "nqn.a", spdkrpc.NvmfListenAddress{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.5", Trsvcid: "20001"})
	_ = spdkrpc.BdevNvmeDetachController(ctx, c, "vol-r-1", spdkrpc.NvmeTransportID{})
	_ = spdkrpc.BdevNvmeDetachController(ctx, c, "vol-r-1", spdkrpc.NvmeTransportID{Traddr: "10.0.0.6", Trsvcid: "20002", Subnqn: "nqn.b"})
	c.result = "[]"
	_, _ = spdkrpc.NvmfGetSubsystems(ctx, c, "")
	_, _ = spdkrpc.NvmfGetSubsystems(ctx, c, "nqn.a")
	_, _ = spdkrpc.BdevNvmeGetControllers(ctx, c, "")
	_, _ = spdkrpc.BdevNvmeGetControllers(ctx, c, "vol-r-1")
	want := []string{
		`nvmf_delete_subsystem {"nqn":"nqn.a"}`,
		`nvmf_subsystem_remove_ns {"nqn":"nqn.a","nsid":2}`,
		`nvmf_subsystem_remove_listener {"nqn":"nqn.a","listen_address":{"trtype":"TCP","adrfam":"IPv4","traddr":"10.0.0.5","trsvcid":"20001"}}`,
		`bdev_nvme_detach_controller {"name":"vol-r-1"}`,
		`bdev_nvme_detach_controller {"name":"vol-r-1","traddr":"10.0.0.6","trsvcid":"20002","subnqn":"nqn.b"}`,
		`nvmf_get_subsystems null`,
		`nvmf_get_subsystems {"nqn":"nqn.a"}`,
		`bdev_nvme_get_controllers null`,
		`bdev_nvme_get_controllers {"name":"vol-r-1"}`,
	}
	if !slices.Equal(c.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(c.calls, "\n"), strings.Join(want, "\n"))
	}
}

func TestNvmfRemovalsRejectAnythingButTrue(t *testing.T) {
	ctx := context.Background()
	calls := map[string]func(spdkrpc.Caller) error{
		"nvmf_delete_subsystem":    func(c spdkrpc.Caller) error { return spdkrpc.NvmfDeleteSubsystem(ctx, c, "nqn.a") },
		"nvmf_subsystem_remove_ns": func(c spdkrpc.Caller) error { return spdkrpc.NvmfSubsystemRemoveNs(ctx, c, "nqn.a", 1) },
		"nvmf_subsystem_remove_listener": func(c spdkrpc.Caller) error {
			return spdkrpc.NvmfSubsystemRemoveListener(ctx, c, "nqn.a", spdkrpc.NvmfListenAddress{Trtype: "TCP", Traddr: "10.0.0.1"})
		},
		"bdev_nvme_detach_controller": func(c spdkrpc.Caller) error {
			return spdkrpc.BdevNvmeDetachController(ctx, c, "c", spdkrpc.NvmeTransportID{})
		},
	}
	for method, call := range calls {
		for _, bad := range []string{`null`, `false`, `"true"`, `[true]`, `{}`, `1`} {
			err := call(&jsonCaller{result: bad})
			var rerr *spdkrpc.ResultError
			if !errors.As(err, &rerr) || rerr.Method != method {
				t.Errorf("%s answering %s: %v, want a *ResultError", method, bad, err)
			}
		}
		if err := call(&jsonCaller{result: "true"}); err != nil {
			t.Errorf("%s answering true: %v", method, err)
		}
	}
}

func TestNvmeBdevName(t *testing.T) {
	if got := spdkrpc.NvmeBdevName("vol-r-1234abcd", 1); got != "vol-r-1234abcd"+"n1" {
		t.Errorf("NvmeBdevName = %q", got)
	}
	if got := spdkrpc.NvmeBdevName("Nvme0", 12); got != "Nvme0n12" {
		t.Errorf("NvmeBdevName = %q", got)
	}
}

// TestNvmfWireTypesSpellSPDKsFields is TestWireTypesSpellSPDKsFields for
// the NVMe-oF wire types, with the keys dump_nvmf_subsystem and
// rpc_dump_nvme_bdev_controller_info write that the types keep.
func TestNvmfWireTypesSpellSPDKsFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		into any
		json string
	}{
		{"nvmf_get_subsystems", &spdkrpc.NvmfSubsystem{}, `{"nqn":"nqn.a","subtype":"NVMe","listen_addresses":[{"trtype":"TCP","adrfam":"IPv4",
			"traddr":"10.0.0.5","trsvcid":"4420"}],"allow_any_host":false,"hosts":[{"nqn":"nqn.h"}],"serial_number":"SN","model_number":"MN",
			"max_namespaces":4,"namespaces":[{"nsid":1,"bdev_name":"b","name":"b","nguid":"00","eui64":"01","uuid":"u"}]}`},
		{"bdev_nvme_get_controllers", &spdkrpc.BdevNvmeController{}, `{"name":"c","ctrlrs":[{"state":"enabled","cntlid":1,
			"trid":{"trtype":"TCP","adrfam":"IPv4","traddr":"10.0.0.6","trsvcid":"4420","subnqn":"nqn.s"},"host":{"nqn":"nqn.h","addr":"a","svcid":"s"}}]}`},
	} {
		if err := json.Unmarshal([]byte(tc.json), tc.into); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		again, err := json.Marshal(tc.into)
		if err != nil {
			t.Fatal(err)
		}
		var want, got any
		_ = json.Unmarshal([]byte(tc.json), &want)
		_ = json.Unmarshal(again, &got)
		if w, g := keys("", want), keys("", got); !slices.Equal(w, g) {
			t.Errorf("%s: SPDK writes the keys\n %v\nthe wire type round-trips\n %v", tc.name, w, g)
		}
	}
}

// FuzzNvmfListings holds the NVMe-oF listings to their promise on any
// result: no panic, and either an error or elements with everything the
// inventory relies on (a name, an NSID and a bdev per namespace, a
// transport per path).
func FuzzNvmfListings(f *testing.F) {
	for _, seed := range []string{
		`[{"nqn":"nqn.2014-08.org.nvmexpress.discovery","subtype":"Discovery","listen_addresses":[],"allow_any_host":true,"hosts":[]}]`,
		`[{"nqn":"n","subtype":"NVMe","namespaces":[{"nsid":1,"bdev_name":"b"}],"hosts":[{"nqn":"h"}],"listen_addresses":[{"trtype":"TCP"}]}]`,
		`[{"nqn":"n","subtype":"NVMe","namespaces":[],"hosts":[],"listen_addresses":[]}]`,
		`[{"name":"c","ctrlrs":[{"state":"enabled","trid":{"trtype":"TCP"}}]}]`,
		`[{"name":"c","trid":{"trtype":"PCIe"}}]`,
		`null`, `[null]`, `{}`, `[{"nqn":"n","namespaces":[null]}]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, result string) {
		ctx := context.Background()
		if subs, err := spdkrpc.NvmfGetSubsystems(ctx, &jsonCaller{result: result}, ""); err == nil {
			for _, s := range subs {
				if s.NQN == "" || s.Subtype == "" || s.Hosts == nil || s.ListenAddresses == nil || (s.Subtype == spdkrpc.SubtypeNVMe && s.Namespaces == nil) {
					t.Fatalf("hollow subsystem %+v from %s", s, result)
				}
				for _, n := range s.Namespaces {
					if n.NSID == 0 || n.Bdev() == "" {
						t.Fatalf("hollow namespace %+v from %s", n, result)
					}
				}
			}
		} else if !errors.Is(err, spdkrpc.ErrUnexpectedResult) {
			t.Fatalf("error %v is not ErrUnexpectedResult", err)
		}
		if ctrls, err := spdkrpc.BdevNvmeGetControllers(ctx, &jsonCaller{result: result}, ""); err == nil {
			for _, c := range ctrls {
				if c.Name == "" || c.Ctrlrs == nil {
					t.Fatalf("hollow controller %+v from %s", c, result)
				}
				for _, p := range c.Ctrlrs {
					if p.Trid.Trtype == "" {
						t.Fatalf("path without transport %+v from %s", p, result)
					}
				}
			}
		} else if !errors.Is(err, spdkrpc.ErrUnexpectedResult) {
			t.Fatalf("error %v is not ErrUnexpectedResult", err)
		}
	})
}

// TestNvmfOverTheSocket runs the calls against the fake target.
func TestNvmfOverTheSocket(t *testing.T) {
	srv := fixture.Start(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	id := fixture.Must(srv.AddLvol("disk-1", "vol-r-1234abcd"))(t)
	nqn := "nqn.2023-01.io.longhorn.spdk:vol-r-1234abcd"
	if err := srv.AddSubsystem(nqn, spdktest.SubsystemOptions{AllowAnyHost: true}); err != nil {
		t.Fatal(err)
	}
	nsid := fixture.Must(srv.AddNamespace(nqn, "disk-1/vol-r-1234abcd"))(t)
	subs, err := spdkrpc.NvmfGetSubsystems(ctx, c, nqn)
	if err != nil || len(subs) != 1 || subs[0].Namespaces[0].BdevName != id {
		t.Fatalf("%+v, %v", subs, err)
	}
	if err := spdkrpc.NvmfSubsystemRemoveNs(ctx, c, nqn, nsid); err != nil {
		t.Fatal(err)
	}
	// SPDK answers a namespace that is gone as it answers bad params.
	var rerr *spdkrpc.RPCError
	if err := spdkrpc.NvmfSubsystemRemoveNs(ctx, c, nqn, nsid); !errors.As(err, &rerr) || rerr.Code != spdkrpc.CodeInvalidParams {
		t.Errorf("removing it again: %v", err)
	}
	if err := spdkrpc.NvmfDeleteSubsystem(ctx, c, nqn); err != nil {
		t.Fatal(err)
	}
	if _, err := spdkrpc.NvmfGetSubsystems(ctx, c, nqn); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("a deleted subsystem: %v", err)
	}
}
