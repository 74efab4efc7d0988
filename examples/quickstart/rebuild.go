package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/rebuildtest"
)

// runRebuild tells the rebuild story on an in-memory cluster and a fake
// clock: a v2 volume loses a replica while a pod uses it, is rebuilt in
// maintenance mode once the pod is gone, and a user attaching mid-rebuild
// wins over the rebuild. dir is unused: nothing touches the disk.
func runRebuild(ctx context.Context, w io.Writer, _ string) error {
	sim, err := rebuildtest.NewSim(rebuild.Options{})
	if err != nil {
		return err
	}
	c := sim.Cluster
	const vol = "pvc-web"
	state := func() rebuildtest.VolumeState { return c.Inspect(vol) }
	until := func(what string, done func(rebuildtest.VolumeState) bool) error {
		ok, err := sim.RunUntil(ctx, 40, func() bool { return done(state()) })
		if err == nil && !ok {
			err = fmt.Errorf("%s did not happen", what)
		}
		return err
	}
	say := func(format string, args ...any) {
		s := state()
		fmt.Fprintf(w, "  %-7s %-9s replicas %d/%d  tickets %-45s %s\n", "+"+sim.Elapsed().String(), s.State,
			s.Healthy, s.Desired, ticketList(s.Tickets), fmt.Sprintf(format, args...))
	}

	fmt.Fprintln(w, "A v2 volume cannot rebuild a replica while it serves I/O. Once it is detached,")
	fmt.Fprintln(w, "a low-priority ticket attaches it in maintenance mode, the replica is rebuilt,")
	fmt.Fprintln(w, "and the volume is released. Any workload ticket wins over the rebuild.")
	steps := []func() error{
		func() error { return c.CreateVolume(rebuildtest.VolumeSpec{Name: vol, OwnerNode: "node-1"}) },
		func() error { return c.Attach(vol, "csi-pod", "node-1", rebuildtest.PriorityCSI) },
		func() error {
			return until("pod attach", func(s rebuildtest.VolumeState) bool { return s.State == rebuild.StateAttached })
		},
		func() error { say("a pod uses the volume"); return c.LoseReplica(vol) },
		func() error { return sim.Run(ctx, 1) },
		func() error { say("a replica failed: %s", condition(state())); return c.Detach(vol, "csi-pod") },
		func() error {
			return until("rebuild", func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })
		},
		func() error { return sim.Run(ctx, 1) },
		func() error { say("pod gone, rebuilding: %s", condition(state())); return nil },
		func() error {
			return until("release", func(s rebuildtest.VolumeState) bool {
				return s.State == rebuild.StateDetached && len(s.Tickets) == 0
			})
		},
		func() error { say("rebuilt and released"); return c.LoseReplica(vol) },
		func() error {
			return until("second rebuild", func(s rebuildtest.VolumeState) bool { return s.Rebuilding > 0 })
		},
		func() error {
			say("another replica failed, rebuilding again")
			return c.Attach(vol, "longhorn-ui", "node-2", rebuildtest.PriorityAPI)
		},
		func() error { return sim.Run(ctx, 1) },
		func() error { say("a user attaches: %s", condition(state())); return nil },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "Run examples/rebuild-sim for the full timelines, including deletion mid-rebuild")
	fmt.Fprintln(w, "and a rebuild that cannot progress (released, then retried with backoff).")
	return nil
}

func condition(s rebuildtest.VolumeState) string {
	c := s.Status.Condition
	return fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
}

func ticketList(ts []rebuild.Ticket) string {
	if len(ts) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s(%d)", t.ID, t.Priority))
	}
	return strings.Join(parts, ",")
}
