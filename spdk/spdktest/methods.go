package spdktest

import (
	"encoding/json"
	"slices"

	"github.com/caretaker-storage/caretaker/spdk"
)

// dispatch runs one method against the state.
func (s *Server) dispatch(method string, params json.RawMessage) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "bdev_get_bdevs":
		var p struct {
			Name    string `json:"name"`
			Timeout int    `json:"timeout"`
		}
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.bdevs(p.Name)
	case "bdev_lvol_get_lvstores":
		var p struct {
			UUID    string `json:"uuid"`
			LvsName string `json:"lvs_name"`
		}
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.getLvstores(p.UUID, p.LvsName)
	case "bdev_lvol_get_lvols":
		var p struct {
			LvsUUID string `json:"lvs_uuid"`
			LvsName string `json:"lvs_name"`
		}
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.getLvols(p.LvsUUID, p.LvsName)
	case "bdev_raid_get_bdevs":
		var p struct {
			Category string `json:"category"`
		}
		if !hasParams(params) {
			return nil, errInvalidParams()
		}
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.getRaids(p.Category)
	case "bdev_lvol_delete":
		var p struct {
			Name string `json:"name"`
			Sync bool   `json:"sync"`
		}
		if !hasParams(params) {
			return nil, errInvalidParams()
		}
		if err := decodeParams(params, &p); err != nil || p.Name == "" {
			return nil, errInvalidParams()
		}
		return s.deleteLvol(p.Name)
	case "bdev_raid_delete":
		var p struct {
			Name string `json:"name"`
		}
		if !hasParams(params) {
			return nil, errInvalidParams()
		}
		if err := decodeParams(params, &p); err != nil || p.Name == "" {
			return nil, errInvalidParams()
		}
		return s.deleteRaid(p.Name)
	}
	return nil, &rpcError{spdk.CodeMethodNotFound, "Method not found"}
}

// The replies are package spdk's wire types, which follow SPDK's writers
// (vbdev_lvol_rpc.c, vbdev_lvol.c dump_info_json, bdev_raid.c,
// bdev_rpc.c).

func (s *Server) getLvstores(id, name string) (any, *rpcError) {
	if id != "" && name != "" {
		return nil, &rpcError{spdk.CodeInvalidParams, "Invalid argument"}
	}
	out := []spdk.Lvstore{}
	for _, l := range s.lvstores {
		if (id != "" && l.uuid != id) || (name != "" && l.name != name) {
			continue
		}
		out = append(out, spdk.Lvstore{UUID: l.uuid, Name: l.name, BaseBdev: l.baseBdev, TotalDataClusters: 1 << 16, FreeClusters: 1 << 15, BlockSize: 4096, ClusterSize: 1 << 20})
	}
	if (id != "" || name != "") && len(out) == 0 {
		return nil, errNoDevice()
	}
	return out, nil
}

func (s *Server) getLvols(lvsUUID, lvsName string) (any, *rpcError) {
	if lvsUUID != "" && lvsName != "" {
		return nil, &rpcError{spdk.CodeInvalidParams, "Invalid argument"}
	}
	if (lvsUUID != "" || lvsName != "") && !slices.ContainsFunc(s.lvstores, func(l *lvstore) bool { return l.uuid == lvsUUID || l.name == lvsName }) {
		return nil, errNoDevice()
	}
	out := make([]spdk.Lvol, 0, len(s.lvols))
	for _, l := range s.lvols {
		if (lvsUUID != "" && l.lvs.uuid != lvsUUID) || (lvsName != "" && l.lvs.name != lvsName) {
			continue
		}
		out = append(out, spdk.Lvol{Alias: l.alias(), UUID: l.uuid, Name: l.name, IsThinProvisioned: true, IsSnapshot: l.snapshot, IsClone: l.parent != nil,
			Lvs: spdk.LvolStoreRef{Name: l.lvs.name, UUID: l.lvs.uuid}})
	}
	return out, nil
}

func (s *Server) getRaids(category string) (any, *rpcError) {
	switch category {
	case "all", "online", "configuring", "offline":
	default:
		return nil, errInvalidParams()
	}
	out := []spdk.RaidBdev{}
	for _, r := range s.raids {
		if category != "all" && category != r.state {
			continue
		}
		out = append(out, spdk.RaidBdev{Name: r.name, BdevRaidInfo: raidInfo(r)})
	}
	return out, nil
}

