package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

// A listing of backups/ that a gateway, cache or proxy rewrote: the
// deletion must delete nothing (not even the backup's cfg) and say why.

// listingBackup is one backup of a listing fixture.
type listingBackup struct {
	name string
	at   string
	cks  []string
}

// writeListingFixture writes vol-a with backups and their blocks, and
// volume.cfg naming last as LastBackupName.
func writeListingFixture(t *testing.T, e *env, last string, backups []listingBackup) {
	t.Helper()
	ctx := ctxT(t)
	must(t, e.store.WriteVolume(ctx, Volume{Name: "vol-a", Size: 8 << 20, CreatedTime: "2026-11-01T00:00:00Z",
		LastBackupName: last, BlockCount: 4, DataEngine: "v1"}))
	for _, b := range backups {
		var blocks []BlockMapping
		for i, ck := range b.cks {
			blocks = append(blocks, BlockMapping{Offset: int64(i) << 21, BlockChecksum: ck})
			must(t, e.store.WriteBlock(ctx, "vol-a", ck, []byte("block "+ck)))
		}
		must(t, e.store.WriteBackup(ctx, Backup{Name: b.name, VolumeName: "vol-a", SnapshotName: "snap-" + b.name,
			SnapshotCreatedAt: b.at, CreatedTime: b.at, Size: 4 << 20, Blocks: blocks}))
	}
}

// backupsListing reports whether r lists vol-a's backups/.
func backupsListing(op string, r *http.Request) bool {
	return op == "ListObjectsV2" && strings.HasSuffix(r.URL.Query().Get("prefix"), "/"+volumePath("vol-a")+"/backups/")
}

// deleteRecorder wraps a proxy hook and records every delete request but
// those of lock objects.
type deleteRecorder struct {
	mu      sync.Mutex
	deletes []string
}

func (d *deleteRecorder) hook(next func(op string, r *http.Request) *s3test.Fault) func(op string, r *http.Request) *s3test.Fault {
	return func(op string, r *http.Request) *s3test.Fault {
		if (op == "DeleteObject" && !strings.Contains(r.URL.Path, "/locks/")) || op == "DeleteObjects" {
			d.mu.Lock()
			d.deletes = append(d.deletes, op+" "+r.URL.Path)
			d.mu.Unlock()
		}
		return next(op, r)
	}
}

func (d *deleteRecorder) none(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.deletes) > 0 {
		t.Errorf("a refused deletion sent %q", d.deletes)
	}
}

// cfgKey is the object key of vol-a's backup cfg in an env's bucket.
func cfgKey(name string) string {
	return "lh/target/" + volumePath("vol-a") + "/backups/backup_" + name + ".cfg"
}

// refusedIntact checks that the deletion of victim deleted nothing: its cfg
// is there and so is every block in want.
func refusedIntact(t *testing.T, e *env, victim string, want ...string) {
	t.Helper()
	if ok, err := e.store.BackupExists(ctxT(t), backupdelete.BackupRef{Volume: "vol-a", Name: victim}); err != nil || !ok {
		t.Errorf("the cfg of %s is gone (%v): a refused deletion must leave it for the retry", victim, err)
	}
	have := e.blocks(t, "vol-a")
	for _, ck := range want {
		if !have[ck] {
			t.Errorf("block %s… was deleted", ck[:8])
		}
	}
}

// lieFixture: backup-3, volume.cfg's last, shares ckS with backup-2, the
// backup deleted; backup-1 shares nothing with either.
var lieFixture = []listingBackup{
	{"backup-1", "2026-11-01T00:00:00Z", []string{ckA}},
	{"backup-2", "2026-11-02T00:00:00Z", []string{ckS, ckB}},
	{"backup-3", "2026-11-03T00:00:00Z", []string{ckS, ckC}},
}

// TestListingDropsLastBackup: a proxy drops backup-3 (volume.cfg's
// LastBackupName) from every listing of backups/. Longhorn's deletion of
// backup-2 would delete ckS, which backup-3 references. Ours, and a
// CollectBlocks, delete nothing and return ErrListingInconsistent; once
// the listing is honest the same deletion goes through.
func TestListingDropsLastBackup(t *testing.T) {
	e := newEnv(t, true, Options{})
	writeListingFixture(t, e, "backup-3", lieFixture)
	drop := s3test.DropListed(cfgKey("backup-3"))
	var rec deleteRecorder
	e.proxy.SetHook(rec.hook(func(op string, r *http.Request) *s3test.Fault {
		if backupsListing(op, r) {
			return drop
		}
		return nil
	}))
	ref := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"}
	c, err := e.store.DeleteBackupReport(ctxT(t), ref)
	if !errors.Is(err, backupdelete.ErrListingInconsistent) || !strings.Contains(err.Error(), "backup-3") {
		t.Fatalf("DeleteBackupReport: %+v, %v; want ErrListingInconsistent naming backup-3", c, err)
	}
	rec.none(t)
	refusedIntact(t, e, "backup-2", ckA, ckS, ckB, ckC)
	if _, err := e.store.CollectBlocks(ctxT(t), "vol-a"); !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Fatalf("CollectBlocks: %v, want ErrListingInconsistent", err)
	}
	refusedIntact(t, e, "backup-2", ckA, ckS, ckB, ckC)

	e.proxy.SetHook(nil)
	c, err = e.store.DeleteBackupReport(ctxT(t), ref)
	must(t, err)
	have := e.blocks(t, "vol-a")
	if have[ckB] || !have[ckS] || !have[ckC] || !have[ckA] || c.Skipped != "" {
		t.Fatalf("honest retry: %+v, blocks %v; want only ckB gone", c, have)
	}
}

