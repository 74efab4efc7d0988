package backupdelete_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/orphan"
	clocktesting "k8s.io/utils/clock/testing"
)

// sweepHarness is the failed-backup loop as a host runs it: the host's
// backup records (lister), the backupstore (mem), orphan records in an
// orphan.MemStore, and a Sweeper on a fake clock.
type sweepHarness struct {
	lister  *lister
	mem     *backupstoretest.MemStore
	fb      *backupdelete.Orphans
	records *orphan.MemStore
	sweeper *orphan.Sweeper
	clock   *clocktesting.FakeClock
}

func newSweepHarness(t *testing.T, bs ...backupdelete.Backup) *sweepHarness {
	h := &sweepHarness{lister: newLister(bs...), mem: backupstoretest.NewMemStore(), records: orphan.NewMemStore(), clock: clocktesting.NewFakeClock(epoch)}
	h.fb = newOrphans(t, h.lister, h.mem)
	var err error
	if h.sweeper, err = orphan.NewSweeper(h.records, h.fb, orphan.SweeperOptions{Clock: h.clock}); err != nil {
		t.Fatal(err)
	}
	return h
}

// scan is the host reading its list: ObservedAt is taken just before.
func (h *sweepHarness) scan(t *testing.T) (orphan.Snapshot, time.Time) {
	t.Helper()
	at := h.clock.Now()
	snap, err := h.fb.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap, at
}

func (h *sweepHarness) run(t *testing.T, snap orphan.Snapshot, observedAt time.Time) (orphan.Plan, orphan.Result) {
	t.Helper()
	plan, res, err := h.sweeper.Reconcile(context.Background(), snap, orphan.Cycle{Selector: orphan.Selector{NodeID: "node-1"},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}}, ObservedAt: observedAt})
	if err != nil {
		t.Fatal(err)
	}
	return plan, res
}

// TestFailedBackupOfTheOnlyTargetBecomesARecord: a host with one backup
// target reports an empty target name. The failed backup becomes a record
// like any other, named as Longhorn's default target's ("default"), and
// its purge reaches the backupstore under the host's own spelling.
func TestFailedBackupOfTheOnlyTargetBecomesARecord(t *testing.T) {
	ctx := context.Background()
	failed := backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0000000000000001"}, State: backupdelete.StateError}
	h := newSweepHarness(t, failed)
	must(t, h.mem.Put(failed.Ref, false, "k1"))

	snap, at := h.scan(t)
	if len(snap.Items) != 1 || len(snap.Skipped) != 0 {
		t.Fatalf("items %+v skipped %+v, want the failed backup listed", snap.Items, snap.Skipped)
	}
	it := snap.Items[0]
	if it.Param(orphan.ParamBackupTarget) != backupdelete.DefaultBackupTarget {
		t.Fatalf("target parameter %q, want %q", it.Param(orphan.ParamBackupTarget), backupdelete.DefaultBackupTarget)
	}
	withName, _ := backupdelete.BackupItem(backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-0000000000000001"}, "node-1").Name()
	if name, err := it.Name(); err != nil || name != withName {
		t.Fatalf("record name %q %v, want the default target's %q", name, err, withName)
	}
	_, res := h.run(t, snap, at)
	if !reflect.DeepEqual(res.Created, []string{withName}) {
		t.Fatalf("created %v", res.Created)
	}
	must(t, h.records.RequestDeletion(ctx, withName))
	h.clock.Step(time.Second)
	snap, at = h.scan(t)
	if _, res := h.run(t, snap, at); !reflect.DeepEqual(res.Purged, []string{withName}) {
		t.Fatalf("purge %+v", res)
	}
	if ok, _ := h.mem.BackupExists(ctx, failed.Ref); ok {
		t.Fatal("not deleted from the backupstore")
	}
}

// TestPurgedBackupIsNotRecreatedFromAStaleList: after a purge the host
// still lists the backup as failed for a while (its record outlives the
// data, or its cache is behind). No record is created again for data that
// is gone: the scan checks the backupstore, and a snapshot read before
// the purge is ignored through Cycle.ObservedAt.
func TestPurgedBackupIsNotRecreatedFromAStaleList(t *testing.T) {
	ctx := context.Background()
	failed := bk("backup-0000000000000001", backupdelete.StateError)
	h := newSweepHarness(t, failed)
	must(t, h.mem.Put(failed.Ref, false, "k1"))
	name, _ := backupdelete.BackupItem(failed.Ref, "node-1").Name()

	snap, at := h.scan(t)
	h.run(t, snap, at)
	must(t, h.records.RequestDeletion(ctx, name))
	h.clock.Step(time.Second)
	before, beforeAt := h.scan(t) // read before the purge: still shows the data
	if _, res := h.run(t, before, beforeAt); len(res.Purged) != 1 {
		t.Fatalf("purge %+v", res)
	}

	// The snapshot read before the purge, handed in after it (a host
	// reconciling on the purge's own event), with its ObservedAt.
	if plan, _ := h.run(t, before, beforeAt); len(plan.Create) != 0 {
		t.Fatalf("a snapshot from before the purge re-created the record: %+v", plan)
	}

	// The host's list is stale: the backup is still Error.
	h.clock.Step(time.Second)
	for i := range 3 {
		snap, at := h.scan(t)
		if len(snap.Items) != 0 || len(snap.Skipped) != 1 || !strings.Contains(snap.Skipped[0].Reason, "not in the backupstore") {
			t.Fatalf("scan %d after the purge: items %+v skipped %+v", i, snap.Items, snap.Skipped)
		}
		if plan, res := h.run(t, snap, at); len(plan.Create) != 0 || len(res.Created) != 0 {
			t.Fatalf("scan %d after the purge re-created a record: %+v", i, res)
		}
		h.clock.Step(time.Minute)
	}
	if h.records.Len() != 0 {
		t.Fatalf("%d records left", h.records.Len())
	}
}

// TestScanCannotTellIfDataExists: a backupstore that cannot answer makes
// the scope Unknown (keep every record, create none, purge none).
func TestScanCannotTellIfDataExists(t *testing.T) {
	failed := bk("backup-0000000000000001", backupdelete.StateError)
	h := newSweepHarness(t, failed)
	must(t, h.mem.Put(failed.Ref, false, "k1"))
	h.fb = newOrphans(t, h.lister, existsFails{h.mem})
	snap, _ := h.scan(t)
	if st := snap.Scopes[orphan.Scope{NodeID: "node-1"}]; st.Health != orphan.HealthUnknown || !strings.Contains(st.Message, "not responding") {
		t.Fatalf("scope %+v, want Unknown with the reason", st)
	}
	if v, err := h.fb.Judge(context.Background(), snap.Items[0]); err != nil || v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("Judge = %+v, %v; want undecided while the store cannot tell", v, err)
	}
}

