package spdk

import (
	"maps"
	"slices"
	"strconv"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// replicaNameInfix and replicaNameRandLen are Longhorn's replica name
// form: longhorn-manager names a replica "<volume>-r-<8 hex>"
// (types.GenerateReplicaNameForVolume: the volume's name, "-r-" and
// util.RandomID, the first 8 characters of a lowercase UUID).
const (
	replicaNameInfix   = "-r-"
	replicaNameRandLen = 8
)

// volumeOfReplica returns the volume a Longhorn replica named name
// belongs to, by Longhorn's replica naming ("<volume>-r-<8 lowercase hex
// digits>", longhorn-manager's types.GenerateReplicaNameForVolume), or ""
// when name is not of that form: the volume cannot be told then, and the
// last-copy guard treats the copy's volume as unknown.
func volumeOfReplica(name string) string {
	n := len(name) - replicaNameRandLen - len(replicaNameInfix)
	if n < 1 || name[n:n+len(replicaNameInfix)] != replicaNameInfix {
		return ""
	}
	for _, c := range []byte(name[n+len(replicaNameInfix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return name[:n]
}

// reasonV2Copy is why a v2 replica is never a recoverable copy to
// caretaker, whatever its lvols hold.
const reasonV2Copy = "a v2 replica: the volume's data is in its SPDK lvols (the head and its snapshot lvols), which caretaker's export tool does not read (it reads v1 replica directories only): to recover the volume from it, read the lvols with SPDK's own tools before the orphan is deleted"

// fillCopies sets the Copy of each replica item in items, which are the
// replicas' items in the order of reps; bdevs is SPDK's bdev_get_bdevs
// listing, and err its failure. The listing is indexed once for all
// replicas.
func fillCopies(items []orphan.Item, reps []Replica, bdevs []spdkrpc.Bdev, err error) {
	var ix *lvolIndex
	var byUUID map[string]*spdkrpc.Bdev
	if err == nil {
		ix, err = newLvolIndex(bdevs)
		byUUID = make(map[string]*spdkrpc.Bdev, len(bdevs))
		for i := range bdevs {
			if b := &bdevs[i]; b.DriverSpecific.Lvol != nil && usableUUID(b.UUID) {
				byUUID[b.UUID] = b
			}
		}
	}
	for i := range items {
		items[i].Copy = replicaCopy(reps[i], ix, byUUID, err)
	}
}

// replicaCopy is what the runtime shows of replica r as a copy of its
// volume's data, by ix and byUUID, the index of a bdev_get_bdevs listing
// and its lvol bdevs by UUID, or listErr, why there are none. It is never
// Recoverable (see reasonV2Copy); it holds no data (NoData) only when the
// listing has the lvols a purge of r deletes (the tree PurgeOrder
// deletes: the head and the snapshot lvols SPDK relates to its chain)
// and reports for every one of them that it has allocated no cluster. A
// listing that failed, a tree PurgeOrder cannot prove, and a count SPDK
// did not write all leave the copy as one that may hold data.
func replicaCopy(r Replica, ix *lvolIndex, byUUID map[string]*spdkrpc.Bdev, listErr error) *orphan.Copy {
	cp := &orphan.Copy{Volume: volumeOfReplica(r.Name()), Head: r.Name(), Reasons: []string{reasonV2Copy}}
	if cp.Volume == "" {
		cp.Reasons = append(cp.Reasons, "the name "+strconv.Quote(r.Name())+" is not of Longhorn's form <volume>-r-<8 hex digits>, so its volume cannot be told")
	}
	if b := byUUID[r.UUID()]; b != nil && b.BlockSize > 0 {
		cp.Size = int64(b.NumBlocks) * int64(b.BlockSize)
	}
	why := ""
	if listErr != nil {
		why = "its lvols' allocated clusters could not be read (" + listErr.Error() + ")"
	} else {
		switch _, tree, err := ix.tree(r.Name(), r.UUID()); {
		case err != nil:
			why = "its lvols' allocated clusters could not be read (" + err.Error() + ")"
		case tree == nil:
			why = "its head lvol was not in the bdev listing"
		default:
			order := make([]spdkrpc.Lvol, 0, len(tree))
			for _, n := range slices.Sorted(maps.Keys(tree)) {
				order = append(order, tree[n].Lvol)
			}
			why = allocatedOf(order, byUUID)
		}
	}
	if why == "" {
		cp.NoData = true
		cp.Reasons = append(cp.Reasons, "its lvols have no allocated cluster: no data of the volume was ever written to them")
		return cp
	}
	cp.Reasons = append(cp.Reasons, why)
	return cp
}

// allocatedOf says what the lvols of order hold by SPDK's count of their
// allocated clusters: "" when every one reports none.
func allocatedOf(order []spdkrpc.Lvol, byUUID map[string]*spdkrpc.Bdev) string {
	var total uint64
	for _, l := range order {
		b := byUUID[l.UUID]
		if b == nil || b.DriverSpecific.Lvol.NumAllocatedClusters == nil {
			return "SPDK did not report how many clusters lvol " + l.Alias + " has allocated, so it may hold data"
		}
		total += *b.DriverSpecific.Lvol.NumAllocatedClusters
	}
	if total == 0 {
		return ""
	}
	return "its lvols hold " + strconv.FormatUint(total, 10) + " allocated clusters of the volume's data"
}