// TestListingCutAtPageSize: a gateway cuts every listing at the page size
// and marks it complete, which hides backup-d, sharing ckS with the
// deleted backup-b (Longhorn's deletion, which lists after it removed
// backup-b's cfg, sees backup-a and backup-c at most and deletes ckS).
// volume.cfg's last (backup-a) is on the first page, so only the page
// check can tell.
func TestListingCutAtPageSize(t *testing.T) {
	for _, pageSize := range []int{1, 2} {
		t.Run(fmt.Sprintf("pages of %d", pageSize), func(t *testing.T) {
			e := newEnv(t, true, Options{ListPageSize: pageSize})
			ckD := checksum("d")
			backups := []listingBackup{
				{"backup-a", "2026-11-04T00:00:00Z", []string{ckA}},
				{"backup-b", "2026-11-01T00:00:00Z", []string{ckS, ckB}},
				{"backup-c", "2026-11-02T00:00:00Z", []string{ckC}},
				{"backup-d", "2026-11-03T00:00:00Z", []string{ckS, ckD}},
			}
			victim := "backup-b"
			writeListingFixture(t, e, "backup-a", backups)
			cut := s3test.EndListing()
			var rec deleteRecorder
			e.proxy.SetHook(rec.hook(func(op string, r *http.Request) *s3test.Fault {
				if backupsListing(op, r) {
					return cut
				}
				return nil
			}))
			c, err := e.store.DeleteBackupReport(ctxT(t), backupdelete.BackupRef{Volume: "vol-a", Name: victim})
			if !errors.Is(err, backupdelete.ErrListingInconsistent) {
				t.Fatalf("DeleteBackupReport: %+v, %v; want ErrListingInconsistent", c, err)
			}
			rec.none(t)
			refusedIntact(t, e, victim, ckA, ckS, ckB, ckC, ckD)

			e.proxy.SetHook(nil)
			_, err = e.store.DeleteBackupReport(ctxT(t), backupdelete.BackupRef{Volume: "vol-a", Name: victim})
			must(t, err)
			if have := e.blocks(t, "vol-a"); have[ckB] || !have[ckS] || !have[ckC] || !have[ckA] || !have[ckD] {
				t.Fatalf("honest retry: blocks %v; want only ckB gone", have)
			}
		})
	}
}

// TestListingLegitimateStates: what the checks must let through. A
// listing that really ends on a full page; a LastBackupName whose cfg is
// gone (a deletion that died before it rewrote volume.cfg); an empty one;
// the deleted backup as the last one.
func TestListingLegitimateStates(t *testing.T) {
	cases := []struct {
		name     string
		pageSize int
		last     string
		goneLast bool // remove the last backup's cfg before the deletion
		victim   string
	}{
		{"exactly a full page", 2, "backup-3", false, "backup-2"},
		{"last backup's cfg gone", 0, "backup-3", true, "backup-2"},
		{"no last backup", 0, "", false, "backup-2"},
		{"last backup deleted", 0, "backup-3", false, "backup-3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true, Options{ListPageSize: tc.pageSize})
			backups := lieFixture
			if tc.pageSize == 2 {
				backups = lieFixture[1:] // backup-2 and backup-3: one full page
			}
			writeListingFixture(t, e, tc.last, backups)
			if tc.goneLast {
				must(t, e.store.del(ctxT(t), volumePath("vol-a")+"/backups/backup_backup-3.cfg"))
			}
			var mu sync.Mutex
			listings := 0
			e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
				if backupsListing(op, r) {
					mu.Lock()
					listings++
					mu.Unlock()
				}
				return nil
			})
			c, err := e.store.DeleteBackupReport(ctxT(t), backupdelete.BackupRef{Volume: "vol-a", Name: tc.victim})
			if err != nil || c.Skipped != "" || c.Removed == 0 {
				t.Fatalf("%+v, %v: a legitimate state was refused", c, err)
			}
			mu.Lock()
			defer mu.Unlock()
			// The listing before the cfg's deletion ends on a full page and
			// is listed again in pages of 1 (2 requests), and is proven
			// to end where it says (1 request past its last key); the
			// re-listing after the scan holds one backup, not a full page.
			if want := map[bool]int{true: 5, false: 3}[tc.pageSize == 2]; listings != want {
				t.Errorf("%d listings of backups/, want %d", listings, want)
			}
		})
	}
}

