package spdktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/spdk"
)

// FaultAction is what a fault does to a reply.
type FaultAction int

// The fault actions. In every case the method itself is carried out: the
// fault hits the reply, as when SPDK did the work and the answer was lost.
const (
	None     FaultAction = iota // reply normally (after Delay)
	Garbage                     // reply with bytes that are not JSON
	Truncate                    // send half the reply, then close the connection
	Drop                        // close the connection without replying
	// Replace answers with a well-formed JSON-RPC reply whose result is
	// Fault.Result exactly as given (nil means null): a wrong-shaped
	// result, as a broken or foreign SPDK might send.
	Replace
)

// Fault changes how the server answers matching calls.
type Fault struct {
	// Method the fault applies to; "" matches every method.
	Method string
	// Params, when set, limits the fault to calls whose params are this
	// JSON value (compared after compaction); "null" matches a call
	// without params. Nil matches any params.
	Params json.RawMessage
	// Delay before the reply is sent.
	Delay time.Duration
	// Action taken on the reply.
	Action FaultAction
	// Result is the raw JSON result a Replace reply carries; nil means
	// null. It is sent as given, so it may be any JSON value (an object
	// where a list belongs, a list of numbers, a list with a null).
	Result json.RawMessage
	// Times is how many matching calls the fault applies to; 0 means once,
	// a negative value means every call until ClearFaults.
	Times int
	// Then, if set, runs for each matching call after the method was
	// carried out and before its reply is sent: use it to change state
	// between two calls, e.g. RecreateLvol after a listing. It must not
	// block on the caller.
	Then func()
}

// Inject adds a fault. Faults are matched in the order they were added.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// matchFault returns the fault for method and params and uses it up.
// Called with mu held.
func (s *Server) matchFault(method string, params json.RawMessage) *Fault {
	for i, f := range s.faults {
		if f.Method != "" && f.Method != method {
			continue
		}
		if f.Params != nil && compact(f.Params) != compact(params) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		return f
	}
	return nil
}

// compact returns v without insignificant space, and "null" for nothing.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if len(bytes.TrimSpace(v)) == 0 || json.Compact(&b, v) != nil {
		return "null"
	}
	return b.String()
}

type lvstore struct {
	uuid, name, baseBdev string
}

type lvol struct {
	uuid, name string
	lvs        *lvstore
	snapshot   bool
	parent     *lvol
	clones     []*lvol
	blocks     uint64
}

func (l *lvol) alias() string { return l.lvs.name + "/" + l.name }

type raid struct {
	uuid, name, level, state string
	base                     []string
}

// Errors of the state-building methods.
var (
	// ErrExists: an object of that name exists already.
	ErrExists = errors.New("spdktest: already exists")
	// ErrNotFound: the object named does not exist. It is the same value
	// in every caretaker package.
	ErrNotFound = errclass.ErrNotFound
)

// AddLvstore creates an lvstore on a base bdev named "<name>-base" and
// returns its UUID.
func (s *Server) AddLvstore(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findLvs(name) != nil {
		return "", fmt.Errorf("%w: lvstore %s", ErrExists, name)
	}
	l := &lvstore{uuid: s.newUUID(), name: name, baseBdev: name + "-base"}
	s.lvstores = append(s.lvstores, l)
	return l.uuid, nil
}

// AddLvol creates a thin lvol in lvstore lvs and returns its UUID.
func (s *Server) AddLvol(lvs, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.lvstoreNamed(lvs)
	if err != nil {
		return "", err
	}
	if s.findLvol(st, name) != nil {
		return "", fmt.Errorf("%w: lvol %s/%s", ErrExists, lvs, name)
	}
	l := &lvol{uuid: s.newUUID(), name: name, lvs: st, blocks: 262144}
	s.lvols = append(s.lvols, l)
	return l.uuid, nil
}

// Snapshot snapshots lvol lvs/name as lvs/snapName, as
// bdev_lvol_snapshot does: the snapshot takes the lvol's place under its
// parent and the lvol becomes the snapshot's clone. It returns the
// snapshot's UUID.
func (s *Server) Snapshot(lvs, name, snapName string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, l, err := s.lvolNamed(lvs, name)
	if err != nil {
		return "", err
	}
	if s.findLvol(st, snapName) != nil {
		return "", fmt.Errorf("%w: lvol %s/%s", ErrExists, lvs, snapName)
	}
	snap := &lvol{uuid: s.newUUID(), name: snapName, lvs: st, snapshot: true, parent: l.parent, blocks: l.blocks}
	if p := l.parent; p != nil {
		p.clones[slices.Index(p.clones, l)] = snap
	}
	snap.clones = []*lvol{l}
	l.parent = snap
	s.lvols = append(s.lvols, snap)
	return snap.uuid, nil
}

// Clone creates lvs/cloneName as a clone of snapshot lvs/snapName and
// returns its UUID.
func (s *Server) Clone(lvs, snapName, cloneName string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, snap, err := s.lvolNamed(lvs, snapName)
	if err != nil || !snap.snapshot {
		return "", fmt.Errorf("%w: snapshot %s/%s", ErrNotFound, lvs, snapName)
	}
	if s.findLvol(st, cloneName) != nil {
		return "", fmt.Errorf("%w: lvol %s/%s", ErrExists, lvs, cloneName)
	}
	c := &lvol{uuid: s.newUUID(), name: cloneName, lvs: st, parent: snap, blocks: snap.blocks}
	snap.clones = append(snap.clones, c)
	s.lvols = append(s.lvols, c)
	return c.uuid, nil
}

