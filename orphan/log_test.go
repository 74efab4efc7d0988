package orphan_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/internal/logrecord"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

func TestMonitorLogsScans(t *testing.T) {
	rec := logrecord.New(slog.LevelDebug)
	inv := &orphantest.Inventory{}
	inv.Set(snapshotOf(replicaItem("n1", "disk-1", "pvc-a-0123abcd")), nil)
	clk := clocktesting.NewFakeClock(testEpoch)
	scans := make(chan orphan.Observation, 4)
	mon, err := orphan.NewMonitor(inv, orphan.MonitorOptions{Clock: clk, Logger: slog.New(rec),
		OnScan: func(o orphan.Observation) { scans <- o }})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Stop)
	<-scans
	rec.Want(t, 1, slog.LevelDebug, "orphan: scan finished", map[string]string{"seq": "1", "items": "1", "took": "0s"})
	rec.Want(t, 0, slog.LevelWarn, "orphan: scan failed", nil)

	inv.Set(orphan.Snapshot{}, errors.New("disk-1: EIO"))
	mon.Rescan()
	select {
	case <-scans:
	case <-time.After(10 * time.Second):
		t.Fatal("no rescan")
	}
	e := rec.Want(t, 1, slog.LevelWarn, "orphan: scan failed", map[string]string{"seq": "2", "err": "disk-1: EIO"})
	if _, ok := e[0].Attrs["took"]; !ok {
		t.Fatalf("scan failed without took: %v", e[0])
	}
	rec.Want(t, 1, slog.LevelDebug, "orphan: scan finished", map[string]string{"seq": "2", "err": "disk-1: EIO"})
}

func newLoggedSweepHarness(level slog.Level) (*sweepHarness, *logrecord.Handler) {
	h := newSweepHarness()
	rec := logrecord.New(level)
	h.sweeper, _ = orphan.NewSweeper(h.store, orphantest.FakeAdapter(nil, h.judge, h.deleter),
		orphan.SweeperOptions{Clock: h.clock, Logger: slog.New(rec)})
	return h, rec
}

func TestSweeperLogsWhatItDid(t *testing.T) {
	h, rec := newLoggedSweepHarness(slog.LevelDebug)
	ctx := context.Background()
	keep := cleanRecord("n1", "disk-1", "pvc-keep-0123abcd")
	gone := cleanRecord("n1", "disk-1", "pvc-gone-0123abcd")
	purge := cleanRecord("n1", "disk-1", "pvc-purge-0123abcd")
	purge.DeletionRequested = true
	h.seed(t, keep, gone, purge)
	create := cleanRecord("n1", "disk-1", "pvc-new-0123abcd")
	_, err := h.sweeper.Sync(ctx, orphan.Plan{
		Create:     []orphan.Record{create},
		Forget:     []orphan.Forget{{Record: gone, Reason: orphan.ReasonGone, Message: "the data is gone"}},
		Purge:      []orphan.Purge{{Record: purge, Auto: false}},
		Keep:       []orphan.Keep{{Record: keep}},
		Conditions: []orphan.SetConditions{{Record: keep, Conditions: keep.Conditions}},
		Refused:    []orphan.Refusal{{Name: "pvc-guarded-0123abcd", Reason: "more than the guard allows"}},
	})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	of := func(r orphan.Record) map[string]string {
		return map[string]string{"orphan": r.Name, "kind": string(r.Kind), "node": r.NodeID}
	}
	rec.Want(t, 1, slog.LevelInfo, "orphan: record created", of(create))
	forgot := of(gone)
	forgot["reason"], forgot["message"] = string(orphan.ReasonGone), "the data is gone"
	rec.Want(t, 1, slog.LevelInfo, "orphan: record forgotten", forgot)
	purged := of(purge)
	purged["auto"] = "false"
	rec.Want(t, 1, slog.LevelInfo, "orphan: data purged", purged)
	rec.Want(t, 1, slog.LevelDebug, "orphan: conditions marked", of(keep))
	rec.Want(t, 1, slog.LevelWarn, "orphan: purge refused",
		map[string]string{"orphan": "pvc-guarded-0123abcd", "reason": "more than the guard allows", "at": "plan"})
	if n := len(rec.Entries()); n != 5 {
		t.Fatalf("%d entries logged, want 5:\n%s", n, rec.Dump())
	}
}