// existsFails is a backupstore that cannot say whether a backup is there.
type existsFails struct{ *backupstoretest.MemStore }

func (existsFails) BackupExists(context.Context, backupdelete.BackupRef) (bool, error) {
	return false, errors.New("nfs: server not responding")
}

// TestNewOrphansRequiresItsParts: without a store, a purged backup the
// host still lists as failed would get a new record; without a store that
// deletes only completed backups, a backup the host lost track of
// (Unknown) could be purged while it is still being written.
func TestNewOrphansRequiresItsParts(t *testing.T) {
	l, mem := newLister(), backupstoretest.NewMemStore()
	for _, c := range []struct {
		name   string
		lister backupdelete.BackupLister
		store  backupdelete.Backupstore
		node   string
	}{
		{"no store", l, nil, "node-1"},
		{"no lister", nil, mem, "node-1"},
		{"store cannot tell whether a backup is in progress", l, noAbilityStore{mem}, "node-1"},
		{"no node", l, mem, ""},
	} {
		if o, err := backupdelete.NewOrphans(c.lister, c.store, backupdelete.OrphansOptions{NodeID: c.node}); !errors.Is(err, orphan.ErrIncomplete) || o != nil {
			t.Errorf("%s: %v, %v; want ErrIncomplete and no adapter", c.name, o, err)
		}
	}
}

// noAbilityStore is a Backupstore that cannot delete conditionally.
type noAbilityStore struct{ backupdelete.Backupstore }

// corruptStore cannot parse the backup it is asked to delete.
type corruptStore struct{ *backupstoretest.MemStore }

func (corruptStore) DeleteCompletedBackup(_ context.Context, ref backupdelete.BackupRef) error {
	return fmt.Errorf("%w: backups/backup_%s.cfg: unexpected end of JSON input", backupdelete.ErrCorrupt, ref.Name)
}

// lyingListingStore finds the volume's listing of backups inconsistent.
type lyingListingStore struct{ *backupstoretest.MemStore }

func (lyingListingStore) DeleteCompletedBackup(_ context.Context, ref backupdelete.BackupRef) error {
	return fmt.Errorf("%w: volume %s: backup backup-2, volume.cfg's LastBackupName, exists but is missing from the listing", backupdelete.ErrListingInconsistent, ref.Volume)
}

