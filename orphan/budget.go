package orphan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// LedgerStore is an optional ability of a Store: it keeps the guard's
// ledger of automatic purges (Plan.AutoPurges, which the Budget rule of
// Guard counts) where every Sweeper of the node reads it, across restarts.
// Without one, an agent that crash-loops while its view is broken would
// start a fresh budget at each restart, and two agents of one node at
// once (a DaemonSet surge) would each have a whole allowance.
//
// The ledger is saved with optimistic concurrency, so that "load, decide,
// save" is safe for several Sweepers sharing it: LoadAutoPurges returns a
// version with the ledger, and SaveAutoPurges replaces the ledger only if
// it is still at that version. Sweeper.Reconcile loads the ledger, decides,
// and saves the plan's ledger before carrying out anything; on
// ErrConflict it loads the ledger again and decides again with it (a few
// times, then the Reconcile fails), so the automatic purges two Sweepers plan
// at once are counted against one allowance. A purge is reserved in the
// saved ledger before it happens: if the save fails, the Reconcile fails before
// anything is done, and a purge that was reserved and then failed stays
// counted (its record's next purge is not counted twice). A Reconcile that
// plans no new automatic purge does not save, and one that would plan no
// automatic purge even with an empty ledger does not load it either.
//
// MemStore keeps a ledger shared by every Sweeper given the same
// MemStore. A Kubernetes host keeps it, for instance, in a ConfigMap per
// node updated with its resourceVersion; the entries are small (a name,
// a scope, a group and a time) and only those of one window are kept.
//
// A Store that wraps another (to pin a List, say) hides the LedgerStore
// methods of the one it embeds if it embeds it as an orphan.Store: it
// should implement Unwrap() Store, returning the Store it wraps, and the
// Sweeper looks for a LedgerStore through it.
//
// A Sweeper whose Store is not a LedgerStore keeps the ledger in memory,
// and knows nothing of the automatic purges before it was made: it starts
// as if every group's allowance were spent, so its automatic purges wait
// one Guard.BudgetWindow after NewSweeper (see Input.AutoPurgesSince);
// requested purges go on.
type LedgerStore interface {
	// LoadAutoPurges returns the ledger last saved, nil if none was, and
	// its version: an opaque token, "" if nothing was ever saved.
	LoadAutoPurges(ctx context.Context) (ledger []AutoPurge, version string, err error)
	// SaveAutoPurges replaces the saved ledger with ledger if the saved
	// one is still at version, and returns the new version. If another
	// save came in between, it saves nothing and returns an error that
	// wraps ErrConflict; any other error may leave either ledger saved,
	// and the Sweeper then does nothing.
	SaveAutoPurges(ctx context.Context, ledger []AutoPurge, version string) (newVersion string, err error)
}

// ledgerOf is the LedgerStore of s: s itself, or the first Store found
// through Unwrap that is one.
func ledgerOf(s Store) (LedgerStore, bool) {
	for range 8 { // a chain of wrappers is short; a loop of them is a bug, not a ledger
		if ls, ok := s.(LedgerStore); ok {
			return ls, true
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return nil, false
		}
		if s = u.Unwrap(); s == nil {
			return nil, false
		}
	}
	return nil, false
}

// ledgerAttempts bounds how often Reconcile loads the ledger again after a
// conflicting save: a few Sweepers of one node conflict rarely, and a
// Reconcile that keeps losing fails and is retried by its host.
const ledgerAttempts = 5

// planWithLedger calls decide with the ledger of automatic purges and
// the time it begins (zero if complete), and keeps the ledger of the plan
// it returns: saved in a LedgerStore (deciding again on a conflict), or
// in the Sweeper's memory.
func (s *Sweeper) planWithLedger(ctx context.Context, decide func(ledger []AutoPurge, since time.Time) Plan) (Plan, error) {
	s.ledgerMu.Lock() // one Reconcile of this Sweeper at a time; other Sweepers are told apart by the version
	defer s.ledgerMu.Unlock()
	ls, ok := ledgerOf(s.store)
	if !ok {
		plan := decide(slices.Clone(s.ledger), s.started)
		s.ledger = slices.Clone(plan.AutoPurges)
		return plan, nil
	}
	// The ledger only ever refuses automatic purges: a plan that has none
	// without it has none with it, and the same everything else. Most
	// cycles are such, and read no ledger.
	if plan := decide(nil, time.Time{}); !hasAutoPurge(plan) {
		return plan, nil
	}
	for attempt := 1; ; attempt++ {
		l, version, err := ls.LoadAutoPurges(ctx)
		if err != nil {
			return Plan{}, fmt.Errorf("orphan: loading the ledger of automatic purges: %w", err)
		}
		plan := decide(slices.Clone(l), time.Time{})
		if !addsTo(l, plan.AutoPurges) {
			return plan, nil
		}
		_, err = ls.SaveAutoPurges(ctx, slices.Clone(plan.AutoPurges), version)
		switch {
		case err == nil:
			return plan, nil
		case !errors.Is(err, ErrConflict) || attempt == ledgerAttempts:
			return Plan{}, fmt.Errorf("orphan: saving the ledger of automatic purges (attempt %d): %w", attempt, err)
		}
	}
}

// hasAutoPurge reports whether the plan purges anything automatically.
func hasAutoPurge(p Plan) bool {
	for _, pu := range p.Purge {
		if pu.Auto {
			return true
		}
	}
	return false
}

// addsTo reports whether the ledger after has an entry that before has
// not: a purge that must be reserved before it happens. (Entries only
// dropped, their window passed, need no save: the next save drops them.)
func addsTo(before, after []AutoPurge) bool {
	have := make(map[AutoPurge]bool, len(before))
	for _, e := range before {
		have[ledgerKey(e)] = true
	}
	for _, e := range after {
		if !have[ledgerKey(e)] {
			return true
		}
	}
	return false
}

// ledgerKey is e comparable as a map key: its time without a monotonic
// reading or location, so a ledger that went through a store compares
// equal to the one saved.
func ledgerKey(e AutoPurge) AutoPurge {
	e.At = e.At.UTC().Round(0)
	return e
}
