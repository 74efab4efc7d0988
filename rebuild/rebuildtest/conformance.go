package rebuildtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/rebuild"
)

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

// VolumeSourceHarness gives RunVolumeSourceTests a VolumeSource and the
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

// TicketStoreHarness gives RunTicketStoreTests a TicketStore and the means
// to create the volumes its tickets belong to.
type TicketStoreHarness interface {
	VolumeFixture
	// Store returns the implementation under test.
	Store() rebuild.TicketStore
}

// RunVolumeSourceTests checks that the VolumeSource of each harness honours
// the contract of rebuild.VolumeSource: views of existing volumes, NotFound
// for missing and deleted ones, raw global setting values, status updates
// merged as meta.SetStatusCondition does, copies, concurrent use and
// cancelled contexts. newHarness is called once per subtest and must return
// a harness over a host with no volumes.
func RunVolumeSourceTests(t *testing.T, newHarness func(t *testing.T) VolumeSourceHarness) {
	t.Helper()
	ctx := context.Background()

	t.Run("VolumeView", func(t *testing.T) {
		h := newHarness(t)
		specs := []VolumeSpec{
			{Name: "vol-a", OwnerNode: "node-1", DataEngine: rebuild.DataEngineV2, Replicas: 3, Setting: rebuild.VolumeSettingIgnored},
			{Name: "vol-b", OwnerNode: "node-2", DataEngine: rebuild.DataEngineV1, Replicas: 2, Setting: rebuild.VolumeSettingEnabled},
			{Name: "vol-c", OwnerNode: "node-3", DataEngine: rebuild.DataEngineV2, Replicas: 1, Setting: rebuild.VolumeSettingDisabled},
		}
		for _, s := range specs {
			mustCreate(t, h, s)
		}
		for _, s := range specs {
			v, err := h.Source().Volume(ctx, s.Name)
			if err != nil {
				t.Fatalf("Volume(%s): %v", s.Name, err)
			}
			checkView(t, v, s)
		}
	})

	t.Run("MissingVolumeIsNotFound", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		if _, err := h.Source().Volume(ctx, "vol-missing"); !errors.Is(err, rebuild.ErrNotFound) {
			t.Fatalf("Volume of a volume that never existed: got %v, want an error wrapping ErrNotFound", err)
		}
	})

	t.Run("DeletedVolumeIsNotFound", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		mustCreate(t, h, sampleSpec("vol-b"))
		if err := h.DeleteVolume(ctx, "vol-a"); err != nil {
			t.Fatalf("DeleteVolume: %v", err)
		}
		if _, err := h.Source().Volume(ctx, "vol-a"); !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("Volume after deletion: got %v, want an error wrapping ErrNotFound", err)
		}
		if err := h.Source().UpdateStatus(ctx, "vol-a", sampleStatus(true, metav1.ConditionTrue, rebuild.ReasonAttaching, 0)); !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("UpdateStatus after deletion: got %v, want an error wrapping ErrNotFound", err)
		}
		if _, err := h.Source().Volume(ctx, "vol-b"); err != nil {
			t.Errorf("deleting vol-a affected vol-b: %v", err)
		}
	})

	t.Run("GlobalSettingIsRaw", func(t *testing.T) {
		h := newHarness(t)
		for _, value := range []string{"enabled", "disabled", "true", "false", "enabled"} {
			if err := h.SetGlobalSetting(ctx, value); err != nil {
				t.Fatalf("SetGlobalSetting(%q): %v", value, err)
			}
			got, err := h.Source().GlobalSetting(ctx)
			if err != nil {
				t.Fatalf("GlobalSetting: %v", err)
			}
			if got != value {
				t.Errorf("GlobalSetting = %q after setting %q: the raw value must reach the driver unchanged", got, value)
			}
		}
		const unknown = "sometimes"
		if err := h.SetGlobalSetting(ctx, unknown); err != nil {
			t.Skipf("the host refuses the unknown value %q (%v); nothing more to check", unknown, err)
		}
		got, err := h.Source().GlobalSetting(ctx)
		if err != nil {
			t.Fatalf("GlobalSetting with an unknown value: %v (the driver parses it, the source must not)", err)
		}
		if got != unknown {
			t.Errorf("GlobalSetting = %q, want the unknown raw value %q so the driver can report it", got, unknown)
		}
	})

	t.Run("MissingGlobalSettingIsTheDefault", func(t *testing.T) {
		h := newHarness(t)
		r, ok := h.(GlobalSettingRemover)
		if !ok {
			t.Skip("the harness cannot remove the global setting")
		}
		if err := r.RemoveGlobalSetting(ctx); err != nil {
			t.Fatalf("RemoveGlobalSetting: %v", err)
		}
		got, err := h.Source().GlobalSetting(ctx)
		if errors.Is(err, rebuild.ErrNotFound) {
			t.Fatalf("GlobalSetting without a setting: %v; want the host's default, there is no NotFound", err)
		}
		if err != nil {
			t.Fatalf("GlobalSetting without a setting: %v", err)
		}
		if _, err := rebuild.ParseGlobalSetting(got); err != nil {
			t.Errorf("GlobalSetting without a setting = %q, not a valid default: %v", got, err)
		}
	})

	t.Run("UpdateStatusRoundTrip", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		mustCreate(t, h, sampleSpec("vol-b"))
		want := sampleStatus(true, metav1.ConditionTrue, rebuild.ReasonAttaching, 0)
		if err := h.Source().UpdateStatus(ctx, "vol-a", want); err != nil {
			t.Fatalf("UpdateStatus: %v", err)
		}
		got := mustStatus(t, h, "vol-a")
		checkStatus(t, "stored status", got, want, want.Condition.LastTransitionTime)
		if other := mustStatus(t, h, "vol-b"); other.Required || other.Condition.Reason != "" {
			t.Errorf("UpdateStatus of vol-a changed vol-b: %+v", other)
		}
		if _, err := h.Source().Volume(ctx, "vol-a"); err != nil {
			t.Errorf("Volume after UpdateStatus: %v", err)
		}
	})

	t.Run("UpdateStatusMergesCondition", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		first := sampleStatus(true, metav1.ConditionTrue, rebuild.ReasonAttaching, 0)
		same := sampleStatus(true, metav1.ConditionTrue, rebuild.ReasonRebuilding, time.Minute)
		flipped := sampleStatus(false, metav1.ConditionFalse, rebuild.ReasonCompleted, 2*time.Minute)
		if err := h.Source().UpdateStatus(ctx, "vol-a", first); err != nil {
			t.Fatalf("UpdateStatus #1: %v", err)
		}
		if err := h.Source().UpdateStatus(ctx, "vol-a", same); err != nil {
			t.Fatalf("UpdateStatus #2: %v", err)
		}
		checkStatus(t, "same condition status, new reason", mustStatus(t, h, "vol-a"), same, first.Condition.LastTransitionTime)
		if err := h.Source().UpdateStatus(ctx, "vol-a", flipped); err != nil {
			t.Fatalf("UpdateStatus #3: %v", err)
		}
		checkStatus(t, "condition status changed", mustStatus(t, h, "vol-a"), flipped, flipped.Condition.LastTransitionTime)
	})

	t.Run("UpdateStatusOfMissingVolumeIsNotFound", func(t *testing.T) {
		h := newHarness(t)
		err := h.Source().UpdateStatus(ctx, "vol-missing", sampleStatus(true, metav1.ConditionTrue, rebuild.ReasonAttaching, 0))
		if !errors.Is(err, rebuild.ErrNotFound) {
			t.Fatalf("UpdateStatus of a missing volume: got %v, want an error wrapping ErrNotFound", err)
		}
	})

	t.Run("ReturnedVolumesAreCopies", func(t *testing.T) {
		h := newHarness(t)
		spec := sampleSpec("vol-a")
		mustCreate(t, h, spec)
		v, err := h.Source().Volume(ctx, spec.Name)
		if err != nil || len(v.Replicas) == 0 {
			t.Fatalf("Volume: %+v, %v", v, err)
		}
		for i := range v.Replicas {
			v.Replicas[i].State = rebuild.ReplicaFailed
			v.Replicas[i].Name = "scribbled"
		}
		again, err := h.Source().Volume(ctx, spec.Name)
		if err != nil {
			t.Fatalf("second Volume: %v", err)
		}
		if again.HealthyReplicas() != spec.Replicas {
			t.Fatalf("the source shares its Replicas slice with callers: %d healthy after a caller wrote to it, want %d",
				again.HealthyReplicas(), spec.Replicas)
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		h := newHarness(t)
		const n = 8
		for i := range n {
			mustCreate(t, h, sampleSpec(fmt.Sprintf("vol-%d", i)))
		}
		if err := h.SetGlobalSetting(ctx, "enabled"); err != nil {
			t.Fatalf("SetGlobalSetting: %v", err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*n)
		for i := range n {
			name := fmt.Sprintf("vol-%d", i)
			required := i%2 == 0
			for range 2 { // two goroutines per volume: the contract covers one volume too
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := h.Source().Volume(ctx, name); err != nil {
						errs <- fmt.Errorf("Volume(%s): %w", name, err)
					}
					if g, err := h.Source().GlobalSetting(ctx); err != nil || g != "enabled" {
						errs <- fmt.Errorf("GlobalSetting = %q, %v", g, err)
					}
					if err := h.Source().UpdateStatus(ctx, name, sampleStatus(required, metav1.ConditionTrue, rebuild.ReasonAttaching, 0)); err != nil {
						errs <- fmt.Errorf("UpdateStatus(%s): %w", name, err)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent call: %v", err)
		}
		for i := range n {
			name := fmt.Sprintf("vol-%d", i)
			if st := mustStatus(t, h, name); st.Required != (i%2 == 0) || st.Condition.Reason != rebuild.ReasonAttaching {
				t.Errorf("%s after concurrent updates: %+v, want Required=%v and reason %s", name, st, i%2 == 0, rebuild.ReasonAttaching)
			}
		}
	})

	t.Run("CancelledContextIsNeverNotFound", func(t *testing.T) {
		h := newHarness(t)
		spec := sampleSpec("vol-a")
		mustCreate(t, h, spec)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		v, err := h.Source().Volume(cctx, spec.Name)
		switch {
		case errors.Is(err, rebuild.ErrNotFound):
			t.Errorf("Volume with a cancelled context reported NotFound (%v): the driver would forget an existing volume", err)
		case err == nil:
			checkView(t, v, spec)
		}
		st := sampleStatus(true, metav1.ConditionTrue, rebuild.ReasonAttaching, 0)
		err = h.Source().UpdateStatus(cctx, spec.Name, st)
		switch {
		case errors.Is(err, rebuild.ErrNotFound):
			t.Errorf("UpdateStatus with a cancelled context reported NotFound: %v", err)
		case err == nil:
			checkStatus(t, "status after a successful UpdateStatus with a cancelled context", mustStatus(t, h, spec.Name), st, st.Condition.LastTransitionTime)
		}
		if _, err := h.Source().GlobalSetting(cctx); errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("GlobalSetting with a cancelled context reported NotFound: %v", err)
		}
	})
}

// RunTicketStoreTests checks that the TicketStore of each harness honours
// the contract of rebuild.TicketStore: tickets round-trip with every field,
// a put replaces the ticket with the same ID and loses no other, puts on
// missing volumes are NotFound, deleting what is gone is success, returned
// slices are copies, concurrent use is safe, and a cancelled context never
// passes for NotFound. newHarness is called once per subtest and must
// return a harness over a host with no volumes.
func RunTicketStoreTests(t *testing.T, newHarness func(t *testing.T) TicketStoreHarness) {
	t.Helper()
	ctx := context.Background()

	t.Run("NewVolumeHasNoTickets", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		if ts, err := h.Store().Tickets(ctx, "vol-a"); err != nil || len(ts) != 0 {
			t.Fatalf("Tickets of a new volume = %v, %v; want none and no error", ts, err)
		}
	})

	t.Run("MissingVolumeHasNoTickets", func(t *testing.T) {
		h := newHarness(t)
		if ts, err := h.Store().Tickets(ctx, "vol-missing"); err != nil || len(ts) != 0 {
			t.Fatalf("Tickets of a missing volume = %v, %v; want none and no error", ts, err)
		}
	})

	t.Run("PutTicketRoundTrip", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		mustCreate(t, h, sampleSpec("vol-b"))
		want := []rebuild.Ticket{RebuildingTicket("vol-a", "node-1"), WorkloadTicket("csi-pod", "node-2"), UserTicket("ui", "node-3")}
		for _, tk := range want {
			if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
				t.Fatalf("PutTicket(%s): %v", tk.ID, err)
			}
		}
		checkTickets(t, "vol-a", mustTickets(t, h, "vol-a"), want)
		checkTickets(t, "vol-b (untouched)", mustTickets(t, h, "vol-b"), nil)
	})

	t.Run("PutTicketReplacesSameID", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		workload := WorkloadTicket("csi-pod", "node-2")
		first := RebuildingTicket("vol-a", "node-1")
		moved := first
		moved.NodeID, moved.DisableFrontend = "node-9", false
		for _, tk := range []rebuild.Ticket{workload, first, moved} {
			if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
				t.Fatalf("PutTicket(%s): %v", tk.ID, err)
			}
		}
		checkTickets(t, "after replacing the rebuilding ticket", mustTickets(t, h, "vol-a"), []rebuild.Ticket{workload, moved})
	})

	t.Run("PutTicketOnMissingVolumeIsNotFound", func(t *testing.T) {
		h := newHarness(t)
		tk := RebuildingTicket("vol-missing", "node-1")
		if err := h.Store().PutTicket(ctx, "vol-missing", tk); !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("PutTicket on a volume that never existed: got %v, want an error wrapping ErrNotFound", err)
		}
		checkTickets(t, "vol-missing after a refused put", mustTickets(t, h, "vol-missing"), nil)

		mustCreate(t, h, sampleSpec("vol-gone"))
		if err := h.DeleteVolume(ctx, "vol-gone"); err != nil {
			t.Fatalf("DeleteVolume: %v", err)
		}
		if err := h.Store().PutTicket(ctx, "vol-gone", RebuildingTicket("vol-gone", "node-1")); !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("PutTicket on a deleted volume: got %v, want an error wrapping ErrNotFound", err)
		}
	})

	t.Run("DeleteTicketRemovesOnlyThatTicket", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		ours, pod := RebuildingTicket("vol-a", "node-1"), WorkloadTicket("csi-pod", "node-2")
		for _, tk := range []rebuild.Ticket{ours, pod} {
			if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
				t.Fatalf("PutTicket(%s): %v", tk.ID, err)
			}
		}
		if err := h.Store().DeleteTicket(ctx, "vol-a", ours.ID); err != nil {
			t.Fatalf("DeleteTicket: %v", err)
		}
		checkTickets(t, "after deleting the rebuilding ticket", mustTickets(t, h, "vol-a"), []rebuild.Ticket{pod})
	})

	t.Run("DeletingWhatIsGoneIsSuccess", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		pod := WorkloadTicket("csi-pod", "node-2")
		if err := h.Store().PutTicket(ctx, "vol-a", pod); err != nil {
			t.Fatalf("PutTicket: %v", err)
		}
		id := rebuild.TicketID("vol-a")
		for i := range 2 {
			if err := h.Store().DeleteTicket(ctx, "vol-a", id); err != nil && !errors.Is(err, rebuild.ErrNotFound) {
				t.Errorf("DeleteTicket #%d of a missing ticket: %v; want nil or an error wrapping ErrNotFound", i+1, err)
			}
		}
		checkTickets(t, "after deleting a missing ticket", mustTickets(t, h, "vol-a"), []rebuild.Ticket{pod})
		if err := h.Store().DeleteTicket(ctx, "vol-missing", rebuild.TicketID("vol-missing")); err != nil && !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("DeleteTicket on a missing volume: %v; want nil or an error wrapping ErrNotFound", err)
		}
	})

	t.Run("ReturnedTicketsAreCopies", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		tk := RebuildingTicket("vol-a", "node-1")
		if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
			t.Fatalf("PutTicket: %v", err)
		}
		got := mustTickets(t, h, "vol-a")
		for i := range got {
			got[i].Priority, got[i].NodeID, got[i].DisableFrontend = 1, "scribbled", false
		}
		checkTickets(t, "after a caller wrote to a returned slice", mustTickets(t, h, "vol-a"), []rebuild.Ticket{tk})
	})

	t.Run("ConcurrentVolumes", func(t *testing.T) {
		h := newHarness(t)
		const n = 8
		for i := range n {
			mustCreate(t, h, sampleSpec(fmt.Sprintf("vol-%d", i)))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*n)
		for i := range n {
			name := fmt.Sprintf("vol-%d", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ours, pod := RebuildingTicket(name, "node-1"), WorkloadTicket("csi-"+name, "node-2")
				for _, tk := range []rebuild.Ticket{ours, pod} {
					if err := h.Store().PutTicket(ctx, name, tk); err != nil {
						errs <- fmt.Errorf("PutTicket(%s, %s): %w", name, tk.ID, err)
					}
				}
				if _, err := h.Store().Tickets(ctx, name); err != nil {
					errs <- fmt.Errorf("Tickets(%s): %w", name, err)
				}
				if i%2 == 0 {
					if err := h.Store().DeleteTicket(ctx, name, ours.ID); err != nil {
						errs <- fmt.Errorf("DeleteTicket(%s): %w", name, err)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent call: %v", err)
		}
		for i := range n {
			name := fmt.Sprintf("vol-%d", i)
			want := []rebuild.Ticket{WorkloadTicket("csi-"+name, "node-2")}
			if i%2 != 0 {
				want = append(want, RebuildingTicket(name, "node-1"))
			}
			checkTickets(t, name+" after concurrent use", mustTickets(t, h, name), want)
		}
	})

	t.Run("ConcurrentPutsLoseNoTicket", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		var stored []rebuild.Ticket
		for i := range n {
			tk := WorkloadTicket(fmt.Sprintf("csi-pod-%d", i), "node-2")
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := h.Store().PutTicket(ctx, "vol-a", tk)
				if errors.Is(err, rebuild.ErrNotFound) {
					t.Errorf("concurrent PutTicket on an existing volume reported NotFound: %v", err)
				}
				if err == nil {
					mu.Lock()
					stored = append(stored, tk)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(stored) == 0 {
			t.Fatalf("none of %d concurrent PutTickets on one volume succeeded", n)
		}
		got := mustTickets(t, h, "vol-a")
		byID := ticketsByID(t, got)
		for _, tk := range stored {
			if g, ok := byID[tk.ID]; !ok || g != tk {
				t.Errorf("ticket %s was put successfully but is lost or changed (%+v): a put must not overwrite concurrent puts", tk.ID, g)
			}
		}
	})

	t.Run("CancelledContextIsNeverNotFound", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		tk := RebuildingTicket("vol-a", "node-1")
		err := h.Store().PutTicket(cctx, "vol-a", tk)
		switch {
		case errors.Is(err, rebuild.ErrNotFound):
			t.Errorf("PutTicket with a cancelled context reported NotFound: %v", err)
		case err == nil:
			checkTickets(t, "after a successful put with a cancelled context", mustTickets(t, h, "vol-a"), []rebuild.Ticket{tk})
		}
		if ts, err := h.Store().Tickets(cctx, "vol-a"); errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("Tickets with a cancelled context reported NotFound: %v", err)
		} else if err == nil && len(ts) > 1 {
			t.Errorf("Tickets with a cancelled context = %v", ts)
		}

		if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
			t.Fatalf("PutTicket: %v", err)
		}
		err = h.Store().DeleteTicket(cctx, "vol-a", tk.ID)
		if err == nil || errors.Is(err, rebuild.ErrNotFound) {
			// Success as the driver reads it: the ticket must be gone.
			checkTickets(t, fmt.Sprintf("after DeleteTicket with a cancelled context returned %v", err), mustTickets(t, h, "vol-a"), nil)
		}
	})
}

// RebuildingTicket is the ticket the driver puts for volume: the
// rebuilding attacher at rebuild.DefaultPriority, frontend disabled.
func RebuildingTicket(volume, node string) rebuild.Ticket {
	return rebuild.Ticket{ID: rebuild.TicketID(volume), Type: rebuild.AttacherType, NodeID: node,
		Priority: rebuild.DefaultPriority, DisableFrontend: true}
}

// WorkloadTicket is a pod's CSI attachment ticket, at PriorityCSI.
func WorkloadTicket(id, node string) rebuild.Ticket {
	return rebuild.Ticket{ID: id, Type: "csi-attacher", NodeID: node, Priority: PriorityCSI}
}

// UserTicket is a user's attachment through the Longhorn API, at
// PriorityAPI.
func UserTicket(id, node string) rebuild.Ticket {
	return rebuild.Ticket{ID: id, Type: "longhorn-api", NodeID: node, Priority: PriorityAPI}
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
