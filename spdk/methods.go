package spdk

import (
	"context"
	"errors"
	"fmt"
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
	Raid *BdevRaidInfo `json:"raid,omitempty"`
}

// BdevRaidInfo is the part of driver_specific.raid of a RAID bdev this
// package reads: which bdevs the RAID is built on.
type BdevRaidInfo struct {
	BaseBdevsList []RaidBaseBdev `json:"base_bdevs_list"`
}

// BdevLvolInfo is driver_specific.lvol of an lvol bdev, as SPDK's
// vbdev_lvol_dump_info_json writes it. BaseSnapshot (for a clone) and
// Clones (for a snapshot) hold lvol names, not aliases, in the same
// lvstore; SPDK leaves a name out when it cannot resolve it, so a clone
// may have no BaseSnapshot and a snapshot may list fewer clones than it
// has.
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
// ErrNoSuchDevice). A null result, or an element without a name, is a
// *ResultError: an unreadable listing never means "nothing exists".
func BdevGetBdevs(ctx context.Context, c Caller, name string) ([]Bdev, error) {
	const method = "bdev_get_bdevs"
	var params any
	if name != "" {
		params = struct {
			Name string `json:"name"`
		}{name}
	}
	var out []Bdev
	if err := c.Call(ctx, method, params, &out); err != nil {
		return nil, err
	}
	if err := checkList(method, out, func(b *Bdev) string { return b.Name }); err != nil {
		return nil, err
	}
	return out, nil
}

// BdevLvolGetLvstores lists every lvstore. Like BdevGetBdevs, it fails with
// a *ResultError on a null result or a nameless element.
func BdevLvolGetLvstores(ctx context.Context, c Caller) ([]Lvstore, error) {
	const method = "bdev_lvol_get_lvstores"
	var out []Lvstore
	if err := c.Call(ctx, method, nil, &out); err != nil {
		return nil, err
	}
	if err := checkList(method, out, func(l *Lvstore) string { return l.Name }); err != nil {
		return nil, err
	}
	return out, nil
}

// BdevLvolGetLvols lists the lvols of the lvstore named lvsName, or of
// every lvstore for "". Like BdevGetBdevs, it fails with a *ResultError on
// a null result or a nameless element.
func BdevLvolGetLvols(ctx context.Context, c Caller, lvsName string) ([]Lvol, error) {
	const method = "bdev_lvol_get_lvols"
	var params any
	if lvsName != "" {
		params = struct {
			LvsName string `json:"lvs_name"`
		}{lvsName}
	}
	var out []Lvol
	if err := c.Call(ctx, method, params, &out); err != nil {
		return nil, err
	}
	if err := checkList(method, out, func(l *Lvol) string { return l.Name }); err != nil {
		return nil, err
	}
	return out, nil
}

// BdevRaidGetBdevs lists RAID bdevs of a category ("" means all). Like
// BdevGetBdevs, it fails with a *ResultError on a null result or a nameless
// element.
func BdevRaidGetBdevs(ctx context.Context, c Caller, category string) ([]RaidBdev, error) {
	const method = "bdev_raid_get_bdevs"
	if category == "" {
		category = RaidCategoryAll
	}
	params := struct {
		Category string `json:"category"`
	}{category}
	var out []RaidBdev
	if err := c.Call(ctx, method, params, &out); err != nil {
		return nil, err
	}
	if err := checkList(method, out, func(r *RaidBdev) string { return r.Name }); err != nil {
		return nil, err
	}
	return out, nil
}

// Errors checkList reports inside a *ResultError.
var (
	errNullResult = errors.New("result is null, not a list")
	errNameless   = errors.New("list element has no name (null, or not an object of the method's kind)")
)

// checkList rejects what json.Unmarshal lets through but SPDK never sends:
// a null result (a nil slice: "[]" decodes to an empty non-nil one) and
// null or foreign elements, which decode to values without a name. An
// object where a list belongs, or a list of numbers, already failed to
// decode.
func checkList[T any](method string, list []T, name func(*T) string) error {
	if list == nil {
		return &ResultError{Method: method, Err: errNullResult}
	}
	for i := range list {
		if name(&list[i]) == "" {
			return &ResultError{Method: method, Err: fmt.Errorf("element %d: %w", i, errNameless)}
		}
	}
	return nil
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
