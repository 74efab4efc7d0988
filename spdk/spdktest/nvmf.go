package spdktest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// The NVMe-oF state and methods: subsystems with their namespaces,
// listeners and hosts (SPDK's lib/nvmf: nvmf_rpc.c for the handlers,
// subsystem.c for what they do), and NVMe bdev controllers with their
// paths and namespace bdevs (module/bdev/nvme: bdev_nvme_rpc.c,
// bdev_nvme.c). All of it is guarded by Server.mu.

// DiscoveryNQN is the NQN of the discovery subsystem every NVMe-oF target
// has; the fake lists it first, with no namespaces.
const DiscoveryNQN = "nqn.2014-08.org.nvmexpress.discovery"

// defaultTarget is the name of the NVMe-oF target spdk_tgt creates
// (lib/event/subsystems/nvmf), the only one the fake has: a tgt_name
// param must be it.
const defaultTarget = "nvmf_tgt"

// modelNumberDefault is a subsystem's model number when none is given
// (MODEL_NUMBER_DEFAULT in lib/nvmf/subsystem.c); defaultMaxNSID bounds
// the NSIDs of a subsystem created without max_namespaces
// (NVMF_SUBSYSTEM_DEFAULT_NAMESPACES).
const (
	modelNumberDefault = "SPDK bdev Controller"
	defaultMaxNSID     = 32
)

type subsystem struct {
	nqn, sn, mn   string
	discovery     bool
	allowAnyHost  bool
	anaReporting  bool
	maxNamespaces uint32 // as given; 0: none given
	listeners     []spdkrpc.NvmfListenAddress
	hosts         []string
	ns            []*namespace // ascending NSID
}

func newDiscoverySubsystem() *subsystem {
	return &subsystem{nqn: DiscoveryNQN, discovery: true, allowAnyHost: true}
}

func (ss *subsystem) maxNSID() uint32 {
	if ss.maxNamespaces != 0 {
		return ss.maxNamespaces
	}
	return defaultMaxNSID
}

// namespace is one namespace: the bdev it claims, and the UUID and NGUID
// it was given (the bdev's UUID when none was: spdk_nvmf_subsystem_add_ns_ext).
type namespace struct {
	nsid        uint32
	bdev        bdevRef
	uuid, nguid string
}

// bdevRef is a bdev a namespace (or, for NVMe bdevs, a RAID bdev) holds:
// exactly one field is set.
type bdevRef struct {
	lvol *lvol
	raid *raid
	nvme *nvmeCtrlr // the bdev of the controller's namespace 1
}

// nvmeCtrlr is an NVMe bdev controller: bdev_nvme_attach_controller made
// it and its bdev "<name>n1" (the fake's remote targets have one
// namespace each).
type nvmeCtrlr struct {
	name  string
	paths []*nvmePath
	uuid  string // of its namespace bdev
}

type nvmePath struct {
	trid   spdkrpc.NvmeTransportID
	host   spdkrpc.NvmeHostID
	cntlid uint16
	state  string
}

func (c *nvmeCtrlr) bdevName() string { return spdkrpc.NvmeBdevName(c.name, 1) }

// SubsystemOptions are the optional params of a subsystem added with
// AddSubsystem, as nvmf_create_subsystem takes them. The zero value means
// SPDK's defaults: no serial number, the model number "SPDK bdev
// Controller", no host allowed but those added, 32 namespaces at most.
type SubsystemOptions struct {
	SerialNumber  string
	ModelNumber   string
	AllowAnyHost  bool
	MaxNamespaces uint32
}

// AddSubsystem creates an NVMe subsystem, as nvmf_create_subsystem does.
func (s *Server) AddSubsystem(nqn string, opts SubsystemOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findSubsystem(nqn) != nil {
		return fmt.Errorf("%w: subsystem %s", ErrExists, nqn)
	}
	s.subsystems = append(s.subsystems, s.newSubsystem(nqn, opts))
	return nil
}

func (s *Server) newSubsystem(nqn string, opts SubsystemOptions) *subsystem {
	mn := opts.ModelNumber
	if mn == "" {
		mn = modelNumberDefault
	}
	return &subsystem{nqn: nqn, sn: opts.SerialNumber, mn: mn, allowAnyHost: opts.AllowAnyHost, maxNamespaces: opts.MaxNamespaces}
}

// AddNamespace exposes the bdev named bdev (a name, alias or UUID, as
// SPDK resolves it) as the next free namespace of subsystem nqn, as
// nvmf_subsystem_add_ns does, and returns its NSID. Like SPDK, it claims
// the bdev: a bdev another namespace or a RAID bdev holds cannot be
// added.
func (s *Server) AddNamespace(nqn, bdev string) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.findSubsystem(nqn)
	if ss == nil || ss.discovery {
		return 0, fmt.Errorf("%w: subsystem %s", ErrNotFound, nqn)
	}
	nsid, why := s.addNamespace(ss, bdev, 0, "", "")
	if nsid == 0 {
		return 0, fmt.Errorf("spdktest: adding %s to %s: %s", bdev, nqn, why)
	}
	return nsid, nil
}

