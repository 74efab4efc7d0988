package orphan_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// kindAdapter is an adapter of fixed kinds whose scan, verdicts and
// deletions a test sets.
type kindAdapter struct {
	kinds    []orphan.Kind
	snap     orphan.Snapshot
	scanErr  error
	deleted  []string
	finished int
	finErr   error
}

func (a *kindAdapter) Kinds() []orphan.Kind { return a.kinds }
func (a *kindAdapter) Scan(context.Context) (orphan.Snapshot, error) {
	return a.snap, a.scanErr
}
func (a *kindAdapter) Judge(_ context.Context, it orphan.Item) (orphan.Verdict, error) {
	return orphan.Orphan("judged by " + string(a.kinds[0])), nil
}
func (a *kindAdapter) Delete(_ context.Context, r orphan.Record) error {
	a.deleted = append(a.deleted, r.Name)
	return nil
}
func (a *kindAdapter) FinishInterrupted(context.Context) error { a.finished++; return a.finErr }

func TestCombineDispatchesByKind(t *testing.T) {
	ctx := context.Background()
	node := orphan.Scope{NodeID: "n1"}
	disk := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	disks := &kindAdapter{kinds: []orphan.Kind{orphan.KindReplicaData}, snap: orphan.Snapshot{
		Items:  []orphan.Item{orphanRecord("n1", "disk-1", "pvc-a-0123abcd").Item()},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{disk: {Health: orphan.HealthReady, OwnedUnlisted: 5}},
	}}
	runtime := &kindAdapter{kinds: []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}, snap: orphan.Snapshot{
		Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady}},
	}}
	c, err := orphan.Combine(disks, runtime)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Kinds(); !slices.Equal(got, []orphan.Kind{orphan.KindReplicaData, orphan.KindEngineInstance, orphan.KindReplicaInstance}) {
		t.Fatalf("Kinds = %v", got)
	}
	snap, err := c.Scan(ctx)
	// The disks' evidence speaks for replica data only, of every engine.
	if err != nil || len(snap.Items) != 1 || snap.Scopes[disk].Groups[orphan.Group{Kind: orphan.KindReplicaData}].OwnedUnlisted != 5 ||
		snap.Scopes[disk].OwnedUnlisted != 0 || snap.Scopes[node].Health != orphan.HealthReady {
		t.Fatalf("Scan = %+v, %v", snap, err)
	}
	v, _ := c.Judge(ctx, orphan.Item{Kind: orphan.KindReplicaInstance})
	if !strings.Contains(v.Reason, "engine-instance") {
		t.Fatalf("a replica-instance item went to %q", v.Reason)
	}
	v, err = c.Judge(ctx, orphan.Item{Kind: orphan.KindBackup})
	if err != nil || v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("an item no adapter serves: %v, %v; want undecided", v, err)
	}
	rec := orphanRecord("n1", "disk-1", "pvc-a-0123abcd")
	if err := c.Delete(ctx, rec); err != nil || len(disks.deleted) != 1 || len(runtime.deleted) != 0 {
		t.Fatalf("Delete went to the wrong adapter: %v, disks %v, runtime %v", err, disks.deleted, runtime.deleted)
	}
	backup := rec
	backup.Kind = orphan.KindBackup
	var kerr *orphan.KindError
	if err := c.Delete(ctx, backup); !errors.Is(err, orphan.ErrNoAdapter) || !errors.As(err, &kerr) || kerr.Kind != orphan.KindBackup {
		t.Fatalf("Delete of a kind no adapter serves: %v", err)
	}
	disks.finErr = errors.New("tombstone stuck")
	err = c.(orphan.Finisher).FinishInterrupted(ctx)
	var merr *multierror.Error
	if disks.finished != 1 || runtime.finished != 1 || !errors.As(err, &merr) || len(merr.Errors) != 1 {
		t.Fatalf("FinishInterrupted: %v (finished %d, %d)", err, disks.finished, runtime.finished)
	}
}

