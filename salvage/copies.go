package salvage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/orphan"
)

// CopyInventory is an orphan.Inventory that fills each Longhorn v1
// replica-data item's Copy (orphan.Item.Copy) with what Inspect finds in
// its directory, <DiskPath>/replicas/<DataName>, and its rank among the
// copies of its volume in the same snapshot. So the orphan record shows
// whether the orphan is a recoverable copy of a volume, and the last-copy
// guard keeps it while its volume needs it. Other items pass through
// unchanged.
//
// Copy.NoData is Inspection.NoData: set only when the directory is proven
// to hold none of the volume's data. A copy the export cannot read today
// (Recoverable false: a backing image missing from the disk or in qcow2,
// a damaged volume.meta, a broken chain) still holds the volume's data,
// so the last-copy guard still covers it; Copy.Reasons say why it cannot
// be exported and what to do about it (ReasonKind.Remedy).
//
// Inner is usually diskscan's *Orphans, which lists only the directories
// no replica expects: the inspections cost a few small reads per orphan
// per scan. Use WithCopies to wrap a whole orphan.Adapter: its Delete
// also re-checks NoData at the moment of the purge, which a host that
// pairs a CopyInventory with a Deleter of its own does not get.
//
// Scan is safe to call concurrently if Inner.Scan is.
type CopyInventory struct {
	Inner   orphan.Inventory
	Options Options // for each Inspect; DiskPath is set per item

	// seen, when set (WithCopies), gets the record names of the replica
	// data items each Scan listed, true for those it found NoData.
	seen func(listed map[string]bool)
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
	// A copy proven to hold no data is no candidate: ranking it could put
	// an empty directory above a copy with the volume's data.
	ranked := make([]*Inspection, len(ins))
	for j, in := range ins {
		if !in.NoData {
			ranked[j] = in
		}
	}
	if c.seen != nil {
		listed := make(map[string]bool, len(ins))
		for j, in := range ins {
			if name, err := snap.Items[at[j]].Name(); err == nil {
				listed[name] = in.NoData
			}
		}
		c.seen(listed)
	}
	for j, r := range Rank(ranked) {
		in := ins[j]
		snap.Items[at[j]].Copy = &orphan.Copy{
			// The guard's rule, not Inspection.Volume's rescue naming: a
			// name not of Longhorn's form leaves the volume unknown.
			Volume:      orphan.VolumeOfDataName(snap.Items[at[j]].Param(orphan.ParamDataName)),
			Recoverable: in.Recoverable,
			Reasons:     in.ReasonStrings(),
			NoData:      in.NoData,
			Revision:    in.Revision,
			Rank:        r.Rank,
		}
		if h, ok := in.ReuseHint(); ok && !in.NoData {
			cp := snap.Items[at[j]].Copy
			cp.Head, cp.Size = h.Head, h.Size
		}
	}
	return snap, nil
}

// ErrDataAppeared is wrapped, with orphan.ErrPreconditionFailed, by the
// refusal of WithCopies' Delete to purge a directory that a scan found
// holding no data (orphan.Copy.NoData) and that holds data now.
var ErrDataAppeared = errors.New("salvage: the copy held no data when scanned and holds data now")

// WithCopies returns inner with its Scan replaced by a CopyInventory's:
// the same kinds, Judge and Deleter (and Finisher, if inner is one).
//
// Its Delete re-checks, at the moment it acts, what the last-copy guard
// relied on: a directory one of its scans found holding no data (NoData,
// which takes a copy out of the guard) is inspected again, and if it
// holds data now, or cannot be inspected, the purge is refused with an
// error wrapping orphan.ErrPreconditionFailed (and ErrDataAppeared when it
// holds data); the next scan judges it as it is. Other records go
// straight to inner's Delete.
func WithCopies(inner orphan.Adapter, opts Options) (orphan.Adapter, error) {
	ca := &copyAdapter{inv: CopyInventory{Inner: inner, Options: opts}, del: inner, noData: map[string]bool{}}
	ca.inv.seen = ca.sawNoData
	return orphan.NewAdapter(inner.Kinds(), ca.inv, inner, ca.deleter(inner))
}

// maxNoDataNames bounds the names a copyAdapter remembers as NoData.
const maxNoDataNames = 1 << 16

// copyAdapter remembers the records whose directory a scan found holding
// no data, so that their purge re-checks it. A name is remembered from a
// scan that found its directory empty until a scan finds data in it: a
// scan that does not list the item (its disk unreadable this time, say)
// does not forget it, since a plan made from an older snapshot may still
// purge it. Names no scan listed are dropped only when the memory is
// full. What it does not catch: a purge planned from a snapshot that
// found the directory empty, run after a later scan found data in it
// (the later scan's own plan keeps the copy under the guard).
type copyAdapter struct {
	inv CopyInventory
	del orphan.Deleter

	mu     sync.Mutex
	noData map[string]bool
}

// sawNoData is called by each scan with the record names of the replica
// data items it inspected, true for those it found NoData.
func (ca *copyAdapter) sawNoData(listed map[string]bool) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if len(ca.noData)+len(listed) > maxNoDataNames {
		for name := range ca.noData {
			if _, ok := listed[name]; !ok {
				delete(ca.noData, name)
			}
		}
	}
	for name, empty := range listed {
		switch {
		case !empty:
			delete(ca.noData, name)
		case len(ca.noData) < maxNoDataNames:
			ca.noData[name] = true
		}
	}
}

func (ca *copyAdapter) wasNoData(name string) bool {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.noData[name]
}

// deleter is the Deleter WithCopies hands out: a Finisher when inner is.
func (ca *copyAdapter) deleter(inner orphan.Deleter) orphan.Deleter {
	if f, ok := inner.(orphan.Finisher); ok {
		return finishingCopyDeleter{ca, f}
	}
	return ca
}

type finishingCopyDeleter struct {
	*copyAdapter
	f orphan.Finisher
}

func (d finishingCopyDeleter) FinishInterrupted(ctx context.Context) error {
	return d.f.FinishInterrupted(ctx)
}

// Delete re-proves NoData for a record a scan found empty, then calls the
// inner Delete.
func (ca *copyAdapter) Delete(ctx context.Context, r orphan.Record) error {
	if r.Kind == orphan.KindReplicaData && r.DataEngine == orphan.DataEngineV1 && ca.wasNoData(r.Name) {
		name, disk := r.Param(orphan.ParamDataName), r.Param(orphan.ParamDiskPath)
		if !plainName(name) || disk == "" {
			return errclass.Wrapf("salvage", orphan.ErrPreconditionFailed, "record %s names no replica directory", r.Name)
		}
		opts := ca.inv.Options
		opts.DiskPath = filepath.Clean(disk)
		in, err := Inspect(ctx, filepath.Join(opts.DiskPath, "replicas", name), opts)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Gone already: the inner Delete says so.
		case err != nil:
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return errclass.Wrapf("salvage", orphan.ErrPreconditionFailed, "%s: it held no data when scanned and cannot be inspected now (%v)", name, err)
		case !in.NoData:
			return fmt.Errorf("%w (%s), the next scan judges it as it is: %w", ErrDataAppeared, name, orphan.ErrPreconditionFailed)
		}
	}
	return ca.del.Delete(ctx, r)
}
