package rebuildtest

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/rebuild"
)

// Harness says how to make each implementation under test: one maker per
// interface of package rebuild that hosts implement. A nil field skips that
// interface's section. A maker is called once per subtest and must return
// a harness over a host with no volumes.
type Harness struct {
	// VolumeSource makes a harness over the rebuild.VolumeSource under test.
	VolumeSource func(t *testing.T) VolumeSourceHarness
	// TicketStore makes a harness over the rebuild.TicketStore under test.
	TicketStore func(t *testing.T) TicketStoreHarness
}

// RunConformanceTests checks that the implementations h makes honour the
// contracts of package rebuild's host interfaces, one subtest per
// interface: "VolumeSource" (volumes, the raw global setting and status
// updates) and "TicketStore". A Harness with no maker set is a test
// failure: it would check nothing.
//
// A host runs it against its own adapters in one line:
//
//	func TestMyHost(t *testing.T) {
//		rebuildtest.RunConformanceTests(t, rebuildtest.Harness{
//			VolumeSource: func(t *testing.T) rebuildtest.VolumeSourceHarness { return newMyHarness(t) },
//			TicketStore:  func(t *testing.T) rebuildtest.TicketStoreHarness { return newMyHarness(t) },
//		})
//	}
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.VolumeSource == nil && h.TicketStore == nil {
		t.Fatal("rebuildtest: RunConformanceTests needs at least one maker in the Harness")
	}
	if h.VolumeSource != nil {
		t.Run("VolumeSource", func(t *testing.T) { testVolumeSource(t, h.VolumeSource) })
	}
	if h.TicketStore != nil {
		t.Run("TicketStore", func(t *testing.T) { testTicketStore(t, h.TicketStore) })
	}
}

// VolumeFixture creates and removes volumes in the host that backs the
// implementation under test. Each method returns once the implementation
// sees the change (an informer-backed host waits for its cache).
type VolumeFixture interface {
	// CreateVolume makes a detached volume exist as spec describes, with
	// spec.Replicas healthy replicas and no tickets. The suite always fills
	// every field of spec.
	CreateVolume(ctx context.Context, spec VolumeSpec) error
	// DeleteVolume makes the volume gone, not merely marked for deletion.
	DeleteVolume(ctx context.Context, name string) error
}

// VolumeSourceHarness gives the VolumeSource section a VolumeSource and the
// means to set up what it reads and to see what it wrote.
type VolumeSourceHarness interface {
	VolumeFixture
	// Source returns the implementation under test.
	Source() rebuild.VolumeSource
	// SetGlobalSetting stores value as the raw global setting
	// rebuild.SettingName. A host that refuses a value it does not know
	// returns an error; the suite then skips the check that needs it.
	SetGlobalSetting(ctx context.Context, value string) error
	// Status returns what UpdateStatus stored on the volume: the required
	// flag and the condition of type rebuild.ConditionType (zero if none).
	Status(ctx context.Context, name string) (rebuild.Status, error)
}

// GlobalSettingRemover is an optional ability of a VolumeSourceHarness
// whose host can lack the global setting altogether; the suite then checks
// that GlobalSetting answers the host's default.
type GlobalSettingRemover interface {
	// RemoveGlobalSetting deletes the global setting.
	RemoveGlobalSetting(ctx context.Context) error
}

// TicketStoreHarness gives the TicketStore section a TicketStore and the means
// to create the volumes its tickets belong to.
type TicketStoreHarness interface {
	VolumeFixture
	// Store returns the implementation under test.
	Store() rebuild.TicketStore
}

// statusEpoch is the first LastTransitionTime of the suite's statuses:
// whole seconds, as metav1.Time keeps them.
var statusEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sampleSpec(name string) VolumeSpec {
	return VolumeSpec{Name: name, OwnerNode: "node-1", DataEngine: rebuild.DataEngineV2, Replicas: 3, Setting: rebuild.VolumeSettingIgnored}
}

func sampleStatus(required bool, status metav1.ConditionStatus, reason string, after time.Duration) rebuild.Status {
	return rebuild.Status{Required: required, Condition: metav1.Condition{
		Type: rebuild.ConditionType, Status: status, Reason: reason, Message: "conformance: " + reason,
		LastTransitionTime: metav1.NewTime(statusEpoch.Add(after)),
	}}
}

func mustCreate(t *testing.T, h VolumeFixture, spec VolumeSpec) {
	t.Helper()
	if err := h.CreateVolume(context.Background(), spec); err != nil {
		t.Fatalf("CreateVolume(%s): %v", spec.Name, err)
	}
}

