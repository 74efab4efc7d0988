// Package metrics exports caretaker's driver hooks as Prometheus metrics:
// counters of each act by its labels and histograms of their durations.
// One Metrics value serves the orphan Monitor and Sweeper (Orphan), the
// backupdelete Driver (BackupDelete) and the rebuild Driver (Rebuild);
// the series appear when the first event of their kind is observed.
//
// Every label is one of the hooks' low-cardinality fields (op, outcome,
// kind, state, why, action, reason): never a record, backup or volume
// name, which would make one series per object. A per-node agent tells
// its nodes apart by the scrape target's labels.
//
// The metric names, all prefixed caretaker_:
//
//	orphan_scans_total{outcome}                        counter    Monitor scans (ok, failed)
//	orphan_scan_duration_seconds{outcome}              histogram  how long each scan took
//	orphan_sync_steps_total{op,kind,outcome}           counter    Sweeper steps: create, forget, mark, purge, finish
//	                                                              (ok, failed, refused, guarded)
//	orphan_sync_step_duration_seconds{op,kind}         histogram  how long each step took (guarded purges excluded)
//	orphan_forgotten_total{kind,reason}                counter    records forgotten, by why (Gone, Owned, DiskEvicted...)
//	backupdelete_events_total{op,outcome,state,why}    counter    presence checks, reconciles (by the step taken), delete commands
//	backupdelete_duration_seconds{op}                  histogram  how long each took
//	rebuild_reconciles_total{op,outcome,action,reason} counter    Reconciles, by the decision applied
//	rebuild_reconcile_duration_seconds{op}             histogram  how long each took
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/rebuild"
)

// Namespace prefixes every metric name.
const Namespace = "caretaker"

// Metrics holds the collectors; its methods return the hooks that feed
// them. It is safe for concurrent use, as the hooks must be.
type Metrics struct {
	scans        *prometheus.CounterVec
	scanDuration *prometheus.HistogramVec
	steps        *prometheus.CounterVec
	stepDuration *prometheus.HistogramVec
	forgotten    *prometheus.CounterVec

	backups        *prometheus.CounterVec
	backupDuration *prometheus.HistogramVec

	rebuilds        *prometheus.CounterVec
	rebuildDuration *prometheus.HistogramVec
}

// Buckets of the duration histograms, in seconds: from a cached scan of
// a small disk to a delete command on a slow NFS backupstore.
var Buckets = []float64{0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10, 60, 300}

// New registers the collectors with reg and returns them. It fails if
// reg holds collectors of the same names already.
func New(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	}
	histogram := func(subsystem, name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
			Buckets: Buckets}, labels)
	}
	m := &Metrics{
		scans:        counter("orphan", "scans_total", "Inventory scans by the orphan Monitor, by outcome.", "outcome"),
		scanDuration: histogram("orphan", "scan_duration_seconds", "How long each orphan Monitor scan took.", "outcome"),
		steps: counter("orphan", "sync_steps_total",
			"Steps of the orphan Sweeper (create, forget, mark, purge, finish) by record kind and outcome (ok, failed, refused, guarded).",
			"op", "kind", "outcome"),
		stepDuration: histogram("orphan", "sync_step_duration_seconds", "How long each orphan Sweeper step took.", "op", "kind"),
		forgotten:    counter("orphan", "forgotten_total", "Orphan records forgotten (data kept), by kind and reason.", "kind", "reason"),
		backups: counter("backupdelete", "events_total",
			"Acts of the backupdelete Driver: presence checks, reconciles (by the step taken) and delete commands.",
			"op", "outcome", "state", "why"),
		backupDuration: histogram("backupdelete", "duration_seconds", "How long each act of the backupdelete Driver took.", "op"),
		rebuilds: counter("rebuild", "reconciles_total",
			"Reconciles of the rebuild Driver by outcome and the decision applied (action, condition reason).",
			"op", "outcome", "action", "reason"),
		rebuildDuration: histogram("rebuild", "reconcile_duration_seconds", "How long each Reconcile of the rebuild Driver took.", "op"),
	}
	for _, c := range []prometheus.Collector{m.scans, m.scanDuration, m.steps, m.stepDuration, m.forgotten,
		m.backups, m.backupDuration, m.rebuilds, m.rebuildDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Orphan returns the hooks for orphan.MonitorOptions.Hooks and
// orphan.SweeperOptions.Hooks.
func (m *Metrics) Orphan() orphan.Hooks {
	return orphan.HooksFunc(func(e orphan.Event) {
		if e.Op == orphan.OpScan {
			m.scans.WithLabelValues(string(e.Outcome)).Inc()
			m.scanDuration.WithLabelValues(string(e.Outcome)).Observe(e.Duration.Seconds())
			return
		}
		kind := string(e.Kind)
		m.steps.WithLabelValues(string(e.Op), kind, string(e.Outcome)).Inc()
		if e.Outcome != orphan.EventGuarded { // no act of the Sweeper's: nothing to time
			m.stepDuration.WithLabelValues(string(e.Op), kind).Observe(e.Duration.Seconds())
		}
		if e.Op == orphan.OpForget && e.Outcome == orphan.EventOK {
			m.forgotten.WithLabelValues(kind, e.Reason).Inc()
		}
	})
}

// BackupDelete returns the hooks for backupdelete.DriverOptions.Hooks.
func (m *Metrics) BackupDelete() backupdelete.Hooks {
	return backupdelete.HooksFunc(func(e backupdelete.Event) {
		m.backups.WithLabelValues(string(e.Op), string(e.Outcome), string(e.State), e.Why).Inc()
		m.backupDuration.WithLabelValues(string(e.Op)).Observe(e.Duration.Seconds())
	})
}

// Rebuild returns the hooks for rebuild.Options.Hooks.
func (m *Metrics) Rebuild() rebuild.Hooks {
	return rebuild.HooksFunc(func(e rebuild.Event) {
		action := ""
		if e.Decided {
			action = e.Action.String()
		}
		m.rebuilds.WithLabelValues(string(e.Op), string(e.Outcome), action, e.Reason).Inc()
		m.rebuildDuration.WithLabelValues(string(e.Op)).Observe(e.Duration.Seconds())
	})
}
