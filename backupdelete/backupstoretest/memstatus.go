package backupstoretest

import (
	"context"
	"fmt"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// MemStatusSource is an in-memory backupdelete.StatusSource: the creation
// progress of the backups it was told about, or an injected error. A
// backup it knows nothing about is an error (an engine that has no such
// backup). It is safe for concurrent use; the zero value knows no backup.
type MemStatusSource struct {
	mu       sync.Mutex
	progress map[backupdelete.BackupRef]backupdelete.Progress
	errs     map[backupdelete.BackupRef]error
}

// Set makes BackupStatus report p for ref (and clears an injected error).
func (s *MemStatusSource) Set(ref backupdelete.BackupRef, p backupdelete.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.progress == nil {
		s.progress = map[backupdelete.BackupRef]backupdelete.Progress{}
	}
	s.progress[ref] = p
	delete(s.errs, ref)
}

// Fail makes BackupStatus fail with err for ref until the next Set: the
// status is not readable (the engine restarts, the replica is gone).
func (s *MemStatusSource) Fail(ref backupdelete.BackupRef, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = map[backupdelete.BackupRef]error{}
	}
	s.errs[ref] = err
}

// BackupStatus implements backupdelete.StatusSource.
func (s *MemStatusSource) BackupStatus(ctx context.Context, ref backupdelete.BackupRef) (backupdelete.Progress, error) {
	if err := ctx.Err(); err != nil {
		return backupdelete.Progress{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.errs[ref]; err != nil {
		return backupdelete.Progress{}, err
	}
	p, ok := s.progress[ref]
	if !ok {
		return backupdelete.Progress{}, fmt.Errorf("status of backup %s: %w", ref, backupdelete.ErrNotFound)
	}
	return p, nil
}

var _ backupdelete.StatusSource = (*MemStatusSource)(nil)