// TestDriverRetriesInconsistentListing: the Driver keeps a backup whose
// deletion met a lying listing in Error with the reason, and the retry
// after the backoff deletes it once the listing is honest; backup-3's
// blocks survive throughout.
func TestDriverRetriesInconsistentListing(t *testing.T) {
	h := newHost(t)
	writeListingFixture(t, h.e, "backup-3", lieFixture)
	for _, b := range lieFixture {
		h.Backups[b.name] = &backupdelete.Backup{Ref: h.Ref(b.name), State: backupdelete.StateCompleted}
	}
	var mu sync.Mutex
	lie := true
	drop := s3test.DropListed(cfgKey("backup-3"))
	h.e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if lie && backupsListing(op, r) {
			return drop
		}
		return nil
	})
	h.ReconcileDelete("backup-2")
	if err := h.WaitCommand(); !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Fatalf("%v, want ErrListingInconsistent", err)
	}
	h.ReconcileDelete("backup-2")
	if b := h.Backups["backup-2"]; b == nil || b.State != backupdelete.StateError ||
		!strings.Contains(h.Message["backup-2"], "inconsistent") {
		t.Fatalf("backup-2 %+v %q, want Error with the listing's reason", b, h.Message["backup-2"])
	}
	if !h.Exists("backup-2") {
		t.Fatal("backup-2's cfg is gone after a refused deletion")
	}
	// Lying still: the retry after the backoff is refused again.
	h.Clock.Step(10 * time.Second)
	if res := h.ReconcileDelete("backup-2"); !res.StartCommand {
		t.Fatalf("%+v, want a retry after the backoff", res)
	}
	if err := h.WaitCommand(); !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Fatalf("%v, want ErrListingInconsistent", err)
	}
	h.ReconcileDelete("backup-2")
	refusedIntact(t, h.e, "backup-2", ckA, ckS, ckB, ckC)

	mu.Lock()
	lie = false
	mu.Unlock()
	h.Clock.Step(time.Minute)
	if res := h.ReconcileDelete("backup-2"); !res.StartCommand {
		t.Fatalf("%+v, want a retry after the backoff", res)
	}
	must(t, h.WaitCommand())
	if res := h.ReconcileDelete("backup-2"); !res.Finalize {
		t.Fatalf("%+v, want the deletion finalized", res)
	}
	if have := h.e.blocks(t, "vol-a"); have[ckB] || !have[ckS] || !have[ckC] || !have[ckA] {
		t.Fatalf("blocks %v; want only ckB gone", have)
	}
}

// TestListingCutAfterTheCfgIsGone: the gateway starts cutting listings
// after backup-b's cfg was deleted, so the re-listing after the scan is
// the one that lies. The deletion fails with ErrListingInconsistent and
// no block is deleted; the backup is gone, so what finishes the job is
// the Driver's CollectVolume (CollectBlocks), which fails the same way
// while the listing lies and collects ckB once it is honest.
func TestListingCutAfterTheCfgIsGone(t *testing.T) {
	e := newEnv(t, true, Options{ListPageSize: 2})
	ckD := checksum("d")
	writeListingFixture(t, e, "backup-a", []listingBackup{
		{"backup-a", "2026-11-04T00:00:00Z", []string{ckA}},
		{"backup-b", "2026-11-01T00:00:00Z", []string{ckS, ckB}},
		{"backup-c", "2026-11-02T00:00:00Z", []string{ckC}},
		{"backup-d", "2026-11-03T00:00:00Z", []string{ckS, ckD}},
	})
	var mu sync.Mutex
	lie := false
	cut := s3test.EndListing()
	var rec deleteRecorder
	e.proxy.SetHook(rec.hook(func(op string, r *http.Request) *s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if op == "DeleteObject" && strings.HasSuffix(r.URL.Path, "/backup_backup-b.cfg") {
			lie = true
		}
		if lie && backupsListing(op, r) {
			return cut
		}
		return nil
	}))
	ref := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-b"}
	if _, err := e.store.DeleteBackupReport(ctxT(t), ref); !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Fatalf("DeleteBackupReport: %v, want ErrListingInconsistent", err)
	}
	if _, err := e.store.CollectBlocks(ctxT(t), "vol-a"); !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Fatalf("CollectBlocks: %v, want ErrListingInconsistent", err)
	}
	rec.mu.Lock()
	if len(rec.deletes) != 1 {
		t.Errorf("deletes %q, want only backup-b's cfg", rec.deletes)
	}
	rec.mu.Unlock()
	if have := e.blocks(t, "vol-a"); len(have) != 5 {
		t.Fatalf("blocks %v: a refused collection deleted blocks", have)
	}

	mu.Lock()
	lie = false
	mu.Unlock()
	c, err := e.store.CollectBlocks(ctxT(t), "vol-a")
	must(t, err)
	if have := e.blocks(t, "vol-a"); have[ckB] || !have[ckS] || !have[ckC] || !have[ckA] || !have[ckD] || c.Removed != 1 {
		t.Fatalf("honest collection: %+v, blocks %v; want only ckB gone", c, have)
	}
}
