package metrics_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/examples/kube/metrics"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/rebuild"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// compare checks the named metrics' whole exposition, so that a series
// with a wrong label, or one too many, fails.
func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestOrphanEventsMapToTheirSeries(t *testing.T) {
	m, reg := newMetrics(t)
	h := m.Orphan()
	replica, instance := orphan.KindReplicaData, orphan.KindReplicaInstance
	for _, e := range []orphan.Event{
		{Op: orphan.OpScan, Outcome: orphan.EventOK, Duration: 2 * time.Second},
		{Op: orphan.OpScan, Outcome: orphan.EventFailed, Duration: 30 * time.Millisecond, Err: errors.New("EIO")},
		{Op: orphan.OpCreate, Outcome: orphan.EventOK, Kind: replica, Name: "orphan-1", NodeID: "n1", Duration: time.Millisecond},
		{Op: orphan.OpPurge, Outcome: orphan.EventOK, Kind: replica, Name: "orphan-2", Duration: 3 * time.Second},
		{Op: orphan.OpPurge, Outcome: orphan.EventOK, Kind: replica, Name: "orphan-3", Duration: 4 * time.Second},
		{Op: orphan.OpPurge, Outcome: orphan.EventRefused, Kind: replica, Name: "orphan-4", Reason: "re-judged owned: r-1", Duration: 20 * time.Millisecond},
		{Op: orphan.OpPurge, Outcome: orphan.EventGuarded, Kind: instance, Name: "orphan-5", Reason: "NoneExpected: ..."},
		{Op: orphan.OpPurge, Outcome: orphan.EventFailed, Kind: instance, Name: "orphan-6", Duration: time.Second, Err: errors.New("EIO")},
		{Op: orphan.OpForget, Outcome: orphan.EventOK, Kind: replica, Name: "orphan-7", Reason: string(orphan.ReasonGone), Duration: time.Millisecond},
		{Op: orphan.OpForget, Outcome: orphan.EventFailed, Kind: replica, Name: "orphan-8", Duration: time.Millisecond, Err: errors.New("conflict")},
		{Op: orphan.OpFinish, Outcome: orphan.EventOK, Duration: time.Millisecond},
	} {
		h.Observe(e)
	}

	compare(t, reg, `
# HELP caretaker_orphan_scans_total Inventory scans by the orphan Monitor, by outcome.
# TYPE caretaker_orphan_scans_total counter
caretaker_orphan_scans_total{outcome="failed"} 1
caretaker_orphan_scans_total{outcome="ok"} 1
# HELP caretaker_orphan_sync_steps_total Steps of the orphan Sweeper (create, forget, mark, purge, finish) by record kind and outcome (ok, failed, refused, guarded).
# TYPE caretaker_orphan_sync_steps_total counter
caretaker_orphan_sync_steps_total{kind="",op="finish",outcome="ok"} 1
caretaker_orphan_sync_steps_total{kind="replica",op="create",outcome="ok"} 1
caretaker_orphan_sync_steps_total{kind="replica",op="forget",outcome="failed"} 1
caretaker_orphan_sync_steps_total{kind="replica",op="forget",outcome="ok"} 1
caretaker_orphan_sync_steps_total{kind="replica",op="purge",outcome="ok"} 2
caretaker_orphan_sync_steps_total{kind="replica",op="purge",outcome="refused"} 1
caretaker_orphan_sync_steps_total{kind="replica-instance",op="purge",outcome="failed"} 1
caretaker_orphan_sync_steps_total{kind="replica-instance",op="purge",outcome="guarded"} 1
# HELP caretaker_orphan_forgotten_total Orphan records forgotten (data kept), by kind and reason.
# TYPE caretaker_orphan_forgotten_total counter
caretaker_orphan_forgotten_total{kind="replica",reason="Gone"} 1
`, "caretaker_orphan_scans_total", "caretaker_orphan_sync_steps_total", "caretaker_orphan_forgotten_total")

	// Durations: the two ok purges took 3 s and 4 s; the guarded one,
	// which no act preceded, is not timed.
	compare(t, reg, `
# HELP caretaker_orphan_scan_duration_seconds How long each orphan Monitor scan took.
# TYPE caretaker_orphan_scan_duration_seconds histogram
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="0.001"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="0.005"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="0.025"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="0.1"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="0.5"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="2.5"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="10"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="60"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="300"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="failed",le="+Inf"} 1
caretaker_orphan_scan_duration_seconds_sum{outcome="failed"} 0.03
caretaker_orphan_scan_duration_seconds_count{outcome="failed"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="0.001"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="0.005"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="0.025"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="0.1"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="0.5"} 0
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="2.5"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="10"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="60"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="300"} 1
caretaker_orphan_scan_duration_seconds_bucket{outcome="ok",le="+Inf"} 1
caretaker_orphan_scan_duration_seconds_sum{outcome="ok"} 2
caretaker_orphan_scan_duration_seconds_count{outcome="ok"} 1
`, "caretaker_orphan_scan_duration_seconds")
	purges := histogram(t, reg, "caretaker_orphan_sync_step_duration_seconds", map[string]string{"op": "purge", "kind": "replica"})
	if purges.GetSampleCount() != 3 || math.Abs(purges.GetSampleSum()-7.02) > 1e-9 {
		t.Errorf("replica purge durations: %d samples, sum %v; want 3 (ok, ok, refused) summing 7.02 s", purges.GetSampleCount(), purges.GetSampleSum())
	}
	if inst := histogram(t, reg, "caretaker_orphan_sync_step_duration_seconds", map[string]string{"op": "purge", "kind": "replica-instance"}); inst.GetSampleCount() != 1 {
		t.Errorf("instance purge durations: %d samples, want 1 (the failed one; the guarded one is not timed)", inst.GetSampleCount())
	}
}

