package orphan_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// lifecycle is one node's world driven through Sweeper.Reconcile cycle after
// cycle: a MemAdapter's items, a MemStore, a fake clock, and an
// auto-deletion policy for replica data with a one-minute grace period.
type lifecycle struct {
	t       *testing.T
	ctx     context.Context
	clock   *clocktesting.FakeClock
	world   *orphantest.MemAdapter
	store   *orphan.MemStore
	sweeper *orphan.Sweeper
	policy  orphan.Policy

	mu     sync.Mutex
	events []orphan.Event
}

func newLifecycle(t *testing.T) *lifecycle {
	t.Helper()
	l := &lifecycle{t: t, ctx: context.Background(), clock: clocktesting.NewFakeClock(testEpoch),
		world: orphantest.NewMemAdapter(), store: orphan.NewMemStore(),
		policy: orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}, GracePeriod: time.Minute}}
	var err error
	hooks := orphan.HooksFunc(func(e orphan.Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	})
	if l.sweeper, err = orphan.NewSweeper(l.store, l.world, orphan.SweeperOptions{Clock: l.clock, Hooks: hooks}); err != nil {
		t.Fatal(err)
	}
	return l
}

// put makes an orphan directory on n1/disk-1.
func (l *lifecycle) put(dataName string) (orphan.Item, string) {
	l.t.Helper()
	it := replicaItem("n1", "disk-1", dataName)
	if err := l.world.Put(it, false); err != nil {
		l.t.Fatal(err)
	}
	name, _ := it.Name()
	return it, name
}

// run scans and runs one cycle with the host's scopes, and with the
// snapshot's scopes replaced by scan (nil: the scan's own).
func (l *lifecycle) run(host, scan map[orphan.Scope]orphan.ScopeStatus) (orphan.Plan, orphan.Result) {
	l.t.Helper()
	snap, err := l.world.Scan(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	if scan != nil {
		snap.Scopes = scan
	}
	plan, res, err := l.sweeper.Reconcile(l.ctx, snap, orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: host, Policy: l.policy,
		VolumesComplete: true}) // no volume listed: each is deleted, and the last-copy guard stays out of these tests
	if err != nil {
		l.t.Fatalf("Reconcile: %v", err)
	}
	return plan, res
}

// cleanable returns the record's DataCleanable condition, failing if the
// record is gone.
func (l *lifecycle) cleanable(name string) *metav1.Condition {
	l.t.Helper()
	r, err := l.store.Get(l.ctx, name)
	if err != nil {
		l.t.Fatalf("record %s: %v", name, err)
	}
	return meta.FindStatusCondition(r.Conditions, orphan.ConditionDataCleanable)
}

func (l *lifecycle) gone(name string) bool {
	_, err := l.store.Get(l.ctx, name)
	return err != nil
}

var (
	n1Ready    = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthReady}}
	n1Down     = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthNodeUnavailable, Message: "the node is down"}}
	n1Evicted  = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthNodeEvicted}}
	n1Deleted  = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthNodeDeleted}}
	d1Invalid  = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthDiskInvalid, Message: "longhorn-disk.cfg: unreadable"}}
	d1Removed  = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1", Disk: "disk-2"}: {Health: orphan.HealthReady}}
	d1Evicted  = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthReady}, {NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthDiskEvicted}}
	d1UUIDGone = map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthDiskChanged}}
)

