// Command rebuild-sim runs offline replica rebuilding (package rebuild) in an
// in-memory cluster on a fake clock and prints the timeline: user events,
// ticket changes, the OfflineRebuilding condition, attachment transitions
// and replica counts. Nothing touches a real cluster, nothing sleeps.
//
//	go run ./examples/rebuild-sim                  # every scenario
//	go run ./examples/rebuild-sim -scenario stuck  # one of them
//
// Scenarios:
//   - lifecycle: the test plan of Longhorn's "Automatic Offline Replica Rebuilding" (longhorn/longhorn#6071): a volume is created, attached by a pod,
//     loses a replica, is detached, rebuilt offline in maintenance mode and
//     detached again.
//   - interrupt: a user attaches the volume mid-rebuild; the rebuild stops,
//     the user gets the volume, and the rebuild resumes after the detach.
//   - delete: the volume is deleted mid-rebuild; the ticket and the
//     driver's memory of the volume go with it.
//   - stuck: rebuilds keep failing, then no replica can be scheduled; the
//     ticket is given up so the volume detaches, and attempts back off.
//   - hang: a rebuild hangs: the replica stays "rebuilding" and its
//     progress never moves; the ticket is released after the stall
//     timeout, and the rebuild succeeds once the engine works again.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/rebuild/rebuildtest"
)

// scenario is one story: the steps it takes on a simulation that starts
// with one healthy, detached 3-replica v2 volume.
type scenario struct {
	name, title string
	steps       func(ctx context.Context, sim *rebuildtest.Sim) []func() error
}

var scenarios = []scenario{
	{"lifecycle", "degraded volume lifecycle with offline rebuilding", lifecycle},
	{"interrupt", "a user attaches mid-rebuild", interrupt},
	{"delete", "the volume is deleted mid-rebuild", deleteMidRebuild},
	{"stuck", "rebuilding cannot progress: give up, detach, back off", stuck},
	{"hang", "a rebuild hangs without progress: released after the stall timeout", hang},
}

var command = cli.Command{
	Name:  "rebuild-sim",
	Usage: "rebuild-sim [-scenario NAME]",
	About: "rebuild-sim runs offline replica rebuilding (package rebuild) in an in-memory cluster on a fake clock " +
		"and prints the timeline of each scenario: user events, ticket changes, the OfflineRebuilding condition, " +
		"attachment transitions and replica counts. Nothing touches a real cluster and nothing sleeps. " +
		"Scenarios: " + scenarioNames() + ".",
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	code := runCommand(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// runCommand is the tool's command line: it parses args and returns the
// exit code.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := command.FlagSet()
	which := fs.String("scenario", "all", "the scenario to run: "+scenarioNames()+", or all")
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return command.Exit(err, stderr)
	}
	if err := checkScenario(*which); err != nil {
		return command.Exit(cli.Usagef("-scenario: %v", err), stderr)
	}
	return command.Exit(run(ctx, stdout, *which), stderr)
}

// scenarioNames lists the scenarios for the help and for errors.
func scenarioNames() string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.name
	}
	return strings.Join(names, ", ")
}

// checkScenario refuses a name that is not a scenario, listing the valid
// ones.
func checkScenario(which string) error {
	if which == "all" {
		return nil
	}
	for _, sc := range scenarios {
		if sc.name == which {
			return nil
		}
	}
	return fmt.Errorf("unknown scenario %q; valid: %s, or all", which, scenarioNames())
}

