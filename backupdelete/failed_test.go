package backupdelete_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/backupstoretest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// lister is a host's backup records in memory.
type lister struct {
	mu      sync.Mutex
	backups map[backupdelete.BackupRef]backupdelete.Backup
	err     error
}

func newLister(bs ...backupdelete.Backup) *lister {
	l := &lister{backups: map[backupdelete.BackupRef]backupdelete.Backup{}}
	for _, b := range bs {
		l.backups[b.Ref] = b
	}
	return l
}

func (l *lister) ListBackups(context.Context) ([]backupdelete.Backup, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	var out []backupdelete.Backup
	for _, b := range l.backups {
		out = append(out, b)
	}
	return out, nil
}

func (l *lister) GetBackup(_ context.Context, ref backupdelete.BackupRef) (backupdelete.Backup, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return backupdelete.Backup{}, l.err
	}
	b, ok := l.backups[ref]
	if !ok {
		return backupdelete.Backup{}, fmt.Errorf("backup %s: %w", ref, backupdelete.ErrNotFound)
	}
	return b, nil
}

func (l *lister) setState(ref backupdelete.BackupRef, s backupdelete.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.backups[ref]
	b.State = s
	l.backups[ref] = b
}

func bk(name string, s backupdelete.State) backupdelete.Backup {
	return backupdelete.Backup{Ref: backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: name}, State: s}
}

