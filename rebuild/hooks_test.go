package rebuild_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/mocks"
)

// TestDriverHooksMirrorEachReconcile checks the Event of each kind of
// Reconcile: decisions (attach, healthy, disabled by an unknown setting,
// interrupted), a host failure before deciding, a failed ticket change,
// and a volume that is gone; each timed by the Driver's clock.
func TestDriverHooksMirrorEachReconcile(t *testing.T) {
	ctx := context.Background()
	healthy := degradedVolume()
	healthy.Replicas[1].State = rebuild.ReplicaHealthy
	ticket := []rebuild.Ticket{{ID: rebuild.TicketID("vol"), Type: rebuild.AttacherType, NodeID: "node-1", Priority: 800, DisableFrontend: true}}
	workload := append(ticket[:1:1], rebuild.Ticket{ID: "csi-vol", Type: "csi-attacher", NodeID: "node-2", Priority: 900})
	notFound := errors.Join(errors.New(`volumes.longhorn.io "vol" not found`), rebuild.ErrNotFound)

	tests := []struct {
		name   string
		expect func(f driverFixture)
		want   rebuild.Event
		err    error // what Event.Err must wrap
	}{
		{"attach", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
			f.tickets.EXPECT().PutTicket(ctx, "vol", gomock.Any()).Return(nil)
			f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(nil)
		}, rebuild.Event{Op: rebuild.OpReconcile, Outcome: rebuild.EventOK, Decided: true, Action: rebuild.ActionCreate, Reason: rebuild.ReasonAttaching}, nil},
		{"healthy", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(healthy, nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
			f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(nil)
		}, rebuild.Event{Op: rebuild.OpReconcile, Outcome: rebuild.EventOK, Decided: true, Action: rebuild.ActionWait, Reason: rebuild.ReasonHealthy}, nil},
		{"interrupted", func(f driverFixture) {
			v := degradedVolume()
			v.State = rebuild.StateAttached
			f.volumes.EXPECT().Volume(ctx, "vol").Return(v, nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(workload, nil)
			f.tickets.EXPECT().DeleteTicket(ctx, "vol", rebuild.TicketID("vol")).Return(nil)
			f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(nil)
		}, rebuild.Event{Op: rebuild.OpReconcile, Outcome: rebuild.EventOK, Decided: true, Action: rebuild.ActionDelete, Reason: rebuild.ReasonInterrupted}, nil},
		{"unknown setting", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("sometimes", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
			f.volumes.EXPECT().UpdateStatus(ctx, "vol", gomock.Any()).Return(nil)
		}, rebuild.Event{Op: rebuild.OpReconcile, Outcome: rebuild.EventFailed, Decided: true, Action: rebuild.ActionWait, Reason: rebuild.ReasonDisabled}, rebuild.ErrInvalidSetting},
		{"volume unreadable", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(rebuild.Volume{}, errBoom)
		}, rebuild.Event{Op: rebuild.OpReconcile, Outcome: rebuild.EventFailed}, errBoom},
		{"ticket not created", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(degradedVolume(), nil)
			f.volumes.EXPECT().GlobalSetting(ctx).Return("true", nil)
			f.tickets.EXPECT().Tickets(ctx, "vol").Return(nil, nil)
			f.tickets.EXPECT().PutTicket(ctx, "vol", gomock.Any()).Return(errBoom)
		}, rebuild.Event{Op: rebuild.OpReconcile, Outcome: rebuild.EventFailed, Decided: true, Action: rebuild.ActionCreate, Reason: rebuild.ReasonAttaching}, errBoom},
		{"volume gone", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(rebuild.Volume{}, notFound)
			f.tickets.EXPECT().DeleteTicket(ctx, "vol", rebuild.TicketID("vol")).Return(nil)
		}, rebuild.Event{Op: rebuild.OpForget, Outcome: rebuild.EventOK, Decided: true, Action: rebuild.ActionDelete}, nil},
		{"volume gone, ticket stuck", func(f driverFixture) {
			f.volumes.EXPECT().Volume(ctx, "vol").Return(rebuild.Volume{}, notFound)
			f.tickets.EXPECT().DeleteTicket(ctx, "vol", rebuild.TicketID("vol")).Return(errBoom)
		}, rebuild.Event{Op: rebuild.OpForget, Outcome: rebuild.EventFailed, Decided: true, Action: rebuild.ActionDelete}, errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			clk := testingclock.NewFakeClock(start)
			f := driverFixture{volumes: mocks.NewMockVolumeSource(ctrl), tickets: mocks.NewMockTicketStore(ctrl), clock: clk}
			var got []rebuild.Event
			// Reading the volume takes 3 s by the Driver's clock.
			slow := steppingVolumes{f.volumes, clk, 3 * time.Second}
			d, err := rebuild.NewDriver(slow, f.tickets, rebuild.Options{Clock: clk,
				Hooks: rebuild.HooksFunc(func(e rebuild.Event) { got = append(got, e) })})
			if err != nil {
				t.Fatal(err)
			}
			tt.expect(f)
			_, rerr := d.Reconcile(ctx, "vol")
			if len(got) != 1 {
				t.Fatalf("%d events, want 1: %+v", len(got), got)
			}
			e := got[0]
			if !errors.Is(e.Err, tt.err) || (tt.err == nil) != (e.Err == nil) || !errors.Is(rerr, tt.err) || (rerr == nil) != (e.Err == nil) {
				t.Fatalf("event err %v, Reconcile err %v; want both to wrap %v", e.Err, rerr, tt.err)
			}
			want := tt.want
			want.Volume, want.Duration, want.Err, e.Err = "vol", 3*time.Second, nil, nil
			if e != want {
				t.Fatalf("event\n got %+v\nwant %+v", e, want)
			}
		})
	}
}

// steppingVolumes moves the fake clock on each volume read, as a slow API
// server would.
type steppingVolumes struct {
	rebuild.VolumeSource
	clock *testingclock.FakeClock
	took  time.Duration
}

func (v steppingVolumes) Volume(ctx context.Context, name string) (rebuild.Volume, error) {
	v.clock.Step(v.took)
	return v.VolumeSource.Volume(ctx, name)
}
