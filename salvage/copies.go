package salvage

import (
	"context"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/orphan"
)

// CopyInventory is an orphan.Inventory that fills each Longhorn v1
// replica-data item's Copy (orphan.Item.Copy) with what Inspect finds in
// its directory, <DiskPath>/replicas/<DataName>, and its rank among the
// copies of its volume in the same snapshot. So the orphan record shows
// whether the orphan is a recoverable copy of a volume, and the last-copy
// guard can keep it. Other items pass through unchanged.
//
// Inner is usually diskscan's *Orphans, which lists only the directories
// no replica expects: the inspections cost a few small reads per orphan
// per scan. Use WithCopies to wrap a whole orphan.Adapter.
//
// Scan is safe to call concurrently if Inner.Scan is.
type CopyInventory struct {
	Inner   orphan.Inventory
	Options Options // for each Inspect; DiskPath is set per item
}

// Scan calls Inner.Scan and inspects each replica-data item's directory.
// A directory that disappeared since the listing, or that cannot be read,
// leaves its item's Copy nil (nobody inspected it): Inspect's error is
// then not Scan's, except ctx's.
func (c CopyInventory) Scan(ctx context.Context) (orphan.Snapshot, error) {
	snap, err := c.Inner.Scan(ctx)
	if err != nil {
		return snap, err
	}
	var ins []*Inspection
	var at []int
	for i := range snap.Items {
		it := &snap.Items[i]
		if it.Kind != orphan.KindReplicaData || it.DataEngine != orphan.DataEngineV1 {
			continue
		}
		name, disk := it.Param(orphan.ParamDataName), it.Param(orphan.ParamDiskPath)
		if !plainName(name) || disk == "" {
			continue
		}
		opts := c.Options
		opts.DiskPath = filepath.Clean(disk)
		in, err := Inspect(ctx, filepath.Join(opts.DiskPath, "replicas", name), opts)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return orphan.Snapshot{}, ctxErr
			}
			continue
		}
		ins = append(ins, in)
		at = append(at, i)
	}
	for j, r := range Rank(ins) {
		in := ins[j]
		snap.Items[at[j]].Copy = &orphan.Copy{
			// The guard's rule, not Inspection.Volume's rescue naming: a
			// name not of Longhorn's form leaves the volume unknown.
			Volume:      orphan.VolumeOfDataName(snap.Items[at[j]].Param(orphan.ParamDataName)),
			Recoverable: in.Recoverable,
			Reasons:     in.ReasonStrings(),
			Revision:    in.Revision,
			Rank:        r.Rank,
		}
		if h, ok := in.ReuseHint(); ok {
			cp := snap.Items[at[j]].Copy
			cp.Head, cp.Size = h.Head, h.Size
		}
	}
	return snap, nil
}

// WithCopies returns inner with its Scan replaced by a CopyInventory's:
// the same kinds, Judge, Deleter (and Finisher, if inner is one).
func WithCopies(inner orphan.Adapter, opts Options) (orphan.Adapter, error) {
	return orphan.NewAdapter(inner.Kinds(), CopyInventory{Inner: inner, Options: opts}, inner, inner)
}
