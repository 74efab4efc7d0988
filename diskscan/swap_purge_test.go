package diskscan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// armedExpected is an ExpectedSource that runs fire on the n-th call
// after arm, and never again.
type armedExpected struct {
	*StaticExpected
	mu   sync.Mutex
	n    int
	fire func()
}

func (a *armedExpected) arm(n int, fire func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n, a.fire = n, fire
}

func (a *armedExpected) Expected(ctx context.Context, d Disk) (NameSet, error) {
	a.mu.Lock()
	if a.fire != nil {
		if a.n--; a.n == 0 {
			f := a.fire
			a.fire = nil
			f()
		}
	}
	a.mu.Unlock()
	return a.StaticExpected.Expected(ctx, d)
}

// swapWorld is one disk with a live replica a Replica expects and an
// orphan whose record a user asked to delete, driven by a Sweeper.
type swapWorld struct {
	t          *testing.T
	ctx        context.Context
	d          Disk
	o          *Orphans
	exp        *armedExpected
	store      *orphan.MemStore
	sw         *orphan.Sweeper
	cycle      orphan.Cycle
	live, lost string // names
	rec        orphan.Record
}

func newSwapWorld(t *testing.T) *swapWorld {
	t.Helper()
	w := &swapWorld{t: t, ctx: context.Background(), live: "pvc-live-r-00000000", lost: "pvc-lost-r-00000001"}
	w.d = makeDisk(t, t.TempDir(), "n", "d", "u")
	replica(t, w.d, w.live, disktest.Replica{Size: 1 << 20})
	replica(t, w.d, w.lost, disktest.Replica{Size: 1 << 20})
	w.exp = &armedExpected{StaticExpected: NewStaticExpected(ReplicaRef{Name: w.live, DiskID: w.d.UUID, DataDirectoryName: w.live})}
	w.o = newOrphans(t, w.exp, settled, w.d)
	w.store = orphan.NewMemStore()
	var err error
	if w.sw, err = orphan.NewSweeper(w.store, w.o, orphan.SweeperOptions{Clock: clocktesting.NewFakeClock(time.Now())}); err != nil {
		t.Fatal(err)
	}
	w.cycle = orphan.Cycle{Selector: orphan.Selector{NodeID: "n"},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n"}: {Health: orphan.HealthReady}}}
	if _, res, err := w.sw.Reconcile(w.ctx, w.scan(), w.cycle); err != nil || len(res.Created) != 1 {
		t.Fatalf("first cycle: %+v, %v", res, err)
	}
	recs, _ := w.store.List(w.ctx, orphan.Selector{})
	w.rec = recs[0]
	if err := w.store.RequestDeletion(w.ctx, w.rec.Name); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *swapWorld) scan() orphan.Snapshot {
	w.t.Helper()
	snap, err := w.o.Scan(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return snap
}

// plan plans from snap as Sweeper.Reconcile would.
func (w *swapWorld) plan(snap orphan.Snapshot) orphan.Plan {
	w.t.Helper()
	cands, err := orphan.JudgeAll(w.ctx, w.o, snap.Items)
	if err != nil {
		w.t.Fatal(err)
	}
	recs, _ := w.store.List(w.ctx, orphan.Selector{})
	p := orphan.Decide(orphan.Input{Now: time.Now(), Scopes: orphan.MergeScopes(snap.Scopes, w.cycle.Scopes), Candidates: cands, Records: recs})
	if len(p.Purge) != 1 || p.Purge[0].Record.Name != w.rec.Name {
		w.t.Fatalf("the plan does not purge the requested record: %+v", p)
	}
	return p
}

// swap replaces the orphan directory by a symbolic link to the live one.
func (w *swapWorld) swap() {
	p := filepath.Join(w.d.Path, ReplicasDir, w.lost)
	if err := os.RemoveAll(p); err != nil {
		w.t.Error(err)
	}
	if err := os.Symlink(w.live, p); err != nil {
		w.t.Error(err)
	}
}

// checkUntouched fails unless the live replica and the symbolic link are
// as the swap left them.
func (w *swapWorld) checkUntouched() {
	w.t.Helper()
	if _, err := os.Stat(filepath.Join(w.d.Path, ReplicasDir, w.live, MetaFile)); err != nil {
		w.t.Fatalf("the live replica was touched: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(w.d.Path, ReplicasDir, w.lost)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		w.t.Fatalf("the symbolic link was touched: %v, %v", fi, err)
	}
}

// errorCondition returns the record's Error condition; nil if the record
// is gone.
func (w *swapWorld) errorCondition() *metav1.Condition {
	r, err := w.store.Get(w.ctx, w.rec.Name)
	if err != nil {
		return nil
	}
	return meta.FindStatusCondition(r.Conditions, orphan.ConditionError)
}

// TestRequestedPurgeOfDirectorySwappedForSymlink: a requested record whose
// directory is replaced by a symbolic link (to a live replica) between the
// scan and the purge, or during the purge's own checks, is refused visibly
// (a refusal, never a failure retried for ever: the Deleter's refusal
// wraps orphan.ErrPreconditionFailed), keeps showing Error=True while it
// waits, and is forgotten by the first plan from a scan that sees the
// link; the live replica and the link are never touched.
func TestRequestedPurgeOfDirectorySwappedForSymlink(t *testing.T) {
	for _, when := range []string{"before the purge", "during the purge's checks"} {
		t.Run(when, func(t *testing.T) {
			w := newSwapWorld(t)
			snap := w.scan()
			plan := w.plan(snap)
			if when == "before the purge" {
				w.swap()
			} else {
				// The Sweeper's re-judge asks first, then Delete, after
				// its lstat of the directory.
				w.exp.arm(2, w.swap)
			}
			res, err := w.sw.Sync(w.ctx, plan)
			if err != nil || len(res.Failed) != 0 {
				t.Fatalf("Sync failed instead of refusing: %+v, %v", res.Failed, err)
			}
			if len(res.Purged) != 0 || len(res.Refused) != 1 || res.Refused[0].Name != w.rec.Name {
				t.Fatalf("Sync = %+v; want the purge refused", res)
			}
			w.checkUntouched()
			if c := w.errorCondition(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != orphan.ReasonPurgeRefused {
				t.Fatalf("after the refusal: Error = %+v, want True/PurgeRefused", c)
			}

			// Plans from the scan that predates the swap keep the record,
			// still requested, and still showing why it waits.
			for range 2 {
				if _, res, err := w.sw.Reconcile(w.ctx, snap, w.cycle); err != nil || len(res.Purged) != 0 {
					t.Fatalf("stale cycle: %+v, %v", res, err)
				}
				if c := w.errorCondition(); c == nil || c.Status != metav1.ConditionTrue {
					t.Fatalf("a stale cycle left the requested record with nothing to show: Error = %+v", c)
				}
			}

			// A scan that sees the link forgets the record; nothing is
			// recorded for the link.
			_, res, err = w.sw.Reconcile(w.ctx, w.scan(), w.cycle)
			if err != nil || len(res.Forgotten) != 1 || res.Forgotten[0] != w.rec.Name || len(res.Created) != 0 || w.store.Len() != 0 {
				t.Fatalf("fresh cycle: %+v, %v, %d records", res, err, w.store.Len())
			}
			w.checkUntouched()
		})
	}
}

// TestPurgeRefusesDirectoryReplacedDuringChecks: Delete itself, when the
// directory it lstat'ed is replaced (by a symbolic link, or by another
// directory) before it walks it, refuses with orphan.ErrPreconditionFailed
// and ErrChanged, and removes nothing.
func TestPurgeRefusesDirectoryReplacedDuringChecks(t *testing.T) {
	for _, by := range []string{"symlink", "directory"} {
		t.Run(by, func(t *testing.T) {
			w := newSwapWorld(t)
			w.scan() // pins the filesystem ID
			lost := filepath.Join(w.d.Path, ReplicasDir, w.lost)
			w.exp.arm(1, func() {
				if by == "symlink" {
					w.swap()
					return
				}
				if err := os.Rename(lost, lost+".moved"); err != nil {
					t.Error(err)
				}
				if err := disktest.MakeReplica(w.d.Path, w.lost, disktest.Replica{Size: 1 << 20}); err != nil {
					t.Error(err)
				}
			})
			err := w.o.Delete(w.ctx, w.rec)
			if !errors.Is(err, orphan.ErrPreconditionFailed) || !errors.Is(err, ErrChanged) {
				t.Fatalf("Delete = %v, want a refusal wrapping ErrPreconditionFailed and ErrChanged", err)
			}
			if _, err := os.Stat(filepath.Join(lost, MetaFile)); err != nil {
				t.Fatalf("what replaced the directory was touched: %v", err)
			}
			if by == "directory" {
				if _, err := os.Stat(filepath.Join(lost+".moved", MetaFile)); err != nil {
					t.Fatalf("the moved directory was touched: %v", err)
				}
			}
			if tombs := tombstonesIn(t, w.d); len(tombs) != 0 {
				t.Fatalf("tombstones left: %v", tombs)
			}
		})
	}
}