// TestCombineScanFailsWhole: one adapter's failed scan must not leave the
// others' scopes to speak for its records (a disk missing beside a Ready
// node would be DiskInvalid, and its records forgotten).
func TestCombineScanFailsWhole(t *testing.T) {
	disks := &kindAdapter{kinds: []orphan.Kind{orphan.KindReplicaData}, scanErr: errors.New("disk hung")}
	runtime := &kindAdapter{kinds: []orphan.Kind{orphan.KindEngineInstance}, snap: orphan.Snapshot{
		Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthReady}}}}
	c, _ := orphan.Combine(runtime, disks)
	if snap, err := c.Scan(context.Background()); err == nil || len(snap.Scopes) != 0 {
		t.Fatalf("Scan = %+v, %v; want an error and nothing else", snap, err)
	}
}

func TestCombineRefusesAmbiguity(t *testing.T) {
	a := &kindAdapter{kinds: []orphan.Kind{orphan.KindReplicaData}}
	b := &kindAdapter{kinds: []orphan.Kind{orphan.KindReplicaData, orphan.KindBackup}}
	if _, err := orphan.Combine(a, b); err == nil {
		t.Fatal("two adapters serving one kind were combined")
	}
	if _, err := orphan.Combine(); err == nil {
		t.Fatal("an empty Combine succeeded")
	}
	if _, err := orphan.Combine(&kindAdapter{kinds: []orphan.Kind{"volume"}}); err == nil {
		t.Fatal("an adapter of an unknown kind was accepted")
	}
	if _, err := orphan.NewAdapter(nil, &orphantest.Inventory{}, &orphantest.Judge{}, &orphantest.Deleter{}); err == nil {
		t.Fatal("NewAdapter without kinds succeeded")
	}
	if _, err := orphan.NewAdapter([]orphan.Kind{orphan.KindBackup}, nil, &orphantest.Judge{}, &orphantest.Deleter{}); err == nil {
		t.Fatal("NewAdapter without an Inventory succeeded")
	}
}

// TestKindTableIsConsistent pins the invariants the planner relies on:
// the match parameter and the scope parameter are part of the name, so
// two observations of one record's item share both; kinds of one name
// class share one formula.
func TestKindTableIsConsistent(t *testing.T) {
	formula := map[string][]string{}
	for _, k := range orphan.Kinds() {
		s, ok := orphan.Spec(k)
		if !ok || s.Kind != k || !k.Valid() {
			t.Fatalf("%s: Spec = %+v, %v", k, s, ok)
		}
		if !slices.Contains(s.NameFields, s.MatchParam) {
			t.Errorf("%s: MatchParam %q is not a name field", k, s.MatchParam)
		}
		if s.ScopeParam != "" && !slices.Contains(s.NameFields, s.ScopeParam) {
			t.Errorf("%s: ScopeParam %q is not a name field", k, s.ScopeParam)
		}
		if prev, ok := formula[s.NameClass]; ok && !slices.Equal(prev, s.NameFields) {
			t.Errorf("%s: name class %q with two formulas", k, s.NameClass)
		}
		formula[s.NameClass] = s.NameFields
		// Longhorn's setting names every Longhorn kind; caretaker's own
		// backup kind is enabled by Policy.FailedBackups instead.
		if (len(s.AutoDeletionItems) == 0) != (k == orphan.KindBackup) {
			t.Errorf("%s: auto-deletion items %v", k, s.AutoDeletionItems)
		}
	}
	if _, ok := orphan.Spec("volume"); ok || orphan.Kind("volume").Valid() {
		t.Fatal("an unknown kind has a spec")
	}
}

