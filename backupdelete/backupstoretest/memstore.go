package backupstoretest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// MemStore is an in-memory backupdelete.Backupstore: a set of backups,
// each with the blocks it references, and reference-counted block
// collection like the filesystem store's. It is safe for concurrent use.
// The zero value is an empty store.
type MemStore struct {
	mu      sync.Mutex
	backups map[backupdelete.BackupRef]memBackup
	blocks  map[memBlock]struct{}
	deletes int
}

type memBackup struct {
	blocks     []string
	inProgress bool
	// abandoned: in progress, but its writer died (no live lock).
	abandoned bool
}

type memBlock struct {
	target, volume, checksum string
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{} }

// Put adds (or replaces) a backup referencing the given block checksums,
// creating the blocks. inProgress marks a backup still being written: while
// one exists in a volume, no block of that volume is collected.
func (m *MemStore) Put(ref backupdelete.BackupRef, inProgress bool, blocks ...string) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	m.backups[ref] = memBackup{blocks: slices.Clone(blocks), inProgress: inProgress}
	for _, b := range blocks {
		m.blocks[memBlock{ref.Target, ref.Volume, b}] = struct{}{}
	}
	return nil
}

// PutAbandoned adds (or replaces) a backup whose creation died
// mid-upload, having uploaded the given blocks: in progress (while it
// exists in a volume, no block of that volume is collected), but with no
// writer left (Longhorn: a cfg with an empty CreatedTime and no live
// backup lock of the volume). Its cfg lists none of them, as Longhorn's
// in-progress cfg lists none: they are referenced by no backup.
func (m *MemStore) PutAbandoned(ref backupdelete.BackupRef, uploaded ...string) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	m.backups[ref] = memBackup{inProgress: true, abandoned: true}
	for _, b := range uploaded {
		m.blocks[memBlock{ref.Target, ref.Volume, b}] = struct{}{}
	}
	return nil
}

// BackupExists implements backupdelete.Backupstore.
func (m *MemStore) BackupExists(ctx context.Context, ref backupdelete.BackupRef) (bool, error) {
	if err := ref.Validate(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.backups[ref]
	return ok, nil
}

// DeleteBackup implements backupdelete.Backupstore: it removes the backup,
// then the volume's blocks no remaining backup references, unless a
// remaining backup of the volume is in progress.
func (m *MemStore) DeleteBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleteLocked(ref)
	return nil
}

// DeleteCompletedBackup implements backupdelete.CompletedBackupDeleter: a
// backup Put as in progress is not touched (an error wrapping
// backupdelete.ErrInProgress), and neither is one added with PutAbandoned
// while a backup Put as in progress exists in its volume (its writer's
// lock is the volume's); otherwise it is DeleteBackup. The check and the
// deletion happen under one lock.
func (m *MemStore) DeleteCompletedBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.backups[ref]; ok && b.inProgress {
		if !b.abandoned {
			return fmt.Errorf("backup %s: %w", ref, backupdelete.ErrInProgress)
		}
		for r, o := range m.backups {
			if r.Target == ref.Target && r.Volume == ref.Volume && o.inProgress && !o.abandoned {
				return fmt.Errorf("backup %s: %w: backup %s of the volume is being written", ref, backupdelete.ErrInProgress, r)
			}
		}
	}
	m.deleteLocked(ref)
	return nil
}

// deleteLocked removes the backup and collects its volume's blocks.
func (m *MemStore) deleteLocked(ref backupdelete.BackupRef) {
	m.init()
	m.deletes++
	delete(m.backups, ref)
	referenced := map[string]bool{}
	for r, b := range m.backups {
		if r.Target != ref.Target || r.Volume != ref.Volume {
			continue
		}
		if b.inProgress {
			return
		}
		for _, ck := range b.blocks {
			referenced[ck] = true
		}
	}
	for blk := range m.blocks {
		if blk.target == ref.Target && blk.volume == ref.Volume && !referenced[blk.checksum] {
			delete(m.blocks, blk)
		}
	}
}

// Blocks returns the block checksums present in a volume, sorted.
func (m *MemStore) Blocks(target, volume string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for b := range m.blocks {
		if b.target == target && b.volume == volume {
			out = append(out, b.checksum)
		}
	}
	slices.Sort(out)
	return out
}

// Deletes returns how many times DeleteBackup or DeleteCompletedBackup
// deleted (or found gone) a backup.
func (m *MemStore) Deletes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deletes
}

func (m *MemStore) init() {
	if m.backups == nil {
		m.backups = map[backupdelete.BackupRef]memBackup{}
		m.blocks = map[memBlock]struct{}{}
	}
}

var (
	_ backupdelete.Backupstore            = (*MemStore)(nil)
	_ backupdelete.CompletedBackupDeleter = (*MemStore)(nil)
)
