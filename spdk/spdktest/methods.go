package spdktest

import (
	"encoding/json"
	"slices"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// dispatch runs one method against the state. Each case follows the
// handler of the same name in SPDK (Longhorn's fork where it differs):
// how it decodes its params (params.go), what it answers when an object
// is missing, and what it writes (replies.go).
func (s *Server) dispatch(method string, params json.RawMessage) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "bdev_get_bdevs": // lib/bdev/bdev_rpc.c rpc_bdev_get_bdevs
		var p getBdevsParams
		if hasParams(params) && !decodeObject(params, &p, "name", "timeout") {
			return nil, errDecodeFailed(spdkrpc.CodeInternalError)
		}
		return s.bdevs(p.Name)
	case "bdev_lvol_get_lvstores": // vbdev_lvol_rpc.c rpc_bdev_lvol_get_lvstores
		var p lvstoreParams
		if !hasParams(params) {
			return s.getLvstores(nil)
		}
		if !decodeObject(params, &p, "uuid", "lvs_name") {
			return nil, errDecodeFailed(spdkrpc.CodeInternalError)
		}
		st, err := s.lvstoreXor(p.UUID, p.LvsName)
		if err != nil {
			return nil, err
		}
		return s.getLvstores(st)
	case "bdev_lvol_get_lvols": // vbdev_lvol_rpc.c rpc_bdev_lvol_get_lvols
		var p lvolsParams
		if !hasParams(params) {
			return s.getLvols(nil), nil
		}
		if !decodeObject(params, &p, "lvs_uuid", "lvs_name") {
			return nil, errDecodeFailed(spdkrpc.CodeInternalError)
		}
		st, err := s.lvstoreXor(p.LvsUUID, p.LvsName)
		if err != nil {
			return nil, err
		}
		return s.getLvols(st), nil
	case "bdev_raid_get_bdevs": // bdev_raid_rpc.c rpc_bdev_raid_get_bdevs
		var p raidGetParams
		if !hasParams(params) || !decodeObject(params, &p, "category") || p.Category == nil {
			return nil, errDecodeFailed(spdkrpc.CodeParseError)
		}
		return s.getRaids(*p.Category)
	case "bdev_lvol_delete": // vbdev_lvol_rpc.c rpc_bdev_lvol_delete
		name, err := decodeName(params, spdkrpc.CodeInternalError)
		if err != nil {
			return nil, err
		}
		return s.deleteLvol(name)
	case "bdev_raid_delete": // bdev_raid_rpc.c rpc_bdev_raid_delete
		name, err := decodeName(params, spdkrpc.CodeParseError)
		if err != nil {
			return nil, err
		}
		return s.deleteRaid(name)
	case "bdev_lvol_get_xattr": // vbdev_lvol_rpc.c rpc_bdev_lvol_get_xattr
		var p getXattrParams
		if !hasParams(params) || !decodeObject(params, &p, "name", "xattr_name") || p.Name == nil || p.XattrName == nil {
			return nil, errDecodeFailed(spdkrpc.CodeInternalError)
		}
		return s.getXattr(*p.Name, *p.XattrName)
	case "bdev_lvol_set_xattr": // vbdev_lvol_rpc.c rpc_bdev_lvol_set_xattr
		var p setXattrParams
		if !hasParams(params) || !decodeObject(params, &p, "name", "xattr_name", "xattr_value") ||
			p.Name == nil || p.XattrName == nil || p.XattrValue == nil {
			return nil, errDecodeFailed(spdkrpc.CodeInternalError)
		}
		l := s.lookupLvol(*p.Name)
		if l == nil {
			return nil, errNoDevice()
		}
		l.setXattr(*p.XattrName, *p.XattrValue)
		return true, nil
	case "bdev_lvol_get_snapshot_checksum": // Longhorn's vbdev_lvol_rpc.c
		name, err := decodeName(params, spdkrpc.CodeInternalError)
		if err != nil {
			return nil, err
		}
		// Every failure, an lvol that is no snapshot or has no
		// registered checksum included, is -ENODEV.
		l := s.lookupLvol(name)
		if l == nil || l.checksum == nil {
			return nil, errNoDevice()
		}
		return checksumReply{*l.checksum}, nil
	}
	if result, err, ok := s.dispatchNvmf(method, params); ok {
		return result, err
	}
	return nil, &rpcError{spdkrpc.CodeMethodNotFound, "Method not found"}
}

// getLvstores answers bdev_lvol_get_lvstores: lvstore only, or every
// lvstore for nil (a call without params).
func (s *Server) getLvstores(only *lvstore) (any, *rpcError) {
	out := []spdkrpc.Lvstore{}
	for _, l := range s.lvstores {
		if only != nil && l != only {
			continue
		}
		out = append(out, spdkrpc.Lvstore{UUID: l.uuid, Name: l.name, BaseBdev: l.baseBdev, TotalDataClusters: 1 << 16, FreeClusters: 1 << 15, BlockSize: 4096, ClusterSize: 1 << 20})
	}
	return out, nil
}

