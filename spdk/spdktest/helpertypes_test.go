package spdktest_test

import "encoding/json"

// Mirrors of the reply types of Longhorn's SPDK client,
// github.com/longhorn/go-spdk-helper (pkg/spdk/types: bdev.go, lvol.go,
// raid.go, aio.go, nvmf.go, nvme.go, at its newest commits, 2026-11), field for field with
// the same json tags, so the golden tests decode the fake's replies as
// that client does. Only the layout is carried over; the names are
// go-spdk-helper's so a reader can hold one beside the other.

// ghBdevInfo is BdevInfo: what BdevGetBdevs, BdevAioGet, BdevLvolGet and
// BdevRaidGet decode from bdev_get_bdevs.
type ghBdevInfo struct {
	ghBdevInfoBasic
	DriverSpecific *ghBdevDriverSpecific `json:"driver_specific"`
}

type ghBdevInfoBasic struct {
	Name         string   `json:"name"`
	Aliases      []string `json:"aliases"`
	ProductName  string   `json:"product_name"`
	BlockSize    uint32   `json:"block_size"`
	NumBlocks    uint64   `json:"num_blocks"`
	UUID         string   `json:"uuid,omitempty"`
	CreationTime string   `json:"creation_time,omitempty"`

	MdSize               uint32 `json:"md_size,omitempty"`
	MdInterleave         bool   `json:"md_interleave,omitempty"`
	DifType              uint32 `json:"dif_type,omitempty"`
	DifIsHeadOfMd        bool   `json:"dif_is_head_of_md,omitempty"`
	EnabledDifCheckTypes *struct {
		Reftag bool `json:"reftag"`
		Apptag bool `json:"apptag"`
		Guard  bool `json:"guard"`
	} `json:"enabled_dif_check_types,omitempty"`

	AssignedRateLimits ghAssignedRateLimits `json:"assigned_rate_limits"`

	Claimed   bool   `json:"claimed"`
	ClaimType string `json:"claim_type,omitempty"`

	Zoned            bool   `json:"zoned"`
	ZoneSize         uint64 `json:"zone_size,omitempty"`
	MaxOpenZones     uint64 `json:"max_open_zones,omitempty"`
	OptimalOpenZones uint64 `json:"optimal_open_zones,omitempty"`

	SupportedIoTypes ghSupportedIoTypes `json:"supported_io_types"`

	MemoryDomains []struct {
		DmaDeviceID   string `json:"dma_device_id"`
		DmaDeviceType int32  `json:"dma_device_type"`
	} `json:"memory_domains,omitempty"`
}

type ghAssignedRateLimits struct {
	RwIosPerSec    uint64 `json:"rw_ios_per_sec"`
	RwMbytesPerSec uint64 `json:"rw_mbytes_per_sec"`
	RMbytesPerSec  uint64 `json:"r_mbytes_per_sec"`
	WMbytesPerSec  uint64 `json:"w_mbytes_per_sec"`
}

type ghSupportedIoTypes struct {
	Read            bool `json:"read"`
	Write           bool `json:"write"`
	Unmap           bool `json:"unmap"`
	WriteZeroes     bool `json:"write_zeroes"`
	Flush           bool `json:"flush"`
	Reset           bool `json:"reset"`
	Compare         bool `json:"compare"`
	CompareAndWrite bool `json:"compare_and_write"`
	Abort           bool `json:"abort"`
	NvmeAdmin       bool `json:"nvme_admin"`
	NvmeIo          bool `json:"nvme_io"`
}

// ghBdevDriverSpecific is BdevDriverSpecific; Nvme is
// BdevDriverSpecificNvme.
type ghBdevDriverSpecific struct {
	Aio      *ghBdevDriverSpecificAio  `json:"aio,omitempty"`
	Lvol     *ghBdevDriverSpecificLvol `json:"lvol,omitempty"`
	Raid     *ghBdevRaidInfo           `json:"raid,omitempty"`
	Nvme     []ghNvmeNamespaceInfo     `json:"nvme,omitempty"`
	MpPolicy string                    `json:"mp_policy,omitempty"`
}

