package spdk

import (
	"context"
	"errors"
)

// The fields below are the ones SPDK writes for each method (see SPDK's
// doc/jsonrpc.md and module/bdev/lvol/vbdev_lvol_rpc.c,
// module/bdev/raid/bdev_raid.c). Fields this package does not need are
// left out; json ignores them.

// Bdev is one element of bdev_get_bdevs.
type Bdev struct {
	Name           string             `json:"name"`
	Aliases        []string           `json:"aliases"`
	ProductName    string             `json:"product_name"`
	BlockSize      uint32             `json:"block_size"`
	NumBlocks      uint64             `json:"num_blocks"`
	UUID           string             `json:"uuid"`
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
}

// BdevLvolInfo is driver_specific.lvol of an lvol bdev. BaseSnapshot and
// Clones hold lvol names (not aliases) in the same lvstore.
type BdevLvolInfo struct {
	LvolStoreUUID        string   `json:"lvol_store_uuid"`
	BaseBdev             string   `json:"base_bdev"`
	ThinProvision        bool     `json:"thin_provision"`
	NumAllocatedClusters uint64   `json:"num_allocated_clusters"`
	Snapshot             bool     `json:"snapshot"`
	Clone                bool     `json:"clone"`
	BaseSnapshot         string   `json:"base_snapshot,omitempty"`
	Clones               []string `json:"clones,omitempty"`
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
type Lvol struct {
	Alias                string       `json:"alias"`
	UUID                 string       `json:"uuid"`
	Name                 string       `json:"name"`
	IsThinProvisioned    bool         `json:"is_thin_provisioned"`
	IsSnapshot           bool         `json:"is_snapshot"`
	IsClone              bool         `json:"is_clone"`
	IsEsnapClone         bool         `json:"is_esnap_clone"`
	IsDegraded           bool         `json:"is_degraded"`
	NumAllocatedClusters uint64       `json:"num_allocated_clusters"`
	Lvs                  LvolStoreRef `json:"lvs"`
}

// LvolStoreRef names an lvol's lvstore.
type LvolStoreRef struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
}

// RaidBdev is one element of bdev_raid_get_bdevs.
type RaidBdev struct {
	Name                    string         `json:"name"`
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
}

// RAID categories for BdevRaidGetBdevs.
const (
	RaidCategoryAll         = "all"
	RaidCategoryOnline      = "online"
	RaidCategoryConfiguring = "configuring"
	RaidCategoryOffline     = "offline"
)

// BdevGetBdevs lists bdevs: all of them for name "", else the one bdev
// whose name, alias or UUID is name (a missing one is an error matching
// ErrNoSuchDevice).
func BdevGetBdevs(ctx context.Context, c Caller, name string) ([]Bdev, error) {
	var params any
	if name != "" {
		params = struct {
			Name string `json:"name"`
		}{name}
	}
	var out []Bdev
	return out, c.Call(ctx, "bdev_get_bdevs", params, &out)
}

// BdevLvolGetLvstores lists every lvstore.
func BdevLvolGetLvstores(ctx context.Context, c Caller) ([]Lvstore, error) {
	var out []Lvstore
	return out, c.Call(ctx, "bdev_lvol_get_lvstores", nil, &out)
}

// BdevLvolGetLvols lists the lvols of the lvstore named lvsName, or of
// every lvstore for "".
func BdevLvolGetLvols(ctx context.Context, c Caller, lvsName string) ([]Lvol, error) {
	var params any
	if lvsName != "" {
		params = struct {
			LvsName string `json:"lvs_name"`
		}{lvsName}
	}
	var out []Lvol
	return out, c.Call(ctx, "bdev_lvol_get_lvols", params, &out)
}

// BdevRaidGetBdevs lists RAID bdevs of a category ("" means all).
func BdevRaidGetBdevs(ctx context.Context, c Caller, category string) ([]RaidBdev, error) {
	if category == "" {
		category = RaidCategoryAll
	}
	params := struct {
		Category string `json:"category"`
	}{category}
	var out []RaidBdev
	return out, c.Call(ctx, "bdev_raid_get_bdevs", params, &out)
}

// BdevLvolDelete deletes the lvol whose UUID or alias is name. Deleting by
// UUID is what makes a UUID-checked purge race-free. An lvol that does not
// exist is an error matching ErrNoSuchDevice.
func BdevLvolDelete(ctx context.Context, c Caller, name string) error {
	return deleteCall(ctx, c, "bdev_lvol_delete", name)
}

// BdevRaidDelete deletes the RAID bdev named name. A missing one is an
// error matching ErrNoSuchDevice.
func BdevRaidDelete(ctx context.Context, c Caller, name string) error {
	return deleteCall(ctx, c, "bdev_raid_delete", name)
}

// errNotTrue is a delete reply of anything but true.
var errNotTrue = errors.New("result is not true")

func deleteCall(ctx context.Context, c Caller, method, name string) error {
	params := struct {
		Name string `json:"name"`
	}{name}
	var ok bool
	if err := c.Call(ctx, method, params, &ok); err != nil {
		return err
	}
	if !ok {
		return &ResultError{Method: method, Err: errNotTrue}
	}
	return nil
}