// TestSweeperMarksFailedPurges: a purge that fails leaves Error=True on
// its record and a value in Result.Failed; the next plan that keeps the
// record clears it.
func TestSweeperMarksFailedPurges(t *testing.T) {
	ctx := context.Background()
	h := newSweepHarness()
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	r.DeletionRequested = true
	h.seed(t, r)
	h.deleter.FailWith(r.Name, errors.New("device busy"))
	res, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: r}}})
	if err == nil || len(res.Failed) != 1 || res.Failed[0].Name != r.Name || res.Failed[0].Op != orphan.OpPurge {
		t.Fatalf("Sync = %+v, %v; want the failure as a value too", res, err)
	}
	got, _ := h.store.Get(ctx, r.Name)
	c := meta.FindStatusCondition(got.Conditions, orphan.ConditionError)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != orphan.ReasonPurgeFailed || !strings.Contains(c.Message, "device busy") {
		t.Fatalf("Error condition = %+v", c)
	}

	// Refused at the re-check (the judge now says owned): PurgeRefused.
	h.deleter.FailWith(r.Name, nil)
	h.judge.Set(r.Name, orphan.Owned("a replica claimed it"))
	res, err = h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: got}}})
	if err != nil || len(res.Refused) != 1 {
		t.Fatalf("Sync = %+v, %v", res, err)
	}
	got, _ = h.store.Get(ctx, r.Name)
	if c := meta.FindStatusCondition(got.Conditions, orphan.ConditionError); c == nil || c.Reason != orphan.ReasonPurgeRefused {
		t.Fatalf("Error condition after a refusal = %+v", c)
	}

	// A plan that keeps the record while its deletion is still requested
	// leaves it: the request has not ended, and Error=True says why.
	scopes := map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthReady}, {NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthReady}}
	plan := orphan.Decide(orphan.Input{Now: testEpoch, Records: []orphan.Record{got}, Scopes: scopes,
		Candidates: []orphan.Candidate{{Item: got.Item(), Verdict: orphan.Undecided("busy")}}})
	if len(plan.Conditions) != 1 || len(plan.Conditions[0].Conditions) != 1 ||
		plan.Conditions[0].Conditions[0].Status != metav1.ConditionTrue || plan.Conditions[0].Conditions[0].Reason != orphan.ReasonPurgeRefused {
		t.Fatalf("a requested record's Error=True is cleared while its deletion is pending, or not set to why: %+v", plan.Conditions)
	}

	// Once no deletion is requested of it, a plan that keeps it clears it.
	got.DeletionRequested = false
	plan = orphan.Decide(orphan.Input{Now: testEpoch, Records: []orphan.Record{got}, Scopes: scopes,
		Candidates: []orphan.Candidate{{Item: got.Item(), Verdict: orphan.Undecided("busy")}}})
	if len(plan.Conditions) != 1 {
		t.Fatalf("plan conditions = %+v", plan.Conditions)
	}
	if c := meta.FindStatusCondition(plan.Conditions[0].Conditions, orphan.ConditionError); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("the plan does not clear Error: %+v", plan.Conditions)
	}
}

// TestDecidePlansInstanceExist: instance records carry InstanceExist=True
// while their item is seen, from creation on; other kinds never do.
func TestDecidePlansInstanceExist(t *testing.T) {
	inst := orphan.Item{Kind: orphan.KindEngineInstance, NodeID: "n1", DataEngine: orphan.DataEngineV2, Parameters: map[string]string{
		orphan.ParamInstanceName: "vol-e-0", orphan.ParamInstanceUUID: "u-1", orphan.ParamInstanceManager: "im-1"}}
	data := orphanRecord("n1", "disk-1", "pvc-a-0123abcd").Item()
	scopes := map[orphan.Scope]orphan.ScopeStatus{{NodeID: "n1"}: {Health: orphan.HealthReady}, {NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthReady}}
	plan := orphan.Decide(orphan.Input{Now: testEpoch, Scopes: scopes, Guard: orphan.Guard{AllowWholeScope: true},
		Candidates: []orphan.Candidate{{Item: inst, Verdict: orphan.Orphan("no record")}, {Item: data, Verdict: orphan.Orphan("not expected")}}})
	if len(plan.Create) != 2 {
		t.Fatalf("created %d records", len(plan.Create))
	}
	for _, r := range plan.Create {
		has := meta.IsStatusConditionTrue(r.Conditions, orphan.ConditionInstanceExist)
		if has != (r.Kind == orphan.KindEngineInstance) {
			t.Errorf("%s record created with InstanceExist=%v", r.Kind, has)
		}
		if !meta.IsStatusConditionFalse(r.Conditions, orphan.ConditionError) || !r.Cleanable() {
			t.Errorf("%s record created without DataCleanable=True and Error=False: %+v", r.Kind, r.Conditions)
		}
	}
	// A kept instance record that lacks it gets it.
	rec, _ := orphan.NewRecord(inst, testEpoch)
	plan = orphan.Decide(orphan.Input{Now: testEpoch, Scopes: scopes, Records: []orphan.Record{rec},
		Candidates: []orphan.Candidate{{Item: inst, Verdict: orphan.Orphan("no record")}}})
	if len(plan.Conditions) != 1 || !meta.IsStatusConditionTrue(plan.Conditions[0].Conditions, orphan.ConditionInstanceExist) {
		t.Fatalf("plan conditions = %+v", plan.Conditions)
	}
}