// AddListener makes subsystem nqn listen on addr, as
// nvmf_subsystem_add_listener does: Trtype and Adrfam are written as SPDK
// writes them ("tcp" lists as "TCP", "ipv4" as "IPv4"; no Adrfam means
// IPv4 for TCP and RDMA).
func (s *Server) AddListener(nqn string, addr spdkrpc.NvmfListenAddress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.findSubsystem(nqn)
	if ss == nil {
		return fmt.Errorf("%w: subsystem %s", ErrNotFound, nqn)
	}
	a, ok := listenAddress(addr)
	if !ok {
		return fmt.Errorf("spdktest: invalid listen address %+v", addr)
	}
	if ss.findListener(a) >= 0 {
		return fmt.Errorf("%w: listener %s:%s on %s", ErrExists, a.Traddr, a.Trsvcid, nqn)
	}
	ss.listeners = append(ss.listeners, a)
	return nil
}

// AddHost allows host NQN hostNQN to connect to subsystem nqn, as
// nvmf_subsystem_add_host does.
func (s *Server) AddHost(nqn, hostNQN string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.findSubsystem(nqn)
	if ss == nil {
		return fmt.Errorf("%w: subsystem %s", ErrNotFound, nqn)
	}
	if slices.Contains(ss.hosts, hostNQN) {
		return fmt.Errorf("%w: host %s on %s", ErrExists, hostNQN, nqn)
	}
	ss.hosts = append(ss.hosts, hostNQN)
	return nil
}

// AttachController attaches an NVMe bdev controller named name to the
// target at trid, as bdev_nvme_attach_controller does, and returns the
// name of the bdev of its namespace: "<name>n1". The fake's remote
// targets always answer, with one namespace.
func (s *Server) AttachController(name string, trid spdkrpc.NvmeTransportID) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findCtrlr(name) != nil {
		return "", fmt.Errorf("%w: NVMe controller %s", ErrExists, name)
	}
	t, ok := transportID(trid)
	if !ok {
		return "", fmt.Errorf("spdktest: invalid transport ID %+v", trid)
	}
	c := s.attach(name, t, spdkrpc.NvmeHostID{})
	return c.bdevName(), nil
}

// SetControllerState sets the state of every path of NVMe controller name
// ("failed", "resetting", "reconnect_is_delayed"...), as a lost remote
// would.
func (s *Server) SetControllerState(name, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findCtrlr(name)
	if c == nil {
		return fmt.Errorf("%w: NVMe controller %s", ErrNotFound, name)
	}
	for _, p := range c.paths {
		p.state = state
	}
	return nil
}

// Subsystems returns every subsystem as nvmf_get_subsystems lists it, the
// discovery subsystem first.
func (s *Server) Subsystems() []spdkrpc.NvmfSubsystem {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]spdkrpc.NvmfSubsystem, 0, len(s.subsystems))
	for _, ss := range s.subsystems {
		out = append(out, s.subsystemReply(ss).NvmfSubsystem)
	}
	return out
}

// ControllerNames returns the name of every NVMe bdev controller, in
// attach order.
func (s *Server) ControllerNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.ctrlrs))
	for _, c := range s.ctrlrs {
		out = append(out, c.name)
	}
	return out
}

// dispatchNvmf runs the NVMe-oF methods; ok is false for any other.
// s.mu is held.
func (s *Server) dispatchNvmf(method string, params json.RawMessage) (result any, err *rpcError, ok bool) {
	switch method {
	case "nvmf_get_subsystems": // nvmf_rpc.c rpc_nvmf_get_subsystems
		result, err = s.rpcGetSubsystems(params)
	case "nvmf_create_subsystem": // nvmf_rpc.c rpc_nvmf_create_subsystem
		result, err = s.rpcCreateSubsystem(params)
	case "nvmf_delete_subsystem": // nvmf_rpc.c rpc_nvmf_delete_subsystem
		result, err = s.rpcDeleteSubsystem(params)
	case "nvmf_subsystem_add_ns": // nvmf_rpc.c rpc_nvmf_subsystem_add_ns
		result, err = s.rpcAddNs(params)
	case "nvmf_subsystem_remove_ns": // nvmf_rpc.c rpc_nvmf_subsystem_remove_ns
		result, err = s.rpcRemoveNs(params)
	case "nvmf_subsystem_add_listener": // nvmf_rpc.c rpc_nvmf_subsystem_add_listener
		result, err = s.rpcListener(params, true)
	case "nvmf_subsystem_remove_listener": // nvmf_rpc.c rpc_nvmf_subsystem_remove_listener
		result, err = s.rpcListener(params, false)
	case "nvmf_subsystem_get_listeners": // nvmf_rpc.c rpc_nvmf_subsystem_get_listeners
		result, err = s.rpcGetListeners(params)
	case "bdev_nvme_attach_controller": // bdev_nvme_rpc.c rpc_bdev_nvme_attach_controller
		result, err = s.rpcAttachController(params)
	case "bdev_nvme_get_controllers": // bdev_nvme_rpc.c rpc_bdev_nvme_get_controllers
		result, err = s.rpcGetControllers(params)
	case "bdev_nvme_detach_controller": // bdev_nvme_rpc.c rpc_bdev_nvme_detach_controller
		result, err = s.rpcDetachController(params)
	default:
		return nil, nil, false
	}
	return result, err, true
}

