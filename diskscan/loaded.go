package diskscan

import (
	"context"
	"errors"
)

// ErrNotLoaded is WhenLoaded's answer while the host's expected set is not
// loaded: the disk is undecided, and nothing on it is judged or purged.
var ErrNotLoaded = errors.New("diskscan: the expected set is not loaded yet")

// WhenLoaded returns src behind a gate: Expected answers ErrNotLoaded
// while loaded() is false, and src's answer once it is true. loaded is
// called on every Expected call (once per disk per scan, per judged item,
// twice per purge), so it must be cheap and safe for concurrent use.
//
// A host whose expected set fills from a cache (an informer, a node-local
// watch) reports loaded only once the cache holds the whole list for the
// node's current disks, and false again while it lists anew (a disk was
// added): an expected set that is not loaded yet looks like "no replica
// expects anything", which would make every live directory an orphan.
// Options.AllowNoneExpected does not open the gate.
func WhenLoaded(src ExpectedSource, loaded func() bool) ExpectedSource {
	return ExpectedFunc(func(ctx context.Context, d Disk) (NameSet, error) {
		if !loaded() {
			return nil, ErrNotLoaded
		}
		return src.Expected(ctx, d)
	})
}

// ClaimsOn reports whether r can claim a data directory on one of the
// disks of node nodeID whose UUIDs are diskUUIDs, by StaticExpected's
// rule: a replica with a DiskID claims on that disk only, whatever its
// NodeID; one without claims by path on its node's disks (every node's
// if its NodeID is empty too). A replica with no data directory yet, or
// with neither DiskID nor DiskPath, claims nothing anywhere.
//
// It is true for every replica StaticExpected could report on one of the
// node's disks, whatever their paths (it does not compare DiskPath), so a
// host that keeps only the replicas ClaimsOn accepts (a node-local cache)
// loses none that claims a directory here. A host that keeps more (also
// the replicas that name its node) loses nothing either.
func (r ReplicaRef) ClaimsOn(nodeID string, diskUUIDs map[string]bool) bool {
	switch {
	case r.DataDirectoryName == "":
		return false
	case r.DiskID != "":
		return diskUUIDs[r.DiskID]
	case r.DiskPath == "":
		return false
	}
	return r.NodeID == nodeID || r.NodeID == ""
}
