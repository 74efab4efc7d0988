package backupstoretest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// This file is the Backupstore and CompletedBackupDeleter sections of
// RunConformanceTests.

// StoreHarness is one fresh, empty backupstore under test and the ways to
// put backups in it.
type StoreHarness struct {
	// Store is the implementation under test.
	Store backupdelete.Backupstore
	// Create puts a completed backup in the store. Backups of one volume
	// should share some blocks, as incremental backups do.
	Create func(ctx context.Context, ref backupdelete.BackupRef) error
	// CreateInProgress puts a backup still being written in the store
	// (Longhorn: a cfg with an empty CreatedTime). The
	// CompletedBackupDeleter section requires it; the Backupstore section
	// does not use it.
	CreateInProgress func(ctx context.Context, ref backupdelete.BackupRef) error
	// CreateAbandoned, if set, puts a backup whose creation died
	// mid-upload in the store (Longhorn: a cfg with an empty
	// CreatedTime, and no live backup lock of its volume), with blocks
	// it uploaded that no backup references. The
	// CompletedBackupDeleter section then checks that it is deleted,
	// and that it is not while a backup of its volume is being written
	// (CreateInProgress).
	CreateAbandoned func(ctx context.Context, ref backupdelete.BackupRef) error
	// Target is the BackupRef.Target the store answers for.
	Target string
}

// testBackupstore is the Backupstore section.
func testBackupstore(t *testing.T, newHarness func(t *testing.T) StoreHarness) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h StoreHarness)
	}{
		{"AbsentDoesNotExist", testAbsent},
		{"CreatedExists", testCreated},
		{"DeleteRemoves", testDeleteRemoves},
		{"DeleteOfWhatIsGoneIsSuccess", testDeleteGone},
		{"DeleteLeavesOthers", testDeleteLeavesOthers},
		{"InvalidRef", testInvalidRef},
		{"ConcurrentDeletes", testConcurrentDeletes},
		{"CancelledContext", testCancelled},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newHarness(t)) })
	}
}

// testCompletedDeleter is the CompletedBackupDeleter section: it
// deletes a completed backup, treats a gone one as success, refuses
// invalid refs, and never touches a backup still being written.
func testCompletedDeleter(t *testing.T, newHarness func(t *testing.T) StoreHarness) {
	h := newHarness(t)
	cd, ok := h.Store.(backupdelete.CompletedBackupDeleter)
	if !ok {
		t.Fatalf("Harness.CompletedBackupDeleter made a %T, which is not a backupdelete.CompletedBackupDeleter", h.Store)
	}
	if h.CreateInProgress == nil {
		t.Fatal("Harness.CompletedBackupDeleter needs StoreHarness.CreateInProgress: the section checks that a backup still being written is never deleted")
	}
	ctx := context.Background()
	done := ref(h, "vol-a", "backup-0000000000000001")
	mustCreate(t, h, done)
	if err := cd.DeleteCompletedBackup(ctx, done); err != nil {
		t.Fatalf("DeleteCompletedBackup of a completed backup: %v", err)
	}
	wantExists(t, h, done, false)
	if err := cd.DeleteCompletedBackup(ctx, done); err != nil {
		t.Fatalf("DeleteCompletedBackup of what is gone: %v, want nil", err)
	}
	if err := cd.DeleteCompletedBackup(ctx, ref(h, "../etc", "backup-0000000000000001")); !errors.Is(err, backupdelete.ErrInvalidRef) {
		t.Fatalf("DeleteCompletedBackup of an invalid ref: %v, want ErrInvalidRef", err)
	}
	running := ref(h, "vol-a", "backup-0000000000000002")
	keep := ref(h, "vol-a", "backup-0000000000000003")
	mustCreate(t, h, keep)
	if err := h.CreateInProgress(ctx, running); err != nil {
		t.Fatalf("CreateInProgress(%s): %v", running, err)
	}
	if err := cd.DeleteCompletedBackup(ctx, running); !inProgressOrLocked(err) {
		t.Fatalf("DeleteCompletedBackup of a backup in progress: %v, want ErrInProgress or ErrLocked", err)
	}
	wantExists(t, h, running, true)
	wantExists(t, h, keep, true)
	if h.CreateAbandoned == nil {
		return
	}
	// While a backup of the volume is being written, a dead one there
	// cannot be told from it.
	deadBeside := ref(h, "vol-a", "backup-0000000000000004")
	if err := h.CreateAbandoned(ctx, deadBeside); err != nil {
		t.Fatalf("CreateAbandoned(%s): %v", deadBeside, err)
	}
	if err := cd.DeleteCompletedBackup(ctx, deadBeside); !inProgressOrLocked(err) {
		t.Fatalf("DeleteCompletedBackup of an abandoned backup while another of its volume is being written: %v, want ErrInProgress or ErrLocked", err)
	}
	wantExists(t, h, deadBeside, true)
	dead := ref(h, "vol-b", "backup-0000000000000005")
	other := ref(h, "vol-b", "backup-0000000000000006")
	mustCreate(t, h, other)
	if err := h.CreateAbandoned(ctx, dead); err != nil {
		t.Fatalf("CreateAbandoned(%s): %v", dead, err)
	}
	if err := cd.DeleteCompletedBackup(ctx, dead); err != nil {
		t.Fatalf("DeleteCompletedBackup of a backup whose creation died: %v, want nil", err)
	}
	wantExists(t, h, dead, false)
	wantExists(t, h, other, true)
}

