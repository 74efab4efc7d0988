package rebuild_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/mock/gomock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/mocks"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func degradedVolume() rebuild.Volume {
	return rebuild.Volume{
		Name: "vol", OwnerNode: "node-1", DataEngine: rebuild.DataEngineV2, State: rebuild.StateDetached,
		DesiredReplicas: 2, CanScheduleReplica: true,
		Replicas: []rebuild.Replica{{Name: "r1", State: rebuild.ReplicaHealthy}, {Name: "r2", State: rebuild.ReplicaFailed}},
	}
}

type driverFixture struct {
	volumes *mocks.MockVolumeSource
	tickets *mocks.MockTicketStore
	clock   *testingclock.FakeClock
	driver  *rebuild.Driver
}

func newFixture(t *testing.T) driverFixture {
	ctrl := gomock.NewController(t)
	f := driverFixture{volumes: mocks.NewMockVolumeSource(ctrl), tickets: mocks.NewMockTicketStore(ctrl), clock: testingclock.NewFakeClock(start)}
	d, err := rebuild.NewDriver(f.volumes, f.tickets, rebuild.Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.driver = d
	return f
}

var errBoom = errors.New("apiserver unavailable")

func TestDriverCreatesTicketAndReportsStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
	f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
	f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
	f.tickets.EXPECT().PutTicket(ctx, "vol", rebuild.Ticket{ID: "volume-rebuilding-controller-vol", Type: rebuild.AttacherType,
		NodeID: "node-1", Priority: 800, DisableFrontend: true}).Return(nil)
	f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).DoAndReturn(func(_ context.Context, _ string, st rebuild.Status) error {
		if !st.Required || st.Condition.Reason != rebuild.ReasonAttaching || !st.Condition.LastTransitionTime.Time.Equal(start) {
			t.Errorf("status %+v", st)
		}
		return nil
	})
	dec, err := f.driver.Reconcile(ctx, "vol")
	if err != nil || dec.Action != rebuild.ActionCreate {
		t.Fatalf("Reconcile = %s, %v", dec.Action, err)
	}
	if rec := f.driver.Record("vol"); rec.AttemptStartedAt != start {
		t.Errorf("record %+v not kept", rec)
	}
}

func TestDriverVolumeGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// First an attempt, so there is a record to forget.
	f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
	f.volumes.EXPECT().GlobalSetting(ctx).Return("enabled", nil)
	f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
	f.tickets.EXPECT().PutTicket(ctx, "vol", gomock.Any()).Return(nil)
	f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(nil)
	if _, err := f.driver.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}

	f.volumes.EXPECT().Volume(ctx, "vol").Return(rebuild.Volume{}, errors.Join(errors.New("volumes.longhorn.io \"vol\" not found"), rebuild.ErrNotFound))
	f.tickets.EXPECT().DeleteTicket(ctx, "vol", "volume-rebuilding-controller-vol").Return(rebuild.ErrNotFound)
	dec, err := f.driver.Reconcile(ctx, "vol")
	if err != nil || dec.Action != rebuild.ActionDelete {
		t.Fatalf("Reconcile of a gone volume = %s, %v; want delete, nil", dec.Action, err)
	}
	if rec := f.driver.Record("vol"); rec != (rebuild.Record{}) {
		t.Errorf("record %+v not forgotten", rec)
	}
}

func TestDriverHostErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		expect func(f driverFixture)
	}{
		{"volume", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(rebuild.Volume{}, errBoom)
		}},
		{"setting", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("", errBoom)
		}},
		{"tickets", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, errBoom)
		}},
		{"put", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
			f.tickets.EXPECT().PutTicket(ctx, "vol", gomock.Any()).Return(errBoom)
		}},
		{"delete", func(f driverFixture) {
			v := degradedVolume()
			v.Deleting = true
			f.volumes.EXPECT().Volume(ctx, "vol").Return(v, nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return([]rebuild.Ticket{{ID: rebuild.TicketID("vol"), Priority: 800}}, nil)
			f.tickets.EXPECT().DeleteTicket(ctx, "vol", rebuild.TicketID("vol")).Return(errBoom)
		}},
		{"status", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
			f.tickets.EXPECT().PutTicket(ctx, "vol", gomock.Any()).Return(nil)
			f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(errBoom)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.expect(f)
			_, err := f.driver.Reconcile(ctx, "vol")
			if !errors.Is(err, errBoom) {
				t.Fatalf("Reconcile error %v, want it to wrap %v", err, errBoom)
			}
			// Only a status failure happens after the ticket change took;
			// every other failure must leave the memory as it was.
			if rec := f.driver.Record("vol"); (rec != rebuild.Record{}) != (tt.name == "status") {
				t.Errorf("record after a %s failure: %+v", tt.name, rec)
			}
		})
	}
}

// TestDriverUnknownSettingReleases: garbage in the global setting must not
// keep a volume attached; the ticket goes and the error is typed.
func TestDriverUnknownSettingReleases(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	v := degradedVolume()
	v.State = rebuild.StateAttached
	f.volumes.EXPECT().Volume(ctx, "vol").Return(v, nil)
	f.volumes.EXPECT().GlobalSetting(ctx).Return("maybe", nil)
	f.tickets.EXPECT().Tickets(ctx, "vol").Return([]rebuild.Ticket{{ID: rebuild.TicketID("vol"), Priority: 800}}, nil)
	f.tickets.EXPECT().DeleteTicket(ctx, "vol", rebuild.TicketID("vol")).Return(nil)
	f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(rebuild.ErrNotFound) // ignored
	dec, err := f.driver.Reconcile(ctx, "vol")
	var serr *rebuild.SettingError
	if dec.Action != rebuild.ActionDelete || !errors.As(err, &serr) || serr.Value != "maybe" {
		t.Fatalf("Reconcile = %s, %v; want delete and a *SettingError", dec.Action, err)
	}
}

func TestDriverReconcileAllGoesOn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.volumes.EXPECT().Volume(ctx, "a").Return(rebuild.Volume{}, errBoom)
	f.volumes.EXPECT().Volume(ctx, "b").Return(rebuild.Volume{}, errBoom)
	err := f.driver.ReconcileAll(ctx, []string{"a", "b"})
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) != 2 {
		t.Fatalf("ReconcileAll = %v, want both failures", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.driver.ReconcileAll(cancelled, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReconcileAll on a cancelled context = %v", err)
	}
}

func TestNewDriverRejects(t *testing.T) {
	ctrl := gomock.NewController(t)
	vs, ts := mocks.NewMockVolumeSource(ctrl), mocks.NewMockTicketStore(ctrl)
	if _, err := rebuild.NewDriver(nil, ts, rebuild.Options{}); !errors.Is(err, rebuild.ErrInvalidOptions) {
		t.Errorf("nil source: %v", err)
	}
	if _, err := rebuild.NewDriver(vs, nil, rebuild.Options{}); !errors.Is(err, rebuild.ErrInvalidOptions) {
		t.Errorf("nil ticket store: %v", err)
	}
	if _, err := rebuild.NewDriver(vs, ts, rebuild.Options{Priority: 1000}); !errors.Is(err, rebuild.ErrInvalidOptions) {
		t.Errorf("priority above workloads: %v", err)
	}
	if _, err := rebuild.NewDriver(vs, ts, rebuild.Options{}); err != nil {
		t.Errorf("no clock (the real one): %v", err)
	}
}