func raidInfo(r *raid) spdk.BdevRaidInfo {
	n := uint32(len(r.base))
	info := spdk.BdevRaidInfo{UUID: r.uuid, State: r.state, RaidLevel: r.level, NumBaseBdevs: n, NumBaseBdevsDiscovered: n, NumBaseBdevsOperational: n, BaseBdevsList: []spdk.RaidBaseBdev{}}
	for _, b := range r.base {
		info.BaseBdevsList = append(info.BaseBdevsList, spdk.RaidBaseBdev{Name: b, IsConfigured: true})
	}
	return info
}

func (s *Server) bdevs(name string) (any, *rpcError) {
	var out []spdk.Bdev
	for _, st := range s.lvstores {
		out = append(out, spdk.Bdev{Name: st.baseBdev, Aliases: []string{}, ProductName: "Malloc disk", BlockSize: 4096, NumBlocks: 1 << 24, Claimed: true})
	}
	for _, l := range s.lvols {
		info := spdk.BdevLvolInfo{LvolStoreUUID: l.lvs.uuid, BaseBdev: l.lvs.baseBdev, ThinProvision: true, Snapshot: l.snapshot, Clone: l.parent != nil}
		if l.parent != nil {
			info.BaseSnapshot = l.parent.name
		}
		if l.snapshot && len(l.clones) > 0 {
			info.Clones = cloneNames(l)
		}
		// An lvol bdev is named after its UUID; SPDK falls back to the
		// alias only when there is none.
		bname := l.uuid
		if bname == "" {
			bname = l.alias()
		}
		out = append(out, spdk.Bdev{Name: bname, Aliases: []string{l.alias()}, ProductName: spdk.ProductLogicalVolume, BlockSize: 4096, NumBlocks: l.blocks, UUID: l.uuid, Claimed: l.snapshot,
			DriverSpecific: spdk.BdevDriverSpecific{Lvol: &info}})
	}
	for _, r := range s.raids {
		info := raidInfo(r)
		out = append(out, spdk.Bdev{Name: r.name, Aliases: []string{}, ProductName: spdk.ProductRaidVolume, BlockSize: 4096, NumBlocks: 1 << 18, UUID: r.uuid,
			DriverSpecific: spdk.BdevDriverSpecific{Raid: &info}})
	}
	if name == "" {
		if out == nil {
			out = []spdk.Bdev{}
		}
		return out, nil
	}
	for _, b := range out {
		if b.Name == name || (b.UUID != "" && b.UUID == name) || slices.Contains(b.Aliases, name) {
			return []spdk.Bdev{b}, nil
		}
	}
	return nil, errNoDevice()
}

// deleteLvol follows vbdev_lvol_destroy: an lvol with more than one clone
// cannot be deleted (-EPERM, reported as an internal error with
// strerror's message); a snapshot with one clone is deleted and its clone
// is re-parented to the snapshot's parent.
func (s *Server) deleteLvol(name string) (any, *rpcError) {
	l := s.lookupLvol(name)
	if l == nil {
		return nil, errNoDevice()
	}
	if len(l.clones) > 1 {
		return nil, &rpcError{spdk.CodeInternalError, "Operation not permitted"}
	}
	p := l.parent
	if p != nil {
		p.clones = slices.DeleteFunc(p.clones, func(c *lvol) bool { return c == l })
	}
	for _, c := range l.clones {
		c.parent = p
		if p != nil {
			p.clones = append(p.clones, c)
		}
	}
	s.lvols = slices.DeleteFunc(s.lvols, func(x *lvol) bool { return x == l })
	return true, nil
}

func (s *Server) deleteRaid(name string) (any, *rpcError) {
	r := s.findRaid(name)
	if r == nil {
		return nil, &rpcError{spdk.CodeNoSuchDevice, "raid bdev " + name + " is not found"}
	}
	s.raids = slices.DeleteFunc(s.raids, func(x *raid) bool { return x == r })
	return true, nil
}