// The errors of the nvmf handlers: nearly every failure, a decoder's or
// an unknown NQN's, is -32602 "Invalid parameters".
func errInvalidParams() *rpcError { return &rpcError{spdkrpc.CodeInvalidParams, "Invalid parameters"} }
func errNoTarget() *rpcError {
	return &rpcError{spdkrpc.CodeInternalError, "Unable to find a target."}
}

// Params of the NVMe-oF methods, with SPDK's member names (the decoder
// tables in nvmf_rpc.c and bdev_nvme_rpc.c).
type (
	getSubsystemsParams struct {
		NQN     *string `json:"nqn"`
		TgtName *string `json:"tgt_name"`
	}
	createSubsystemParams struct {
		NQN           *string `json:"nqn"`
		SerialNumber  *string `json:"serial_number"`
		ModelNumber   *string `json:"model_number"`
		TgtName       *string `json:"tgt_name"`
		MaxNamespaces *uint32 `json:"max_namespaces"`
		AllowAnyHost  *bool   `json:"allow_any_host"`
		AnaReporting  *bool   `json:"ana_reporting"`
		MinCntlid     *uint16 `json:"min_cntlid"`
		MaxCntlid     *uint16 `json:"max_cntlid"`
	}
	nqnParams struct {
		NQN     *string `json:"nqn"`
		TgtName *string `json:"tgt_name"`
	}
	addNsParams struct {
		NQN       *string         `json:"nqn"`
		Namespace json.RawMessage `json:"namespace"`
		TgtName   *string         `json:"tgt_name"`
	}
	nsParams struct {
		NSID     *uint32 `json:"nsid"`
		BdevName *string `json:"bdev_name"`
		PtplFile *string `json:"ptpl_file"`
		NGUID    *string `json:"nguid"`
		EUI64    *string `json:"eui64"`
		UUID     *string `json:"uuid"`
		Anagrpid *uint32 `json:"anagrpid"`
	}
	removeNsParams struct {
		NQN     *string `json:"nqn"`
		NSID    *uint32 `json:"nsid"`
		TgtName *string `json:"tgt_name"`
	}
	listenerParams struct {
		NQN           *string         `json:"nqn"`
		ListenAddress json.RawMessage `json:"listen_address"`
		TgtName       *string         `json:"tgt_name"`
	}
	listenAddressParams struct {
		Trtype  *string `json:"trtype"`
		Adrfam  *string `json:"adrfam"`
		Traddr  *string `json:"traddr"`
		Trsvcid *string `json:"trsvcid"`
	}
	attachParams struct {
		Name                 *string `json:"name"`
		Trtype               *string `json:"trtype"`
		Traddr               *string `json:"traddr"`
		Adrfam               *string `json:"adrfam"`
		Trsvcid              *string `json:"trsvcid"`
		Priority             *string `json:"priority"`
		Subnqn               *string `json:"subnqn"`
		Hostnqn              *string `json:"hostnqn"`
		Hostaddr             *string `json:"hostaddr"`
		Hostsvcid            *string `json:"hostsvcid"`
		PrchkReftag          *bool   `json:"prchk_reftag"`
		PrchkGuard           *bool   `json:"prchk_guard"`
		Hdgst                *bool   `json:"hdgst"`
		Ddgst                *bool   `json:"ddgst"`
		FabricsTimeout       *uint64 `json:"fabrics_connect_timeout_us"`
		Multipath            *string `json:"multipath"`
		NumIOQueues          *uint32 `json:"num_io_queues"`
		CtrlrLossTimeoutSec  *int32  `json:"ctrlr_loss_timeout_sec"`
		ReconnectDelaySec    *uint32 `json:"reconnect_delay_sec"`
		FastIOFailTimeoutSec *uint32 `json:"fast_io_fail_timeout_sec"`
	}
	detachParams struct {
		Name      *string `json:"name"`
		Trtype    *string `json:"trtype"`
		Traddr    *string `json:"traddr"`
		Adrfam    *string `json:"adrfam"`
		Trsvcid   *string `json:"trsvcid"`
		Subnqn    *string `json:"subnqn"`
		Hostaddr  *string `json:"hostaddr"`
		Hostsvcid *string `json:"hostsvcid"`
	}
)

// Member names of the decoder tables, for decodeObject.
var (
	createSubsystemMembers = []string{"nqn", "serial_number", "model_number", "tgt_name", "max_namespaces", "allow_any_host",
		"ana_reporting", "min_cntlid", "max_cntlid", "max_discard_size_kib", "max_write_zeroes_size_kib", "dmrsl", "wzsl",
		"passthrough", "enable_nssr"}
	nsMembers       = []string{"nsid", "bdev_name", "ptpl_file", "nguid", "eui64", "uuid", "anagrpid", "no_auto_visible", "hide_metadata"}
	listenerMembers = []string{"trtype", "adrfam", "traddr", "trsvcid"}
	attachMembers   = []string{"name", "trtype", "traddr", "adrfam", "trsvcid", "priority", "subnqn", "hostnqn", "hostaddr",
		"hostsvcid", "prchk_reftag", "prchk_guard", "hdgst", "ddgst", "fabrics_connect_timeout_us", "multipath",
		"num_io_queues", "ctrlr_loss_timeout_sec", "reconnect_delay_sec", "fast_io_fail_timeout_sec"}
	detachMembers = []string{"name", "trtype", "traddr", "adrfam", "trsvcid", "subnqn", "hostaddr", "hostsvcid"}
)

