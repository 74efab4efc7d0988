package backupstoretest_test

import (
	"context"
	"errors"
	"reflect"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
)

func TestMemStoreConformance(t *testing.T) {
	backupstoretest.RunConformance(t, func(t *testing.T) backupstoretest.Harness {
		m := backupstoretest.NewMemStore()
		return backupstoretest.Harness{
			Store:  m,
			Target: "default",
			Create: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.Put(r, false, "shared", r.Name)
			},
			CreateInProgress: func(_ context.Context, r backupdelete.BackupRef) error {
				return m.Put(r, true, "shared", r.Name)
			},
		}
	})
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
