package backupstoretest_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/internal/testrun"
)

// TestConformance runs every section against the in-memory
// implementations this package ships, and the Faulty wrapper with no
// fault queued.
func TestConformance(t *testing.T) {
	memStore := func(t *testing.T) backupstoretest.StoreHarness {
		m := backupstoretest.NewMemStore()
		return backupstoretest.StoreHarness{
			Store:  m,
			Target: "default",
			Create: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.Put(r, false, "shared", r.Name)
			},
			CreateInProgress: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.Put(r, true, "shared", r.Name)
			},
			CreateAbandoned: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.PutAbandoned(r, "shared", r.Name)
			},
		}
	}
	backupstoretest.RunConformanceTests(t, backupstoretest.Harness{
		Backupstore:            memStore,
		CompletedBackupDeleter: memStore,
		BackupLister: func(_ *testing.T, records []backupdelete.Backup) backupdelete.BackupLister {
			return backupstoretest.NewMemLister(records...)
		},
		StatusSource: func(_ *testing.T, progress map[backupdelete.BackupRef]backupdelete.Progress) backupdelete.StatusSource {
			s := &backupstoretest.MemStatusSource{}
			for ref, p := range progress {
				s.Set(ref, p)
			}
			return s
		},
	})
}

func TestFaultyConformance(t *testing.T) {
	backupstoretest.RunConformanceTests(t, backupstoretest.Harness{
		Backupstore: func(t *testing.T) backupstoretest.StoreHarness {
			m := backupstoretest.NewMemStore()
			return backupstoretest.StoreHarness{
				Store: &backupstoretest.Faulty{Store: m},
				Create: func(_ context.Context, r backupdelete.BackupRef) error {
					return m.Put(r, false, "shared", r.Name)
				},
			}
		},
	})
}

// runsClean runs the suite as a test of its own and reports whether it
// passed.
func runsClean(h backupstoretest.Harness) bool {
	return testrun.Passes("Suite", func(t *testing.T) { backupstoretest.RunConformanceTests(t, h) })
}

// TestEmptyHarnessFails: a Harness without makers would check nothing,
// and must say so rather than pass.
func TestEmptyHarnessFails(t *testing.T) {
	if runsClean(backupstoretest.Harness{}) {
		t.Fatal("RunConformanceTests with an empty Harness passed")
	}
}

// TestCompletedDeleterSectionIsNotOptional: a store that can delete
// conditionally must run that section (the failed-backup orphans rely on
// it), and the section needs a way to make a backup in progress.
func TestCompletedDeleterSectionIsNotOptional(t *testing.T) {
	mem := func(inProgress bool) func(t *testing.T) backupstoretest.StoreHarness {
		return func(t *testing.T) backupstoretest.StoreHarness {
			m := backupstoretest.NewMemStore()
			h := backupstoretest.StoreHarness{Store: m, Create: func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, false, r.Name) }}
			if inProgress {
				h.CreateInProgress = func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, true, r.Name) }
			}
			return h
		}
	}
	if runsClean(backupstoretest.Harness{Backupstore: mem(true)}) {
		t.Error("a CompletedBackupDeleter passed without its section")
	}
	if runsClean(backupstoretest.Harness{CompletedBackupDeleter: mem(false)}) {
		t.Error("the CompletedBackupDeleter section passed without CreateInProgress")
	}
}

// TestSuitesCatchBrokenImplementations: each section fails an
// implementation that breaks the contract's safety-relevant promise.
func TestSuitesCatchBrokenImplementations(t *testing.T) {
	wrongRecord := func(_ *testing.T, records []backupdelete.Backup) backupdelete.BackupLister {
		return &anyRecordLister{backupstoretest.NewMemLister(records...)}
	}
	if runsClean(backupstoretest.Harness{BackupLister: wrongRecord}) {
		t.Error("a lister answering with another backup's record passed")
	}
	silent := func(_ *testing.T, progress map[backupdelete.BackupRef]backupdelete.Progress) backupdelete.StatusSource {
		return zeroStatus{}
	}
	if runsClean(backupstoretest.Harness{StatusSource: silent}) {
		t.Error("a status source reporting a zero Progress for unknown backups passed")
	}
	deletesInProgress := func(t *testing.T) backupstoretest.StoreHarness {
		m := backupstoretest.NewMemStore()
		return backupstoretest.StoreHarness{
			Store:            unconditional{m},
			Create:           func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, false, r.Name) },
			CreateInProgress: func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, true, r.Name) },
		}
	}
	if runsClean(backupstoretest.Harness{CompletedBackupDeleter: deletesInProgress}) {
		t.Error("a CompletedBackupDeleter deleting a backup in progress passed")
	}
	// A store that takes every cfg with an empty CreatedTime for a backup
	// being written never cleans a backup whose creation died.
	keepsAbandoned := func(t *testing.T) backupstoretest.StoreHarness {
		m := backupstoretest.NewMemStore()
		return backupstoretest.StoreHarness{
			Store:            m,
			Create:           func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, false, r.Name) },
			CreateInProgress: func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, true, r.Name) },
			CreateAbandoned:  func(_ context.Context, r backupdelete.BackupRef) error { return m.Put(r, true, r.Name) },
		}
	}
	if runsClean(backupstoretest.Harness{CompletedBackupDeleter: keepsAbandoned}) {
		t.Error("a CompletedBackupDeleter refusing a backup whose creation died passed")
	}
}

