package orphantest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/caretaker-storage/caretaker/orphan"
)

// MemAdapter is an in-memory orphan.Adapter over a world of items the
// test puts in, each owned or not: what memblob is to a blob driver. It
// honours the whole Adapter contract (RunConformanceTests checks it), so a
// host can test its wiring of Monitor, Sweeper and Store without disks or
// sockets. Safe for concurrent use.
type MemAdapter struct {
	kinds []orphan.Kind

	mu    sync.Mutex
	items map[string]memItem // by record name
}

type memItem struct {
	item  orphan.Item
	owned bool
}

// NewMemAdapter returns an empty world serving kinds (every kind when
// none is given).
func NewMemAdapter(kinds ...orphan.Kind) *MemAdapter {
	if len(kinds) == 0 {
		kinds = orphan.Kinds()
	}
	return &MemAdapter{kinds: slices.Clone(kinds), items: map[string]memItem{}}
}

// Put makes the item's data exist, owned or not. The item must be
// nameable and of a kind the adapter serves.
func (a *MemAdapter) Put(it orphan.Item, owned bool) error {
	name, err := it.Name()
	if err != nil {
		return err
	}
	if !slices.Contains(a.kinds, it.Kind) {
		return fmt.Errorf("orphantest: MemAdapter does not serve kind %q", it.Kind)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.items[name] = memItem{item: it, owned: owned}
	return nil
}

// Remove makes the item's data disappear, as something outside caretaker
// would.
func (a *MemAdapter) Remove(it orphan.Item) {
	name, _ := it.Name()
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.items, name)
}

// Has reports whether the item's data exists.
func (a *MemAdapter) Has(it orphan.Item) bool {
	name, _ := it.Name()
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.items[name]
	return ok
}

// Kinds implements orphan.Adapter.
func (a *MemAdapter) Kinds() []orphan.Kind { return slices.Clone(a.kinds) }

// Scan implements orphan.Inventory: every item, sorted by record name, and
// every scope holding one Ready.
func (a *MemAdapter) Scan(ctx context.Context) (orphan.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return orphan.Snapshot{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	snap := orphan.Snapshot{Scopes: map[orphan.Scope]orphan.ScopeStatus{}}
	names := make([]string, 0, len(a.items))
	for name := range a.items {
		names = append(names, name)
	}
	slices.SortFunc(names, cmp.Compare)
	for _, name := range names {
		it := a.items[name].item
		snap.Items = append(snap.Items, it)
		snap.Scopes[orphan.Scope{NodeID: it.NodeID}] = orphan.ScopeStatus{Health: orphan.HealthReady}
		snap.Scopes[it.Scope()] = orphan.ScopeStatus{Health: orphan.HealthReady}
	}
	return snap, nil
}

// Judge implements orphan.Judge: owned items are owned, others orphans,
// and an item whose data is gone (or that cannot be named) undecided.
func (a *MemAdapter) Judge(_ context.Context, it orphan.Item) (orphan.Verdict, error) {
	name, err := it.Name()
	if err != nil {
		return orphan.Undecided(err.Error()), nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.items[name]
	switch {
	case !ok:
		return orphan.Undecided("no longer exists"), nil
	case m.owned:
		return orphan.Owned("owned in the test's world"), nil
	}
	return orphan.Orphan("nothing in the test's world owns it"), nil
}

// Delete implements orphan.Deleter, re-checking ownership at the moment it
// acts: owned data is refused with orphan.ErrPreconditionFailed.
func (a *MemAdapter) Delete(ctx context.Context, r orphan.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.items[r.Name]
	switch {
	case !ok:
		return nil
	case m.owned:
		return fmt.Errorf("%w: %s is owned", orphan.ErrPreconditionFailed, r.Name)
	}
	delete(a.items, r.Name)
	return nil
}