func run(ctx context.Context, w io.Writer, which string) error {
	if err := checkScenario(which); err != nil {
		return err
	}
	for _, sc := range scenarios {
		if which != "all" && which != sc.name {
			continue
		}
		sim, err := newSim()
		if err == nil {
			err = do(sc.steps(ctx, sim))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintf(w, "\n== %s: %s ==\n", sc.name, sc.title)
		for _, line := range sim.Lines() {
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

const vol = "vol-a"

// newSim returns a simulation with one healthy, detached 3-replica v2 volume.
func newSim() (*rebuildtest.Sim, error) {
	sim, err := rebuildtest.NewSim(rebuild.Options{})
	if err != nil {
		return nil, err
	}
	sim.Event(vol, "create v2 volume with 3 replicas, owner node-1")
	return sim, sim.Cluster.CreateVolume(rebuildtest.VolumeSpec{Name: vol, OwnerNode: "node-1"})
}

// until steps the simulation until cond holds, failing after max steps.
func until(ctx context.Context, sim *rebuildtest.Sim, what string, max int, cond func(rebuildtest.VolumeState) bool) error {
	ok, err := sim.RunUntil(ctx, max, func() bool { return cond(sim.Cluster.Inspect(vol)) })
	if err == nil && !ok {
		err = fmt.Errorf("%s did not happen within %d steps", what, max)
	}
	return err
}

func attached(s rebuildtest.VolumeState) bool { return s.State == rebuild.StateAttached }
func rebuilding(s rebuildtest.VolumeState) bool {
	return s.State == rebuild.StateAttached && s.Rebuilding > 0
}
func settled(s rebuildtest.VolumeState) bool {
	return s.State == rebuild.StateDetached && len(s.Tickets) == 0 && s.Healthy == s.Desired
}

func lifecycle(ctx context.Context, sim *rebuildtest.Sim) []func() error {
	c := sim.Cluster
	return []func() error{
		func() error { return sim.Run(ctx, 1) },
		func() error {
			sim.Event(vol, "pod attaches the volume (csi-attacher, priority 900)")
			return c.Attach(vol, "csi-pod-1", "node-1", rebuildtest.PriorityCSI)
		},
		func() error { return until(ctx, sim, "attach", 10, attached) },
		func() error { sim.Event(vol, "node-3 loses power: a replica fails"); return c.LoseReplica(vol) },
		func() error { return sim.Run(ctx, 2) },
		func() error { sim.Event(vol, "pod goes away: csi ticket removed"); return c.Detach(vol, "csi-pod-1") },
		func() error { return until(ctx, sim, "offline rebuild", 30, settled) },
		func() error { return sim.Run(ctx, 1) },
	}
}

func interrupt(ctx context.Context, sim *rebuildtest.Sim) []func() error {
	c := sim.Cluster
	return []func() error{
		loseReplica(sim),
		func() error { return until(ctx, sim, "rebuild start", 10, rebuilding) },
		func() error {
			sim.Event(vol, "user attaches without maintenance mode (longhorn-api, priority 1000)")
			return c.Attach(vol, "longhorn-ui", "node-2", rebuildtest.PriorityAPI)
		},
		func() error { return until(ctx, sim, "user attach", 10, attached) },
		func() error { return sim.Run(ctx, 2) },
		func() error { sim.Event(vol, "user detaches"); return c.Detach(vol, "longhorn-ui") },
		func() error { return until(ctx, sim, "resumed rebuild", 30, settled) },
	}
}

func deleteMidRebuild(ctx context.Context, sim *rebuildtest.Sim) []func() error {
	c := sim.Cluster
	return []func() error{
		loseReplica(sim),
		func() error { return until(ctx, sim, "rebuild start", 10, rebuilding) },
		func() error { sim.Event(vol, "user deletes the volume"); return c.DeleteVolume(vol) },
		func() error {
			return until(ctx, sim, "removal", 10, func(s rebuildtest.VolumeState) bool { return !s.Exists })
		},
		func() error { return sim.Run(ctx, 1) },
	}
}

func stuck(ctx context.Context, sim *rebuildtest.Sim) []func() error {
	c := sim.Cluster
	gaveUp := func(rebuildtest.VolumeState) bool {
		return sim.Decisions[vol].Condition.Reason == rebuild.ReasonCannotProgress
	}
	return []func() error{
		func() error {
			sim.Event(vol, "every rebuild of this volume fails (bad disk)")
			return c.SetFailRebuilds(vol, true)
		},
		loseReplica(sim),
		func() error { return until(ctx, sim, "give up", 40, gaveUp) },
		func() error {
			return until(ctx, sim, "detach", 5, func(s rebuildtest.VolumeState) bool { return s.State == rebuild.StateDetached })
		},
		func() error {
			sim.Event(vol, "the bad disk is removed: rebuilds would work, but no disk takes a replica")
			if err := c.SetFailRebuilds(vol, false); err != nil {
				return err
			}
			return c.SetSchedulable(vol, false)
		},
		func() error { return sim.Run(ctx, 8) },
		func() error {
			sim.Event(vol, "a new disk is added: replicas can be scheduled")
			return c.SetSchedulable(vol, true)
		},
		func() error { return until(ctx, sim, "rebuild", 200, settled) },
	}
}

func hang(ctx context.Context, sim *rebuildtest.Sim) []func() error {
	c := sim.Cluster
	return []func() error{
		func() error {
			sim.Event(vol, "the engine hangs on every rebuild: replicas stay rebuilding, progress stays put")
			return c.SetHangRebuilds(vol, true)
		},
		loseReplica(sim),
		func() error { return until(ctx, sim, "hung rebuild", 10, rebuilding) },
		func() error {
			return until(ctx, sim, "release", 30, func(s rebuildtest.VolumeState) bool {
				return s.State == rebuild.StateDetached && len(s.Tickets) == 0
			})
		},
		func() error {
			sim.Event(vol, "the engine is fixed: rebuilds make progress again")
			return c.SetHangRebuilds(vol, false)
		},
		func() error { return until(ctx, sim, "rebuild", 40, settled) },
	}
}

// loseReplica is the step that fails a replica of the detached volume.
func loseReplica(sim *rebuildtest.Sim) func() error {
	return func() error {
		sim.Event(vol, "a replica fails while detached")
		return sim.Cluster.LoseReplica(vol)
	}
}

// do runs steps in order until one fails.
func do(steps []func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
