package orphan

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// MemStore is an in-memory Store, safe for concurrent use. Its zero value
// is an empty store ready to use. It keeps deep copies: callers never share
// maps or slices with it. It is a LedgerStore: every Sweeper given the
// same MemStore shares one ledger of automatic purges, and so one budget,
// for as long as the MemStore lives. It lives no longer than its process:
// a host that runs as a new process every cycle (a tool run from cron)
// and deletes automatically needs a Store that keeps the ledger on disk
// or in its cluster.
type MemStore struct {
	mu      sync.Mutex
	records map[string]Record
	version uint64

	ledger        []AutoPurge
	ledgerVersion uint64 // 0: never saved
}

var (
	_ Store       = (*MemStore)(nil)
	_ LedgerStore = (*MemStore)(nil)
)

// LoadAutoPurges implements LedgerStore.
func (s *MemStore) LoadAutoPurges(ctx context.Context) ([]AutoPurge, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ledger), s.ledgerVersionString(), nil
}

// SaveAutoPurges implements LedgerStore.
func (s *MemStore) SaveAutoPurges(ctx context.Context, ledger []AutoPurge, version string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.ledgerVersionString(); version != cur {
		return "", fmt.Errorf("%w: the ledger of automatic purges is at version %q, not %q", ErrConflict, cur, version)
	}
	s.ledger = slices.Clone(ledger)
	s.ledgerVersion++
	return s.ledgerVersionString(), nil
}

func (s *MemStore) ledgerVersionString() string {
	if s.ledgerVersion == 0 {
		return ""
	}
	return strconv.FormatUint(s.ledgerVersion, 10)
}

// NewMemStore returns an empty store. It is the same as new(MemStore).
func NewMemStore() *MemStore { return new(MemStore) }

// List implements Store.
func (s *MemStore) List(ctx context.Context, sel Selector) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		if sel.Matches(r) {
			out = append(out, r.Clone())
		}
	}
	return out, nil
}

// Get implements Store.
func (s *MemStore) Get(ctx context.Context, name string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[name]
	if !ok {
		return Record{}, fmt.Errorf("%w: record %q", ErrNotFound, name)
	}
	return r.Clone(), nil
}

// Create implements Store. A zero CreatedAt is stored as is: the caller
// (normally Decide, through Sweeper) sets it.
func (s *MemStore) Create(ctx context.Context, r Record) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if r.Name == "" {
		return Record{}, fmt.Errorf("%w: record has no name", ErrInvalidItem)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[r.Name]; ok {
		return Record{}, fmt.Errorf("%w: record %q", ErrAlreadyExists, r.Name)
	}
	if s.records == nil {
		s.records = map[string]Record{}
	}
	r = r.Clone()
	r.ResourceVersion = s.nextVersion()
	s.records[r.Name] = r
	return r.Clone(), nil
}

// Update implements Store.
func (s *MemStore) Update(ctx context.Context, r Record) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[r.Name]
	if !ok {
		return Record{}, fmt.Errorf("%w: record %q", ErrNotFound, r.Name)
	}
	if r.ResourceVersion != "" && r.ResourceVersion != cur.ResourceVersion {
		return Record{}, fmt.Errorf("%w: record %q is at version %s, not %s", ErrConflict, r.Name, cur.ResourceVersion, r.ResourceVersion)
	}
	upd := r.Clone()
	cur.DeletionRequested = upd.DeletionRequested
	cur.Dismissed = upd.Dismissed
	cur.Conditions = upd.Conditions
	cur.ResourceVersion = s.nextVersion()
	s.records[r.Name] = cur
	return cur.Clone(), nil
}

// Delete implements Store.
func (s *MemStore) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, name)
	return nil
}

// RequestDeletion marks a record for purging, as a user deleting the
// Orphan object would. It fails with ErrNotFound if the record is gone.
func (s *MemStore) RequestDeletion(ctx context.Context, name string) error {
	r, err := s.Get(ctx, name)
	if err != nil {
		return err
	}
	r.DeletionRequested = true
	_, err = s.Update(ctx, r)
	return err
}

// SetDismissed dismisses a record (its data is kept and never purged) or,
// with dismissed false, returns it to the normal rules, as a user
// labelling the Orphan object would. It fails with ErrNotFound if the
// record is gone.
func (s *MemStore) SetDismissed(ctx context.Context, name string, dismissed bool) error {
	r, err := s.Get(ctx, name)
	if err != nil {
		return err
	}
	r.Dismissed = dismissed
	_, err = s.Update(ctx, r)
	return err
}

// Len returns the number of records.
func (s *MemStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

func (s *MemStore) nextVersion() string {
	s.version++
	return strconv.FormatUint(s.version, 10)
}