// inProgressOrLocked: a store refuses to delete a backup that may be being
// written either after looking (ErrInProgress) or because its exclusion
// kept it from looking (ErrLocked: the writer's lock is held).
func inProgressOrLocked(err error) bool {
	return errors.Is(err, backupdelete.ErrInProgress) || errors.Is(err, backupdelete.ErrLocked)
}

func ref(h StoreHarness, volume, name string) backupdelete.BackupRef {
	return backupdelete.BackupRef{Target: h.Target, Volume: volume, Name: name}
}

func mustCreate(t *testing.T, h StoreHarness, refs ...backupdelete.BackupRef) {
	t.Helper()
	for _, r := range refs {
		if err := h.Create(context.Background(), r); err != nil {
			t.Fatalf("Create(%s): %v", r, err)
		}
	}
}

func wantExists(t *testing.T, h StoreHarness, r backupdelete.BackupRef, want bool) {
	t.Helper()
	got, err := h.Store.BackupExists(context.Background(), r)
	if err != nil {
		t.Fatalf("BackupExists(%s): %v", r, err)
	}
	if got != want {
		t.Fatalf("BackupExists(%s) = %v, want %v", r, got, want)
	}
}

// deleteRetrying deletes, retrying ErrLocked a few times: two deletions
// in one volume may legitimately meet a lock.
func deleteRetrying(ctx context.Context, s backupdelete.Backupstore, r backupdelete.BackupRef) error {
	var err error
	for range 5 {
		if err = s.DeleteBackup(ctx, r); !errors.Is(err, backupdelete.ErrLocked) {
			return err
		}
	}
	return err
}

func testAbsent(t *testing.T, h StoreHarness) {
	wantExists(t, h, ref(h, "vol-none", "backup-0000000000000001"), false)
	mustCreate(t, h, ref(h, "vol-a", "backup-0000000000000001"))
	wantExists(t, h, ref(h, "vol-a", "backup-0000000000000002"), false)
}

func testCreated(t *testing.T, h StoreHarness) {
	r := ref(h, "vol-a", "backup-0000000000000001")
	mustCreate(t, h, r)
	wantExists(t, h, r, true)
}

func testDeleteRemoves(t *testing.T, h StoreHarness) {
	r := ref(h, "vol-a", "backup-0000000000000001")
	mustCreate(t, h, r)
	if err := h.Store.DeleteBackup(context.Background(), r); err != nil {
		t.Fatalf("DeleteBackup: %v", err)
	}
	wantExists(t, h, r, false)
}