// newOrphans is NewOrphans on node-1, failing the test on an error.
func newOrphans(t *testing.T, l backupdelete.BackupLister, s backupdelete.Backupstore) *backupdelete.Orphans {
	t.Helper()
	o, err := backupdelete.NewOrphans(l, s, backupdelete.OrphansOptions{NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOrphansScanAndJudge(t *testing.T) {
	l := newLister(
		bk("backup-ok", backupdelete.StateCompleted),
		bk("backup-err", backupdelete.StateError),
		bk("backup-unk", backupdelete.StateUnknown),
		bk("backup-del", backupdelete.StateDeleting),
		bk("backup-new", backupdelete.StateNew),
		bk("backup-err-purged", backupdelete.StateError), // its data is gone
		backupdelete.Backup{Ref: backupdelete.BackupRef{Volume: "../x", Name: "b1"}, State: backupdelete.StateError},
	)
	mem := backupstoretest.NewMemStore()
	for _, b := range []string{"backup-ok", "backup-err", "backup-unk", "backup-del", "backup-new"} {
		must(t, mem.Put(bk(b, "").Ref, false, "k1"))
	}
	f := newOrphans(t, l, mem)
	snap, err := f.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range snap.Items {
		if it.Kind != orphan.KindBackup || it.NodeID != "node-1" {
			t.Fatalf("item %+v", it)
		}
		names = append(names, it.Param(orphan.ParamBackupName))
	}
	if len(names) != 2 || len(snap.Skipped) != 2 {
		t.Fatalf("items %v skipped %v, want the Error and Unknown backups and two skipped (invalid, purged)", names, snap.Skipped)
	}
	// The owned backups are left out and counted, the pre-filtering rule
	// of orphan.Inventory (the invalid one is neither).
	if st := snap.Scopes[orphan.Scope{NodeID: "node-1"}]; st.Health != orphan.HealthReady || st.OwnedUnlisted != 3 {
		t.Fatalf("scope %+v, want Ready with 3 owned backups unlisted", st)
	}
	// Stable order: by record name.
	n0, _ := snap.Items[0].Name()
	n1, _ := snap.Items[1].Name()
	if n0 >= n1 {
		t.Fatal("items not sorted by record name")
	}

	for _, c := range []struct {
		name string
		want orphan.Outcome
	}{
		{"backup-err", orphan.OutcomeOrphan},
		{"backup-unk", orphan.OutcomeOrphan},
		{"backup-ok", orphan.OutcomeOwned},
		{"backup-del", orphan.OutcomeOwned},
		{"backup-new", orphan.OutcomeOwned},
		{"backup-gone", orphan.OutcomeUndecided},
		{"backup-err-purged", orphan.OutcomeUndecided},
	} {
		v, err := f.Judge(context.Background(), backupdelete.BackupItem(bk(c.name, "").Ref, "node-1"))
		if err != nil || v.Outcome != c.want || v.Reason == "" {
			t.Errorf("%s: %+v %v, want %v with a reason", c.name, v, err, c.want)
		}
	}
	l.err = errors.New("apiserver unavailable")
	if v, _ := f.Judge(context.Background(), backupdelete.BackupItem(bk("backup-err", "").Ref, "node-1")); v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("a lister error must be undecided, got %+v", v)
	}
	if _, err := f.Scan(context.Background()); err == nil {
		t.Fatal("a lister error must fail the scan")
	}
	if v, _ := f.Judge(context.Background(), orphan.Item{Kind: orphan.KindReplicaData}); v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("a foreign item must be undecided, got %+v", v)
	}
}

func TestBackupItemNameIsOrphansFormula(t *testing.T) {
	it := backupdelete.BackupItem(backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-0123456789abcdef"}, "node-1")
	name, err := it.Name()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("default-vol-a-backup-0123456789abcdef"))
	if name != "orphan-"+hex.EncodeToString(sum[:]) {
		t.Fatalf("name %q", name)
	}
	ref, err := backupdelete.RefFromItem(it)
	if err != nil || ref != (backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-0123456789abcdef"}) {
		t.Fatalf("%+v %v", ref, err)
	}
	if _, err := backupdelete.RefFromItem(orphan.Item{Kind: orphan.KindBackup}); !errors.Is(err, backupdelete.ErrInvalidRef) {
		t.Fatalf("%v, want ErrInvalidRef", err)
	}
}

func TestOrphansDeleteRechecks(t *testing.T) {
	ctx := context.Background()
	mem := backupstoretest.NewMemStore()
	failed := bk("backup-err", backupdelete.StateError)
	must(t, mem.Put(failed.Ref, false, "k1"))
	l := newLister(failed)
	d := newOrphans(t, l, mem)
	rec, err := orphan.NewRecord(backupdelete.BackupItem(failed.Ref, "node-1"), epoch)
	if err != nil {
		t.Fatal(err)
	}

	// Retried in the meantime: not an orphan any more, nothing deleted.
	l.setState(failed.Ref, backupdelete.StateInProgress)
	if err := d.Delete(ctx, rec); !errors.Is(err, orphan.ErrPreconditionFailed) {
		t.Fatalf("%v, want ErrPreconditionFailed", err)
	}
	if ok, _ := mem.BackupExists(ctx, failed.Ref); !ok {
		t.Fatal("deleted a backup that was no longer failed")
	}
	// The host record vanished: nothing proves it failed.
	l.mu.Lock()
	delete(l.backups, failed.Ref)
	l.mu.Unlock()
	if err := d.Delete(ctx, rec); !errors.Is(err, orphan.ErrPreconditionFailed) {
		t.Fatalf("%v, want ErrPreconditionFailed", err)
	}
	// Failed: deleted; already gone: success.
	d = newOrphans(t, newLister(failed), mem)
	for range 2 {
		if err := d.Delete(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := mem.BackupExists(ctx, failed.Ref); ok {
		t.Fatal("not deleted")
	}
	if mem.Blocks("default", "vol-a") != nil {
		t.Fatal("blocks not collected")
	}
}

// TestFailedBackupsThroughOrphanPlanner runs seed 000's failed-backup loop
// end to end through package orphan: scan, judge, Decide with an
// auto-deletion policy for backups, a Sweeper over the Orphans adapter.
func TestFailedBackupsThroughOrphanPlanner(t *testing.T) {
	ctx := context.Background()
	mem := backupstoretest.NewMemStore()
	ok, failed := bk("backup-ok", backupdelete.StateCompleted), bk("backup-err", backupdelete.StateError)
	must(t, mem.Put(ok.Ref, false, "k1"))
	must(t, mem.Put(failed.Ref, false, "k1", "k2"))
	l := newLister(ok, failed)
	fb := newOrphans(t, l, mem)
	store := orphan.NewMemStore()
	// Longhorn's setting has no item for failed backups: caretaker's own
	// option turns their auto-deletion on.
	policy := orphan.Policy{FailedBackups: true, GracePeriod: 60 * time.Second}
	sweeper, err := orphan.NewSweeper(store, fb, orphan.SweeperOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cycle := func(now time.Time) (orphan.Plan, orphan.Result) {
		t.Helper()
		snap, err := fb.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var cands []orphan.Candidate
		for _, it := range snap.Items {
			v, err := fb.Judge(ctx, it)
			if err != nil {
				t.Fatal(err)
			}
			cands = append(cands, orphan.Candidate{Item: it, Verdict: v})
		}
		recs, err := store.List(ctx, orphan.Selector{Kind: orphan.KindBackup})
		if err != nil {
			t.Fatal(err)
		}
		plan := orphan.Decide(orphan.Input{Now: now, Scopes: snap.Scopes, Candidates: cands, Records: recs, Policy: policy})
		res, err := sweeper.Sync(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		return plan, res
	}

	_, res := cycle(epoch)
	wantName, _ := backupdelete.BackupItem(failed.Ref, "node-1").Name()
	if !reflect.DeepEqual(res.Created, []string{wantName}) || len(res.Purged) != 0 {
		t.Fatalf("first cycle %+v, want the failed backup's record created, nothing purged in the grace period", res)
	}
	_, res = cycle(epoch.Add(time.Minute))
	if !reflect.DeepEqual(res.Purged, []string{wantName}) {
		t.Fatalf("after the grace period %+v, want the failed backup purged", res)
	}
	if gone, _ := mem.BackupExists(ctx, failed.Ref); gone {
		t.Fatal("failed backup still in the backupstore")
	}
	if still, _ := mem.BackupExists(ctx, ok.Ref); !still {
		t.Fatal("the completed backup was touched")
	}
	if got := mem.Blocks("default", "vol-a"); !reflect.DeepEqual(got, []string{"k1"}) {
		t.Fatalf("blocks %v, want k1 kept for backup-ok", got)
	}
}

func TestParseFailedBackupTTL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"", 1440 * time.Minute, false},
		{"0", 0, false},
		{" 90 ", 90 * time.Minute, false},
		{"-1", 0, true},
		{"1.5", 0, true},
		{"1h", 0, true},
		{"99999999999999999999", 0, true},
		{"\t60\n", 60 * time.Minute, false},
		{"\u00a060", 0, true}, // settings.Trim: ASCII white space only
	} {
		got, err := backupdelete.ParseFailedBackupTTL(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%q: %v %v", c.in, got, err)
		}
		var se *backupdelete.SettingError
		if err != nil && (!errors.Is(err, backupdelete.ErrInvalidSetting) || !errors.As(err, &se) || se.Setting != backupdelete.SettingFailedBackupTTL || se.Value != c.in) {
			t.Errorf("%q: %v is not a *SettingError for %s wrapping ErrInvalidSetting", c.in, err, backupdelete.SettingFailedBackupTTL)
		}
	}
}

func TestExpiredFailedBackups(t *testing.T) {
	at := func(name string, s backupdelete.State, failedAt time.Time) backupdelete.Backup {
		b := bk(name, s)
		b.FailedAt = failedAt
		return b
	}
	bs := []backupdelete.Backup{
		at("backup-old-err", backupdelete.StateError, epoch.Add(-2*time.Hour)),
		at("backup-old-unk", backupdelete.StateUnknown, epoch.Add(-time.Hour)),
		at("backup-young", backupdelete.StateError, epoch.Add(-30*time.Minute)),
		at("backup-ok", backupdelete.StateCompleted, epoch.Add(-5*time.Hour)),
		at("backup-undated", backupdelete.StateError, time.Time{}),
	}
	got, next := backupdelete.ExpiredFailedBackups(bs, time.Hour, epoch)
	if len(got) != 2 || got[0].Name != "backup-old-err" || got[1].Name != "backup-old-unk" {
		t.Fatalf("expired %v", got)
	}
	if !next.Equal(epoch.Add(30 * time.Minute)) {
		t.Fatalf("requeue at %v", next)
	}
	if got, next := backupdelete.ExpiredFailedBackups(bs, 0, epoch); got != nil || !next.IsZero() {
		t.Fatal("ttl 0 must disable")
	}
}