// TestOutageKeepsRecordsNotCleanable follows longhorn/longhorn#7795: a node
// that is down (or whose manager is missing) and a disk whose state cannot
// be read keep their records, marked DataCleanable=False with the reason,
// purge nothing even when auto-deletion is long due, and are cleanable
// again once the scope is Ready; then the due purge goes on.
func TestOutageKeepsRecordsNotCleanable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		host, scan map[orphan.Scope]orphan.ScopeStatus
		reason     orphan.Health
	}{
		{"node down", n1Down, nil, orphan.HealthNodeUnavailable},
		{"disk unreadable", n1Ready, d1Invalid, orphan.HealthDiskInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			it, name := l.put("pvc-a-0123abcd")
			l.run(n1Ready, nil)
			if c := l.cleanable(name); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("new record: DataCleanable = %+v", c)
			}

			// The outage lasts well past the grace period.
			for range 3 {
				l.clock.Step(time.Hour)
				plan, res := l.run(tc.host, tc.scan)
				if l.gone(name) {
					t.Fatalf("the record was forgotten during the outage: plan %+v", plan)
				}
				if len(res.Purged) != 0 || !l.world.Has(it) {
					t.Fatalf("data purged during the outage: %+v", res)
				}
				c := l.cleanable(name)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(tc.reason) {
					t.Fatalf("during the outage: DataCleanable = %+v, want False/%s", c, tc.reason)
				}
			}

			// Ready again: cleanable again, and the overdue auto-deletion
			// purges on the next cycle (never in the cycle that marks it).
			_, res := l.run(n1Ready, nil)
			if len(res.Purged) != 0 || !l.world.Has(it) {
				t.Fatalf("purged in the cycle that marks it cleanable: %+v", res)
			}
			if c := l.cleanable(name); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("back to Ready: DataCleanable = %+v, want True", c)
			}
			_, res = l.run(n1Ready, nil)
			if len(res.Purged) != 1 || l.world.Has(it) || !l.gone(name) {
				t.Fatalf("the due auto-deletion did not purge once Ready: %+v", res)
			}
		})
	}
}

// TestOutageRequestedRecordIsForgottenNotPurged: a user's deletion of a
// record whose node is down ends at once as a forget (Longhorn deletes an
// Orphan that is not cleanable without touching its data), never a
// request left hanging, and never a purge.
func TestOutageRequestedRecordIsForgottenNotPurged(t *testing.T) {
	l := newLifecycle(t)
	l.policy = orphan.Policy{}
	it, name := l.put("pvc-a-0123abcd")
	l.run(n1Ready, nil)
	l.run(n1Down, nil)
	if err := l.store.RequestDeletion(l.ctx, name); err != nil {
		t.Fatal(err)
	}
	_, res := l.run(n1Down, nil)
	if len(res.Forgotten) != 1 || !l.gone(name) || !l.world.Has(it) {
		t.Fatalf("requested during an outage: %+v; record gone %v, data kept %v", res, l.gone(name), l.world.Has(it))
	}
}

// TestForgetOnlyWhenScopeIsGone: eviction of the node or the disk, a
// deleted node, a disk removed from its node or replaced by another disk
// (its UUID changed) forget the records, and never purge their data.
func TestForgetOnlyWhenScopeIsGone(t *testing.T) {
	for _, tc := range []struct {
		name       string
		host, scan map[orphan.Scope]orphan.ScopeStatus
		reason     orphan.ForgetReason
	}{
		{"node evicted", n1Evicted, nil, orphan.ForgetReason(orphan.HealthNodeEvicted)},
		{"node deleted", n1Deleted, nil, orphan.ForgetReason(orphan.HealthNodeDeleted)},
		{"disk evicted", d1Evicted, nil, orphan.ForgetReason(orphan.HealthDiskEvicted)},
		{"disk evicted on a down node", orphan.MergeScopes(n1Down, map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthDiskEvicted}}), nil, orphan.ForgetReason(orphan.HealthDiskEvicted)},
		{"disk removed", n1Ready, d1Removed, orphan.ForgetReason(orphan.HealthDiskRemoved)},
		{"disk replaced", n1Ready, d1UUIDGone, orphan.ForgetReason(orphan.HealthDiskChanged)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			it, name := l.put("pvc-a-0123abcd")
			l.run(n1Ready, nil)
			l.clock.Step(time.Hour)
			plan, res := l.run(tc.host, tc.scan)
			if !l.gone(name) || len(res.Forgotten) != 1 || len(plan.Forget) != 1 || plan.Forget[0].Reason != tc.reason {
				t.Fatalf("not forgotten with %s: plan %+v, result %+v", tc.reason, plan.Forget, res)
			}
			if len(res.Purged) != 0 || !l.world.Has(it) {
				t.Fatalf("data purged: %+v", res)
			}
		})
	}
}

