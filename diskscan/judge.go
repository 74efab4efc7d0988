package diskscan

import (
	"context"
	"fmt"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Judge is the orphan.Judge of replica data directories: an item is owned
// if a replica expects its directory on its disk, an orphan if none does,
// and undecided if that cannot be told now. It does no I/O of its own
// (the Deleter checks the disk), so it is cheap to call right before a
// purge. It is safe for concurrent use.
type Judge struct {
	disks    *DiskSet
	expected ExpectedSource
}

// NewJudge returns a Judge over the same disks and expected source as the
// Inventory and Deleter.
func NewJudge(disks *DiskSet, expected ExpectedSource) *Judge {
	return &Judge{disks: disks, expected: expected}
}

// Judge implements orphan.Judge. It returns an error only for ctx's.
//
//	not a v1 replica data item, or no DataName  → undecided (not ours to judge)
//	disk unknown to the DiskSet                 → undecided
//	item's DiskUUID or DiskPath not the disk's  → undecided (the disk changed)
//	expected source fails                       → undecided
//	a replica expects DataName on the disk      → owned
//	otherwise                                   → orphan
func (j *Judge) Judge(ctx context.Context, it orphan.Item) (orphan.Verdict, error) {
	if it.Kind != orphan.KindReplicaData || it.DataEngine != orphan.DataEngineV1 {
		return orphan.Undecided(fmt.Sprintf("not a v1 replica data item (%s/%s)", it.Kind, it.DataEngine)), nil
	}
	name := it.Param(orphan.ParamDataName)
	if SafeName(name) != nil {
		return orphan.Undecided(fmt.Sprintf("data name %q is not a directory name", name)), nil
	}
	d, ok := j.disks.Lookup(it.NodeID, it.Param(orphan.ParamDiskName))
	if !ok {
		return orphan.Undecided(fmt.Sprintf("disk %s is not known", it.Scope())), nil
	}
	if it.Param(orphan.ParamDiskUUID) != d.UUID || it.Param(orphan.ParamDiskPath) != d.Path {
		return orphan.Undecided(fmt.Sprintf("disk %s is now %s at %s, the item was seen on %s at %s",
			d.Scope(), d.UUID, d.Path, it.Param(orphan.ParamDiskUUID), it.Param(orphan.ParamDiskPath))), nil
	}
	set, err := j.expected.Expected(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return orphan.Verdict{}, ctx.Err()
		}
		return orphan.Undecided("expected replicas unknown: " + err.Error()), nil
	}
	if set.Has(name) {
		return orphan.Owned(fmt.Sprintf("a replica expects %s on disk %s", name, d.UUID)), nil
	}
	return orphan.Orphan(fmt.Sprintf("no replica expects %s on disk %s", name, d.UUID)), nil
}