type engineAdapter struct {
	kindAdapter
	engines []orphan.DataEngine
}

func (a *engineAdapter) DataEngines() []orphan.DataEngine { return a.engines }

// TestCombineRoutesByDataEngine: a host's v1 instance adapter and spdk's
// v2 one serve the same kinds on one node; each gets only its engine's
// items and records.
func TestCombineRoutesByDataEngine(t *testing.T) {
	ctx := context.Background()
	kinds := []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}
	v1 := &engineAdapter{kindAdapter{kinds: kinds}, []orphan.DataEngine{orphan.DataEngineV1}}
	v2 := &engineAdapter{kindAdapter{kinds: kinds}, []orphan.DataEngine{orphan.DataEngineV2}}
	c, err := orphan.Combine(v1, v2)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(e orphan.DataEngine) orphan.Record {
		return orphan.Record{Name: "orphan-" + string(e), Kind: orphan.KindReplicaInstance, DataEngine: e}
	}
	if err := c.Delete(ctx, rec(orphan.DataEngineV2)); err != nil || len(v2.deleted) != 1 || len(v1.deleted) != 0 {
		t.Fatalf("a v2 record went to %v / %v (%v)", v1.deleted, v2.deleted, err)
	}
	if err := c.Delete(ctx, rec("v3")); !errors.Is(err, orphan.ErrNoAdapter) {
		t.Fatalf("a record of an engine nobody serves: %v", err)
	}
	if v, _ := c.Judge(ctx, orphan.Item{Kind: orphan.KindEngineInstance, DataEngine: ""}); v.Outcome != orphan.OutcomeUndecided {
		t.Fatalf("an item without an engine was judged %v", v)
	}
	// Overlap is refused: an unscoped adapter of the same kind, or two
	// that share an engine.
	if _, err := orphan.Combine(v1, &kindAdapter{kinds: kinds}); err == nil {
		t.Fatal("an unscoped adapter beside a scoped one of the same kinds was combined")
	}
	if _, err := orphan.Combine(v1, &engineAdapter{kindAdapter{kinds: kinds}, []orphan.DataEngine{orphan.DataEngineV2, orphan.DataEngineV1}}); err == nil {
		t.Fatal("two adapters serving v1 instances were combined")
	}
}

