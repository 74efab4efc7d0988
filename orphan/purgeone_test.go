package orphan_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// finalizerWorld is a node of Longhorn's shape: a disk with owned
// replicas and orphans, records created by the node's cycle, and a
// finalizer that purges one record through PurgeRecord.
type finalizerWorld struct {
	t       *testing.T
	store   *orphan.MemStore
	adapter *hookedAdapter
	sweeper *orphan.Sweeper
	clock   *clocktesting.FakeClock
	cycle   orphan.Cycle
}

// hookedAdapter is a MemAdapter whose Judge and Delete can run a hook
// first: what the world does between the request and the purge.
type hookedAdapter struct {
	*orphantest.MemAdapter
	mu       sync.Mutex
	onJudge  func(it orphan.Item, call int) // call counts the judgements of the item's name, from 1
	judged   map[string]int
	onDelete func(r orphan.Record)
}

func (a *hookedAdapter) Judge(ctx context.Context, it orphan.Item) (orphan.Verdict, error) {
	name, _ := it.Name()
	a.mu.Lock()
	a.judged[name]++
	call, hook := a.judged[name], a.onJudge
	a.mu.Unlock()
	if hook != nil {
		hook(it, call)
	}
	return a.MemAdapter.Judge(ctx, it)
}

func (a *hookedAdapter) Delete(ctx context.Context, r orphan.Record) error {
	a.mu.Lock()
	hook := a.onDelete
	a.mu.Unlock()
	if hook != nil {
		hook(r)
	}
	return a.MemAdapter.Delete(ctx, r)
}

func newFinalizerWorld(t *testing.T, owned int, orphans ...string) (*finalizerWorld, []orphan.Item) {
	t.Helper()
	w := &finalizerWorld{t: t, store: orphan.NewMemStore(), clock: clocktesting.NewFakeClock(testEpoch),
		adapter: &hookedAdapter{MemAdapter: orphantest.NewMemAdapter(), judged: map[string]int{}}}
	for i := range owned {
		must(t, w.adapter.Put(replicaItem("n1", "disk-1", "pvc-live"+string(rune('a'+i))+"-0123abcd"), true))
	}
	var items []orphan.Item
	for _, data := range orphans {
		it := replicaItem("n1", "disk-1", data)
		must(t, w.adapter.Put(it, false))
		items = append(items, it)
	}
	s, err := orphan.NewSweeper(w.store, w.adapter, orphan.SweeperOptions{Clock: w.clock})
	must(t, err)
	w.sweeper = s
	vols := map[string]orphan.VolumeState{}
	for _, data := range orphans {
		vols[strings.TrimSuffix(data, "-0123abcd")] = orphan.VolumeHealthy
	}
	w.cycle = orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1"), Volumes: vols, VolumesComplete: true}
	// The node controller's cycle creates the records.
	snap, err := w.adapter.Scan(context.Background())
	must(t, err)
	if _, res, err := w.sweeper.Reconcile(context.Background(), snap, w.cycle); err != nil || len(res.Created) != len(orphans) {
		t.Fatalf("the node's cycle created %v, %v; want %d records", res.Created, err, len(orphans))
	}
	return w, items
}

// request is a user's deletion of the item's record (kubectl delete
// orphan): the record's name is returned.
func (w *finalizerWorld) request(it orphan.Item) string {
	w.t.Helper()
	name, err := it.Name()
	must(w.t, err)
	must(w.t, w.store.RequestDeletion(context.Background(), name))
	return name
}

// refusal fails the test unless err is a *Refusal of rule, and the
// record is kept, marked Error=True, with its data.
func (w *finalizerWorld) refusal(err error, name, rule string, it orphan.Item) {
	w.t.Helper()
	var ref *orphan.Refusal
	if !errors.As(err, &ref) || !errors.Is(err, orphan.ErrRefused) || ref.Rule != rule || ref.Name != name {
		w.t.Fatalf("PurgeRecord = %v, want a *Refusal of rule %s", err, rule)
	}
	if !w.adapter.Has(it) {
		w.t.Fatalf("refused (%v), but the data is gone", err)
	}
	r, gerr := w.store.Get(context.Background(), name)
	if gerr != nil {
		w.t.Fatalf("refused (%v), but the record is gone: %v", err, gerr)
	}
	if c := meta.FindStatusCondition(r.Conditions, orphan.ConditionError); c == nil || c.Status != metav1.ConditionTrue || c.Reason != orphan.ReasonPurgeRefused {
		w.t.Fatalf("refused (%v), but Error = %+v", err, c)
	}
}