// decodeRelaxed decodes params as spdk_json_decode_object_relaxed does:
// like decodeObject, but members without a decoder are ignored.
func decodeRelaxed(params json.RawMessage, v any, names ...string) bool {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(params, &members); err != nil || members == nil {
		return false
	}
	known := make(map[string]json.RawMessage)
	for name, raw := range members {
		if slices.Contains(names, name) {
			known[name] = raw
		}
	}
	b, err := json.Marshal(known)
	return err == nil && decodeObject(b, v, names...)
}

// knownTarget reports whether a tgt_name param names the fake's target.
func knownTarget(name *string) bool { return name == nil || *name == defaultTarget }

func (s *Server) rpcGetSubsystems(params json.RawMessage) (any, *rpcError) {
	var p getSubsystemsParams
	if hasParams(params) && !decodeObject(params, &p, "nqn", "tgt_name") {
		return nil, errInvalidParams()
	}
	if !knownTarget(p.TgtName) {
		return nil, errNoTarget()
	}
	out := []subsystemReply{}
	for _, ss := range s.subsystems {
		if p.NQN == nil || ss.nqn == *p.NQN {
			out = append(out, s.subsystemReply(ss))
		}
	}
	if p.NQN != nil && len(out) == 0 {
		// "subsystem '%s' does not exist": -ENODEV with strerror's text.
		return nil, errNoDevice()
	}
	return out, nil
}

func (s *Server) rpcCreateSubsystem(params json.RawMessage) (any, *rpcError) {
	var p createSubsystemParams
	if !hasParams(params) || !decodeObject(params, &p, createSubsystemMembers...) || p.NQN == nil {
		return nil, errInvalidParams()
	}
	// decode_subsystem_serial_number and _model_number (nvmf_subsystem_copy_sn,
	// _mn) refuse what does not fit the NVMe fields: a decoder failure.
	if (p.SerialNumber != nil && !printableFits(*p.SerialNumber, 20)) || (p.ModelNumber != nil && !printableFits(*p.ModelNumber, 40)) {
		return nil, errInvalidParams()
	}
	if !knownTarget(p.TgtName) {
		return nil, &rpcError{spdkrpc.CodeInternalError, "Unable to find target " + *p.TgtName}
	}
	if s.findSubsystem(*p.NQN) != nil || !validNQN(*p.NQN) {
		return nil, &rpcError{spdkrpc.CodeInternalError, "Unable to create subsystem " + *p.NQN}
	}
	opts := SubsystemOptions{SerialNumber: deref(p.SerialNumber), ModelNumber: deref(p.ModelNumber), AllowAnyHost: p.AllowAnyHost != nil && *p.AllowAnyHost}
	if p.MaxNamespaces != nil {
		opts.MaxNamespaces = *p.MaxNamespaces
	}
	ss := s.newSubsystem(*p.NQN, opts)
	ss.anaReporting = p.AnaReporting != nil && *p.AnaReporting
	s.subsystems = append(s.subsystems, ss)
	return true, nil
}

func (s *Server) rpcDeleteSubsystem(params json.RawMessage) (any, *rpcError) {
	var p nqnParams
	if !hasParams(params) || !decodeObject(params, &p, "nqn", "tgt_name") || p.NQN == nil {
		return nil, errInvalidParams()
	}
	if !knownTarget(p.TgtName) {
		return nil, errNoTarget()
	}
	ss := s.findSubsystem(*p.NQN)
	if ss == nil {
		// spdk_nvmf_tgt_find_subsystem found none: "goto invalid".
		return nil, errInvalidParams()
	}
	// Its listeners go, and its namespaces release their bdevs.
	s.subsystems = slices.DeleteFunc(s.subsystems, func(x *subsystem) bool { return x == ss })
	return true, nil
}

func (s *Server) rpcAddNs(params json.RawMessage) (any, *rpcError) {
	var p addNsParams
	var ns nsParams
	if !hasParams(params) || !decodeRelaxed(params, &p, "nqn", "namespace", "tgt_name") || p.NQN == nil || p.Namespace == nil ||
		!decodeObject(p.Namespace, &ns, nsMembers...) || ns.BdevName == nil {
		return nil, errInvalidParams()
	}
	var nguid string
	if ns.NGUID != nil {
		b, err := hex.DecodeString(*ns.NGUID)
		if err != nil || len(b) != 16 {
			return nil, errInvalidParams() // decode_ns_nguid
		}
		nguid = strings.ToUpper(*ns.NGUID)
	}
	var id string
	if ns.UUID != nil {
		u, err := uuid.Parse(*ns.UUID)
		if err != nil {
			return nil, errInvalidParams() // spdk_json_decode_uuid
		}
		id = u.String()
	}
	if !knownTarget(p.TgtName) {
		return nil, errNoTarget()
	}
	ss := s.findSubsystem(*p.NQN)
	if ss == nil {
		return nil, errInvalidParams()
	}
	nsid, _ := s.addNamespace(ss, *ns.BdevName, deref(ns.NSID), id, nguid)
	if nsid == 0 {
		// spdk_nvmf_subsystem_add_ns_ext returned 0: "Unable to add namespace".
		return nil, errInvalidParams()
	}
	return nsid, nil
}

