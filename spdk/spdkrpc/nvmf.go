package spdkrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// The NVMe-oF calls: what a node's SPDK exposes to other nodes (NVMe-oF
// subsystems, lib/nvmf/nvmf_rpc.c) and what it imports from them (NVMe
// bdev controllers, module/bdev/nvme/bdev_nvme_rpc.c). A Longhorn v2
// engine reaches its remote replicas through NVMe bdev controllers, and
// a replica (or an engine, for its frontend) is served to others through
// a subsystem whose namespace is the replica's lvol (or the engine's RAID
// bdev).

// NvmfSubsystem is one element of nvmf_get_subsystems, as SPDK's
// dump_nvmf_subsystem (lib/nvmf/nvmf_rpc.c) writes it. A discovery
// subsystem (Subtype SubtypeDiscovery) has no serial number, model number
// or namespaces; SPDK leaves those keys out.
type NvmfSubsystem struct {
	NQN             string              `json:"nqn"`
	Subtype         string              `json:"subtype"`
	ListenAddresses []NvmfListenAddress `json:"listen_addresses"`
	AllowAnyHost    bool                `json:"allow_any_host"`
	Hosts           []NvmfHost          `json:"hosts"`
	SerialNumber    string              `json:"serial_number,omitempty"`
	ModelNumber     string              `json:"model_number,omitempty"`
	// MaxNamespaces is written only when the subsystem was created with
	// a limit (0: none).
	MaxNamespaces uint32          `json:"max_namespaces,omitempty"`
	Namespaces    []NvmfNamespace `json:"namespaces,omitempty"`
}

// Subsystem types SPDK writes in NvmfSubsystem.Subtype.
const (
	SubtypeNVMe      = "NVMe"
	SubtypeDiscovery = "Discovery"
)

// NvmfListenAddress is one element of a subsystem's listen_addresses (SPDK's
// nvmf_transport_listen_dump_trid writes Trtype as the transport's name,
// "TCP" or "RDMA", and Adrfam as "IPv4", "IPv6", "IB", "FC" or
// "INTRA_HOST"), and the listen_address of nvmf_subsystem_remove_listener,
// which takes those names in any case.
type NvmfListenAddress struct {
	Trtype  string `json:"trtype"`
	Adrfam  string `json:"adrfam,omitempty"`
	Traddr  string `json:"traddr"`
	Trsvcid string `json:"trsvcid,omitempty"`
}

// NvmfHost is one host allowed to connect to a subsystem.
type NvmfHost struct {
	NQN string `json:"nqn"`
}

// NvmfNamespace is one namespace of a subsystem: the bdev it exposes.
// SPDK writes the bdev's name both as bdev_name and, for older clients,
// as name; Bdev returns whichever is set. NGUID, EUI64 and UUID are
// written only when set (non-zero), as upper-case hex for NGUID and EUI64.
type NvmfNamespace struct {
	NSID     uint32 `json:"nsid"`
	BdevName string `json:"bdev_name"`
	Name     string `json:"name,omitempty"`
	NGUID    string `json:"nguid,omitempty"`
	EUI64    string `json:"eui64,omitempty"`
	UUID     string `json:"uuid,omitempty"`
}

// Bdev returns the name of the bdev the namespace exposes.
func (n NvmfNamespace) Bdev() string {
	if n.BdevName != "" {
		return n.BdevName
	}
	return n.Name
}

// BdevNvmeController is one element of bdev_nvme_get_controllers: an NVMe
// bdev controller (what bdev_nvme_attach_controller made under Name) and
// its paths, one per connection to a target. Its namespaces are bdevs
// named NvmeBdevName(Name, nsid).
//
// SPDK before multipath wrote one trid per controller instead of ctrlrs
// (the example of SPDK's doc/jsonrpc.md still shows that shape);
// BdevNvmeGetControllers turns it into one path with an empty State.
type BdevNvmeController struct {
	Name   string      `json:"name"`
	Ctrlrs []NvmeCtrlr `json:"ctrlrs"`
}

