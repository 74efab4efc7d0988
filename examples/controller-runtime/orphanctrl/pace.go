package orphanctrl

import (
	"context"
	"sync"

	"github.com/caretaker-storage/caretaker/orphan"
)

// pinnedStore is the Sweeper's Store: the configured one, except that
// List answers the records the reconcile read just before (pin), once.
// The reconcile decides from that very list which new orphans this sweep
// creates; a later list could show a record created meanwhile whose item
// the sweep left out, and the plan would forget it.
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

// paced returns snap with at most limit of the items that have no record
// in recs, in the snapshot's order, and how many it held back. Every item
// that has a record in recs stays: an item left out looks gone, and its
// record would be forgotten. Leaving out new orphans only makes the
// mass-deletion guard more careful (fewer items in a scope, the same
// owned ones), and no record in recs exists for them to act on. Items
// whose record this controller has just created (justCreated) but recs
// does not show yet (the cache lags) are held back too, rather than
// created again.
func paced(snap orphan.Snapshot, recs []orphan.Record, limit int, justCreated func(name string) bool) (orphan.Snapshot, int) {
	have := make(map[string]bool, len(recs))
	for _, r := range recs {
		have[r.Name] = true
	}
	items := make([]orphan.Item, 0, len(snap.Items))
	fresh, held := 0, 0
	for _, it := range snap.Items {
		if name, err := it.Name(); err == nil && !have[name] {
			if fresh == limit || justCreated(name) {
				held++
				continue
			}
			fresh++
		}
		items = append(items, it)
	}
	if held == 0 {
		return snap, 0
	}
	snap.Items = items
	return snap, held
}
