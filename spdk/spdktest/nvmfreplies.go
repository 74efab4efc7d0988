package spdktest

import (
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// The NVMe-oF reply objects. Like the others, they are package spdkrpc's
// wire types with what SPDK writes besides; testdata/README.md says where
// each shape comes from.

// subsystemReply is one element of nvmf_get_subsystems, as
// dump_nvmf_subsystem (lib/nvmf/nvmf_rpc.c) writes it: the members only an
// NVMe subsystem has are pointers, nil for a discovery subsystem, and
// replace the embedded type's (encoding/json prefers the shallower
// field).
type subsystemReply struct {
	spdkrpc.NvmfSubsystem
	SerialNumber *string           `json:"serial_number,omitempty"`
	ModelNumber  *string           `json:"model_number,omitempty"`
	MinCntlid    *uint16           `json:"min_cntlid,omitempty"`
	MaxCntlid    *uint16           `json:"max_cntlid,omitempty"`
	Namespaces   *[]namespaceReply `json:"namespaces,omitempty"`
}

// namespaceReply is a namespace as dump_nvmf_subsystem writes it; anagrpid
// only when the subsystem reports ANA.
type namespaceReply struct {
	spdkrpc.NvmfNamespace
	Anagrpid *uint32 `json:"anagrpid,omitempty"`
}

// The controller ID range of a subsystem created without one
// (NVMF_MIN_CNTLID, NVMF_MAX_CNTLID).
const (
	minCntlid = 1
	maxCntlid = 0xffef
)

// subsystemReply is what nvmf_get_subsystems writes for ss; s.mu is held.
func (s *Server) subsystemReply(ss *subsystem) subsystemReply {
	r := subsystemReply{NvmfSubsystem: spdkrpc.NvmfSubsystem{
		NQN: ss.nqn, Subtype: spdkrpc.SubtypeNVMe, AllowAnyHost: ss.allowAnyHost,
		ListenAddresses: append([]spdkrpc.NvmfListenAddress{}, ss.listeners...), Hosts: []spdkrpc.NvmfHost{},
	}}
	for _, h := range ss.hosts {
		r.Hosts = append(r.Hosts, spdkrpc.NvmfHost{NQN: h})
	}
	if ss.discovery {
		r.Subtype = spdkrpc.SubtypeDiscovery
		return r
	}
	r.NvmfSubsystem.SerialNumber, r.NvmfSubsystem.ModelNumber, r.MaxNamespaces = ss.sn, ss.mn, ss.maxNamespaces
	sn, mn, minID, maxID := ss.sn, ss.mn, uint16(minCntlid), uint16(maxCntlid)
	r.SerialNumber, r.ModelNumber, r.MinCntlid, r.MaxCntlid = &sn, &mn, &minID, &maxID
	nss := []namespaceReply{}
	for _, n := range ss.ns {
		name := n.bdev.bdevName()
		ns := namespaceReply{NvmfNamespace: spdkrpc.NvmfNamespace{NSID: n.nsid, BdevName: name, Name: name, NGUID: n.nguid, UUID: n.uuid}}
		if ss.anaReporting {
			// spdk_nvmf_subsystem_add_ns_ext: the ANA group defaults to the NSID.
			grp := n.nsid
			ns.Anagrpid = &grp
		}
		nss = append(nss, ns)
		r.NvmfSubsystem.Namespaces = append(r.NvmfSubsystem.Namespaces, ns.NvmfNamespace)
	}
	r.Namespaces = &nss
	return r
}

// controllerReplyOf is what bdev_nvme_get_controllers writes for c: its
// name and, per path, the state, the transport ID (nvme_bdev_dump_trid_json
// leaves out an unset adrfam, trsvcid and subnqn), the controller ID and
// the host side.
func controllerReplyOf(c *nvmeCtrlr) spdkrpc.BdevNvmeController {
	out := spdkrpc.BdevNvmeController{Name: c.name, Ctrlrs: []spdkrpc.NvmeCtrlr{}}
	for _, p := range c.paths {
		host := p.host
		out.Ctrlrs = append(out.Ctrlrs, spdkrpc.NvmeCtrlr{State: p.state, Cntlid: p.cntlid, Trid: p.trid, Host: &host})
	}
	return out
}

// nvmeNsInfo is one element of an NVMe bdev's driver_specific.nvme, as
// module/bdev/nvme/bdev_nvme.c nvme_namespace_info_json writes it for a
// fabrics controller (a PCIe one adds pci_address).
type nvmeNsInfo struct {
	Trid      spdkrpc.NvmeTransportID `json:"trid"`
	CtrlrData nvmeCtrlrData           `json:"ctrlr_data"`
	VS        nvmeVS                  `json:"vs"`
	NsData    nvmeNsData              `json:"ns_data"`
}

type nvmeCtrlrData struct {
	Cntlid           uint16   `json:"cntlid"`
	VendorID         string   `json:"vendor_id"`
	ModelNumber      string   `json:"model_number"`
	SerialNumber     string   `json:"serial_number"`
	FirmwareRevision string   `json:"firmware_revision"`
	Subnqn           string   `json:"subnqn,omitempty"`
	Oacs             nvmeOacs `json:"oacs"`
	MultiCtrlr       bool     `json:"multi_ctrlr"`
	AnaReporting     bool     `json:"ana_reporting"`
}

type nvmeOacs struct {
	Security uint32 `json:"security"`
	Format   uint32 `json:"format"`
	Firmware uint32 `json:"firmware"`
	NsManage uint32 `json:"ns_manage"`
}

type nvmeVS struct {
	NvmeVersion string `json:"nvme_version"`
}

// nvmeNsData is ns_data; ana_state is written when the controller
// reports ANA, as an SPDK target does.
type nvmeNsData struct {
	ID       uint32 `json:"id"`
	AnaState string `json:"ana_state,omitempty"`
	CanShare bool   `json:"can_share"`
}

// What an SPDK NVMe-oF target reports about itself to the controllers
// attached to it: the NVMe-oF vendor ID SPDK uses (SPDK_PCI_VID_NVMF_NVME,
// 0x4e58 "NX"), the default model number, its version, NVMe 1.3.
const (
	nvmfVendorID    = "0x4e58"
	nvmfNvmeVersion = "1.3"
)

// productNVMe is the product name of an NVMe bdev (bdev_nvme.c).
const productNVMe = "NVMe disk"

// nvmeBdev is the bdev of namespace 1 of c. It is claimed when a RAID
// bdev (a Longhorn engine reaching a remote replica) or a namespace holds
// it.
func (s *Server) nvmeBdev(c *nvmeCtrlr) bdevReply {
	p := c.paths[0]
	info := nvmeNsInfo{Trid: p.trid, CtrlrData: nvmeCtrlrData{Cntlid: p.cntlid, VendorID: nvmfVendorID, ModelNumber: modelNumberDefault,
		SerialNumber: "", FirmwareRevision: "", Subnqn: p.trid.Subnqn, MultiCtrlr: true, AnaReporting: true},
		VS: nvmeVS{NvmeVersion: nvmfNvmeVersion}, NsData: nvmeNsData{ID: 1, AnaState: "optimized", CanShare: true}}
	b := bdevReply{
		Bdev:             spdkrpc.Bdev{Name: c.bdevName(), Aliases: []string{}, ProductName: productNVMe, BlockSize: 4096, NumBlocks: raidBlocks, UUID: c.uuid},
		SupportedIOTypes: ioTypes{Read: true, Write: true, Unmap: true, WriteZeroes: true, Flush: true, Reset: true, Compare: true, CompareAndWrite: true, Abort: true, NvmeAdmin: true, NvmeIo: true},
		DriverSpecific:   driverSpecific{Nvme: []nvmeNsInfo{info}, MpPolicy: "active_passive"},
	}
	if s.claimed(bdevRef{nvme: c}) {
		b.Claimed, b.ClaimType = true, "exclusive_write"
	}
	return b
}

// listenerReply is one element of nvmf_subsystem_get_listeners, as
// dump_nvmf_subsystem_listener (nvmf_rpc.c) writes it: the address and
// its ANA state, "optimized" unless set otherwise.
type listenerReply struct {
	Address  spdkrpc.NvmfListenAddress `json:"address"`
	AnaState string                    `json:"ana_state"`
}