// NvmeCtrlr is one path of an NVMe bdev controller: its connection to one
// target (Trid) and its state. Cntlid (the controller ID the target gave
// the connection) and Host are written by newer SPDK only.
type NvmeCtrlr struct {
	// State is "enabled", "deleting", "failed", "resetting" or
	// "reconnect_is_delayed" (nvme_ctrlr_get_state_str); "" when SPDK did
	// not say.
	State  string          `json:"state,omitempty"`
	Cntlid uint16          `json:"cntlid,omitempty"`
	Trid   NvmeTransportID `json:"trid"`
	Host   *NvmeHostID     `json:"host,omitempty"`
}

// NVMe controller path states (NvmeCtrlr.State).
const (
	NvmeCtrlrEnabled            = "enabled"
	NvmeCtrlrDeleting           = "deleting"
	NvmeCtrlrFailed             = "failed"
	NvmeCtrlrResetting          = "resetting"
	NvmeCtrlrReconnectIsDelayed = "reconnect_is_delayed"
)

// NvmeTransportID says where an NVMe controller connects: SPDK's
// nvme_bdev_dump_trid_json writes Trtype as the transport's name ("TCP",
// "RDMA", "PCIe"), and Adrfam, Trsvcid and Subnqn only when set. As the
// path of BdevNvmeDetachController, each field set narrows the paths
// detached; the zero value means every path.
type NvmeTransportID struct {
	Trtype  string `json:"trtype,omitempty"`
	Adrfam  string `json:"adrfam,omitempty"`
	Traddr  string `json:"traddr,omitempty"`
	Trsvcid string `json:"trsvcid,omitempty"`
	Subnqn  string `json:"subnqn,omitempty"`
}

// NvmeHostID is the host side of an NVMe controller path: the host NQN it
// connected as, and the source address and service ID it connected from
// ("" when not set).
type NvmeHostID struct {
	NQN   string `json:"nqn"`
	Addr  string `json:"addr"`
	Svcid string `json:"svcid"`
}

// NvmeBdevName returns the name SPDK gives the bdev of namespace nsid of
// the NVMe bdev controller named controller: "<controller>n<nsid>"
// (module/bdev/nvme/bdev_nvme.c, nvme_bdev_create). A Longhorn engine's
// bdev for a remote replica is NvmeBdevName(replicaController, 1).
func NvmeBdevName(controller string, nsid uint32) string {
	return controller + "n" + strconv.FormatUint(uint64(nsid), 10)
}

// NvmfGetSubsystems lists the NVMe-oF subsystems of SPDK's default target:
// all of them for nqn "", else the one whose NQN is nqn (a missing one is
// an error matching ErrNotFound: SPDK answers -ENODEV). A null result, an
// element without an NQN or a subtype, a subsystem lacking a list SPDK
// always writes (listen_addresses, hosts, an NVMe subsystem's
// namespaces), or one with a namespace without an NSID or a bdev, a host
// without an NQN or a listener without a transport is a *ResultError: an
// unreadable listing never means "nothing is exposed".
func NvmfGetSubsystems(ctx context.Context, c Caller, nqn string) ([]NvmfSubsystem, error) {
	const method = "nvmf_get_subsystems"
	var params any
	if nqn != "" {
		params = struct {
			NQN string `json:"nqn"`
		}{nqn}
	}
	out, err := list(ctx, c, method, params, func(s *NvmfSubsystem) string { return s.NQN })
	if err != nil {
		return nil, err
	}
	for i := range out {
		if err := checkSubsystem(&out[i]); err != nil {
			return nil, &ResultError{Method: method, Err: fmt.Errorf("subsystem %s: %w", out[i].NQN, err)}
		}
	}
	return out, nil
}

