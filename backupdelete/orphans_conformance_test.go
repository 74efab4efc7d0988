package backupdelete_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// orphansHarness binds the Orphans adapter to the host's backup records
// (a MemLister) and a backupstore (a MemStore), both fresh for each
// adapter the suite asks for.
type orphansHarness struct {
	lister *backupstoretest.MemLister
	store  *backupstoretest.MemStore
	n      int
}

func (h *orphansHarness) Adapter(t *testing.T) orphan.Adapter {
	h.lister, h.store = backupstoretest.NewMemLister(), backupstoretest.NewMemStore()
	return newOrphans(t, h.lister, h.store)
}

// make puts a backup in the given state in the host's records and its
// data in the backupstore.
func (h *orphansHarness) make(t *testing.T, s backupdelete.State) orphan.Item {
	t.Helper()
	h.n++
	ref := backupdelete.BackupRef{Volume: "vol-a", Name: fmt.Sprintf("backup-%016x", h.n)}
	h.lister.Put(backupdelete.Backup{Ref: ref, State: s})
	if err := h.store.Put(ref, false, "shared", ref.Name); err != nil {
		t.Fatal(err)
	}
	return backupdelete.BackupItem(ref, "node-1")
}

func (h *orphansHarness) MakeOrphan(t *testing.T) orphan.Item {
	return h.make(t, backupdelete.StateError)
}

func (h *orphansHarness) MakeOwned(t *testing.T) orphan.Item {
	return h.make(t, backupdelete.StateCompleted)
}

// Claim retries the failed backup: the host's backup controller owns it
// again.
func (h *orphansHarness) Claim(t *testing.T, it orphan.Item) {
	ref := h.ref(t, it)
	h.lister.Put(backupdelete.Backup{Ref: ref, State: backupdelete.StateInProgress})
}

func (h *orphansHarness) Exists(t *testing.T, it orphan.Item) bool {
	ok, err := h.store.BackupExists(context.Background(), h.ref(t, it))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// ref is the host's spelling of the item's backup: no target.
func (h *orphansHarness) ref(t *testing.T, it orphan.Item) backupdelete.BackupRef {
	t.Helper()
	ref, err := backupdelete.RefFromItem(it)
	if err != nil {
		t.Fatal(err)
	}
	ref.Target = ""
	return ref
}

// TestOrphansConformance runs orphan's Adapter suite against Orphans.
func TestOrphansConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Adapter: &orphansHarness{}})
}