// TestOrphansDeleteRefuses walks what an accident or an attacker can
// put in the way of a failed backup's purge. Each case must delete nothing.
func TestOrphansDeleteRefuses(t *testing.T) {
	ctx := context.Background()
	good := bk("backup-0000000000000001", backupdelete.StateError)
	record := func(target, volume, name string) orphan.Record {
		return orphan.Record{Name: "orphan-x", Kind: orphan.KindBackup, NodeID: "node-1", Parameters: map[string]string{
			orphan.ParamBackupTarget: target, orphan.ParamBackupVolume: volume, orphan.ParamBackupName: name}}
	}
	goodRec := record("default", "vol-a", good.Ref.Name)
	for _, c := range []struct {
		name  string
		rec   orphan.Record
		setup func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore
	}{
		{"backup still being written in the backupstore", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			must(t, mem.Put(good.Ref, true, "k1"))
			return mem
		}},
		{"store cannot read the backup's state", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			return corruptStore{mem}
		}},
		{"store's listing of the volume's backups lies", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			return lyingListingStore{mem}
		}},
		{"host record retried (InProgress)", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			l.setState(good.Ref, backupdelete.StateInProgress)
			return mem
		}},
		{"host record new", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			l.setState(good.Ref, backupdelete.StateNew)
			return mem
		}},
		{"host record completed", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			l.setState(good.Ref, backupdelete.StateCompleted)
			return mem
		}},
		{"host returns another backup", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			l.mu.Lock()
			b := l.backups[good.Ref]
			b.Ref.Name = "backup-00000000000000ff"
			l.backups[good.Ref] = b
			l.mu.Unlock()
			return mem
		}},
		{"host returns an empty record", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			l.mu.Lock()
			l.backups[good.Ref] = backupdelete.Backup{}
			l.mu.Unlock()
			return mem
		}},
		{"host record gone", goodRec, func(l *lister, mem *backupstoretest.MemStore) backupdelete.Backupstore {
			l.mu.Lock()
			delete(l.backups, good.Ref)
			l.mu.Unlock()
			return mem
		}},
		{"volume ../", record("default", "../vol-a", good.Ref.Name), nil},
		{"volume with a slash", record("default", "vol/a", good.Ref.Name), nil},
		{"empty volume", record("default", "", good.Ref.Name), nil},
		{"NUL in the volume", record("default", "vol-a\x00", good.Ref.Name), nil},
		{"backup ../../", record("default", "vol-a", "../../volume.cfg"), nil},
		{"absolute backup name", record("default", "vol-a", "/etc/passwd"), nil},
		{"empty backup name", record("default", "vol-a", ""), nil},
		{"NUL in the backup name", record("default", "vol-a", "backup-1\x00.cfg"), nil},
		{"target ../", record("../default", "vol-a", good.Ref.Name), nil},
		{"target with a slash", record("a/b", "vol-a", good.Ref.Name), nil},
		{"NUL in the target", record("default\x00", "vol-a", good.Ref.Name), nil},
		{"not a backup record", orphan.Record{Kind: orphan.KindReplicaData, Parameters: goodRec.Parameters}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLister(good)
			mem := backupstoretest.NewMemStore()
			var store backupdelete.Backupstore = mem
			if c.setup != nil {
				store = c.setup(l, mem)
			}
			if _, err := mem.BackupExists(ctx, good.Ref); err == nil {
				if ok, _ := mem.BackupExists(ctx, good.Ref); !ok {
					must(t, mem.Put(good.Ref, false, "k1"))
				}
			}
			err := newOrphans(t, l, store).Delete(ctx, c.rec)
			if !errors.Is(err, orphan.ErrPreconditionFailed) {
				t.Fatalf("%v, want ErrPreconditionFailed", err)
			}
			if ok, _ := mem.BackupExists(ctx, good.Ref); !ok {
				t.Fatal("the backup was deleted")
			}
			if mem.Deletes() != 0 {
				t.Fatalf("the backupstore saw %d deletions", mem.Deletes())
			}
		})
	}
}

// TestCrashAfterThePurgeForgetsTheRecord: the data was deleted but the
// process died before the record was: the next cycle sees no data, so the
// record is forgotten (never purged again, nothing asked of the store).
func TestCrashAfterThePurgeForgetsTheRecord(t *testing.T) {
	ctx := context.Background()
	failed := bk("backup-0000000000000001", backupdelete.StateError)
	h := newSweepHarness(t, failed)
	must(t, h.mem.Put(failed.Ref, false, "k1"))
	snap, at := h.scan(t)
	h.run(t, snap, at)
	name, _ := backupdelete.BackupItem(failed.Ref, "node-1").Name()
	must(t, h.records.RequestDeletion(ctx, name))
	must(t, h.mem.DeleteBackup(ctx, failed.Ref)) // the purge's deletion, then the crash
	deletes := h.mem.Deletes()

	h.clock.Step(time.Second)
	snap, at = h.scan(t)
	plan, res := h.run(t, snap, at)
	if len(plan.Purge) != 0 || len(plan.Forget) != 1 || !reflect.DeepEqual(res.Forgotten, []string{name}) {
		t.Fatalf("plan %+v result %+v, want the record forgotten", plan, res)
	}
	if h.mem.Deletes() != deletes || h.records.Len() != 0 {
		t.Fatalf("store deletions %d (was %d), records %d", h.mem.Deletes(), deletes, h.records.Len())
	}
}
