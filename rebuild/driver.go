package rebuild

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/hashicorp/go-multierror"
	"k8s.io/utils/clock"
)

// Driver applies the Planner's decisions through the host's VolumeSource and
// TicketStore. It keeps each volume's Record in memory and reads the time
// from Options.Clock. It starts no goroutines: the host calls Reconcile
// from its own loop and schedules the next call at Decision.RequeueAt.
//
// A Driver is safe for concurrent use. Calls for the same volume should be
// serialized, as a work queue does; if they are not, a stale decision may be
// applied once and is corrected by the next call.
type Driver struct {
	planner Planner
	volumes VolumeSource
	tickets TicketStore
	clock   clock.Clock
	log     *slog.Logger
	hooks   Hooks

	mu      sync.Mutex
	records map[string]Record
}

// NewDriver returns a Driver reading the time from opts.Clock (nil: the
// real clock; tests pass a fake one). It returns an error naming the option
// that is invalid, wrapping ErrInvalidOptions: a nil volumes or tickets, or
// Options that Options.Validate refuses.
func NewDriver(volumes VolumeSource, tickets TicketStore, opts Options) (*Driver, error) {
	if volumes == nil || tickets == nil {
		return nil, fmt.Errorf("%w: a volume source and a ticket store are required", ErrInvalidOptions)
	}
	p, err := NewPlanner(opts)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{planner: p, volumes: volumes, tickets: tickets, clock: clocks.Or(opts.Clock), log: log, hooks: noHooks(opts.Hooks), records: map[string]Record{}}, nil
}

// Reconcile observes one volume, decides, applies the ticket change, and
// reports the status. It returns the decision it applied; the host should
// call Reconcile again for this volume at Decision.RequeueAt (when not
// zero) and whenever the volume, its replicas, its tickets or the
// global setting change.
//
// When the volume no longer exists, Reconcile deletes its ticket, forgets
// its record and returns a Decision with ActionDelete and no error.
// An unknown global setting value is treated as "disabled", applied, and
// returned as a *SettingError. Other errors come from the host and are
// retryable; the record is kept only when the ticket change succeeded, so a
// retry decides again from the same memory.
func (d *Driver) Reconcile(ctx context.Context, name string) (Decision, error) {
	started := d.clock.Now()
	dec, op, decided, err := d.reconcile(ctx, name)
	e := Event{Op: op, Outcome: EventOK, Volume: name, Duration: d.clock.Since(started)}
	if decided {
		e.Decided, e.Action, e.Reason = true, dec.Action, dec.Condition.Reason
	}
	if err != nil {
		e.Outcome, e.Err = EventFailed, err
	}
	d.hooks.Observe(e)
	return dec, err
}

// reconcile is Reconcile without the hooks; it also says which act it
// was and whether it reached a decision.
func (d *Driver) reconcile(ctx context.Context, name string) (_ Decision, _ Op, decided bool, _ error) {
	vol, err := d.volumes.Volume(ctx, name)
	if errors.Is(err, ErrNotFound) {
		dec, err := d.forget(ctx, name)
		return dec, OpForget, true, err
	}
	if err != nil {
		return Decision{}, OpReconcile, false, fmt.Errorf("rebuild: volume %s: %w", name, err)
	}
	raw, err := d.volumes.GlobalSetting(ctx)
	if err != nil {
		return Decision{}, OpReconcile, false, fmt.Errorf("rebuild: reading setting %s: %w", SettingName, err)
	}
	global, settingErr := ParseGlobalSetting(raw)
	if settingErr != nil {
		d.log.LogAttrs(ctx, slog.LevelWarn, "rebuild: invalid setting", slog.String("volume", name), slog.Any("err", settingErr))
	}
	tickets, err := d.tickets.Tickets(ctx, name)
	if err != nil {
		return Decision{}, OpReconcile, false, fmt.Errorf("rebuild: tickets of volume %s: %w", name, err)
	}

	dec := d.planner.Decide(Input{Volume: vol, Tickets: tickets, Global: global, Record: d.record(name), Now: d.clock.Now()})

	if err := d.apply(ctx, name, dec); err != nil {
		return dec, OpReconcile, true, err
	}
	d.logDecision(ctx, name, dec)
	d.setRecord(name, dec.Record)
	var errs *multierror.Error
	if settingErr != nil {
		errs = multierror.Append(errs, settingErr)
	}
	err = d.volumes.UpdateStatus(ctx, name, Status{Required: dec.Required, Condition: dec.Condition})
	if err != nil && !errors.Is(err, ErrNotFound) {
		errs = multierror.Append(errs, fmt.Errorf("rebuild: status of volume %s: %w", name, err))
		d.log.LogAttrs(ctx, slog.LevelError, "rebuild: apply failed", slog.String("volume", name),
			slog.String("action", dec.Action.String()), slog.String("op", "update-status"), slog.Any("err", err))
	}
	return dec, OpReconcile, true, errs.ErrorOrNil()
}

