package spdkrpc

// The wire types: the JSON objects SPDK's methods return, with the fields
// SPDK writes (see SPDK's doc/jsonrpc.md and
// module/bdev/lvol/vbdev_lvol_rpc.c, vbdev_lvol.c, module/bdev/raid/bdev_raid.c
// and bdev_rpc.c). Fields this package does not read are left out; json
// ignores them. Package spdktest answers with the same types, so its
// replies and this package's decoding share one spelling of every field;
// TestWireTypesSpellSPDKsFields checks that spelling against SPDK's
// writers.

// Bdev is one element of bdev_get_bdevs.
type Bdev struct {
	Name           string             `json:"name"`
	Aliases        []string           `json:"aliases"`
	ProductName    string             `json:"product_name"`
	BlockSize      uint32             `json:"block_size"`
	NumBlocks      uint64             `json:"num_blocks"`
	UUID           string             `json:"uuid,omitempty"` // older SPDK leaves an unset UUID out
	Claimed        bool               `json:"claimed"`
	DriverSpecific BdevDriverSpecific `json:"driver_specific"`
}

// Product names SPDK gives lvol and RAID bdevs.
const (
	ProductLogicalVolume = "Logical Volume"
	ProductRaidVolume    = "Raid Volume"
)

// BdevDriverSpecific holds the driver_specific object of a bdev; only the
// drivers this package reads are decoded.
type BdevDriverSpecific struct {
	Lvol *BdevLvolInfo `json:"lvol,omitempty"`
	Raid *BdevRaidInfo `json:"raid,omitempty"`
}

// BdevLvolInfo is driver_specific.lvol of an lvol bdev, as SPDK's
// vbdev_lvol_dump_info_json writes it. BaseSnapshot (for a clone) and
// Clones (for a snapshot) hold lvol names, not aliases, in the same
// lvstore; SPDK leaves a name out when it cannot resolve it, so a clone
// may have no BaseSnapshot and a snapshot may list fewer clones than it
// has.
//
// NumAllocatedClusters is how many clusters the lvol's own blob has
// allocated (spdk_blob_get_num_allocated_clusters: a clone's count leaves
// out its parent snapshot's), nil when SPDK did not write it: a count
// that is not there is never read as zero.
type BdevLvolInfo struct {
	LvolStoreUUID        string   `json:"lvol_store_uuid"`
	BaseBdev             string   `json:"base_bdev"`
	ThinProvision        bool     `json:"thin_provision"`
	NumAllocatedClusters *uint64  `json:"num_allocated_clusters,omitempty"`
	Snapshot             bool     `json:"snapshot"`
	Clone                bool     `json:"clone"`
	BaseSnapshot         string   `json:"base_snapshot,omitempty"`
	Clones               []string `json:"clones,omitempty"`
	EsnapClone           bool     `json:"esnap_clone"`
}

// Lvstore is one element of bdev_lvol_get_lvstores.
type Lvstore struct {
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	BaseBdev          string `json:"base_bdev"`
	TotalDataClusters uint64 `json:"total_data_clusters"`
	FreeClusters      uint64 `json:"free_clusters"`
	BlockSize         uint64 `json:"block_size"`
	ClusterSize       uint64 `json:"cluster_size"`
}

// Lvol is one element of bdev_lvol_get_lvols. Alias is "<lvstore>/<name>".
// NumAllocatedClusters is nil when SPDK did not write it: upstream SPDK's
// rpc_dump_lvol (vbdev_lvol_rpc.c) does, Longhorn's fork does not; the
// count a decision relies on is bdev_get_bdevs' (BdevLvolInfo).
type Lvol struct {
	Alias                string       `json:"alias"`
	UUID                 string       `json:"uuid"`
	Name                 string       `json:"name"`
	IsThinProvisioned    bool         `json:"is_thin_provisioned"`
	IsSnapshot           bool         `json:"is_snapshot"`
	IsClone              bool         `json:"is_clone"`
	IsEsnapClone         bool         `json:"is_esnap_clone"`
	IsDegraded           bool         `json:"is_degraded"`
	NumAllocatedClusters *uint64      `json:"num_allocated_clusters,omitempty"`
	Lvs                  LvolStoreRef `json:"lvs"`
}

// LvolStoreRef names an lvol's lvstore.
type LvolStoreRef struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
}

// RaidBdev is one element of bdev_raid_get_bdevs: the RAID bdev's name
// and what SPDK's raid_bdev_write_info_json writes, which is also its
// bdev's driver_specific.raid in bdev_get_bdevs.
type RaidBdev struct {
	Name string `json:"name"`
	BdevRaidInfo
}

// BdevRaidInfo is driver_specific.raid of a RAID bdev, as SPDK's
// raid_bdev_write_info_json writes it.
type BdevRaidInfo struct {
	UUID                    string         `json:"uuid"`
	StripSizeKB             uint32         `json:"strip_size_kb"`
	State                   string         `json:"state"`
	RaidLevel               string         `json:"raid_level"`
	Superblock              bool           `json:"superblock"`
	NumBaseBdevs            uint32         `json:"num_base_bdevs"`
	NumBaseBdevsDiscovered  uint32         `json:"num_base_bdevs_discovered"`
	NumBaseBdevsOperational uint32         `json:"num_base_bdevs_operational"`
	BaseBdevsList           []RaidBaseBdev `json:"base_bdevs_list"`
}

// RaidBaseBdev is one base bdev of a RAID bdev; Name is empty for a slot
// whose bdev is missing.
type RaidBaseBdev struct {
	Name         string `json:"name"`
	UUID         string `json:"uuid"`
	IsConfigured bool   `json:"is_configured"`
	DataOffset   uint64 `json:"data_offset"`
	DataSize     uint64 `json:"data_size"`
}

// RAID categories for BdevRaidGetBdevs.
const (
	RaidCategoryAll         = "all"
	RaidCategoryOnline      = "online"
	RaidCategoryConfiguring = "configuring"
	RaidCategoryOffline     = "offline"
)
