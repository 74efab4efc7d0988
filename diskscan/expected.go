package diskscan

import (
	"context"
	"maps"
	"path/filepath"
	"sync"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=expected.go -destination=mocks/expected.go -package=mocks

// ExpectedSource tells which replica data directories the cluster expects
// on a disk: Longhorn's replica objects whose spec.diskID is the disk's
// UUID carry them in spec.dataDirectoryName.
type ExpectedSource interface {
	// Expected returns the data directory names expected on disk.
	// Orphans calls it once per disk per scan, once per item it judges,
	// twice per purge (before and after the rename) and once per
	// tombstone FinishInterrupted finishes, so a directory that became
	// expected at any point stops the purge. It may be called
	// from several goroutines at once, and returns promptly (an answer or
	// an error) when ctx is done.
	//
	// The returned set is read-only for both sides: the caller never
	// modifies it, and the implementation must not modify it after
	// returning it (return a new set instead), so a large set costs nothing
	// to hand out. Returning the same set while nothing changed is
	// cheapest for rescans; a new set with the same names costs them a
	// digest of the set, and one with other names a look-up per
	// directory on disk. A disk the source knows nothing about has an empty set,
	// not an error. An error means the source cannot answer now (an
	// informer not synced, an API error): the disk is undecided this cycle
	// and nothing on it is purged; it is retried on the next call.
	Expected(ctx context.Context, disk Disk) (NameSet, error)
}

// NameSet is a set of data directory names.
type NameSet map[string]struct{}

// Has reports whether name is in the set; a nil set has nothing.
func (s NameSet) Has(name string) bool { _, ok := s[name]; return ok }

// ReplicaRef is what caretaker needs of one Longhorn replica object.
type ReplicaRef struct {
	Name              string // metadata.name
	NodeID            string // spec.nodeID
	DiskID            string // spec.diskID: the disk's UUID
	DiskPath          string // spec.diskPath
	DataDirectoryName string // spec.dataDirectoryName
}

// StaticExpected is an ExpectedSource over a list of replicas the host
// hands over, for example parsed from `kubectl get replicas.longhorn.io -o
// json` by ParseReplicaList. It is safe for concurrent use; Replace and Add
// never modify a set already handed out.
//
// A replica claims its data directory on the disk whose UUID is its
// DiskID, whatever its NodeID and DiskPath say: disk UUIDs are unique, and
// Longhorn's own check (which also requires DiskPath to match byte for
// byte) would call the directory of a replica with a stale path an orphan.
// A replica with no DiskID claims its directory on every disk with its
// DiskPath on its node (or on any node, if NodeID is empty too), the paths
// compared cleaned, so "/var/lib/longhorn" and "/var/lib/longhorn/" match.
// Both rules err towards "owned"; see the package doc for Longhorn's rule.
type StaticExpected struct {
	mu     sync.RWMutex
	byUUID map[string]NameSet
	byPath map[[2]string]NameSet // {nodeID, diskPath} for replicas without DiskID
}

// NewStaticExpected returns a source holding refs.
func NewStaticExpected(refs ...ReplicaRef) *StaticExpected {
	s := &StaticExpected{}
	s.Replace(refs)
	return s
}

// Replace makes refs the whole expected set. A disk whose set has the
// same names as before keeps the set it had, so a host that calls Replace
// with its whole informer cache every cycle hands scans the very set they
// classified last time, and an unchanged rescan looks nothing up. Finding
// that out costs Replace one look-up per ref: the host's cost, once per
// Replace, not the scans'.
func (s *StaticExpected) Replace(refs []ReplicaRef) {
	byUUID, byPath := map[string]NameSet{}, map[[2]string]NameSet{}
	for _, r := range refs {
		addRef(byUUID, byPath, r)
	}
	s.mu.RLock()
	// The outer maps change under the lock (Add); the sets in them never
	// change once stored, so they may be compared after it.
	prevUUID, prevPath := maps.Clone(s.byUUID), maps.Clone(s.byPath)
	s.mu.RUnlock()
	keepEqual(byUUID, prevUUID)
	keepEqual(byPath, prevPath)
	s.mu.Lock()
	s.byUUID, s.byPath = byUUID, byPath
	s.mu.Unlock()
}

// keepEqual replaces each set of next by the set of prev under the same
// key if both hold the same names.
func keepEqual[K comparable](next, prev map[K]NameSet) {
	for k, set := range next {
		if old, ok := prev[k]; ok && equalSets(old, set) {
			next[k] = old
		}
	}
}

// equalSets reports whether a and b hold the same names.
func equalSets(a, b NameSet) bool {
	if len(a) != len(b) {
		return false
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			return false
		}
	}
	return true
}

// Add adds one replica. It copies the affected disk's set (so it costs
// O(size of that set)); use Replace for bulk changes.
func (s *StaticExpected) Add(r ReplicaRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.DiskID != "" {
		s.byUUID[r.DiskID] = maps.Clone(s.byUUID[r.DiskID])
	} else {
		k := pathKey(r.NodeID, r.DiskPath)
		s.byPath[k] = maps.Clone(s.byPath[k])
	}
	addRef(s.byUUID, s.byPath, r)
}

func addRef(byUUID map[string]NameSet, byPath map[[2]string]NameSet, r ReplicaRef) {
	if r.DataDirectoryName == "" {
		return // not scheduled yet: it has no directory anywhere
	}
	set := func(m NameSet) NameSet {
		if m == nil {
			m = NameSet{}
		}
		m[r.DataDirectoryName] = struct{}{}
		return m
	}
	if r.DiskID != "" {
		byUUID[r.DiskID] = set(byUUID[r.DiskID])
		return
	}
	if r.DiskPath == "" {
		return // claims nothing we could find
	}
	k := pathKey(r.NodeID, r.DiskPath)
	byPath[k] = set(byPath[k])
}

// Expected implements ExpectedSource. It never fails.
func (s *StaticExpected) Expected(_ context.Context, d Disk) (NameSet, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	own := s.byUUID[d.UUID]
	byNode, anyNode := s.byPath[pathKey(d.NodeID, d.Path)], s.byPath[pathKey("", d.Path)]
	if len(byNode) == 0 && len(anyNode) == 0 {
		return own, nil
	}
	merged := make(NameSet, len(own)+len(byNode)+len(anyNode))
	maps.Copy(merged, own)
	maps.Copy(merged, byNode)
	maps.Copy(merged, anyNode)
	return merged, nil
}

// pathKey keys a replica without DiskID by node and cleaned disk path: a
// trailing slash in one spec and not in the other must not make a
// directory look unclaimed.
func pathKey(nodeID, diskPath string) [2]string {
	return [2]string{nodeID, filepath.Clean(diskPath)}
}

// ExpectedFunc adapts a function to ExpectedSource.
type ExpectedFunc func(ctx context.Context, disk Disk) (NameSet, error)

// Expected calls f.
func (f ExpectedFunc) Expected(ctx context.Context, disk Disk) (NameSet, error) { return f(ctx, disk) }