func testDeleteGone(t *testing.T, h StoreHarness) {
	ctx := context.Background()
	if err := h.Store.DeleteBackup(ctx, ref(h, "vol-none", "backup-0000000000000001")); err != nil {
		t.Fatalf("delete in a missing volume: %v, want nil", err)
	}
	r := ref(h, "vol-a", "backup-0000000000000001")
	mustCreate(t, h, r)
	for i := range 2 {
		if err := h.Store.DeleteBackup(ctx, r); err != nil {
			t.Fatalf("delete #%d: %v, want nil", i+1, err)
		}
	}
	if err := h.Store.DeleteBackup(ctx, ref(h, "vol-a", "backup-00000000000000ff")); err != nil {
		t.Fatalf("delete of a backup that never existed: %v, want nil", err)
	}
	wantExists(t, h, r, false)
}

func testDeleteLeavesOthers(t *testing.T, h StoreHarness) {
	a1, a2, a3 := ref(h, "vol-a", "backup-0000000000000001"), ref(h, "vol-a", "backup-0000000000000002"), ref(h, "vol-a", "backup-0000000000000003")
	b1 := ref(h, "vol-b", "backup-0000000000000001")
	mustCreate(t, h, a1, a2, a3, b1)
	if err := h.Store.DeleteBackup(context.Background(), a2); err != nil {
		t.Fatalf("DeleteBackup: %v", err)
	}
	wantExists(t, h, a2, false)
	for _, r := range []backupdelete.BackupRef{a1, a3, b1} {
		wantExists(t, h, r, true)
	}
}

func testInvalidRef(t *testing.T, h StoreHarness) {
	ctx := context.Background()
	for _, r := range []backupdelete.BackupRef{
		ref(h, "", "backup-0000000000000001"),
		ref(h, "vol-a", ""),
		ref(h, "../etc", "backup-0000000000000001"),
		ref(h, "vol-a", "../../volume"),
		ref(h, "vol/a", "backup-0000000000000001"),
		ref(h, ".hidden", "backup-0000000000000001"),
	} {
		if _, err := h.Store.BackupExists(ctx, r); !errors.Is(err, backupdelete.ErrInvalidRef) {
			t.Errorf("BackupExists(%q): %v, want ErrInvalidRef", r, err)
		}
		if err := h.Store.DeleteBackup(ctx, r); !errors.Is(err, backupdelete.ErrInvalidRef) {
			t.Errorf("DeleteBackup(%q): %v, want ErrInvalidRef", r, err)
		}
	}
}

func testConcurrentDeletes(t *testing.T, h StoreHarness) {
	var refs []backupdelete.BackupRef
	for _, vol := range []string{"vol-a", "vol-b"} {
		for i := 1; i <= 4; i++ {
			refs = append(refs, ref(h, vol, fmt.Sprintf("backup-%016x", i)))
		}
	}
	keep := ref(h, "vol-a", "backup-00000000000000aa")
	mustCreate(t, h, append(refs, keep)...)
	var wg sync.WaitGroup
	errs := make([]error, len(refs))
	for i, r := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = deleteRetrying(context.Background(), h.Store, r)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("DeleteBackup(%s): %v", refs[i], err)
		}
	}
	for _, r := range refs {
		wantExists(t, h, r, false)
	}
	wantExists(t, h, keep, true)
}

func testCancelled(t *testing.T, h StoreHarness) {
	r := ref(h, "vol-a", "backup-0000000000000001")
	mustCreate(t, h, r)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.Store.DeleteBackup(ctx, r)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("DeleteBackup with a cancelled context: %v, want nil or context.Canceled", err)
	}
	exists, xerr := h.Store.BackupExists(context.Background(), r)
	if xerr != nil {
		t.Fatal(xerr)
	}
	if err == nil && exists {
		t.Fatal("DeleteBackup returned nil but the backup still exists")
	}
	// Whatever happened, a retry finishes the job.
	if err := h.Store.DeleteBackup(context.Background(), r); err != nil {
		t.Fatalf("retry: %v", err)
	}
	wantExists(t, h, r, false)
}
