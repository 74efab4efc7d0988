package orphan

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=adapter.go -destination=mocks/adapter.go -package=mocks

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/go-multierror"
)

// Adapter is everything caretaker needs of one source of orphans: what
// exists (Inventory), whether it is owned (Judge), how to remove it
// (Deleter), and which kinds of item it serves. Each adapter package
// exposes one constructor that returns one value implementing it
// (diskscan.NewOrphans, spdk.NewOrphans, backupdelete.NewOrphans); a host
// hands that value to NewMonitor, as the Inventory, and to NewSweeper.
// An adapter that leaves work behind after a crash also implements
// Finisher.
//
// Hosts that assemble an adapter from pieces of their own (a v1 instance
// inventory, instance.Judge and their deleter) use NewAdapter; hosts with
// several adapters on one node use Combine.
//
// An adapter that serves only some data engines of its kinds (spdk serves
// the v2 engine's instances, a host's own adapter the v1 engine's) also
// implements EngineScoped, so Combine can run both on one node.
type Adapter interface {
	Inventory
	Judge
	Deleter
	// Kinds lists the kinds of item the adapter observes, judges and
	// deletes. It never changes for an adapter value.
	Kinds() []Kind
}

// NewAdapter builds an Adapter from separate pieces serving kinds. The
// result is a Finisher when d is one. It returns an error naming the
// option that is invalid, wrapping ErrIncomplete: a nil inv, j or d, no
// kinds, or a kind this package does not know.
func NewAdapter(kinds []Kind, inv Inventory, j Judge, d Deleter) (Adapter, error) {
	if inv == nil || j == nil || d == nil {
		return nil, fmt.Errorf("%w: NewAdapter needs an Inventory, a Judge and a Deleter", ErrIncomplete)
	}
	if err := checkKinds(kinds); err != nil {
		return nil, err
	}
	p := parts{kinds: slices.Clone(kinds), inv: inv, judge: j, del: d}
	if f, ok := d.(Finisher); ok {
		return finishingParts{p, f}, nil
	}
	return p, nil
}

type parts struct {
	kinds []Kind
	inv   Inventory
	judge Judge
	del   Deleter
}

func (p parts) Kinds() []Kind                                       { return slices.Clone(p.kinds) }
func (p parts) Scan(ctx context.Context) (Snapshot, error)          { return p.inv.Scan(ctx) }
func (p parts) Judge(ctx context.Context, it Item) (Verdict, error) { return p.judge.Judge(ctx, it) }
func (p parts) Delete(ctx context.Context, r Record) error          { return p.del.Delete(ctx, r) }

type finishingParts struct {
	parts
	f Finisher
}

func (p finishingParts) FinishInterrupted(ctx context.Context) error {
	return p.f.FinishInterrupted(ctx)
}

func checkKinds(kinds []Kind) error {
	if len(kinds) == 0 {
		return fmt.Errorf("%w: an adapter must serve at least one kind", ErrIncomplete)
	}
	for _, k := range kinds {
		if !k.Valid() {
			return fmt.Errorf("%w: adapter serves unknown kind %q", ErrIncomplete, k)
		}
	}
	return nil
}

// EngineScoped is an optional ability of an Adapter: it serves only the
// items and records of these data engines, of each of its kinds.
type EngineScoped interface {
	DataEngines() []DataEngine
}

