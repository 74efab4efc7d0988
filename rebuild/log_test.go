package rebuild_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/internal/logrecord"
	"github.com/caretaker-storage/caretaker/rebuild"
)

// logHost is one volume's host: what Volume, GlobalSetting and Tickets
// return, and errors to inject into PutTicket and UpdateStatus.
type logHost struct {
	mu        sync.Mutex
	vol       *rebuild.Volume // nil: the volume is gone
	setting   string
	tickets   []rebuild.Ticket
	putErr    error
	statusErr error
}

func (h *logHost) Volume(context.Context, string) (rebuild.Volume, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.vol == nil {
		return rebuild.Volume{}, rebuild.ErrNotFound
	}
	return *h.vol, nil
}
func (h *logHost) GlobalSetting(context.Context) (string, error) { return h.setting, nil }
func (h *logHost) UpdateStatus(context.Context, string, rebuild.Status) error {
	return h.statusErr
}
func (h *logHost) Tickets(context.Context, string) ([]rebuild.Ticket, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]rebuild.Ticket(nil), h.tickets...), nil
}
func (h *logHost) PutTicket(_ context.Context, _ string, t rebuild.Ticket) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.putErr != nil {
		return h.putErr
	}
	h.drop(t.ID)
	h.tickets = append(h.tickets, t)
	return nil
}
func (h *logHost) DeleteTicket(_ context.Context, _ string, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(id)
	return nil
}
func (h *logHost) drop(id string) {
	kept := h.tickets[:0]
	for _, t := range h.tickets {
		if t.ID != id {
			kept = append(kept, t)
		}
	}
	h.tickets = kept
}

func newLoggedDriver(t *testing.T, host *logHost, level slog.Level) (*rebuild.Driver, *logrecord.Handler) {
	t.Helper()
	rec := logrecord.New(level)
	d, err := rebuild.NewDriver(host, host, rebuild.Options{Clock: testingclock.NewFakeClock(start), Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	return d, rec
}

func TestDriverLogsDecisions(t *testing.T) {
	ctx := context.Background()
	vol := degradedVolume()
	host := &logHost{vol: &vol, setting: "true"}
	d, rec := newLoggedDriver(t, host, slog.LevelDebug)
	ticket := rebuild.TicketID("vol")

	// Degraded and detached: attach.
	if _, err := d.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	rec.Want(t, 1, slog.LevelInfo, "rebuild: attaching",
		map[string]string{"volume": "vol", "action": "create", "reason": rebuild.ReasonAttaching, "ticket": ticket, "node": "node-1"})

	// Attached and rebuilding: nothing changes, at Debug.
	host.mu.Lock()
	host.vol.State = rebuild.StateAttached
	host.vol.Replicas[1].State = rebuild.ReplicaRebuilding
	host.mu.Unlock()
	if _, err := d.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	rec.Want(t, 1, slog.LevelDebug, "rebuild: decided", map[string]string{"volume": "vol", "action": "keep", "reason": rebuild.ReasonRebuilding})

	// A workload outranks us: interrupted.
	host.mu.Lock()
	host.tickets = append(host.tickets, rebuild.Ticket{ID: "csi-attacher", NodeID: "node-2", Priority: 900})
	host.mu.Unlock()
	if _, err := d.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	rec.Want(t, 1, slog.LevelInfo, "rebuild: interrupted", map[string]string{"volume": "vol", "action": "delete", "reason": rebuild.ReasonInterrupted})

	// The workload goes; nothing can be rebuilt: attach, then give up.
	host.mu.Lock()
	host.drop("csi-attacher")
	host.vol.State = rebuild.StateDetached
	host.vol.Replicas[1].State = rebuild.ReplicaFailed
	host.vol.CanScheduleReplica = false
	host.tickets = append(host.tickets, rebuild.Ticket{ID: ticket, NodeID: "node-1", Priority: rebuild.DefaultPriority})
	host.mu.Unlock()
	if _, err := d.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	e := rec.Want(t, 1, slog.LevelWarn, "rebuild: gave up",
		map[string]string{"volume": "vol", "action": "delete", "reason": rebuild.ReasonCannotProgress, "failures": "1"})
	if !strings.Contains(e[0].Attrs["message"], "no new replica can be scheduled") || e[0].Attrs["retry_at"] == "" {
		t.Fatalf("gave up without why or when: %v", e[0])
	}

	// Healthy again with our ticket: released.
	host.mu.Lock()
	host.vol.Replicas[1].State = rebuild.ReplicaHealthy
	host.tickets = append(host.tickets, rebuild.Ticket{ID: ticket, NodeID: "node-1", Priority: rebuild.DefaultPriority})
	host.mu.Unlock()
	if _, err := d.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	rec.Want(t, 1, slog.LevelInfo, "rebuild: released", map[string]string{"volume": "vol", "action": "delete", "reason": rebuild.ReasonCompleted})

	// The volume is deleted.
	host.mu.Lock()
	host.vol = nil
	host.mu.Unlock()
	if _, err := d.Reconcile(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	rec.Want(t, 1, slog.LevelInfo, "rebuild: volume gone", map[string]string{"volume": "vol", "action": "delete", "ticket": ticket})
}

func TestDriverLogsFailuresAndBadSettings(t *testing.T) {
	ctx := context.Background()
	vol := degradedVolume()
	host := &logHost{vol: &vol, setting: "true", putErr: errBoom}
	d, rec := newLoggedDriver(t, host, slog.LevelInfo)
	if _, err := d.Reconcile(ctx, "vol"); !errors.Is(err, errBoom) {
		t.Fatalf("err %v, want the PutTicket error", err)
	}
	rec.Want(t, 1, slog.LevelError, "rebuild: apply failed", map[string]string{"volume": "vol", "action": "create", "op": "put-ticket"})
	rec.Want(t, 0, slog.LevelInfo, "rebuild: attaching", nil)

	host.putErr, host.statusErr, host.setting = nil, errBoom, "sometimes"
	if _, err := d.Reconcile(ctx, "vol"); err == nil {
		t.Fatal("no error for a bad setting and a failed status update")
	}
	rec.Want(t, 1, slog.LevelWarn, "rebuild: invalid setting", map[string]string{"volume": "vol"})
	e := rec.Want(t, 1, slog.LevelError, "rebuild: apply failed", map[string]string{"volume": "vol", "op": "update-status"})
	if !strings.Contains(e[0].Attrs["err"], errBoom.Error()) {
		t.Fatalf("apply failed without the error: %v", e[0])
	}
}

func TestDriverWithoutLoggerStaysSilent(t *testing.T) {
	vol := degradedVolume()
	host := &logHost{vol: &vol, setting: "true", putErr: errBoom}
	d, err := rebuild.NewDriver(host, host, rebuild.Options{Clock: testingclock.NewFakeClock(start)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reconcile(context.Background(), "vol"); !errors.Is(err, errBoom) {
		t.Fatalf("err %v", err)
	}
	host.putErr, host.setting = nil, "sometimes"
	_, _ = d.Reconcile(context.Background(), "vol")
	host.vol = nil
	if _, err := d.Reconcile(context.Background(), "vol"); err != nil {
		t.Fatal(err)
	}
}
