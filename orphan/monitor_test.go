package orphan_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// monitorHarness runs a Monitor on a fake clock and reports every scan on a
// channel, so tests wait for events instead of sleeping.
type monitorHarness struct {
	inv     *orphantest.Inventory
	clock   *clocktesting.FakeClock
	mon     *orphan.Monitor
	scans   chan orphan.Observation
	changes chan orphan.Observation
}

func newMonitorHarness(t *testing.T) *monitorHarness {
	t.Helper()
	h := &monitorHarness{
		inv:     &orphantest.Inventory{},
		clock:   clocktesting.NewFakeClock(testEpoch),
		scans:   make(chan orphan.Observation, 16),
		changes: make(chan orphan.Observation, 16),
	}
	var err error
	h.mon, err = orphan.NewMonitor(h.inv, orphan.MonitorOptions{
		Clock:    h.clock,
		OnScan:   func(o orphan.Observation) { h.scans <- o },
		OnChange: func(o orphan.Observation) { h.changes <- o },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.mon.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.mon.Stop)
	return h
}

func (h *monitorHarness) nextScan(t *testing.T) orphan.Observation {
	t.Helper()
	select {
	case o := <-h.scans:
		return o
	case <-time.After(10 * time.Second):
		t.Fatalf("no scan happened")
	}
	return orphan.Observation{}
}

// step advances the fake clock by d once the monitor is waiting on it.
func (h *monitorHarness) step(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatalf("the monitor never waited on its clock")
		}
		time.Sleep(time.Millisecond) // waiting for the goroutine to park, not for time to pass
	}
	h.clock.Step(d)
}

func (h *monitorHarness) noChange(t *testing.T) {
	t.Helper()
	select {
	case o := <-h.changes:
		t.Fatalf("unexpected change callback: %+v", o)
	default:
	}
}

func snapshotOf(items ...orphan.Item) orphan.Snapshot {
	return orphan.Snapshot{Items: items, Scopes: map[orphan.Scope]orphan.ScopeStatus{
		{NodeID: "n1", Disk: "disk-1"}: {Health: orphan.HealthReady}}}
}

func TestMonitorScansAtOnceThenEveryPeriod(t *testing.T) {
	h := newMonitorHarness(t)
	first := h.nextScan(t)
	if first.Seq != 1 || !first.At.Equal(testEpoch) {
		t.Fatalf("first scan = %+v, want seq 1 at start", first)
	}
	h.step(t, orphan.DefaultPeriod-time.Second)
	select {
	case o := <-h.scans:
		t.Fatalf("scanned before the period was over: %+v", o)
	default:
	}
	h.step(t, time.Second)
	if o := h.nextScan(t); o.Seq != 2 || !o.At.Equal(testEpoch.Add(orphan.DefaultPeriod)) || !o.StartedAt.Equal(o.At) {
		t.Fatalf("second scan = %+v", o)
	}
}

func TestMonitorCallsOnChangeOnlyWhenSomethingChanged(t *testing.T) {
	h := newMonitorHarness(t)
	h.nextScan(t)
	<-h.changes // the first scan always counts as a change

	h.step(t, orphan.DefaultPeriod)
	h.nextScan(t)
	h.noChange(t)

	h.inv.Set(snapshotOf(replicaItem("n1", "disk-1", "pvc-a-0123abcd")), nil)
	h.step(t, orphan.DefaultPeriod)
	o := h.nextScan(t)
	if c := <-h.changes; c.Seq != o.Seq || len(c.Snapshot.Items) != 1 {
		t.Fatalf("change = %+v, want the scan with one item", c)
	}

	h.inv.Set(snapshotOf(replicaItem("n1", "disk-1", "pvc-a-0123abcd")), nil) // equal, fresh maps
	h.step(t, orphan.DefaultPeriod)
	h.nextScan(t)
	h.noChange(t)

	h.inv.Set(orphan.Snapshot{}, errors.New("disk on fire"))
	h.step(t, orphan.DefaultPeriod)
	h.nextScan(t)
	if c := <-h.changes; c.Err == nil {
		t.Fatalf("an error was not reported as a change")
	}
}

func TestMonitorRescanOnDemandAndLatestNeverBlocks(t *testing.T) {
	h := newMonitorHarness(t)
	h.nextScan(t)

	started, release := h.inv.Hold()
	h.mon.Rescan()
	<-started // the rescan has started and is now blocked inside Scan

	done := make(chan orphan.Observation)
	go func() {
		o, _ := h.mon.Latest()
		done <- o
	}()
	select {
	case o := <-done:
		if o.Seq != 1 {
			t.Fatalf("Latest during a scan = seq %d, want the previous scan's 1", o.Seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Latest blocked on a scan in progress")
	}

	h.mon.Rescan() // merged into one pending request
	h.mon.Rescan()
	release()
	if o := h.nextScan(t); o.Seq != 2 {
		t.Fatalf("held scan = %+v", o)
	}
	if o := h.nextScan(t); o.Seq != 3 {
		t.Fatalf("merged rescan = %+v", o)
	}
	select {
	case o := <-h.scans:
		t.Fatalf("two rescan requests while one was pending ran twice: %+v", o)
	default:
	}
}

func TestMonitorStopCancelsScanAndReturns(t *testing.T) {
	inv := &orphantest.Inventory{}
	started, release := inv.Hold()
	defer release()
	mon, err := orphan.NewMonitor(inv, orphan.MonitorOptions{Clock: clocktesting.NewFakeClock(testEpoch)})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(context.Background()); !errors.Is(err, orphan.ErrMonitorStarted) {
		t.Fatalf("second Start: %v", err)
	}
	<-started // the first scan now blocks in Scan until its context is cancelled
	stopped := make(chan struct{})
	go func() { mon.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("Stop did not return while a scan was in progress")
	}
	if _, ok := mon.Latest(); ok {
		t.Fatalf("a scan cancelled by Stop was published")
	}
	mon.Stop() // idempotent
}

func TestMonitorStopWithoutStart(t *testing.T) {
	mon, err := orphan.NewMonitor(&orphantest.Inventory{}, orphan.MonitorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mon.Stop()
}

// TestNewMonitorNeedsAnInventory: a Monitor without an Inventory is
// refused when it is built, with an error naming what is missing, instead
// of a nil dereference in its goroutine at the first scan.
func TestNewMonitorNeedsAnInventory(t *testing.T) {
	mon, err := orphan.NewMonitor(nil, orphan.MonitorOptions{})
	if mon != nil || !errors.Is(err, orphan.ErrIncomplete) || !strings.Contains(err.Error(), "Inventory") {
		t.Fatalf("NewMonitor(nil) = %v, %v; want no monitor and ErrIncomplete naming the Inventory", mon, err)
	}
}
