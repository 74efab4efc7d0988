package orphan

import (
	"context"
	"fmt"
	"slices"
)

// LedgerStore is an optional ability of a Store: it keeps the guard's
// ledger of automatic purges (Plan.AutoPurges, which the Budget rule of
// Guard counts) across restarts. A Sweeper whose Store has it loads the
// ledger on its first Run and saves each plan's before carrying the plan
// out, so a purge is never counted after it happened; a Store without it
// leaves the ledger in the Sweeper's memory, and a restarted Sweeper
// starts the budget afresh: each restart may let one more window's
// allowance of automatic purges through (with the defaults, half of each
// group's valid items per restart), where a kept ledger would not.
//
// A Kubernetes host keeps it, for instance, as a ConfigMap or an
// annotation on its node object; the entries are small (a name, a scope,
// a group and a time) and only those of one window are kept.
type LedgerStore interface {
	// LoadAutoPurges returns the ledger last saved, nil if none was. It is
	// called by Sweeper.Run, once per Sweeper, until it succeeds.
	LoadAutoPurges(ctx context.Context) ([]AutoPurge, error)
	// SaveAutoPurges replaces the saved ledger. It is called by
	// Sweeper.Run before each sync; an error fails the Run before
	// anything is done.
	SaveAutoPurges(ctx context.Context, ledger []AutoPurge) error
}

// autoPurges returns the ledger the Sweeper carries, loading it from a
// LedgerStore the first time. The caller holds s.ledgerMu.
func (s *Sweeper) autoPurges(ctx context.Context) ([]AutoPurge, error) {
	if ls, ok := s.store.(LedgerStore); ok && !s.ledgerLoaded {
		l, err := ls.LoadAutoPurges(ctx)
		if err != nil {
			return nil, fmt.Errorf("orphan: loading the ledger of automatic purges: %w", err)
		}
		s.ledger, s.ledgerLoaded = slices.Clone(l), true
	}
	return s.ledger, nil
}

// keepAutoPurges carries the plan's ledger to the next Run, saving it
// first in a LedgerStore. The caller holds s.ledgerMu.
func (s *Sweeper) keepAutoPurges(ctx context.Context, l []AutoPurge) error {
	if ls, ok := s.store.(LedgerStore); ok {
		if err := ls.SaveAutoPurges(ctx, slices.Clone(l)); err != nil {
			return fmt.Errorf("orphan: saving the ledger of automatic purges: %w", err)
		}
	}
	s.ledger = slices.Clone(l)
	return nil
}