// lvstoreXor finds the lvstore named by exactly one of id and name, as
// vbdev_get_lvol_store_by_uuid_xor_name does: params that name neither
// (an empty object) or both are -EINVAL, an unknown one -ENODEV.
func (s *Server) lvstoreXor(id, name *string) (*lvstore, *rpcError) {
	if (id == nil) == (name == nil) {
		return nil, errInvalidArgument()
	}
	for _, l := range s.lvstores {
		if (id != nil && l.uuid == *id) || (name != nil && l.name == *name) {
			return l, nil
		}
	}
	return nil, errNoDevice()
}

// getLvols answers bdev_lvol_get_lvols: the lvols of lvstore only, or of
// every lvstore for nil. As Longhorn's SPDK (rpc_dump_lvol in its
// vbdev_lvol_rpc.c), it leaves num_allocated_clusters out: only
// bdev_get_bdevs reports it.
func (s *Server) getLvols(only *lvstore) []lvolReply {
	out := make([]lvolReply, 0, len(s.lvols))
	for _, l := range s.lvols {
		if only != nil && l.lvs != only {
			continue
		}
		out = append(out, lvolReply{Lvol: spdkrpc.Lvol{Alias: l.alias(), UUID: l.uuid, Name: l.name, IsThinProvisioned: true, IsSnapshot: l.snapshot, IsClone: l.parent != nil,
			Lvs: spdkrpc.LvolStoreRef{Name: l.lvs.name, UUID: l.lvs.uuid}}, CreationTime: l.created})
	}
	return out
}

func (s *Server) getRaids(category string) (any, *rpcError) {
	switch category {
	case "all", "online", "configuring", "offline":
	default:
		// raid_bdev_str_to_state found no such state: -EINVAL.
		return nil, errInvalidArgument()
	}
	out := []spdkrpc.RaidBdev{}
	for _, r := range s.raids {
		if category != "all" && category != r.state {
			continue
		}
		out = append(out, spdkrpc.RaidBdev{Name: r.name, BdevRaidInfo: s.raidInfo(r)})
	}
	return out, nil
}

// raidInfo is what raid_bdev_write_info_json writes for r. A member's
// UUID is that of the bdev the fake lists under its name; a member the
// fake does not list (a remote replica's NVMe bdev) gets a stable UUID
// derived from its name, as a configured member always has one.
func (s *Server) raidInfo(r *raid) spdkrpc.BdevRaidInfo {
	n := uint32(len(r.base))
	info := spdkrpc.BdevRaidInfo{UUID: r.uuid, State: r.state, RaidLevel: r.level, NumBaseBdevs: n, NumBaseBdevsDiscovered: n, NumBaseBdevsOperational: n, BaseBdevsList: []spdkrpc.RaidBaseBdev{}}
	for _, b := range r.base {
		if b == "" {
			// A slot whose bdev was removed (raid_bdev_remove_base_bdev):
			// no name, the nil UUID, not configured.
			info.BaseBdevsList = append(info.BaseBdevsList, spdkrpc.RaidBaseBdev{UUID: "00000000-0000-0000-0000-000000000000", DataSize: raidBlocks})
			info.NumBaseBdevsDiscovered--
			info.NumBaseBdevsOperational--
			continue
		}
		m := spdkrpc.RaidBaseBdev{Name: b, UUID: derivedUUID("member", b), IsConfigured: true, DataSize: raidBlocks}
		if l := s.lookupLvol(b); l != nil && l.uuid != "" {
			m.UUID, m.DataSize = l.uuid, l.blocks
		}
		info.BaseBdevsList = append(info.BaseBdevsList, m)
	}
	return info
}

// raidBlocks is the size in blocks of every RAID bdev the fake lists.
const raidBlocks = 1 << 18

// bdevs answers bdev_get_bdevs: every bdev, or the one whose name, alias
// or UUID is *name (spdk_bdev_open_async: -ENODEV when there is none).
func (s *Server) bdevs(name *string) (any, *rpcError) {
	var out []bdevReply
	for _, st := range s.lvstores {
		out = append(out, s.aioBdev(st))
	}
	for _, l := range s.lvols {
		out = append(out, s.lvolBdev(l))
	}
	for _, r := range s.raids {
		out = append(out, s.raidBdev(r))
	}
	for _, c := range s.ctrlrs {
		out = append(out, s.nvmeBdev(c))
	}
	if name == nil {
		if out == nil {
			out = []bdevReply{}
		}
		return out, nil
	}
	for _, b := range out {
		if b.Name == *name || (b.UUID != "" && b.UUID == *name) || slices.Contains(b.Aliases, *name) {
			return []bdevReply{b}, nil
		}
	}
	return nil, errNoDevice()
}

