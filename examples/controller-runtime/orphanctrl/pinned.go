package orphanctrl

import (
	"context"
	"sync"

	"github.com/caretaker-storage/caretaker/orphan"
)

// pinnedStore is the Sweeper's Store: the configured one, except that
// List answers the records the reconcile read just before (pin), once.
// The reconcile reads the volumes and last-copy overrides of that very
// list, so the plan is made from the records they belong to.
type pinnedStore struct {
	orphan.Store

	mu     sync.Mutex
	pinned []orphan.Record
	set    bool
}

func (p *pinnedStore) pin(recs []orphan.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pinned, p.set = recs, true
}

// Unwrap returns the configured Store, so that the Sweeper finds its
// ledger of automatic purges (orphan.LedgerStore) through this wrapper.
func (p *pinnedStore) Unwrap() orphan.Store { return p.Store }

// unpin drops a pinned list that was not used.
func (p *pinnedStore) unpin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pinned, p.set = nil, false
}

// List implements orphan.Store.
func (p *pinnedStore) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	p.mu.Lock()
	recs, set := p.pinned, p.set
	p.pinned, p.set = nil, false
	p.mu.Unlock()
	if !set {
		return p.Store.List(ctx, sel)
	}
	out := make([]orphan.Record, 0, len(recs))
	for _, r := range recs {
		if sel.Matches(r) {
			out = append(out, r.Clone())
		}
	}
	return out, nil
}