// ghNvmeNamespaceInfo is NvmeNamespaceInfo (nvme.go).
type ghNvmeNamespaceInfo struct {
	CtrlrData struct {
		AnaReporting     bool   `json:"ana_reporting"`
		Cntlid           uint16 `json:"cntlid"`
		FirmwareRevision string `json:"firmware_revision"`
		ModelNumber      string `json:"model_number"`
		MultiCtrlr       bool   `json:"multi_ctrlr"`
		Oacs             struct {
			Firmware uint32 `json:"firmware"`
			Format   uint32 `json:"format"`
			NsManage uint32 `json:"ns_manage"`
			Security uint32 `json:"security"`
		} `json:"oacs"`
		SerialNumber string `json:"serial_number"`
		Subnqn       string `json:"subnqn"`
		VendorID     string `json:"vendor_id"`
	} `json:"ctrlr_data"`
	NsData struct {
		ID       uint32 `json:"id"`
		CanShare bool   `json:"can_share"`
		AnaState string `json:"ana_state,omitempty"`
	} `json:"ns_data"`
	Trid ghNvmeTransportID `json:"trid"`
	VS   struct {
		NvmeVersion string `json:"nvme_version"`
	} `json:"vs"`
}

// ghNvmeTransportID is NvmeTransportID (nvme.go).
type ghNvmeTransportID struct {
	Trtype  string `json:"trtype,omitempty"`
	Adrfam  string `json:"adrfam,omitempty"`
	Traddr  string `json:"traddr,omitempty"`
	Trsvcid string `json:"trsvcid,omitempty"`
	Subnqn  string `json:"subnqn,omitempty"`
}

// ghBdevNvmeControllerInfo is BdevNvmeControllerInfo (nvme.go), what
// BdevNvmeGetControllers decodes.
type ghBdevNvmeControllerInfo struct {
	Name   string `json:"name"`
	Ctrlrs []struct {
		State  string            `json:"state"`
		Cntlid uint16            `json:"cntlid"`
		Trid   ghNvmeTransportID `json:"trid"`
		Host   struct {
			Nqn   string `json:"nqn"`
			Addr  string `json:"addr"`
			Svcid string `json:"svcid"`
		} `json:"host"`
	} `json:"ctrlrs"`
}

// ghNvmfSubsystem is NvmfSubsystem (nvmf.go), what NvmfGetSubsystems
// decodes. Its Anagrpid is NvmfANAGroupID, a string type whose
// UnmarshalJSON takes a string or a number: kept raw here.
type ghNvmfSubsystem struct {
	Nqn             string `json:"nqn"`
	Subtype         string `json:"subtype"`
	ListenAddresses []struct {
		Trtype  string `json:"trtype"`
		Adrfam  string `json:"adrfam"`
		Traddr  string `json:"traddr"`
		Trsvcid string `json:"trsvcid"`
	} `json:"listen_addresses"`
	AllowAnyHost bool `json:"allow_any_host"`
	Hosts        []struct {
		Nqn string `json:"nqn"`
	} `json:"hosts"`
	SerialNumber  string `json:"serial_number,omitempty"`
	ModelNumber   string `json:"model_number,omitempty"`
	MaxNamespaces uint32 `json:"max_namespaces,omitempty"`
	MinCntlid     uint16 `json:"min_cntlid,omitempty"`
	MaxCntlid     uint16 `json:"max_cntlid,omitempty"`
	Namespaces    []struct {
		Nsid     uint32          `json:"nsid,omitempty"`
		BdevName string          `json:"bdev_name"`
		Nguid    string          `json:"nguid,omitempty"`
		Eui64    string          `json:"eui64,omitempty"`
		UUID     string          `json:"uuid,omitempty"`
		Anagrpid json.RawMessage `json:"anagrpid,omitempty"`
		PtplFile string          `json:"ptpl_file,omitempty"`
	} `json:"namespaces"`
}