// addNamespace is spdk_nvmf_subsystem_add_ns_ext: it returns the new NSID,
// or 0 and why not.
func (s *Server) addNamespace(ss *subsystem, bdevName string, nsid uint32, id, nguid string) (uint32, string) {
	if ss.discovery {
		return 0, "a discovery subsystem has no namespaces"
	}
	if nsid == 0 {
		for n := uint32(1); n <= ss.maxNSID(); n++ {
			if ss.findNS(n) == nil {
				nsid = n
				break
			}
		}
		if nsid == 0 {
			return 0, "no free NSID"
		}
	}
	if nsid > ss.maxNSID() {
		return 0, "NSID greater than maximum not allowed"
	}
	if ss.findNS(nsid) != nil {
		return 0, fmt.Sprintf("Requested NSID %d already in use", nsid)
	}
	ref, bdevUUID, ok := s.resolveBdev(bdevName)
	if !ok {
		return 0, "bdev " + bdevName + " cannot be opened"
	}
	if s.claimed(ref) {
		return 0, "bdev " + bdevName + " is claimed" // spdk_bdev_module_claim_bdev failed
	}
	if id == "" {
		id = bdevUUID
	}
	if nguid == "" {
		nguid = nguidOf(bdevUUID)
	}
	ss.ns = append(ss.ns, &namespace{nsid: nsid, bdev: ref, uuid: id, nguid: nguid})
	slices.SortFunc(ss.ns, func(a, b *namespace) int { return int(a.nsid) - int(b.nsid) })
	return nsid, ""
}

func (s *Server) rpcRemoveNs(params json.RawMessage) (any, *rpcError) {
	var p removeNsParams
	if !hasParams(params) || !decodeObject(params, &p, "nqn", "nsid", "tgt_name") || p.NQN == nil || p.NSID == nil {
		return nil, errInvalidParams()
	}
	if !knownTarget(p.TgtName) {
		return nil, errNoTarget()
	}
	ss := s.findSubsystem(*p.NQN)
	if ss == nil {
		return nil, errInvalidParams()
	}
	// spdk_nvmf_subsystem_remove_ns fails for an NSID of 0, past the
	// maximum, or without a namespace: "Unable to remove namespace ID".
	n := ss.findNS(*p.NSID)
	if n == nil {
		return nil, errInvalidParams()
	}
	ss.ns = slices.DeleteFunc(ss.ns, func(x *namespace) bool { return x == n })
	return true, nil
}

func (s *Server) rpcListener(params json.RawMessage, add bool) (any, *rpcError) {
	var p listenerParams
	var a listenAddressParams
	names := []string{"nqn", "listen_address", "tgt_name"}
	var decoded bool
	if add {
		// add_listener decodes relaxed, and takes secure_channel,
		// ana_state and sock_impl besides.
		decoded = hasParams(params) && decodeRelaxed(params, &p, names...)
	} else {
		decoded = hasParams(params) && decodeObject(params, &p, names...)
	}
	if !decoded || p.NQN == nil || p.ListenAddress == nil || !decodeObject(p.ListenAddress, &a, listenerMembers...) ||
		a.Trtype == nil || a.Traddr == nil {
		return nil, errInvalidParams()
	}
	if !knownTarget(p.TgtName) {
		return nil, errNoTarget()
	}
	ss := s.findSubsystem(*p.NQN)
	if ss == nil {
		return nil, errInvalidParams()
	}
	addr, ok := listenAddress(spdkrpc.NvmfListenAddress{Trtype: *a.Trtype, Adrfam: deref(a.Adrfam), Traddr: *a.Traddr, Trsvcid: deref(a.Trsvcid)})
	if !ok {
		return nil, errInvalidParams() // rpc_listen_address_to_trid
	}
	i := ss.findListener(addr)
	switch {
	case add && i >= 0:
		return nil, errInvalidParams() // "Listener already exists"
	case add:
		ss.listeners = append(ss.listeners, addr)
	case i < 0:
		return nil, errInvalidParams() // "Unable to remove listener"
	default:
		ss.listeners = slices.Delete(ss.listeners, i, i+1)
	}
	return true, nil
}