// ReconcileAll reconciles each named volume, for example all volumes after
// the global setting changed (Longhorn once missed that event, and
// rebuilding never started). It goes on after a failure; the failures are
// returned together as a *multierror.Error.
func (d *Driver) ReconcileAll(ctx context.Context, names []string) error {
	var errs *multierror.Error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return multierror.Append(errs, err)
		}
		if _, err := d.Reconcile(ctx, name); err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	return errs.ErrorOrNil()
}

// Record returns the record the driver holds for a volume (zero if none),
// for hosts that want to show or persist it.
func (d *Driver) Record(name string) Record { return d.record(name) }

// apply makes the ticket change the decision asks for.
func (d *Driver) apply(ctx context.Context, name string, dec Decision) error {
	var op string
	var err error
	switch dec.Action {
	case ActionCreate:
		if err = d.tickets.PutTicket(ctx, name, dec.Ticket); err != nil {
			op, err = "put-ticket", fmt.Errorf("rebuild: creating ticket %s: %w", dec.Ticket.ID, err)
		}
	case ActionDelete:
		if err = d.tickets.DeleteTicket(ctx, name, dec.Ticket.ID); err != nil && !errors.Is(err, ErrNotFound) {
			op, err = "delete-ticket", fmt.Errorf("rebuild: deleting ticket %s: %w", dec.Ticket.ID, err)
		} else {
			err = nil
		}
	}
	if err != nil {
		d.log.LogAttrs(ctx, slog.LevelError, "rebuild: apply failed", slog.String("volume", name),
			slog.String("action", dec.Action.String()), slog.String("reason", dec.Condition.Reason),
			slog.String("op", op), slog.Any("err", err))
	}
	return err
}

// forget cleans up after a deleted volume.
func (d *Driver) forget(ctx context.Context, name string) (Decision, error) {
	dec := Decision{Action: ActionDelete, Ticket: Ticket{ID: TicketID(name)}}
	if err := d.apply(ctx, name, dec); err != nil {
		return dec, err
	}
	d.mu.Lock()
	delete(d.records, name)
	d.mu.Unlock()
	d.log.LogAttrs(ctx, slog.LevelInfo, "rebuild: volume gone", slog.String("volume", name),
		slog.String("action", dec.Action.String()), slog.String("ticket", dec.Ticket.ID))
	return dec, nil
}

// logDecision reports an applied decision: the ones that attach, release,
// interrupt or give up at Info or Warn, the others at Debug.
func (d *Driver) logDecision(ctx context.Context, name string, dec Decision) {
	attrs := []slog.Attr{slog.String("volume", name), slog.String("action", dec.Action.String()),
		slog.String("reason", dec.Condition.Reason)}
	switch {
	case dec.Action == ActionCreate:
		d.log.LogAttrs(ctx, slog.LevelInfo, "rebuild: attaching", append(attrs, slog.String("ticket", dec.Ticket.ID),
			slog.String("node", dec.Ticket.NodeID), slog.String("message", dec.Condition.Message))...)
	case dec.Action == ActionDelete && dec.Condition.Reason == ReasonCannotProgress:
		d.log.LogAttrs(ctx, slog.LevelWarn, "rebuild: gave up", append(attrs, slog.String("message", dec.Condition.Message),
			slog.Int("failures", dec.Record.Failures), slog.Time("retry_at", dec.Record.RetryAt))...)
	case dec.Action == ActionDelete && dec.Condition.Reason == ReasonInterrupted:
		d.log.LogAttrs(ctx, slog.LevelInfo, "rebuild: interrupted", append(attrs, slog.String("message", dec.Condition.Message))...)
	case dec.Action == ActionDelete:
		d.log.LogAttrs(ctx, slog.LevelInfo, "rebuild: released", append(attrs, slog.String("message", dec.Condition.Message))...)
	default:
		d.log.LogAttrs(ctx, slog.LevelDebug, "rebuild: decided", attrs...)
	}
}

func (d *Driver) record(name string) Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.records[name]
}

func (d *Driver) setRecord(name string, r Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r == (Record{}) {
		delete(d.records, name) // healthy volumes cost no memory
		return
	}
	d.records[name] = r
}
