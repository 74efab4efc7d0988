package spdktest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Errors of the state-building methods.
var (
	// ErrExists: an object of that name exists already.
	ErrExists = errors.New("spdktest: already exists")
	// ErrNotFound: the object named does not exist. It is the same value
	// in every caretaker package.
	ErrNotFound = errclass.ErrNotFound
)

// The state: lvstores, lvols with their snapshot and clone relations, and
// RAID bdevs, all guarded by Server.mu.

type lvstore struct {
	uuid, name string
	// The lvstore's base bdev, an AIO bdev as Longhorn's disks are.
	baseBdev, baseUUID string
}

type lvol struct {
	uuid, name string
	lvs        *lvstore
	snapshot   bool
	parent     *lvol
	clones     []*lvol
	blocks     uint64
	allocated  uint64            // clusters the lvol's own blob has allocated
	created    string            // creation_time, RFC 3339 UTC
	xattrs     map[string]string // set with SetLvolXattr or bdev_lvol_set_xattr
	checksum   *uint64           // a snapshot's registered checksum
}

func (l *lvol) alias() string { return l.lvs.name + "/" + l.name }

type raid struct {
	uuid, name, level, state string
	base                     []string
}

// AddLvstore creates an lvstore on an AIO bdev named "<name>-base" (the
// file /dev/<name>-base) and returns the lvstore's UUID. The AIO bdev's
// UUID is derived from the lvstore's, so it takes no value from
// Options.NewUUID.
func (s *Server) AddLvstore(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findLvs(name) != nil {
		return "", fmt.Errorf("%w: lvstore %s", ErrExists, name)
	}
	id := s.newUUID()
	l := &lvstore{uuid: id, name: name, baseBdev: name + "-base", baseUUID: derivedUUID("aio", id)}
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
	l := &lvol{uuid: s.newUUID(), name: name, lvs: st, blocks: 262144, created: s.now()}
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
	// The lvol's clusters become the snapshot's (blob snapshots move the
	// clusters to the new, read-only blob); the lvol starts empty.
	snap := &lvol{uuid: s.newUUID(), name: snapName, lvs: st, snapshot: true, parent: l.parent, blocks: l.blocks, allocated: l.allocated, created: s.now()}
	l.allocated = 0
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
	c := &lvol{uuid: s.newUUID(), name: cloneName, lvs: st, parent: snap, blocks: snap.blocks, created: s.now()}
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
// it under the same name would (a new creation time too, and no xattrs or
// checksum), and returns the new UUID.
func (s *Server) RecreateLvol(lvs, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, l, err := s.lvolNamed(lvs, name)
	if err != nil {
		return "", err
	}
	l.uuid, l.created, l.xattrs, l.checksum = s.newUUID(), s.now(), nil, nil
	// The lvol that was deleted took its namespaces with it.
	s.hotRemove(bdevRef{lvol: l})
	return l.uuid, nil
}

// SetLvolXattr sets xattr key of lvol lvs/name to value, as
// bdev_lvol_set_xattr (or bdev_lvol_snapshot's xattrs) does. Longhorn
// sets "user_created" and "snapshot_timestamp" on its snapshots;
// bdev_lvol_get_xattr answers a missing one with SPDK's error.
func (s *Server) SetLvolXattr(lvs, name, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, l, err := s.lvolNamed(lvs, name)
	if err != nil {
		return err
	}
	l.setXattr(key, value)
	return nil
}

// SetAllocatedClusters sets how many clusters lvol lvs/name has allocated
// of its own, as writes to it (or, for a snapshot, to the lvol it was
// taken of) would: bdev_get_bdevs reports it as
// driver_specific.lvol.num_allocated_clusters. A new lvol has none, as a
// thin lvol nothing was written to; a snapshot takes the count of the lvol
// it was taken of, which starts again at none.
func (s *Server) SetAllocatedClusters(lvs, name string, n uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, l, err := s.lvolNamed(lvs, name)
	if err != nil {
		return err
	}
	l.allocated = n
	return nil
}

// SetSnapshotChecksum registers sum as the checksum of snapshot lvs/name,
// as bdev_lvol_register_snapshot_checksum does after computing it.
// bdev_lvol_get_snapshot_checksum answers -19 until one is registered.
func (s *Server) SetSnapshotChecksum(lvs, name string, sum uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, l, err := s.lvolNamed(lvs, name)
	if err != nil || !l.snapshot {
		return fmt.Errorf("%w: snapshot %s/%s", ErrNotFound, lvs, name)
	}
	l.checksum = &sum
	return nil
}

func (l *lvol) setXattr(key, value string) {
	if l.xattrs == nil {
		l.xattrs = make(map[string]string)
	}
	l.xattrs[key] = value
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
	s.hotRemove(bdevRef{raid: r})
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

// now is the creation time SPDK stamps on a new lvol: RFC 3339 in UTC, to
// the second (Longhorn's SPDK, SPDK_CREATION_TIME_MAX in lvol.h).
func (s *Server) now() string {
	return s.clock.Now().UTC().Format(time.RFC3339)
}

// derivedUUID is a stable UUID for an object the fake shows but does not
// create through Options.NewUUID (an lvstore's AIO bdev, a RAID member
// the fake does not list), so adding one leaves the sequence of the
// others unchanged.
func derivedUUID(kind, of string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("spdktest-"+kind+"-"+of)).String()
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
