package rebuildtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/rebuild"
)

// testVolumeSource checks the contract of rebuild.VolumeSource: views of
// existing volumes, NotFound for missing and deleted ones, raw global
// setting values, status updates merged as meta.SetStatusCondition does,
// copies, concurrent use and cancelled contexts.
func testVolumeSource(t *testing.T, newHarness func(t *testing.T) VolumeSourceHarness) {
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
		// Two goroutines per volume: the contract covers one volume too.
		concurrently(t, 2*n, func(g int, fail func(error)) {
			name := fmt.Sprintf("vol-%d", g/2)
			required := (g/2)%2 == 0
			if _, err := h.Source().Volume(ctx, name); err != nil {
				fail(fmt.Errorf("Volume(%s): %w", name, err))
			}
			if g, err := h.Source().GlobalSetting(ctx); err != nil || g != "enabled" {
				fail(fmt.Errorf("GlobalSetting = %q, %v", g, err))
			}
			if err := h.Source().UpdateStatus(ctx, name, sampleStatus(required, metav1.ConditionTrue, rebuild.ReasonAttaching, 0)); err != nil {
				fail(fmt.Errorf("UpdateStatus(%s): %w", name, err))
			}
		})
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
