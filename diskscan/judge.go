package diskscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Judge implements orphan.Judge for replica data directories: an item is
// owned if a replica expects its directory on its disk, an orphan if none
// does and the directory is still there, and undecided if that cannot be
// told now. It returns an error only for ctx's, and is safe for
// concurrent use. In order:
//
//	not a v1 replica data item                  → undecided (not ours to judge)
//	DataName not a safe directory name          → undecided
//	disk unknown (not set with SetDisks)        → undecided
//	item's DiskUUID or DiskPath not the disk's  → undecided (the disk changed)
//	expected source fails                       → undecided
//	a replica expects DataName on the disk      → owned
//	<disk>/replicas/DataName is no directory    → undecided (gone since the scan)
//	otherwise                                   → orphan
//
// The presence check is there because the Sweeper plans from the latest
// scan, which may predate a purge or a removal: without it, a stale
// snapshot would create a record for a directory that has just gone, and
// the next scan would forget it again. It lstat's the entry inside the
// disk's replicas directory opened as an os.Root, so a symbolic link is
// never followed (a link, or anything but a directory, is no replica).
// The disk's identity is not checked here: Delete checks it at the moment
// it acts, and a changed disk is reported by the scan.
func (o *Orphans) Judge(ctx context.Context, it orphan.Item) (_ orphan.Verdict, err error) {
	defer withPrefix(&err)
	if it.Kind != orphan.KindReplicaData || it.DataEngine != orphan.DataEngineV1 {
		return orphan.Undecided(fmt.Sprintf("not a v1 replica data item (%s/%s)", it.Kind, it.DataEngine)), nil
	}
	name := it.Param(orphan.ParamDataName)
	if SafeName(name) != nil {
		return orphan.Undecided(fmt.Sprintf("data name %q is not a directory name", name)), nil
	}
	d, ok := o.disks.lookup(it.NodeID, it.Param(orphan.ParamDiskName))
	if !ok {
		return orphan.Undecided(fmt.Sprintf("disk %s is not known", it.Scope())), nil
	}
	if it.Param(orphan.ParamDiskUUID) != d.UUID || it.Param(orphan.ParamDiskPath) != d.Path {
		return orphan.Undecided(fmt.Sprintf("disk %s is now %s at %s, the item was seen on %s at %s",
			d.Scope(), d.UUID, d.Path, it.Param(orphan.ParamDiskUUID), it.Param(orphan.ParamDiskPath))), nil
	}
	set, err := o.expected.Expected(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return orphan.Verdict{}, ctx.Err()
		}
		return orphan.Undecided("expected replicas unknown: " + err.Error()), nil
	}
	if set.Has(name) {
		return orphan.Owned(fmt.Sprintf("a replica expects %s on disk %s", name, d.UUID)), nil
	}
	if err := ctx.Err(); err != nil {
		return orphan.Verdict{}, err
	}
	if why := o.host.present(d, name); why != "" {
		return orphan.Undecided(fmt.Sprintf("%s on disk %s: %s", name, d.Scope(), why)), nil
	}
	return orphan.Orphan(fmt.Sprintf("no replica expects %s on disk %s", name, d.UUID)), nil
}

// present returns "" if <disk>/replicas/name is a real directory, and
// otherwise why not. name must be a SafeName.
func (h hostTree) present(d Disk, name string) string {
	root, err := h.openRoot(d.fsPath())
	if err != nil {
		return "disk path cannot be opened: " + errText(err)
	}
	defer root.Close()
	rr, err := openReplicas(root)
	switch {
	case err != nil:
		return errText(err)
	case rr == nil:
		return "not on disk since the scan (no " + ReplicasDir + " directory)"
	}
	defer rr.Close()
	fi, err := rr.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "not on disk since the scan"
	case err != nil:
		return "cannot stat: " + errText(err)
	case !fi.IsDir():
		return "not a directory but " + safefile.Describe(fi.Mode())
	}
	return ""
}
