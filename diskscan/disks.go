package diskscan

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Disk is one Longhorn v1 filesystem disk of a node, as the host knows it
// (node.spec.disks and node.status.diskStatus).
type Disk struct {
	NodeID string // the node the disk belongs to
	Name   string // the disk's name in the node spec
	// Path is the disk's path exactly as the node spec holds it, for
	// example Longhorn's default "/var/lib/longhorn/" with its trailing
	// slash: names, labels and the DiskPath parameter use this string
	// byte for byte (Longhorn hashes the orphan name over it). Filesystem
	// calls use the cleaned path. It must be absolute and must not
	// contain a ".." element.
	Path string
	UUID string // the diskUUID the host expects in longhorn-disk.cfg

	// FSID is the filesystem ID the host expects (as FSID prints it), or
	// empty. Longhorn's disk monitor already computes this very value for
	// every filesystem disk, in the host's mount namespace: DiskStat.DiskID
	// (ns.GetDiskStat of longhorn/go-common-libs: statfs(2), f_fsid's two
	// words as unsigned 32-bit halves, first word high, "%012x"). A host
	// that passes it needs no earlier scan before a purge (a finalizer
	// reconciling one Orphan, say): the purge still statfs'es the disk and
	// refuses if the filesystem is another (ErrDiskChanged). When empty, the first scan that finds the disk's config with
	// the expected UUID pins the filesystem ID it sees, and a later change
	// makes the disk DiskChanged; a pin lives only as long as the Orphans
	// value and is dropped when the disk's Path or UUID changes.
	FSID string
}

