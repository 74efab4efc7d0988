package backupstoretest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// MemLister is an in-memory backupdelete.BackupLister: the host's backup
// records, keyed by their exact ref (an empty Target and
// DefaultBackupTarget are two keys, as two host records would be). It is
// safe for concurrent use; the zero value holds no record.
type MemLister struct {
	mu      sync.Mutex
	records map[backupdelete.BackupRef]backupdelete.Backup
}

// NewMemLister returns a lister holding records.
func NewMemLister(records ...backupdelete.Backup) *MemLister {
	l := &MemLister{}
	for _, b := range records {
		l.Put(b)
	}
	return l
}

// Put adds a record, or replaces the one with the same ref.
func (l *MemLister) Put(b backupdelete.Backup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.records == nil {
		l.records = map[backupdelete.BackupRef]backupdelete.Backup{}
	}
	l.records[b.Ref] = b
}

// Remove drops the record of ref, if there is one.
func (l *MemLister) Remove(ref backupdelete.BackupRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.records, ref)
}

// ListBackups implements backupdelete.BackupLister: every record, sorted
// by ref.
func (l *MemLister) ListBackups(ctx context.Context) ([]backupdelete.Backup, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]backupdelete.Backup, 0, len(l.records))
	for _, b := range l.records {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b backupdelete.Backup) int { return cmp.Compare(a.Ref.String(), b.Ref.String()) })
	return out, nil
}

// GetBackup implements backupdelete.BackupLister.
func (l *MemLister) GetBackup(ctx context.Context, ref backupdelete.BackupRef) (backupdelete.Backup, error) {
	if err := ctx.Err(); err != nil {
		return backupdelete.Backup{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.records[ref]
	if !ok {
		return backupdelete.Backup{}, fmt.Errorf("backup record %s: %w", ref, backupdelete.ErrNotFound)
	}
	return b, nil
}

var _ backupdelete.BackupLister = (*MemLister)(nil)
