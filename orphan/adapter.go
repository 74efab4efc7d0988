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
type Adapter interface {
	Inventory
	Judge
	Deleter
	// Kinds lists the kinds of item the adapter observes, judges and
	// deletes. It never changes for an adapter value.
	Kinds() []Kind
}

// NewAdapter builds an Adapter from separate pieces serving kinds. The
// result is a Finisher when d is one.
func NewAdapter(kinds []Kind, inv Inventory, j Judge, d Deleter) (Adapter, error) {
	if inv == nil || j == nil || d == nil {
		return nil, fmt.Errorf("orphan: NewAdapter needs an Inventory, a Judge and a Deleter")
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
		return fmt.Errorf("orphan: an adapter must serve at least one kind")
	}
	for _, k := range kinds {
		if !k.Valid() {
			return fmt.Errorf("orphan: adapter serves unknown kind %q", k)
		}
	}
	return nil
}

// Combine returns one Adapter over several, for a host that runs them on
// one node (disks, SPDK runtime and backups):
//
//   - Scan scans each adapter in turn and merges the snapshots (items and
//     skips appended, scopes merged with MergeScopes). If any scan fails,
//     the combined scan fails: a snapshot missing one adapter's scopes
//     would make that adapter's records look outside the scan.
//   - Judge and Delete go to the adapter serving the item's or record's
//     kind. An item of a kind no adapter serves is undecided; a record of
//     such a kind fails to delete with a *KindError wrapping ErrNoAdapter.
//   - FinishInterrupted calls every adapter that is a Finisher and
//     returns their failures as a *multierror.Error of *KindError.
//
// Two adapters serving one kind is an error.
func Combine(adapters ...Adapter) (Adapter, error) {
	c := &combined{byKind: map[Kind]Adapter{}}
	for _, a := range adapters {
		if a == nil {
			return nil, fmt.Errorf("orphan: Combine: nil adapter")
		}
		kinds := a.Kinds()
		if err := checkKinds(kinds); err != nil {
			return nil, err
		}
		for _, k := range kinds {
			if _, dup := c.byKind[k]; dup {
				return nil, fmt.Errorf("orphan: Combine: two adapters serve kind %q", k)
			}
			c.byKind[k] = a
			c.kinds = append(c.kinds, k)
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
	byKind   map[Kind]Adapter
	kinds    []Kind
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
		scopes = append(scopes, snap.Scopes)
	}
	out.Scopes = MergeScopes(scopes...)
	return out, nil
}

func (c *combined) Judge(ctx context.Context, it Item) (Verdict, error) {
	a, ok := c.byKind[it.Kind]
	if !ok {
		return Undecided(fmt.Sprintf("no adapter serves kind %q", it.Kind)), nil
	}
	return a.Judge(ctx, it)
}

func (c *combined) Delete(ctx context.Context, r Record) error {
	a, ok := c.byKind[r.Kind]
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