func TestPurgeRecordPurgesARequestedOrphan(t *testing.T) {
	w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
	name := w.request(items[0])
	out, err := w.sweeper.PurgeRecord(context.Background(), name, w.cycle, orphan.PurgeRecordOptions{})
	if err != nil || out != orphan.PurgePurged {
		t.Fatalf("PurgeRecord = %v, %v; want Purged", out, err)
	}
	if w.adapter.Has(items[0]) || w.store.Len() != 0 {
		t.Fatalf("after Purged: data there %v, records %d", w.adapter.Has(items[0]), w.store.Len())
	}
	// The finalizer runs again (a retried reconcile): the record is gone.
	if out, err := w.sweeper.PurgeRecord(context.Background(), name, w.cycle, orphan.PurgeRecordOptions{}); err != nil || out != orphan.PurgeGone {
		t.Fatalf("PurgeRecord of a purged record = %v, %v; want Gone", out, err)
	}
}

// The replica is re-created (a rebuild claims the directory again)
// between the user's request and the purge: at the re-judgement, or
// after it, just before the Deleter acts. Neither purges.
func TestPurgeRecordRefusesAReplicaRecreatedMeanwhile(t *testing.T) {
	for _, when := range []string{"before the re-judgement", "before the deletion"} {
		t.Run(when, func(t *testing.T) {
			w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
			name := w.request(items[0])
			base := w.adapter.judged[name]
			switch when {
			case "before the re-judgement":
				// The plan's judgement sees the orphan; the purge's, right
				// after, the replica that claims it.
				w.adapter.onJudge = func(it orphan.Item, call int) {
					if n, _ := it.Name(); n == name && call == base+2 {
						must(t, w.adapter.Put(it, true))
					}
				}
			case "before the deletion":
				w.adapter.onDelete = func(r orphan.Record) { must(t, w.adapter.Put(r.Item(), true)) }
			}
			_, err := w.sweeper.PurgeRecord(context.Background(), name, w.cycle, orphan.PurgeRecordOptions{})
			w.refusal(err, name, orphan.RuleRecheck, items[0])
		})
	}
}

// A record marked DataCleanable=False (a host's mark: its disk is being
// evicted) is never purged on request: the record is released and the
// data stays, as Longhorn releases an Orphan that is not cleanable.
func TestPurgeRecordNeverPurgesARecordNotCleanable(t *testing.T) {
	w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
	name := w.request(items[0])
	r, err := w.store.Get(context.Background(), name)
	must(t, err)
	meta.SetStatusCondition(&r.Conditions, metav1.Condition{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionFalse, Reason: "DiskEvicted"})
	_, err = w.store.Update(context.Background(), r)
	must(t, err)
	out, err := w.sweeper.PurgeRecord(context.Background(), name, w.cycle, orphan.PurgeRecordOptions{})
	if err != nil || out != orphan.PurgeReleased {
		t.Fatalf("PurgeRecord = %v, %v; want Released", out, err)
	}
	if !w.adapter.Has(items[0]) {
		t.Fatal("the data of a record marked DataCleanable=False was purged")
	}
}

// A record whose name is not the one its parameters give: a forged
// Orphan named after one directory whose parameters point at another (or
// the other way round) names no data the library may delete.
func TestPurgeRecordRefusesAForgedName(t *testing.T) {
	w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd", "pvc-b-0123abcd")
	forged, err := orphan.NewRecord(items[1], testEpoch)
	must(t, err)
	forged.Name = "orphan-" + strings.Repeat("ab", 32) // a well-formed name of no item
	forged.DeletionRequested = true
	forged.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
	_, err = w.store.Create(context.Background(), forged)
	must(t, err)
	_, err = w.sweeper.PurgeRecord(context.Background(), forged.Name, w.cycle, orphan.PurgeRecordOptions{})
	w.refusal(err, forged.Name, orphan.RuleMismatch, items[1])
	if !w.adapter.Has(items[0]) {
		t.Fatal("a forged record purged another item")
	}
}