// TestDismissedOrphanKeepsItsData follows longhorn/longhorn#11286: a
// dismissed orphan is never purged (auto-deletion passes it by; a
// deletion request of it is refused visibly), stays recorded so the next
// scan does not record it anew, and un-dismissing it returns it to the
// normal rules.
func TestDismissedOrphanKeepsItsData(t *testing.T) {
	l := newLifecycle(t)
	kept, keptName := l.put("pvc-kept-0123abcd")
	back, backName := l.put("pvc-back-0123abcd")
	l.run(n1Ready, nil)
	for _, name := range []string{keptName, backName} {
		if err := l.store.SetDismissed(l.ctx, name, true); err != nil {
			t.Fatal(err)
		}
	}

	// Auto-deletion long due: nothing purged, nothing recorded anew, and
	// the records say why.
	for range 3 {
		l.clock.Step(time.Hour)
		_, res := l.run(n1Ready, nil)
		if len(res.Purged) != 0 || len(res.Created) != 0 || len(res.Forgotten) != 0 || l.store.Len() != 2 {
			t.Fatalf("dismissed orphans: %+v (records %d)", res, l.store.Len())
		}
		for _, name := range []string{keptName, backName} {
			if c := l.cleanable(name); c == nil || c.Status != metav1.ConditionFalse || c.Reason != orphan.ReasonDismissed {
				t.Fatalf("%s: DataCleanable = %+v, want False/Dismissed", name, c)
			}
		}
	}

	// A deletion requested of a dismissed orphan is refused, visibly.
	if err := l.store.RequestDeletion(l.ctx, keptName); err != nil {
		t.Fatal(err)
	}
	plan, res := l.run(n1Ready, nil)
	if len(res.Purged) != 0 || !l.world.Has(kept) || l.gone(keptName) {
		t.Fatalf("dismissed and requested: %+v", res)
	}
	if len(plan.Refused) != 1 || plan.Refused[0].Name != keptName || len(res.Refused) != 1 {
		t.Fatalf("the refusal is not reported: plan %+v, result %+v", plan.Refused, res.Refused)
	}
	l.mu.Lock()
	var seen []orphan.Event
	for _, e := range l.events {
		if e.Op == orphan.OpPurge && e.Name == keptName {
			seen = append(seen, e)
		}
	}
	l.mu.Unlock()
	if len(seen) != 1 || seen[0].Outcome != orphan.EventRefused || seen[0].Reason != orphan.RefusalDismissed {
		t.Fatalf("hooks saw %+v; want one EventRefused (a user's choice, not the Guard's)", seen)
	}

	// Un-dismissed: cleanable again on the next cycle, purged by the
	// overdue auto-deletion on the one after.
	if err := l.store.SetDismissed(l.ctx, backName, false); err != nil {
		t.Fatal(err)
	}
	l.run(n1Ready, nil)
	if c := l.cleanable(backName); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("un-dismissed: DataCleanable = %+v, want True", c)
	}
	_, res = l.run(n1Ready, nil)
	if len(res.Purged) != 1 || res.Purged[0] != backName || l.world.Has(back) {
		t.Fatalf("un-dismissed orphan not purged: %+v", res)
	}
	if !l.world.Has(kept) {
		t.Fatal("the dismissed orphan's data was purged")
	}
}

// TestSweeperRefusesDismissedAtTheMoment: a purge planned before the user
// dismissed the orphan is refused by the Sweeper's re-read.
func TestSweeperRefusesDismissedAtTheMoment(t *testing.T) {
	l := newLifecycle(t)
	it, name := l.put("pvc-a-0123abcd")
	l.run(n1Ready, nil)
	if err := l.store.RequestDeletion(l.ctx, name); err != nil {
		t.Fatal(err)
	}
	snap, _ := l.world.Scan(l.ctx)
	cands, _ := orphan.JudgeAll(l.ctx, l.world, snap.Items)
	recs, _ := l.store.List(l.ctx, orphan.Selector{})
	plan := orphan.Decide(orphan.Input{Now: l.clock.Now(), Scopes: orphan.MergeScopes(snap.Scopes, n1Ready), Candidates: cands, Records: recs})
	if len(plan.Purge) != 1 {
		t.Fatalf("plan: %+v", plan)
	}
	if err := l.store.SetDismissed(l.ctx, name, true); err != nil {
		t.Fatal(err)
	}
	res, err := l.sweeper.Sync(l.ctx, plan)
	if err != nil || len(res.Purged) != 0 || len(res.Refused) != 1 || !l.world.Has(it) {
		t.Fatalf("Sync = %+v, %v; want the purge refused and the data kept", res, err)
	}
}