// TestRunTakesNodeHealthOnlyFromTheHost: under Combine, an instance
// adapter reports its node Ready (SPDK answered), which says nothing about
// eviction. A disk's requested purge must not ride on it: without the
// host's node health nothing is purged; with it, the purge goes on.
func TestRunTakesNodeHealthOnlyFromTheHost(t *testing.T) {
	ctx := context.Background()
	node := orphan.Scope{NodeID: "n1"}
	disk := orphan.Scope{NodeID: "n1", Disk: "disk-1"}
	owned := orphanRecord("n1", "disk-1", "pvc-live-0123abcd").Item()
	rec := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	rec.DeletionRequested = true
	disks := &verdictAdapter{kindAdapter: kindAdapter{kinds: []orphan.Kind{orphan.KindReplicaData}, snap: orphan.Snapshot{
		Items:  []orphan.Item{rec.Item(), owned},
		Scopes: map[orphan.Scope]orphan.ScopeStatus{disk: {Health: orphan.HealthReady}}}}, owned: mustName(t, owned)}
	runtime := &kindAdapter{kinds: []orphan.Kind{orphan.KindEngineInstance}, snap: orphan.Snapshot{
		Scopes: map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthReady}}}}
	c, err := orphan.Combine(disks, runtime)
	if err != nil {
		t.Fatal(err)
	}
	store := orphan.NewMemStore()
	if _, err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	s, err := orphan.NewSweeper(store, c, orphan.SweeperOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := s.Reconcile(ctx, snap, orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}})
	if err != nil || len(res.Purged) != 0 || len(disks.deleted) != 0 {
		t.Fatalf("without the host's node health: %+v, %v, deleted %v; want nothing purged", res, err, disks.deleted)
	}
	// The host says the node is being evicted: the record is forgotten.
	evicted := map[orphan.Scope]orphan.ScopeStatus{node: {Health: orphan.HealthNodeEvicted}}
	if _, res, err = s.Reconcile(ctx, snap, orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: evicted}); err != nil ||
		len(res.Forgotten) != 1 || len(disks.deleted) != 0 {
		t.Fatalf("node evicted: %+v, %v, deleted %v; want the record forgotten", res, err, disks.deleted)
	}
	if _, err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	_, res, err = s.Reconcile(ctx, snap, orphan.Cycle{Selector: orphan.Selector{NodeID: "n1"}, Scopes: hostReady("n1")})
	if err != nil || len(res.Purged) != 1 || len(disks.deleted) != 1 {
		t.Fatalf("with the host's node Ready: %+v, %v; want the purge", res, err)
	}
}

// verdictAdapter judges one name owned and every other item an orphan.
type verdictAdapter struct {
	kindAdapter
	owned string
}

func (a *verdictAdapter) Judge(_ context.Context, it orphan.Item) (orphan.Verdict, error) {
	if n, _ := it.Name(); n == a.owned {
		return orphan.Owned("expected"), nil
	}
	return orphan.Orphan("not expected"), nil
}

// TestConstructorErrorsWrapErrIncomplete: every constructor of the package
// refuses a missing part or an unknown kind the same way, with an error
// wrapping ErrIncomplete that names what is wrong.
func TestConstructorErrorsWrapErrIncomplete(t *testing.T) {
	inv, j, d := &orphantest.Inventory{}, &orphantest.Judge{}, &orphantest.Deleter{}
	kinds := []orphan.Kind{orphan.KindReplicaData}
	for _, tc := range []struct {
		name, says string
		err        error
	}{
		{"NewAdapter without kinds", "kind", second(orphan.NewAdapter(nil, inv, j, d))},
		{"NewAdapter of an unknown kind", `"volume"`, second(orphan.NewAdapter([]orphan.Kind{"volume"}, inv, j, d))},
		{"NewAdapter without a Judge", "Judge", second(orphan.NewAdapter(kinds, inv, nil, d))},
		{"Combine of nil", "nil adapter", second(orphan.Combine(nil))},
		{"NewSweeper without a Store", "Store", second(orphan.NewSweeper(nil, nil, orphan.SweeperOptions{}))},
		{"NewMonitor without an Inventory", "Inventory", second(orphan.NewMonitor(nil, orphan.MonitorOptions{}))},
	} {
		if !errors.Is(tc.err, orphan.ErrIncomplete) || !strings.Contains(tc.err.Error(), tc.says) || !strings.HasPrefix(tc.err.Error(), "orphan: ") {
			t.Errorf("%s: %v; want an error wrapping ErrIncomplete naming %s", tc.name, tc.err, tc.says)
		}
	}
}

func second[T any](_ T, err error) error { return err }