type ghBdevDriverSpecificAio struct {
	FileName          string `json:"filename"`
	ReadOnly          bool   `json:"readonly"`
	BlockSizeOverride bool   `json:"block_size_override"`
}

type ghBdevDriverSpecificLvol struct {
	LvolStoreUUID        string            `json:"lvol_store_uuid"`
	BaseBdev             string            `json:"base_bdev"`
	BaseSnapshot         string            `json:"base_snapshot,omitempty"`
	ThinProvision        bool              `json:"thin_provision"`
	NumAllocatedClusters uint64            `json:"num_allocated_clusters"`
	Snapshot             bool              `json:"snapshot"`
	Clone                bool              `json:"clone"`
	Clones               []string          `json:"clones,omitempty"`
	Xattrs               map[string]string `json:"xattrs,omitempty"`
}

// ghBdevRaidInfo is BdevRaidInfo: bdev_raid_get_bdevs' elements, and
// driver_specific.raid (whose Name the client fills in itself).
type ghBdevRaidInfo struct {
	Name                    string       `json:"name,omitempty"`
	StripSizeKb             uint32       `json:"strip_size_kb"`
	State                   string       `json:"state"`
	RaidLevel               string       `json:"raid_level"`
	NumBaseBdevs            uint8        `json:"num_base_bdevs"`
	NumBaseBdevsDiscovered  uint8        `json:"num_base_bdevs_discovered"`
	NumBaseBdevsOperational uint8        `json:"num_base_bdevs_operational,omitempty"`
	BaseBdevsList           []ghBaseBdev `json:"base_bdevs_list"`
	Superblock              bool         `json:"superblock"`
}

type ghBaseBdev struct {
	Name         string `json:"name"`
	UUID         string `json:"uuid"`
	IsConfigured bool   `json:"is_configured"`
	DataOffset   uint64 `json:"data_offset"`
	DataSize     uint64 `json:"data_size"`
}

// ghLvstoreInfo is LvstoreInfo (bdev_lvol_get_lvstores).
type ghLvstoreInfo struct {
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	BaseBdev          string `json:"base_bdev"`
	TotalDataClusters uint64 `json:"total_data_clusters"`
	FreeClusters      uint64 `json:"free_clusters"`
	BlockSize         uint64 `json:"block_size"`
	ClusterSize       uint64 `json:"cluster_size"`
}

// ghLvolInfo is LvolInfo (bdev_lvol_get_lvols).
type ghLvolInfo struct {
	Alias             string `json:"alias"`
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	IsThinProvisioned bool   `json:"is_thin_provisioned"`
	IsSnapshot        bool   `json:"is_snapshot"`
	IsClone           bool   `json:"is_clone"`
	IsEsnapClone      bool   `json:"is_esnap_clone"`
	IsDegraded        bool   `json:"is_degraded"`
	Lvs               struct {
		Name string `json:"name"`
		UUID string `json:"uuid"`
	} `json:"lvs"`
}

// ghBdevLvolSnapshotChecksum is BdevLvolSnapshotChecksum
// (bdev_lvol_get_snapshot_checksum).
type ghBdevLvolSnapshotChecksum struct {
	Checksum uint64 `json:"checksum"`
}

// ghNvmfSubsystemListener is NvmfSubsystemListener (nvmf.go), what
// NvmfSubsystemGetListeners decodes.
type ghNvmfSubsystemListener struct {
	Address struct {
		Trtype  string `json:"trtype"`
		Adrfam  string `json:"adrfam"`
		Traddr  string `json:"traddr"`
		Trsvcid string `json:"trsvcid"`
	} `json:"address"`
	AnaState string `json:"ana_state"`
}