// AddRaid creates a RAID1 bdev over base and returns its UUID.
func (s *Server) AddRaid(name string, base ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findRaid(name) != nil {
		return "", fmt.Errorf("%w: RAID bdev %s", ErrExists, name)
	}
	r := &raid{uuid: s.newUUID(), name: name, level: "raid1", state: "online", base: slices.Clone(base)}
	s.raids = append(s.raids, r)
	return r.uuid, nil
}

// RecreateLvol gives lvol lvs/name a new UUID, as deleting and recreating
// it under the same name would, and returns the new UUID.
func (s *Server) RecreateLvol(lvs, name string) (string, error) {
	return s.SetLvolUUID(lvs, name, "")
}

// SetLvolUUID sets the UUID of lvol lvs/name to id, or to a fresh one if
// id is "" (ClearLvolUUID makes it empty), and returns it.
func (s *Server) SetLvolUUID(lvs, name, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		id = s.newUUID()
	}
	return id, s.setLvolUUID(lvs, name, id)
}

// ClearLvolUUID makes lvol lvs/name report an empty UUID, as an SPDK that
// does not populate it would.
func (s *Server) ClearLvolUUID(lvs, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setLvolUUID(lvs, name, "")
}

// setLvolUUID sets the UUID of lvs/name; s.mu is held.
func (s *Server) setLvolUUID(lvs, name, id string) error {
	_, l, err := s.lvolNamed(lvs, name)
	if err != nil {
		return err
	}
	l.uuid = id
	return nil
}

// RecreateRaid gives RAID bdev name a new UUID, as deleting and recreating
// it would, and returns the new UUID.
func (s *Server) RecreateRaid(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.findRaid(name)
	if r == nil {
		return "", fmt.Errorf("%w: RAID bdev %s", ErrNotFound, name)
	}
	r.uuid = s.newUUID()
	return r.uuid, nil
}

// ClearRaidUUID makes RAID bdev name report an empty UUID.
func (s *Server) ClearRaidUUID(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.findRaid(name)
	if r == nil {
		return fmt.Errorf("%w: RAID bdev %s", ErrNotFound, name)
	}
	r.uuid = ""
	return nil
}

// LvolInfo describes one lvol of the server's state.
type LvolInfo struct {
	Alias, UUID string
	Snapshot    bool
	Parent      string   // the parent snapshot's name, "" if none
	Clones      []string // clone names
}

// Lvols returns every lvol, in creation order.
func (s *Server) Lvols() []LvolInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LvolInfo, 0, len(s.lvols))
	for _, l := range s.lvols {
		info := LvolInfo{Alias: l.alias(), UUID: l.uuid, Snapshot: l.snapshot, Clones: cloneNames(l)}
		if l.parent != nil {
			info.Parent = l.parent.name
		}
		out = append(out, info)
	}
	return out
}

// LvolAliases returns the alias of every lvol, in creation order.
func (s *Server) LvolAliases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.lvols))
	for _, l := range s.lvols {
		out = append(out, l.alias())
	}
	return out
}

// RaidNames returns the name of every RAID bdev, in creation order.
func (s *Server) RaidNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.raids))
	for _, r := range s.raids {
		out = append(out, r.name)
	}
	return out
}

func cloneNames(l *lvol) []string {
	if len(l.clones) == 0 {
		return nil
	}
	out := make([]string, len(l.clones))
	for i, c := range l.clones {
		out[i] = c.name
	}
	return out
}

func (s *Server) findLvs(name string) *lvstore {
	for _, l := range s.lvstores {
		if l.name == name {
			return l
		}
	}
	return nil
}

// lvstoreNamed returns lvstore lvs, or an error wrapping ErrNotFound.
func (s *Server) lvstoreNamed(lvs string) (*lvstore, error) {
	st := s.findLvs(lvs)
	if st == nil {
		return nil, fmt.Errorf("%w: lvstore %s", ErrNotFound, lvs)
	}
	return st, nil
}

// lvolNamed returns lvol lvs/name and its lvstore, or an error wrapping
// ErrNotFound naming what is missing.
func (s *Server) lvolNamed(lvs, name string) (*lvstore, *lvol, error) {
	st, err := s.lvstoreNamed(lvs)
	if err != nil {
		return nil, nil, err
	}
	l := s.findLvol(st, name)
	if l == nil {
		return nil, nil, fmt.Errorf("%w: lvol %s/%s", ErrNotFound, lvs, name)
	}
	return st, l, nil
}

func (s *Server) findLvol(st *lvstore, name string) *lvol {
	for _, l := range s.lvols {
		if l.lvs == st && l.name == name {
			return l
		}
	}
	return nil
}

// lookupLvol finds an lvol by UUID or alias, as bdev_lvol_delete does.
func (s *Server) lookupLvol(name string) *lvol {
	for _, l := range s.lvols {
		if (l.uuid != "" && l.uuid == name) || l.alias() == name {
			return l
		}
	}
	return nil
}

func (s *Server) findRaid(name string) *raid {
	for _, r := range s.raids {
		if r.name == name {
			return r
		}
	}
	return nil
}

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