// validFSID reports whether s is printed as FormatFSID prints: 12 to 16
// lowercase hex digits. Anything else could never match a disk, and
// every purge on it would be refused for a typo.
func validFSID(s string) bool {
	if len(s) < 12 || len(s) > 16 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Scope returns the disk's orphan scope.
func (d Disk) Scope() orphan.Scope { return orphan.Scope{NodeID: d.NodeID, Disk: d.Name} }

// fsPath is the path filesystem calls use: Path cleaned, so that
// "/var/lib/longhorn/" and "/var/lib/longhorn" open the same directory.
func (d Disk) fsPath() string { return filepath.Clean(d.Path) }

func (d Disk) validate() error {
	switch {
	case d.NodeID == "" || d.Name == "" || d.UUID == "":
		return fmt.Errorf("diskscan: disk %q on node %q: NodeID, Name and UUID are required", d.Name, d.NodeID)
	case !filepath.IsAbs(d.Path) || !filepath.IsAbs(d.fsPath()):
		return fmt.Errorf("diskscan: disk %s: path %q is not absolute", d.Scope(), d.Path)
	case slices.Contains(strings.Split(d.Path, "/"), ".."):
		return fmt.Errorf("diskscan: disk %s: path %q contains \"..\"", d.Scope(), d.Path)
	case strings.ContainsRune(d.Path, 0):
		return fmt.Errorf("diskscan: disk %s: path %q contains a NUL byte", d.Scope(), d.Path)
	case strings.TrimSpace(d.UUID) != d.UUID:
		return fmt.Errorf("diskscan: disk %s: UUID %q has surrounding white space", d.Scope(), d.UUID)
	case d.FSID != "" && !validFSID(d.FSID):
		return fmt.Errorf("diskscan: disk %s: FSID %q is not a filesystem ID as FSID prints it (12 to 16 lowercase hex digits, as Longhorn's DiskStat.DiskID)", d.Scope(), d.FSID)
	}
	return nil
}

// diskSet is the node's disks as the host last set them, with what
// scans learned about them: pinned filesystem IDs and whether a disk may
// hold tombstones. It is safe for concurrent use.
type diskSet struct {
	mu    sync.Mutex
	disks []Disk                  // sorted by NodeID, Name
	pins  map[orphan.Scope]pinned // filesystem IDs learned by scans
	tombs map[orphan.Scope]tombs  // whether a disk may hold tombstones
}

// tombs is what is known of a disk's tombstones. A disk with no entry may
// hold some (nothing has looked since this process started); clean means
// the last complete listing found none and no purge has failed since.
type tombs struct {
	path, uuid string
	clean      bool
	marks      uint64 // purges that left a tombstone behind, ever
}

type pinned struct{ path, uuid, fsid string }

// set replaces the disks (see Orphans.SetDisks).
func (s *diskSet) set(disks []Disk) error {
	ds := slices.Clone(disks)
	slices.SortFunc(ds, func(a, b Disk) int {
		if c := strings.Compare(a.NodeID, b.NodeID); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i, d := range ds {
		if err := d.validate(); err != nil {
			return err
		}
		if i > 0 && ds[i-1].NodeID == d.NodeID && ds[i-1].Name == d.Name {
			return fmt.Errorf("diskscan: disk %s listed twice", d.Scope())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pins := make(map[orphan.Scope]pinned, len(ds))
	for _, d := range ds {
		if p, ok := s.pins[d.Scope()]; ok && p.path == d.Path && p.uuid == d.UUID {
			pins[d.Scope()] = p
		}
	}
	s.disks, s.pins = ds, pins
	return nil
}

// list returns a copy of the disks, sorted by node and name.
func (s *diskSet) list() []Disk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.disks)
}

// lookup returns the disk of a node by name.
func (s *diskSet) lookup(nodeID, name string) (Disk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.disks {
		if d.NodeID == nodeID && d.Name == name {
			return d, true
		}
	}
	return Disk{}, false
}

// expectedFSID returns the filesystem ID d must have: the host's, else the
// pinned one, else "".
func (s *diskSet) expectedFSID(d Disk) string {
	if d.FSID != "" {
		return d.FSID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pins[d.Scope()]; ok && p.path == d.Path && p.uuid == d.UUID {
		return p.fsid
	}
	return ""
}

// pin records fsid for d if nothing is pinned yet and d is still in the set.
func (s *diskSet) pin(d Disk, fsid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pins[d.Scope()]; ok {
		return
	}
	for _, cur := range s.disks {
		if cur.NodeID == d.NodeID && cur.Name == d.Name && cur.Path == d.Path && cur.UUID == d.UUID {
			s.pins[d.Scope()] = pinned{path: d.Path, uuid: d.UUID, fsid: fsid}
			return
		}
	}
}

// tombMarks returns how many purges on d have left a tombstone so far; a
// listing that starts now passes it to sawTombstones.
func (s *diskSet) tombMarks(d Disk) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tombs[d.Scope()].marks
}

// sawTombstones records what a complete listing of d's replicas directory,
// started when tombMarks returned marks, found. It marks the disk clean only
// if no purge left a tombstone since the listing started.
func (s *diskSet) sawTombstones(d Disk, found bool, marks uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tombs == nil {
		s.tombs = map[orphan.Scope]tombs{}
	}
	t := s.tombs[d.Scope()]
	if t.path != d.Path || t.uuid != d.UUID {
		t = tombs{path: d.Path, uuid: d.UUID, marks: t.marks}
	}
	t.clean = !found && t.marks == marks
	s.tombs[d.Scope()] = t
}

// markTombstone records that a purge on d left a tombstone behind.
func (s *diskSet) markTombstone(d Disk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tombs == nil {
		s.tombs = map[orphan.Scope]tombs{}
	}
	t := s.tombs[d.Scope()]
	t.clean = false
	t.marks++
	s.tombs[d.Scope()] = t
}

// mayHoldTombstones reports whether FinishInterrupted has to look at d: it
// does unless a listing of this very disk found none since anything could
// have left one. A crash that leaves a tombstone also ends this process,
// and a new Orphans value knows nothing, so it looks.
func (s *diskSet) mayHoldTombstones(d Disk) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tombs[d.Scope()]
	return !ok || !t.clean || t.path != d.Path || t.uuid != d.UUID
}