// BdevNvmeGetControllers lists the NVMe bdev controllers: all of them for
// name "", else the one named name. SPDK answers a name it does not know
// with code 22 (a positive EINVAL) and "Controller <name> does not
// exist"; that reply is returned as an error matching ErrNotFound (and
// still an *RPCError). A null result, an element without a name, or a
// controller with no path (neither ctrlrs nor the older trid) or with a
// path without a transport is a *ResultError.
func BdevNvmeGetControllers(ctx context.Context, c Caller, name string) ([]BdevNvmeController, error) {
	const method = "bdev_nvme_get_controllers"
	var params any
	if name != "" {
		params = struct {
			Name string `json:"name"`
		}{name}
	}
	var raw []nvmeControllerWire
	if err := c.Call(ctx, method, params, &raw); err != nil {
		var rerr *RPCError
		if name != "" && errors.As(err, &rerr) && isNoController(rerr, name) {
			return nil, &notFoundError{err: err}
		}
		return nil, err
	}
	if err := checkList(method, raw, func(w *nvmeControllerWire) string { return w.Name }); err != nil {
		return nil, err
	}
	out := make([]BdevNvmeController, len(raw))
	for i, w := range raw {
		ctrl, err := w.controller()
		if err != nil {
			return nil, &ResultError{Method: method, Err: fmt.Errorf("controller %s: %w", w.Name, err)}
		}
		out[i] = ctrl
	}
	return out, nil
}

// NvmfDeleteSubsystem deletes the subsystem whose NQN is nqn, with its
// listeners and namespaces: the hosts connected to it lose it, and the
// bdevs its namespaces exposed are released. SPDK answers an NQN it does
// not know as it answers malformed params, -32602 "Invalid parameters"
// (rpc_nvmf_delete_subsystem), so an *RPCError of that code does not say
// the subsystem is gone: NvmfGetSubsystems(ctx, c, nqn) does (ErrNotFound).
func NvmfDeleteSubsystem(ctx context.Context, c Caller, nqn string) error {
	params := struct {
		NQN string `json:"nqn"`
	}{nqn}
	return boolCall(ctx, c, "nvmf_delete_subsystem", params)
}

// NvmfSubsystemRemoveNs removes namespace nsid from the subsystem whose NQN
// is nqn: the bdev it exposed is released and stays. Like
// NvmfDeleteSubsystem, an unknown NQN and an NSID the subsystem does not
// have are -32602 "Invalid parameters" (rpc_nvmf_subsystem_remove_ns):
// re-list to tell "already gone".
func NvmfSubsystemRemoveNs(ctx context.Context, c Caller, nqn string, nsid uint32) error {
	params := struct {
		NQN  string `json:"nqn"`
		NSID uint32 `json:"nsid"`
	}{nqn, nsid}
	return boolCall(ctx, c, "nvmf_subsystem_remove_ns", params)
}

// NvmfSubsystemRemoveListener stops the subsystem whose NQN is nqn from
// listening on addr. An unknown NQN, or an address the subsystem does not
// listen on, is -32602 "Invalid parameters".
func NvmfSubsystemRemoveListener(ctx context.Context, c Caller, nqn string, addr NvmfListenAddress) error {
	params := struct {
		NQN           string            `json:"nqn"`
		ListenAddress NvmfListenAddress `json:"listen_address"`
	}{nqn, addr}
	return boolCall(ctx, c, "nvmf_subsystem_remove_listener", params)
}

// BdevNvmeDetachController detaches the NVMe bdev controller named name,
// and with it the bdevs of its namespaces. path narrows what is detached
// to the controller's paths whose transport ID has every field path sets
// (the zero NvmeTransportID: every path, so the controller and its bdevs
// go). SPDK compares them at the moment it detaches, so a path given with
// its Traddr, Trsvcid and Subnqn detaches nothing if the controller now
// connects elsewhere.
//
// An unknown name is an error matching ErrNotFound (-ENODEV from
// bdev_nvme_delete; Longhorn's own detach treats it as "already gone"); a
// path that matches none of the controller's is an *RPCError of code -6
// (-ENXIO, "No such device or address"), CodeNoSuchPath, and detaches
// nothing.
func BdevNvmeDetachController(ctx context.Context, c Caller, name string, path NvmeTransportID) error {
	params := struct {
		Name string `json:"name"`
		NvmeTransportID
	}{name, path}
	return boolCall(ctx, c, "bdev_nvme_detach_controller", params)
}