func mustStatus(t *testing.T, h VolumeSourceHarness, name string) rebuild.Status {
	t.Helper()
	st, err := h.Status(context.Background(), name)
	if err != nil {
		t.Fatalf("harness Status(%s): %v", name, err)
	}
	return st
}

func mustTickets(t *testing.T, h TicketStoreHarness, volume string) []rebuild.Ticket {
	t.Helper()
	ts, err := h.Store().Tickets(context.Background(), volume)
	if err != nil {
		t.Fatalf("Tickets(%s): %v", volume, err)
	}
	return ts
}

func checkView(t *testing.T, v rebuild.Volume, s VolumeSpec) {
	t.Helper()
	if v.Name != s.Name || v.OwnerNode != s.OwnerNode || v.DataEngine != s.DataEngine || v.Setting != s.Setting {
		t.Errorf("Volume(%s) identity = %q/%q/%q/%q, want %q/%q/%q/%q", s.Name,
			v.Name, v.OwnerNode, v.DataEngine, v.Setting, s.Name, s.OwnerNode, s.DataEngine, s.Setting)
	}
	if v.DesiredReplicas != s.Replicas || v.HealthyReplicas() != s.Replicas || v.Degraded() {
		t.Errorf("Volume(%s): %d of %d replicas healthy (degraded %v), want %d of %d", s.Name,
			v.HealthyReplicas(), v.DesiredReplicas, v.Degraded(), s.Replicas, s.Replicas)
	}
	if v.State != rebuild.StateDetached || v.Deleting {
		t.Errorf("Volume(%s): state %q deleting %v, want a detached volume not being deleted", s.Name, v.State, v.Deleting)
	}
	if v.Robustness != rebuild.RobustnessHealthy && v.Robustness != rebuild.RobustnessUnknown {
		t.Errorf("Volume(%s): robustness %q, want healthy (or unknown, as Longhorn says of detached volumes)", s.Name, v.Robustness)
	}
	seen := map[string]bool{}
	for _, r := range v.Replicas {
		if r.Name == "" || seen[r.Name] {
			t.Errorf("Volume(%s): replica name %q is empty or repeated", s.Name, r.Name)
		}
		seen[r.Name] = true
	}
}

func checkStatus(t *testing.T, what string, got, want rebuild.Status, wantLTT metav1.Time) {
	t.Helper()
	g, w := got.Condition, want.Condition
	if got.Required != want.Required {
		t.Errorf("%s: Required = %v, want %v", what, got.Required, want.Required)
	}
	if g.Type != w.Type || g.Status != w.Status || g.Reason != w.Reason || g.Message != w.Message {
		t.Errorf("%s: condition %s=%s %s %q, want %s=%s %s %q", what, g.Type, g.Status, g.Reason, g.Message,
			w.Type, w.Status, w.Reason, w.Message)
	}
	if !g.LastTransitionTime.Equal(&wantLTT) {
		t.Errorf("%s: LastTransitionTime = %v, want %v (merged as meta.SetStatusCondition does: it moves only when Status changes)",
			what, g.LastTransitionTime.UTC(), wantLTT.UTC())
	}
}

func ticketsByID(t *testing.T, ts []rebuild.Ticket) map[string]rebuild.Ticket {
	t.Helper()
	m := make(map[string]rebuild.Ticket, len(ts))
	for _, tk := range ts {
		if _, dup := m[tk.ID]; dup {
			t.Errorf("Tickets returned ID %s twice", tk.ID)
		}
		m[tk.ID] = tk
	}
	return m
}

func checkTickets(t *testing.T, what string, got, want []rebuild.Ticket) {
	t.Helper()
	byID := ticketsByID(t, got)
	if len(byID) != len(want) {
		t.Errorf("%s: tickets %v, want %v", what, sortedIDs(got), sortedIDs(want))
	}
	for _, w := range want {
		g, ok := byID[w.ID]
		if !ok {
			t.Errorf("%s: ticket %s missing", what, w.ID)
			continue
		}
		if g != w {
			t.Errorf("%s: ticket %s = %+v, want %+v (ID, Type, NodeID, Priority and DisableFrontend as put)", what, w.ID, g, w)
		}
	}
}

func sortedIDs(ts []rebuild.Ticket) []string {
	ids := make([]string, len(ts))
	for i, tk := range ts {
		ids[i] = tk.ID
	}
	sort.Strings(ids)
	return ids
}

// concurrently runs f(0) … f(n-1) on n goroutines at once and reports every
// failure they pass to fail once all are done.
func concurrently(t *testing.T, n int, f func(i int, fail func(error))) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, fail)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent call: %v", err)
	}
}