// rpcGetListeners is _rpc_nvmf_subsystem_query with
// rpc_nvmf_get_listeners_paused: a decoder failure or an unknown NQN is
// "Invalid parameters", an unknown target "Unable to find a target"
// (without the period the other handlers write).
func (s *Server) rpcGetListeners(params json.RawMessage) (any, *rpcError) {
	var p nqnParams
	if !hasParams(params) || !decodeObject(params, &p, "nqn", "tgt_name") || p.NQN == nil {
		return nil, errInvalidParams()
	}
	if !knownTarget(p.TgtName) {
		return nil, &rpcError{spdkrpc.CodeInternalError, "Unable to find a target"}
	}
	ss := s.findSubsystem(*p.NQN)
	if ss == nil {
		return nil, errInvalidParams()
	}
	out := []listenerReply{}
	for _, a := range ss.listeners {
		out = append(out, listenerReply{Address: a, AnaState: "optimized"})
	}
	return out, nil
}

func (s *Server) rpcAttachController(params json.RawMessage) (any, *rpcError) {
	var p attachParams
	if !hasParams(params) || !decodeObject(params, &p, attachMembers...) || p.Name == nil || p.Trtype == nil || p.Traddr == nil {
		return nil, errDecodeFailed(spdkrpc.CodeInternalError)
	}
	trtype, ok := parseTrtype(*p.Trtype)
	if !ok {
		return nil, &rpcError{codeEINVAL, "Failed to parse trtype: " + *p.Trtype}
	}
	trid := spdkrpc.NvmeTransportID{Trtype: trtype, Traddr: *p.Traddr, Trsvcid: deref(p.Trsvcid), Subnqn: deref(p.Subnqn)}
	if p.Adrfam != nil {
		if trid.Adrfam, ok = parseAdrfam(*p.Adrfam); !ok {
			return nil, &rpcError{codeEINVAL, "Failed to parse adrfam: " + *p.Adrfam}
		}
	}
	host := spdkrpc.NvmeHostID{NQN: deref(p.Hostnqn), Addr: deref(p.Hostaddr), Svcid: deref(p.Hostsvcid)}
	c := s.findCtrlr(*p.Name)
	if c == nil {
		c = s.attach(*p.Name, trid, host)
		return []string{c.bdevName()}, nil
	}
	// A second path to an existing controller (failover when multipath
	// is not given).
	name, first := *p.Name, c.paths[0]
	switch mp := strings.ToLower(deref(p.Multipath)); mp {
	case "disable":
		return nil, &rpcError{codeEALREADY, "A controller named " + name + " already exists and multipath is disabled\n"}
	case "", "failover", "multipath":
	default:
		return nil, &rpcError{codeEINVAL, "Invalid multipath parameter: " + deref(p.Multipath) + "\n"}
	}
	for _, path := range c.paths {
		if path.trid.Traddr == trid.Traddr && path.trid.Trsvcid == trid.Trsvcid && path.host.Addr == host.Addr && path.host.Svcid == host.Svcid {
			return nil, &rpcError{codeEALREADY, "A controller named " + name + " already exists with the specified network path\n"}
		}
	}
	if trid.Subnqn != first.trid.Subnqn {
		return nil, &rpcError{codeEINVAL, "A controller named " + name + " already exists, but uses a different subnqn (" + first.trid.Subnqn + ")\n"}
	}
	if host.NQN != "" && host.NQN != first.host.NQN {
		return nil, &rpcError{codeEINVAL, "A controller named " + name + " already exists, but uses a different hostnqn (" + first.host.NQN + ")\n"}
	}
	host.NQN = first.host.NQN
	s.seqCntlid++
	c.paths = append(c.paths, &nvmePath{trid: trid, host: host, cntlid: s.seqCntlid, state: spdkrpc.NvmeCtrlrEnabled})
	// A path added to an existing controller creates no bdev.
	return []string{}, nil
}

// attach creates a controller with one path; s.mu is held.
func (s *Server) attach(name string, trid spdkrpc.NvmeTransportID, host spdkrpc.NvmeHostID) *nvmeCtrlr {
	if host.NQN == "" {
		// spdk_nvme_ctrlr_get_default_ctrlr_opts: a host NQN made of a UUID.
		host.NQN = "nqn.2014-08.org.nvmexpress:uuid:" + derivedUUID("hostnqn", name)
	}
	s.seqCntlid++
	c := &nvmeCtrlr{name: name, uuid: derivedUUID("member", spdkrpc.NvmeBdevName(name, 1)),
		paths: []*nvmePath{{trid: trid, host: host, cntlid: s.seqCntlid, state: spdkrpc.NvmeCtrlrEnabled}}}
	s.ctrlrs = append(s.ctrlrs, c)
	return c
}

func (s *Server) rpcGetControllers(params json.RawMessage) (any, *rpcError) {
	var p nameParams
	if hasParams(params) && !decodeObject(params, &p, "name") {
		return nil, errDecodeFailed(spdkrpc.CodeInternalError)
	}
	out := []spdkrpc.BdevNvmeController{}
	for _, c := range s.ctrlrs {
		if p.Name == nil || c.name == *p.Name {
			out = append(out, controllerReplyOf(c))
		}
	}
	if p.Name != nil && len(out) == 0 {
		// EINVAL, positive, as rpc_bdev_nvme_get_controllers sends it.
		return nil, &rpcError{-codeEINVAL, "Controller " + *p.Name + " does not exist"}
	}
	return out, nil
}

