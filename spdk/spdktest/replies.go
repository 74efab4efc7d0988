package spdktest

import (
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// The reply objects. Each embeds package spdk's wire type, so the fields
// package spdk reads have one spelling for the client and the fake, and
// adds what SPDK writes besides, which other clients (go-spdk-helper)
// read: the golden tests in testdata hold both to SPDK's documented
// shapes.

// bdevReply is one element of bdev_get_bdevs, as rpc_dump_bdev_info
// (lib/bdev/bdev_rpc.c) writes it. Its DriverSpecific replaces the
// embedded spdkrpc.Bdev's (encoding/json prefers the shallower field).
type bdevReply struct {
	spdkrpc.Bdev
	// CreationTime is written by Longhorn's SPDK for lvol bdevs
	// (vbdev_lvol.c _create_lvol_disk copies the lvol's), RFC 3339 in
	// UTC to the second.
	CreationTime       string         `json:"creation_time,omitempty"`
	AssignedRateLimits rateLimits     `json:"assigned_rate_limits"`
	ClaimType          string         `json:"claim_type,omitempty"` // only when claimed
	Zoned              bool           `json:"zoned"`
	SupportedIOTypes   ioTypes        `json:"supported_io_types"`
	DriverSpecific     driverSpecific `json:"driver_specific"`
}

// rateLimits is assigned_rate_limits: the QoS limits, 0 for none.
type rateLimits struct {
	RwIosPerSec    uint64 `json:"rw_ios_per_sec"`
	RwMbytesPerSec uint64 `json:"rw_mbytes_per_sec"`
	RMbytesPerSec  uint64 `json:"r_mbytes_per_sec"`
	WMbytesPerSec  uint64 `json:"w_mbytes_per_sec"`
}

// ioTypes is supported_io_types: the I/O types of SPDK's documented
// example and those go-spdk-helper decodes. SPDK writes one member per
// I/O type it knows; clients ignore the others.
type ioTypes struct {
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

// driverSpecific is the driver_specific object; one member is set.
type driverSpecific struct {
	Aio  *aioInfo              `json:"aio,omitempty"`
	Lvol *lvolInfo             `json:"lvol,omitempty"`
	Raid *spdkrpc.BdevRaidInfo `json:"raid,omitempty"`
	// Nvme and MpPolicy are an NVMe bdev's (nvmfreplies.go).
	Nvme     []nvmeNsInfo `json:"nvme,omitempty"`
	MpPolicy string       `json:"mp_policy,omitempty"`
}

// aioInfo is driver_specific.aio, as bdev_aio_dump_info_json
// (module/bdev/aio/bdev_aio.c) writes it.
type aioInfo struct {
	Filename          string `json:"filename"`
	BlockSizeOverride bool   `json:"block_size_override"`
	Readonly          bool   `json:"readonly"`
	Fallocate         bool   `json:"fallocate"`
}

// lvolInfo is driver_specific.lvol as Longhorn's SPDK writes it
// (vbdev_lvol_dump_info_json), which adds num_clusters.
type lvolInfo struct {
	spdkrpc.BdevLvolInfo
	NumClusters uint64 `json:"num_clusters"`
}

// lvolReply is one element of bdev_lvol_get_lvols; Longhorn's SPDK adds
// creation_time (rpc_dump_lvol in vbdev_lvol_rpc.c).
type lvolReply struct {
	spdkrpc.Lvol
	CreationTime string `json:"creation_time"`
}

// checksumReply is the result of bdev_lvol_get_snapshot_checksum.
type checksumReply struct {
	Checksum uint64 `json:"checksum"`
}

// Product names SPDK gives the bdevs the fake lists besides lvols and
// RAID bdevs.
const productAIO = "AIO disk"