// TestMemStoreAbandoned: a backup whose creation died is deleted by
// DeleteCompletedBackup with the blocks it uploaded that nothing
// references, unless a backup of its volume is being written; while
// another dead backup remains in the volume, no block is collected.
func TestMemStoreAbandoned(t *testing.T) {
	ctx := context.Background()
	m := backupstoretest.NewMemStore()
	done := backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-1"}
	dead := backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-2"}
	dead2 := backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-3"}
	running := backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-4"}
	must(t, m.Put(done, false, "k1"))
	must(t, m.PutAbandoned(dead, "k1", "k2"))
	must(t, m.Put(running, true))
	if err := m.DeleteCompletedBackup(ctx, dead); !errors.Is(err, backupdelete.ErrInProgress) {
		t.Fatalf("with a backup being written in the volume: %v, want ErrInProgress", err)
	}
	must(t, m.DeleteBackup(ctx, running))
	must(t, m.PutAbandoned(dead2, "k3"))
	must(t, m.DeleteCompletedBackup(ctx, dead))
	if got := m.Blocks("default", "vol-a"); !slices.Equal(got, []string{"k1", "k2", "k3"}) {
		t.Fatalf("blocks %v with another dead backup left, want none collected", got)
	}
	must(t, m.DeleteCompletedBackup(ctx, dead2))
	if got := m.Blocks("default", "vol-a"); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("blocks %v, want [k1]", got)
	}
}

// anyRecordLister answers GetBackup with any record of the same volume
// when it has none of the ref asked for.
type anyRecordLister struct{ *backupstoretest.MemLister }

func (l *anyRecordLister) GetBackup(ctx context.Context, ref backupdelete.BackupRef) (backupdelete.Backup, error) {
	b, err := l.MemLister.GetBackup(ctx, ref)
	if err == nil {
		return b, nil
	}
	all, _ := l.ListBackups(ctx)
	for _, b := range all {
		if b.Ref.Volume == ref.Volume {
			return b, nil
		}
	}
	return b, err
}

type zeroStatus struct{}

func (zeroStatus) BackupStatus(context.Context, backupdelete.BackupRef) (backupdelete.Progress, error) {
	return backupdelete.Progress{}, nil
}

// unconditional deletes whatever it is asked to.
type unconditional struct{ *backupstoretest.MemStore }

func (u unconditional) DeleteCompletedBackup(ctx context.Context, ref backupdelete.BackupRef) error {
	return u.DeleteBackup(ctx, ref)
}

func TestMemStoreCollectsOnlyUnreferencedBlocks(t *testing.T) {
	m := backupstoretest.NewMemStore()
	a := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-a"}
	b := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-b"}
	other := backupdelete.BackupRef{Volume: "vol-b", Name: "backup-a"}
	must(t, m.Put(a, false, "k1", "k2"))
	must(t, m.Put(b, false, "k2", "k3"))
	must(t, m.Put(other, false, "k1"))
	must(t, m.DeleteBackup(context.Background(), a))
	if got, want := m.Blocks("", "vol-a"), []string{"k2", "k3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("vol-a blocks = %v, want %v", got, want)
	}
	if got, want := m.Blocks("", "vol-b"), []string{"k1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("vol-b blocks = %v, want %v", got, want)
	}
}

func TestMemStoreKeepsBlocksWhileABackupIsInProgress(t *testing.T) {
	m := backupstoretest.NewMemStore()
	a := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-a"}
	w := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-w"}
	must(t, m.Put(a, false, "k1"))
	must(t, m.Put(w, true))
	must(t, m.DeleteBackup(context.Background(), a))
	if got := m.Blocks("", "vol-a"); !reflect.DeepEqual(got, []string{"k1"}) {
		t.Fatalf("blocks = %v, want k1 kept while backup-w is in progress", got)
	}
}

func TestFaultyInjectsInOrder(t *testing.T) {
	m := backupstoretest.NewMemStore()
	f := &backupstoretest.Faulty{Store: m}
	r := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-a"}
	must(t, m.Put(r, false, "k1"))
	ctx := context.Background()

	f.InjectDelete(backupstoretest.Fault{Err: syscall.EIO}, backupstoretest.Fault{Err: syscall.EIO, Partial: true})
	if err := f.DeleteBackup(ctx, r); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first delete: %v, want EIO", err)
	}
	if ok, _ := m.BackupExists(ctx, r); !ok {
		t.Fatal("a plain fault must not reach the store")
	}
	if err := f.DeleteBackup(ctx, r); !errors.Is(err, syscall.EIO) {
		t.Fatalf("partial delete: %v, want EIO", err)
	}
	if ok, _ := m.BackupExists(ctx, r); ok {
		t.Fatal("a partial fault must reach the store")
	}

	f.InjectDelete(backupstoretest.Fault{Panic: "boom"})
	func() {
		defer func() {
			if recover() != "boom" {
				t.Fatal("want panic boom")
			}
		}()
		_ = f.DeleteBackup(ctx, r)
	}()

	hang := make(chan struct{})
	f.InjectDelete(backupstoretest.Fault{Wait: hang})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.DeleteBackup(cctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("hung delete: %v, want context.Canceled", err)
	}
	f.InjectExists(syscall.ETIMEDOUT)
	if _, err := f.BackupExists(ctx, r); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("exists: %v, want ETIMEDOUT", err)
	}
	if f.DeleteCalls() != 4 {
		t.Fatalf("DeleteCalls = %d, want 4", f.DeleteCalls())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