// The guards weigh a one-shot purge as they weigh the cycle's.
func TestPurgeRecordAppliesTheGuards(t *testing.T) {
	ctx := context.Background()
	t.Run("last copy of a faulted volume", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
		name := w.request(items[0])
		w.cycle.Volumes = map[string]orphan.VolumeState{"pvc-a": orphan.VolumeFaulted}
		_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{})
		w.refusal(err, name, string(orphan.GuardLastCopy), items[0])
		// A person's override lets the requested purge through.
		w.cycle.LastCopyOverride = map[string]bool{name: true}
		if out, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{}); err != nil || out != orphan.PurgePurged {
			t.Fatalf("with the override: %v, %v", out, err)
		}
	})
	t.Run("faulted since the plan", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
		name := w.request(items[0])
		w.cycle.LookupVolume = func(context.Context, string) (orphan.VolumeState, bool, error) {
			return orphan.VolumeFaulted, true, nil
		}
		_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{})
		w.refusal(err, name, string(orphan.GuardLastCopy), items[0])
	})
	t.Run("whole scope judged orphaned", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 0, "pvc-a-0123abcd", "pvc-b-0123abcd", "pvc-c-0123abcd")
		name := w.request(items[0])
		_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{})
		w.refusal(err, name, string(orphan.GuardWholeScope), items[0])
	})
	t.Run("nothing expected", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
		name := w.request(items[0])
		snap, err := w.adapter.Scan(ctx)
		must(t, err)
		d1 := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
		st := snap.Scopes[d1]
		st.NoneExpected = true
		snap.Scopes[d1] = st
		_, err = w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{Snapshot: &snap})
		w.refusal(err, name, string(orphan.GuardNoneExpected), items[0])
	})
	t.Run("undecided", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
		name := w.request(items[0])
		w.adapter.onJudge = func(it orphan.Item, _ int) {
			if n, _ := it.Name(); n == name {
				w.adapter.Remove(it) // MemAdapter: gone data is undecided
			}
		}
		snap := orphan.Snapshot{Items: []orphan.Item{items[0]}, Scopes: ready(orphan.Scope{NodeID: "n1", Disk: "disk-1"})}
		_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{Snapshot: &snap})
		var ref *orphan.Refusal
		if !errors.As(err, &ref) || ref.Rule != orphan.RuleUndecided {
			t.Fatalf("PurgeRecord = %v, want an Undecided refusal", err)
		}
		r, _ := w.store.Get(ctx, name)
		if c := meta.FindStatusCondition(r.Conditions, orphan.ConditionError); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "no longer exists") {
			t.Fatalf("Error = %+v", c)
		}
	})
	t.Run("node not given", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
		name := w.request(items[0])
		w.cycle.Scopes = nil
		_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{})
		var ref *orphan.Refusal
		if !errors.As(err, &ref) || ref.Rule != orphan.RuleScopeUnknown || !w.adapter.Has(items[0]) {
			t.Fatalf("PurgeRecord = %v, want a ScopeUnknown refusal", err)
		}
	})
	t.Run("not requested", func(t *testing.T) {
		w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
		name, _ := items[0].Name()
		_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{})
		var ref *orphan.Refusal
		if !errors.As(err, &ref) || ref.Rule != orphan.RuleNotRequested || !w.adapter.Has(items[0]) {
			t.Fatalf("PurgeRecord = %v, want a NotRequested refusal", err)
		}
	})
}

// A purge the node's own cycle has under way is not started twice: the
// Deleter is never called twice at once for one record.
func TestPurgeRecordWhileTheCyclePurgesIt(t *testing.T) {
	ctx := context.Background()
	w, items := newFinalizerWorld(t, 2, "pvc-a-0123abcd")
	name := w.request(items[0])
	inDelete, release := make(chan struct{}), make(chan struct{})
	w.adapter.onDelete = func(orphan.Record) {
		close(inDelete)
		<-release
	}
	done := make(chan orphan.Result)
	go func() {
		snap, _ := w.adapter.Scan(ctx)
		_, res, _ := w.sweeper.Reconcile(ctx, snap, w.cycle)
		done <- res
	}()
	<-inDelete
	_, err := w.sweeper.PurgeRecord(ctx, name, w.cycle, orphan.PurgeRecordOptions{})
	var ref *orphan.Refusal
	if !errors.As(err, &ref) || ref.Rule != orphan.RuleInProgress {
		t.Fatalf("PurgeRecord during the cycle's purge = %v, want InProgress", err)
	}
	close(release)
	if res := <-done; len(res.Purged) != 1 {
		t.Fatalf("the cycle's purge: %+v", res)
	}
}