// Combine returns one Adapter over several, for a host that runs them on
// one node (disks, SPDK runtime and backups):
//
//   - Scan scans each adapter in turn and merges the snapshots (items and
//     skips appended, scopes merged with MergeScopes, each adapter's
//     guard evidence first moved by AttributeEvidence into the groups of
//     its own kinds and data engines, so that one adapter's owned items
//     never vouch for another's orphans). If any scan fails,
//     the combined scan fails: a snapshot missing one adapter's scopes
//     would make that adapter's records look outside the scan.
//   - Judge and Delete go to the adapter serving the item's or record's
//     kind and, for an EngineScoped adapter, its data engine. An item no
//     adapter serves is undecided; a record no adapter serves fails to
//     delete with a *KindError wrapping ErrNoAdapter.
//   - FinishInterrupted calls every adapter that is a Finisher and
//     returns their failures as a *multierror.Error of *KindError.
//
// Two adapters that could both serve one item (the same kind, and data
// engines that are not disjoint) is an error.
func Combine(adapters ...Adapter) (Adapter, error) {
	c := &combined{byKind: map[Kind][]route{}}
	for _, a := range adapters {
		if a == nil {
			return nil, fmt.Errorf("%w: Combine: nil adapter", ErrIncomplete)
		}
		kinds := a.Kinds()
		if err := checkKinds(kinds); err != nil {
			return nil, err
		}
		r := route{adapter: a}
		if e, ok := a.(EngineScoped); ok {
			if r.engines = e.DataEngines(); len(r.engines) == 0 {
				return nil, fmt.Errorf("orphan: Combine: an EngineScoped adapter of %v serves no data engine", kinds)
			}
		}
		for _, k := range kinds {
			for _, other := range c.byKind[k] {
				if r.overlaps(other) {
					return nil, fmt.Errorf("orphan: Combine: two adapters serve kind %q", k)
				}
			}
			if len(c.byKind[k]) == 0 {
				c.kinds = append(c.kinds, k)
			}
			c.byKind[k] = append(c.byKind[k], r)
		}
		c.adapters = append(c.adapters, a)
	}
	if len(c.adapters) == 0 {
		return nil, fmt.Errorf("orphan: Combine needs at least one adapter")
	}
	return c, nil
}

type combined struct {
	adapters []Adapter
	byKind   map[Kind][]route
	kinds    []Kind
}

// route is one adapter serving a kind, for some data engines (nil: all).
type route struct {
	adapter Adapter
	engines []DataEngine
}

func (r route) serves(e DataEngine) bool { return r.engines == nil || slices.Contains(r.engines, e) }

func (r route) overlaps(o route) bool {
	if r.engines == nil || o.engines == nil {
		return true
	}
	for _, e := range r.engines {
		if o.serves(e) {
			return true
		}
	}
	return false
}

// find returns the adapter serving kind k and data engine e.
func (c *combined) find(k Kind, e DataEngine) (Adapter, bool) {
	for _, r := range c.byKind[k] {
		if r.serves(e) {
			return r.adapter, true
		}
	}
	return nil, false
}

func (c *combined) Kinds() []Kind { return slices.Clone(c.kinds) }

func (c *combined) Scan(ctx context.Context) (Snapshot, error) {
	var out Snapshot
	scopes := make([]map[Scope]ScopeStatus, 0, len(c.adapters))
	for _, a := range c.adapters {
		snap, err := a.Scan(ctx)
		if err != nil {
			return Snapshot{}, fmt.Errorf("orphan: scanning %v: %w", a.Kinds(), err)
		}
		out.Items = append(out.Items, snap.Items...)
		out.Skipped = append(out.Skipped, snap.Skipped...)
		var engines []DataEngine
		if e, ok := a.(EngineScoped); ok {
			engines = e.DataEngines()
		}
		scopes = append(scopes, AttributeEvidence(snap.Scopes, a.Kinds(), engines))
	}
	out.Scopes = MergeScopes(scopes...)
	return out, nil
}

func (c *combined) Judge(ctx context.Context, it Item) (Verdict, error) {
	a, ok := c.find(it.Kind, it.DataEngine)
	if !ok {
		return Undecided(fmt.Sprintf("no adapter serves kind %q of data engine %q", it.Kind, it.DataEngine)), nil
	}
	return a.Judge(ctx, it)
}

func (c *combined) Delete(ctx context.Context, r Record) error {
	a, ok := c.find(r.Kind, r.DataEngine)
	if !ok {
		return &KindError{Kind: r.Kind, Err: ErrNoAdapter}
	}
	return a.Delete(ctx, r)
}

func (c *combined) FinishInterrupted(ctx context.Context) error {
	var errs *multierror.Error
	for _, a := range c.adapters {
		if f, ok := a.(Finisher); ok {
			if err := f.FinishInterrupted(ctx); err != nil {
				for _, k := range a.Kinds() {
					errs = multierror.Append(errs, &KindError{Kind: k, Err: err})
					break
				}
			}
		}
	}
	return errs.ErrorOrNil()
}