func (s *Server) rpcDetachController(params json.RawMessage) (any, *rpcError) {
	var p detachParams
	if !hasParams(params) || !decodeObject(params, &p, detachMembers...) || p.Name == nil {
		return nil, errDecodeFailed(spdkrpc.CodeInternalError)
	}
	var want spdkrpc.NvmeTransportID
	var ok bool
	if p.Trtype != nil {
		if want.Trtype, ok = parseTrtype(*p.Trtype); !ok {
			return nil, &rpcError{codeEINVAL, "Failed to parse trtype: " + *p.Trtype}
		}
	}
	if p.Adrfam != nil {
		if want.Adrfam, ok = parseAdrfam(*p.Adrfam); !ok {
			return nil, &rpcError{codeEINVAL, "Failed to parse adrfam: " + *p.Adrfam}
		}
	}
	want.Traddr, want.Trsvcid, want.Subnqn = deref(p.Traddr), deref(p.Trsvcid), deref(p.Subnqn)
	c := s.findCtrlr(*p.Name)
	if c == nil {
		return nil, errNoDevice() // bdev_nvme_delete: -ENODEV
	}
	// bdev_nvme_delete removes every path whose transport ID has the
	// fields the params set; none matching is -ENXIO.
	matched := false
	c.paths = slices.DeleteFunc(c.paths, func(path *nvmePath) bool {
		m := pathMatches(path, want, deref(p.Hostaddr), deref(p.Hostsvcid))
		matched = matched || m
		return m
	})
	if !matched {
		return nil, &rpcError{codeENXIO, "No such device or address"}
	}
	if len(c.paths) == 0 {
		s.ctrlrs = slices.DeleteFunc(s.ctrlrs, func(x *nvmeCtrlr) bool { return x == c })
		s.hotRemove(bdevRef{nvme: c})
		s.removeRaidMember(func(b string) bool { return b == c.bdevName() })
	}
	return true, nil
}

func pathMatches(p *nvmePath, want spdkrpc.NvmeTransportID, hostaddr, hostsvcid string) bool {
	eq := strings.EqualFold
	return (want.Trtype == "" || eq(want.Trtype, p.trid.Trtype)) &&
		(want.Traddr == "" || eq(want.Traddr, p.trid.Traddr)) &&
		(want.Adrfam == "" || want.Adrfam == p.trid.Adrfam) &&
		(want.Trsvcid == "" || eq(want.Trsvcid, p.trid.Trsvcid)) &&
		(want.Subnqn == "" || want.Subnqn == p.trid.Subnqn) &&
		(hostaddr == "" || eq(hostaddr, p.host.Addr)) &&
		(hostsvcid == "" || eq(hostsvcid, p.host.Svcid))
}

// hotRemove is what SPDK does to the users of a bdev that goes away
// (spdk_bdev_unregister sends SPDK_BDEV_EVENT_REMOVE to every open
// descriptor): a namespace exposing it is removed from its subsystem
// (lib/nvmf/subsystem.c nvmf_ns_event -> nvmf_ns_hot_remove). The delete
// itself does not fail. s.mu is held.
func (s *Server) hotRemove(ref bdevRef) {
	for _, ss := range s.subsystems {
		ss.ns = slices.DeleteFunc(ss.ns, func(n *namespace) bool { return n.bdev == ref })
	}
}

// removeRaidMember empties the slot of every RAID bdev whose member is
// (isGone) a bdev that went away, as SPDK's RAID module does on the bdev's
// remove event (bdev_raid.c raid_bdev_event_base_bdev ->
// raid_bdev_remove_base_bdev): the slot stays, without a name, and a
// RAID bdev left with no member goes offline. It is called with the
// member still resolvable; s.mu is held.
func (s *Server) removeRaidMember(isGone func(base string) bool) {
	for _, r := range s.raids {
		left := 0
		for i, b := range r.base {
			if b != "" && isGone(b) {
				r.base[i] = ""
			}
			if r.base[i] != "" {
				left++
			}
		}
		if left == 0 && len(r.base) > 0 {
			r.state = "offline"
		}
	}
}

// exposed reports whether a namespace holds ref.
func (s *Server) exposed(ref bdevRef) bool {
	for _, ss := range s.subsystems {
		for _, n := range ss.ns {
			if n.bdev == ref {
				return true
			}
		}
	}
	return false
}

// claimed reports whether a module holds ref: a namespace, or a RAID
// bdev built on it.
func (s *Server) claimed(ref bdevRef) bool {
	if s.exposed(ref) {
		return true
	}
	switch {
	case ref.lvol != nil:
		return s.raidMember(ref.lvol)
	case ref.nvme != nil:
		return s.raidMemberName(ref.nvme.bdevName())
	}
	return false
}

func (s *Server) raidMemberName(name string) bool {
	for _, r := range s.raids {
		if slices.Contains(r.base, name) {
			return true
		}
	}
	return false
}

