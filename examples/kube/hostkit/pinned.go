package hostkit

import (
	"context"
	"sync"

	"github.com/caretaker-storage/caretaker/orphan"
)

// Pinned is the Sweeper's Store in a host that reads the last-copy
// guard's input (the volumes orphan.VolumesAsked names, the overrides of
// orphan.LastCopyOverrides) from the records before a sweep: Pin lists
// them, and the Sweeper's next List of the same selector answers that
// very list, so the plan is made from the records the volumes were read
// for. Without it, a record created between the host's read and the
// Sweeper's List could be planned with its volume unread; the guard
// would take it as unknown (or, with VolumesComplete, as deleted).
//
// A pin is used once: the next List takes it, whatever its selector; a
// List of another selector asks the wrapped Store. Every other call goes
// to the wrapped Store, and Unwrap returns it, so the Sweeper finds an
// orphan.LedgerStore through Pinned. It is safe for concurrent use; a
// host runs one sweep at a time through it.
type Pinned struct {
	orphan.Store

	mu   sync.Mutex
	recs []orphan.Record
	sel  orphan.Selector
	set  bool
}

// NewPinned returns s with List pinned by Pin.
func NewPinned(s orphan.Store) *Pinned { return &Pinned{Store: s} }

// Pin lists the records of sel from the wrapped Store and makes the next
// List of sel answer them (copies).
func (p *Pinned) Pin(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	recs, err := p.Store.List(ctx, sel)
	if err != nil {
		return nil, err
	}
	kept := make([]orphan.Record, len(recs))
	for i, r := range recs {
		kept[i] = r.Clone()
	}
	p.mu.Lock()
	p.recs, p.sel, p.set = kept, sel, true
	p.mu.Unlock()
	return recs, nil
}

// Unpin drops a pin no List took (a sweep that failed before listing),
// so that no later List answers a list older than it asked for.
func (p *Pinned) Unpin() {
	p.mu.Lock()
	p.recs, p.set = nil, false
	p.mu.Unlock()
}

// List implements orphan.Store.
func (p *Pinned) List(ctx context.Context, sel orphan.Selector) ([]orphan.Record, error) {
	p.mu.Lock()
	recs, ok := p.recs, p.set && p.sel == sel
	p.recs, p.set = nil, false
	p.mu.Unlock()
	if !ok {
		return p.Store.List(ctx, sel)
	}
	out := make([]orphan.Record, len(recs))
	for i, r := range recs {
		out[i] = r.Clone()
	}
	return out, nil
}

// Unwrap returns the wrapped Store.
func (p *Pinned) Unwrap() orphan.Store { return p.Store }