func TestBackupDeleteEventsMapToTheirSeries(t *testing.T) {
	m, reg := newMetrics(t)
	h := m.BackupDelete()
	ref := backupdelete.BackupRef{Target: "default", Volume: "vol-a", Name: "backup-b"}
	for _, e := range []backupdelete.Event{
		{Op: backupdelete.OpReconcile, Outcome: backupdelete.EventStarted, Ref: ref, State: backupdelete.StateDeleting, Why: "start command", Attempt: 1},
		{Op: backupdelete.OpDelete, Outcome: backupdelete.EventFailed, Ref: ref, Attempt: 1, Duration: 4 * time.Second, Err: errors.New("EIO")},
		{Op: backupdelete.OpCheck, Outcome: backupdelete.EventOK, Ref: ref, Duration: time.Second},
		{Op: backupdelete.OpReconcile, Outcome: backupdelete.EventErrored, Ref: ref, State: backupdelete.StateError, Why: "command failed", Attempt: 1, Duration: time.Second},
		{Op: backupdelete.OpReconcile, Outcome: backupdelete.EventFailed, Err: backupdelete.ErrClosed},
	} {
		h.Observe(e)
	}
	compare(t, reg, `
# HELP caretaker_backupdelete_events_total Acts of the backupdelete Driver: presence checks, reconciles (by the step taken) and delete commands.
# TYPE caretaker_backupdelete_events_total counter
caretaker_backupdelete_events_total{op="check",outcome="ok",state="",why=""} 1
caretaker_backupdelete_events_total{op="delete",outcome="failed",state="",why=""} 1
caretaker_backupdelete_events_total{op="reconcile",outcome="error",state="Error",why="command failed"} 1
caretaker_backupdelete_events_total{op="reconcile",outcome="failed",state="",why=""} 1
caretaker_backupdelete_events_total{op="reconcile",outcome="started",state="Deleting",why="start command"} 1
`, "caretaker_backupdelete_events_total")
	if d := histogram(t, reg, "caretaker_backupdelete_duration_seconds", map[string]string{"op": "delete"}); d.GetSampleCount() != 1 || d.GetSampleSum() != 4 {
		t.Errorf("delete durations: %d samples, sum %v; want 1 of 4 s", d.GetSampleCount(), d.GetSampleSum())
	}
}

func TestRebuildEventsMapToTheirSeries(t *testing.T) {
	m, reg := newMetrics(t)
	h := m.Rebuild()
	for _, e := range []rebuild.Event{
		{Op: rebuild.OpReconcile, Outcome: rebuild.EventOK, Volume: "pvc-1", Decided: true, Action: rebuild.ActionCreate, Reason: rebuild.ReasonAttaching, Duration: 2 * time.Second},
		{Op: rebuild.OpReconcile, Outcome: rebuild.EventFailed, Volume: "pvc-1", Err: errors.New("apiserver unavailable")}, // no decision: Action's zero value must not show as "wait"
		{Op: rebuild.OpForget, Outcome: rebuild.EventOK, Volume: "pvc-2", Decided: true, Action: rebuild.ActionDelete},
	} {
		h.Observe(e)
	}
	compare(t, reg, `
# HELP caretaker_rebuild_reconciles_total Reconciles of the rebuild Driver by outcome and the decision applied (action, condition reason).
# TYPE caretaker_rebuild_reconciles_total counter
caretaker_rebuild_reconciles_total{action="",op="reconcile",outcome="failed",reason=""} 1
caretaker_rebuild_reconciles_total{action="create",op="reconcile",outcome="ok",reason="Attaching"} 1
caretaker_rebuild_reconciles_total{action="delete",op="forget",outcome="ok",reason=""} 1
`, "caretaker_rebuild_reconciles_total")
	if d := histogram(t, reg, "caretaker_rebuild_reconcile_duration_seconds", map[string]string{"op": "reconcile"}); d.GetSampleCount() != 2 || d.GetSampleSum() != 2 {
		t.Errorf("reconcile durations: %d samples, sum %v; want 2 summing 2 s", d.GetSampleCount(), d.GetSampleSum())
	}
}

func TestNewRefusesADoubleRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Fatal("registered the same metrics twice")
	}
}

// histogram finds the series of name with exactly these labels.
func histogram(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) interface {
	GetSampleCount() uint64
	GetSampleSum() float64
} {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetHistogram()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}