// resolveBdev finds the bdev a name, alias or UUID names, as
// spdk_bdev_open_ext does, with its UUID.
func (s *Server) resolveBdev(name string) (bdevRef, string, bool) {
	if l := s.lookupLvol(name); l != nil {
		return bdevRef{lvol: l}, l.uuid, true
	}
	for _, r := range s.raids {
		if r.name == name || (r.uuid != "" && r.uuid == name) {
			return bdevRef{raid: r}, r.uuid, true
		}
	}
	for _, c := range s.ctrlrs {
		if c.bdevName() == name || c.uuid == name {
			return bdevRef{nvme: c}, c.uuid, true
		}
	}
	return bdevRef{}, "", false
}

// bdevName is the name SPDK writes for ref: spdk_bdev_get_name, an lvol's
// UUID (its alias only when it has none).
func (ref bdevRef) bdevName() string {
	switch {
	case ref.lvol != nil:
		if ref.lvol.uuid != "" {
			return ref.lvol.uuid
		}
		return ref.lvol.alias()
	case ref.raid != nil:
		return ref.raid.name
	case ref.nvme != nil:
		return ref.nvme.bdevName()
	}
	return ""
}

// nguidOf is the NGUID SPDK gives a namespace from its bdev's UUID: the
// UUID's 16 bytes, written as upper-case hex (json_write_hex_str).
func nguidOf(id string) string {
	u, err := uuid.Parse(id)
	if err != nil {
		return ""
	}
	return strings.ToUpper(hex.EncodeToString(u[:]))
}

func (s *Server) findSubsystem(nqn string) *subsystem {
	for _, ss := range s.subsystems {
		if ss.nqn == nqn {
			return ss
		}
	}
	return nil
}

func (ss *subsystem) findNS(nsid uint32) *namespace {
	for _, n := range ss.ns {
		if n.nsid == nsid {
			return n
		}
	}
	return nil
}

// findListener returns the index of the listener at a (nvmf_subsystem_find_listener
// compares the transport IDs), or -1.
func (ss *subsystem) findListener(a spdkrpc.NvmfListenAddress) int {
	return slices.IndexFunc(ss.listeners, func(l spdkrpc.NvmfListenAddress) bool {
		return l.Trtype == a.Trtype && l.Adrfam == a.Adrfam && strings.EqualFold(l.Traddr, a.Traddr) && strings.EqualFold(l.Trsvcid, a.Trsvcid)
	})
}

func (s *Server) findCtrlr(name string) *nvmeCtrlr {
	for _, c := range s.ctrlrs {
		if c.name == name {
			return c
		}
	}
	return nil
}

// listenAddress is a as SPDK stores and writes it (rpc_listen_address_to_trid,
// nvmf_transport_listen_dump_trid): the transport's name, the address
// family's, IPv4 when TCP or RDMA give none.
func listenAddress(a spdkrpc.NvmfListenAddress) (spdkrpc.NvmfListenAddress, bool) {
	trtype, ok := parseTrtype(a.Trtype)
	if !ok || a.Traddr == "" {
		return a, false
	}
	out := spdkrpc.NvmfListenAddress{Trtype: trtype, Traddr: a.Traddr, Trsvcid: a.Trsvcid}
	switch {
	case a.Adrfam != "":
		if out.Adrfam, ok = parseAdrfam(a.Adrfam); !ok {
			return a, false
		}
	case trtype == "TCP" || trtype == "RDMA":
		out.Adrfam = "IPv4"
	}
	return out, true
}

// transportID is trid as bdev_nvme_attach_controller stores it.
func transportID(trid spdkrpc.NvmeTransportID) (spdkrpc.NvmeTransportID, bool) {
	trtype, ok := parseTrtype(trid.Trtype)
	if !ok || trid.Traddr == "" {
		return trid, false
	}
	trid.Trtype = trtype
	if trid.Adrfam != "" {
		if trid.Adrfam, ok = parseAdrfam(trid.Adrfam); !ok {
			return trid, false
		}
	}
	return trid, true
}

// parseTrtype is spdk_nvme_transport_id_parse_trtype (case-insensitive)
// with the name SPDK writes back (spdk_nvme_transport_id_trtype_str).
func parseTrtype(s string) (string, bool) {
	for _, t := range []string{"PCIe", "RDMA", "FC", "TCP", "VFIOUSER"} {
		if strings.EqualFold(s, t) {
			return t, true
		}
	}
	return "", false
}

// parseAdrfam is spdk_nvme_transport_id_parse_adrfam with the name SPDK
// writes back (spdk_nvme_transport_id_adrfam_str).
func parseAdrfam(s string) (string, bool) {
	for _, a := range []string{"IPv4", "IPv6", "IB", "FC", "INTRA_HOST"} {
		if strings.EqualFold(s, a) {
			return a, true
		}
	}
	return "", false
}

// validNQN checks what spdk_nvmf_subsystem_create's nvmf_valid_nqn checks
// first: the "nqn." prefix and at most 223 bytes.
func validNQN(nqn string) bool {
	return strings.HasPrefix(nqn, "nqn.") && len(nqn) <= 223
}

// printableFits reports whether s fits an NVMe ASCII field of n bytes.
func printableFits(s string, n int) bool {
	if len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// More codes SPDK answers.
const (
	codeENXIO    = -6   // bdev_nvme_delete: no path matched
	codeEALREADY = -114 // bdev_nvme_attach_controller: the path exists
)