// aioBdev is the AIO bdev an lvstore sits on, claimed by the lvstore's
// blobstore (spdk_bs_bdev_claim in blob_bdev.c: read_many_write_one).
func (s *Server) aioBdev(st *lvstore) bdevReply {
	return bdevReply{
		Bdev:               spdkrpc.Bdev{Name: st.baseBdev, Aliases: []string{}, ProductName: productAIO, BlockSize: 4096, NumBlocks: 1 << 24, UUID: st.baseUUID, Claimed: true},
		ClaimType:          "read_many_write_one",
		SupportedIOTypes:   ioTypes{Read: true, Write: true, Unmap: true, WriteZeroes: true, Flush: true, Reset: true},
		DriverSpecific:     driverSpecific{Aio: &aioInfo{Filename: "/dev/" + st.baseBdev}},
		AssignedRateLimits: rateLimits{},
	}
}

// lvolBdev is an lvol's bdev. A snapshot is read-only, so it takes no
// writes (vbdev_lvol_io_type_supported).
func (s *Server) lvolBdev(l *lvol) bdevReply {
	allocated := l.allocated
	info := lvolInfo{BdevLvolInfo: spdkrpc.BdevLvolInfo{LvolStoreUUID: l.lvs.uuid, BaseBdev: l.lvs.baseBdev, ThinProvision: true, NumAllocatedClusters: &allocated, Snapshot: l.snapshot, Clone: l.parent != nil},
		NumClusters: l.blocks * 4096 / (1 << 20)}
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
	writable := !l.snapshot
	b := bdevReply{
		Bdev:             spdkrpc.Bdev{Name: bname, Aliases: []string{l.alias()}, ProductName: spdkrpc.ProductLogicalVolume, BlockSize: 4096, NumBlocks: l.blocks, UUID: l.uuid},
		CreationTime:     l.created,
		SupportedIOTypes: ioTypes{Read: true, Write: writable, Unmap: writable, WriteZeroes: writable, Flush: true, Reset: true},
		DriverSpecific:   driverSpecific{Lvol: &info},
	}
	// A RAID bdev claims its members (raid_bdev_configure_base_bdev takes
	// the module's exclusive_write claim), and so does an NVMe-oF
	// namespace its bdev (spdk_nvmf_subsystem_add_ns_ext).
	if s.claimed(bdevRef{lvol: l}) {
		b.Claimed, b.ClaimType = true, "exclusive_write"
	}
	return b
}

// raidMember reports whether l is a member of a RAID bdev.
func (s *Server) raidMember(l *lvol) bool {
	alias := l.alias()
	for _, r := range s.raids {
		for _, b := range r.base {
			// Only a name that could be l's is looked up: lookupLvol
			// walks every lvol, and a listing asks this of every lvol.
			if (b == alias || l.uuid != "" && b == l.uuid) && s.lookupLvol(b) == l {
				return true
			}
		}
	}
	return false
}

func (s *Server) raidBdev(r *raid) bdevReply {
	info := s.raidInfo(r)
	b := bdevReply{
		Bdev:             spdkrpc.Bdev{Name: r.name, Aliases: []string{}, ProductName: spdkrpc.ProductRaidVolume, BlockSize: 4096, NumBlocks: raidBlocks, UUID: r.uuid},
		SupportedIOTypes: ioTypes{Read: true, Write: true, Unmap: true, WriteZeroes: true, Flush: true, Reset: true},
		DriverSpecific:   driverSpecific{Raid: &info},
	}
	if s.exposed(bdevRef{raid: r}) {
		b.Claimed, b.ClaimType = true, "exclusive_write"
	}
	return b
}

// getXattr answers bdev_lvol_get_xattr: the value as a JSON string, -19
// for a name that is no lvol, and the blobstore's -ENOENT as an internal
// error for an xattr the lvol does not have.
func (s *Server) getXattr(name, key string) (any, *rpcError) {
	l := s.lookupLvol(name)
	if l == nil {
		return nil, errNoDevice()
	}
	v, ok := l.xattrs[key]
	if !ok {
		return nil, errNoXattr()
	}
	return v, nil
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
		return nil, &rpcError{spdkrpc.CodeInternalError, "Operation not permitted"}
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
	// Deleting an exposed lvol, or a RAID bdev's member, does not fail:
	// its namespace, or its slot in the RAID bdev, goes.
	s.removeRaidMember(func(b string) bool { return s.lookupLvol(b) == l })
	s.lvols = slices.DeleteFunc(s.lvols, func(x *lvol) bool { return x == l })
	s.hotRemove(bdevRef{lvol: l})
	return true, nil
}

// deleteRaid answers bdev_raid_delete; a missing RAID bdev is -ENODEV
// with the message rpc_bdev_raid_delete formats.
func (s *Server) deleteRaid(name string) (any, *rpcError) {
	r := s.findRaid(name)
	if r == nil {
		return nil, &rpcError{spdkrpc.CodeNoSuchDevice, "raid bdev " + name + " not found"}
	}
	s.raids = slices.DeleteFunc(s.raids, func(x *raid) bool { return x == r })
	s.hotRemove(bdevRef{raid: r})
	return true, nil
}