// CodeNoSuchPath is -ENXIO, what bdev_nvme_detach_controller answers for a
// path that matches none of the controller's.
const CodeNoSuchPath = -6

// boolCall calls a method whose result is true on success.
func boolCall(ctx context.Context, c Caller, method string, params any) error {
	var ok bool
	if err := c.Call(ctx, method, params, &ok); err != nil {
		return err
	}
	if !ok {
		return &ResultError{Method: method, Err: errNotTrue}
	}
	return nil
}

// Errors the NVMe-oF listings report inside a *ResultError.
var (
	errNoNSID         = errors.New("namespace without an nsid")
	errNoNamespaceDev = errors.New("namespace without a bdev")
	errNoHostNQN      = errors.New("host without an nqn")
	errNoTransport    = errors.New("address without a transport type")
	errNoPath         = errors.New("controller with no path (neither ctrlrs nor trid)")
	errNoSubtype      = errors.New("subsystem without a subtype")
	errNoList         = errors.New("list missing or null")
)

// checkSubsystem rejects what a null or foreign element inside a
// subsystem decodes to, and a subsystem without what dump_nvmf_subsystem
// always writes (subtype, listen_addresses, hosts, and for an NVMe
// subsystem namespaces): read as "exposes nothing", such a reply would
// hide what is exposed.
func checkSubsystem(s *NvmfSubsystem) error {
	switch {
	case s.Subtype == "":
		return errNoSubtype
	case s.ListenAddresses == nil:
		return fmt.Errorf("listen_addresses: %w", errNoList)
	case s.Hosts == nil:
		return fmt.Errorf("hosts: %w", errNoList)
	case s.Subtype == SubtypeNVMe && s.Namespaces == nil:
		return fmt.Errorf("namespaces of an NVMe subsystem: %w", errNoList)
	}
	for i, a := range s.ListenAddresses {
		if a.Trtype == "" {
			return fmt.Errorf("listen address %d: %w", i, errNoTransport)
		}
	}
	for i, h := range s.Hosts {
		if h.NQN == "" {
			return fmt.Errorf("host %d: %w", i, errNoHostNQN)
		}
	}
	for i, n := range s.Namespaces {
		if n.NSID == 0 {
			return fmt.Errorf("namespace %d: %w", i, errNoNSID)
		}
		if n.Bdev() == "" {
			return fmt.Errorf("namespace %d (nsid %d): %w", i, n.NSID, errNoNamespaceDev)
		}
	}
	return nil
}

// nvmeControllerWire is an element of bdev_nvme_get_controllers in any of
// SPDK's shapes.
type nvmeControllerWire struct {
	Name   string           `json:"name"`
	Ctrlrs []NvmeCtrlr      `json:"ctrlrs"`
	Trid   *NvmeTransportID `json:"trid"` // before multipath
}

func (w nvmeControllerWire) controller() (BdevNvmeController, error) {
	ctrlrs := w.Ctrlrs
	if ctrlrs == nil {
		if w.Trid == nil {
			return BdevNvmeController{}, errNoPath
		}
		ctrlrs = []NvmeCtrlr{{Trid: *w.Trid}}
	}
	for i, p := range ctrlrs {
		if p.Trid.Trtype == "" {
			return BdevNvmeController{}, fmt.Errorf("path %d: %w", i, errNoTransport)
		}
	}
	return BdevNvmeController{Name: w.Name, Ctrlrs: ctrlrs}, nil
}

// isNoController reports whether rerr is SPDK's answer to
// bdev_nvme_get_controllers for a name it does not know
// (rpc_bdev_nvme_get_controllers: EINVAL, positive, with this message).
func isNoController(rerr *RPCError, name string) bool {
	return (rerr.Code == 22 || rerr.Code == -22) && rerr.Message == "Controller "+name+" does not exist"
}

// notFoundError is an error SPDK answered with another code than -ENODEV
// that still means "no such object".
type notFoundError struct{ err error }

func (e *notFoundError) Error() string { return e.err.Error() }

// Unwrap returns SPDK's error.
func (e *notFoundError) Unwrap() error { return e.err }

// Is reports ErrNotFound.
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }
