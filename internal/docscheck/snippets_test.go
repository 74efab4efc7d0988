package docscheck

import (
	"context"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/orphan"
)

// embedOrphanedReplicaDirectories is the README's "Embedding" snippet,
// compiled: its inputs are the parameters.
func embedOrphanedReplicaDirectories(ctx context.Context, expected diskscan.ExpectedSource, store orphan.Store,
	settings map[string]string, diskUUIDFromNodeSpec string, nodeAndDisks map[orphan.Scope]orphan.ScopeStatus, enqueue func(), report func(...any)) error {
	// expected: a diskscan.ExpectedSource over your replica cache; it is asked again right before a purge.
	orphans, err := diskscan.NewOrphans(expected, diskscan.Options{})
	if err != nil {
		return err
	}
	// Again whenever the Node object changes.
	if err := orphans.SetDisks(diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: "/var/lib/longhorn/", UUID: diskUUIDFromNodeSpec}); err != nil {
		return err
	}

	mon, err := orphan.NewMonitor(orphans, orphan.MonitorOptions{OnChange: func(orphan.Observation) { enqueue() }})
	if err != nil {
		return err
	}
	if err := mon.Start(ctx); err != nil {
		return err
	}
	defer mon.Stop()

	policy, err := orphan.ParsePolicy(settings["orphan-resource-auto-deletion"],
		settings["orphan-resource-auto-deletion-grace-period"])
	if err != nil {
		return err // an unknown item is an error, never a guess
	}
	sweeper, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{})
	if err != nil {
		return err
	}

	// In your reconcile:
	obs, ok := mon.Latest() // never waits for a scan
	if ok && obs.Err == nil {
		plan, result, err := sweeper.Reconcile(ctx, obs.Snapshot, orphan.Cycle{
			Selector:   orphan.Selector{NodeID: "node-1"},
			Scopes:     nodeAndDisks, // the node's health (Ready, NodeUnavailable, NodeEvicted) and evicted disks
			Policy:     policy,
			ObservedAt: obs.StartedAt, // a scan older than a purge does not bring its record back
		})
		// plan: what was decided; result: created, forgotten, purged, marked, refused (with why) and
		// failed; err: the same failures, aggregated. The Sweeper has written every condition.
		report(plan, result, err)
	}
	return nil
}

var _ = embedOrphanedReplicaDirectories