func TestSweeperLogsRefusalsAtTheMomentOfDeletion(t *testing.T) {
	ctx := context.Background()
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	r.DeletionRequested = true

	t.Run("re-judged owned", func(t *testing.T) {
		h, rec := newLoggedSweepHarness(slog.LevelInfo)
		h.seed(t, r)
		h.judge.Set(r.Name, orphan.Owned("a replica claims it now"))
		if _, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: r}}}); err != nil {
			t.Fatal(err)
		}
		e := rec.Want(t, 1, slog.LevelWarn, "orphan: purge refused",
			map[string]string{"orphan": r.Name, "kind": string(r.Kind), "node": "n1", "at": "deletion"})
		if e[0].Attrs["reason"] == "" {
			t.Fatalf("refusal without a reason: %v", e[0])
		}
		rec.Want(t, 0, slog.LevelInfo, "orphan: data purged", nil)
	})
	t.Run("deleter's precondition failed", func(t *testing.T) {
		h, rec := newLoggedSweepHarness(slog.LevelInfo)
		h.seed(t, r)
		h.deleter.FailWith(r.Name, fmt.Errorf("disk UUID changed: %w", orphan.ErrPreconditionFailed))
		if _, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: r}}}); err != nil {
			t.Fatal(err)
		}
		e := rec.Want(t, 1, slog.LevelWarn, "orphan: purge refused", map[string]string{"orphan": r.Name, "at": "deletion"})
		if !strings.Contains(e[0].Attrs["reason"], "disk UUID changed") {
			t.Fatalf("refusal = %v", e[0])
		}
	})
}

func TestSweeperLogsFailures(t *testing.T) {
	h, rec := newLoggedSweepHarness(slog.LevelInfo)
	ctx := context.Background()
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	r.DeletionRequested = true
	h.seed(t, r)
	h.deleter.FailWith(r.Name, errors.New("EIO"))
	if _, err := h.sweeper.Sync(ctx, orphan.Plan{Purge: []orphan.Purge{{Record: r}}}); err == nil {
		t.Fatal("Sync hid the failure")
	}
	rec.Want(t, 1, slog.LevelError, "orphan: sync step failed",
		map[string]string{"orphan": r.Name, "kind": string(r.Kind), "node": "n1", "op": "purge", "err": "EIO"})
	rec.Want(t, 0, slog.LevelInfo, "orphan: data purged", nil)
}

func TestDriversWithoutLoggerStaySilent(t *testing.T) {
	// Nil loggers: the same paths as above must neither panic nor log.
	inv := &orphantest.Inventory{}
	inv.Set(orphan.Snapshot{}, errors.New("EIO"))
	scans := make(chan orphan.Observation, 1)
	mon, err := orphan.NewMonitor(inv, orphan.MonitorOptions{Clock: clocktesting.NewFakeClock(testEpoch),
		OnScan: func(o orphan.Observation) { scans <- o }})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-scans
	mon.Stop()

	h := newSweepHarness() // no Logger
	r := cleanRecord("n1", "disk-1", "pvc-a-0123abcd")
	r.DeletionRequested = true
	h.seed(t, r)
	h.deleter.FailWith(r.Name, errors.New("EIO"))
	if _, err := h.sweeper.Sync(context.Background(), orphan.Plan{
		Purge:   []orphan.Purge{{Record: r}},
		Create:  []orphan.Record{cleanRecord("n1", "disk-1", "pvc-b-0123abcd")},
		Refused: []orphan.Refusal{{Name: "x", Reason: "guard"}},
	}); err == nil {
		t.Fatal("Sync hid the failure")
	}
}
