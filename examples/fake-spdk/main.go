// Command fake-spdk serves a fake SPDK target (package spdk/spdktest) on a
// Unix socket, so that spdk-inventory, or any SPDK JSON-RPC client, can be
// tried without SPDK. It holds lvstores, lvols with their snapshots and
// clones, RAID bdevs, NVMe-oF subsystems and NVMe bdev controllers, and
// answers the methods package spdk/spdktest serves (bdev_get_bdevs,
// bdev_lvol_get_lvols, bdev_raid_get_bdevs, nvmf_get_subsystems,
// bdev_nvme_get_controllers, the deletes...) as SPDK does, until SIGINT,
// SIGTERM or the end of its context.
//
//	fake-spdk [-socket PATH] [-scenario rejoin | -seed FILE]
//
// The socket defaults to fake-spdk.sock in the temporary directory; SPDK's
// own /var/tmp/spdk.sock is used only if given with -socket, and never
// while a server answers on it (a live SPDK's socket is not replaced).
//
// Scenarios:
//
//   - rejoin (the default): node-1 ran v2 volumes and came back to the
//     cluster. Its SPDK holds a live volume (engine vol-live-e-0, replica
//     vol-live-r-11111111 with a snapshot), a replica on a backing image,
//     the engine of a volume that moved to node-2, a detached volume's
//     engine and replica, a volume deleted while the node was away (RAID
//     bdev, replica with two snapshots and an expired clone) and a replica
//     whose record was deleted (vol-redo-r-55555555). The deleted volume
//     left NVMe-oF behind as Longhorn builds it: its engine's RAID bdev and
//     its replica's head are still exposed (subsystems
//     nqn.2023-01.io.longhorn.spdk:vol-gone-e-0 and :vol-gone-r-33333333),
//     and its engine's RAID bdev is built on a controller attached to its
//     remote replica on node-2 (vol-gone-r-66666666, bdev
//     vol-gone-r-66666666n1). The live engine is exposed too, and a
//     controller to a live remote replica (vol-live-r-77777777) is
//     attached with no RAID bdev on it yet. An interrupted purge of an
//     older volume left an empty subsystem of its local replica
//     (nqn.2023-01.io.longhorn.spdk:vol-old-r-88888888, whose lvols are
//     gone) and a controller to its remote replica on node-3
//     (vol-old-r-99999999) that no RAID bdev uses any more: no engine or
//     replica here holds them, and spdk.Orphans.PurgeLeftoverExposures
//     removes them once their records are gone too.
//   - empty: one lvstore, disk-1, and nothing in it.
//
// A seed file has the same form as the scenarios (scenarios/*.json):
//
//	{
//	  "lvstores": [{"name": "disk-1", "lvols": [
//	    {"name": "vol-r-1234abcd-snap-s1"},
//	    {"name": "vol-r-1234abcd", "parent": "vol-r-1234abcd-snap-s1"},
//	    {"name": "vol-r-1234abcd-clone", "parent": "vol-r-1234abcd-snap-s1"}
//	  ]}],
//	  "controllers": [{"name": "vol-r-9876fedc", "traddr": "10.0.0.2", "trsvcid": "20001",
//	    "subnqn": "nqn.2023-01.io.longhorn.spdk:vol-r-9876fedc"}],
//	  "raids": [{"name": "vol-e-0", "base": ["vol-r-1234abcd", "vol-r-9876fedcn1"]}],
//	  "subsystems": [{"nqn": "nqn.2023-01.io.longhorn.spdk:vol-e-0", "namespaces": ["vol-e-0"],
//	    "listen": "10.0.0.1:20001"}]
//	}
//
// An lvol's parent is the snapshot it is a clone of, in the same lvstore;
// an lvol some other lvol names as its parent is a snapshot. A
// controller's namespace is the bdev "<name>n1"; a subsystem's namespaces
// name bdevs as SPDK resolves them (an lvol's "<lvstore>/<lvol>" or UUID,
// a RAID bdev's name), and a bdev can be in one namespace only. Unknown
// fields, missing parents and cycles are errors naming the entry.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

var command = cli.Command{
	Name:  "fake-spdk",
	Usage: "fake-spdk [-socket PATH] [-scenario NAME | -seed FILE]",
	About: "fake-spdk serves a fake SPDK target (spdk/spdktest) on a Unix socket, seeded from a built-in scenario " +
		"or a JSON file of lvstores, lvols (with snapshot parents), NVMe controllers, RAID bdevs and NVMe-oF subsystems, until interrupted. " +
		"Point spdk-inventory (or any SPDK JSON-RPC client) at the socket it prints.",
}

// defaultSocket is where the fake listens unless told otherwise: never
// SPDK's own socket.
func defaultSocket() string { return filepath.Join(os.TempDir(), "fake-spdk.sock") }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runCommand(ctx, os.Args[1:], os.Stdout, os.Stderr, nil))
}

// runCommand is the tool's command line: it serves until ctx ends and
// returns the exit code. ready, if not nil, receives the socket path once
// the fake answers.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	return command.Exit(run(ctx, args, stdout, stderr, ready), stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) error {
	fs := command.FlagSet()
	socket := fs.String("socket", defaultSocket(), "Unix socket `path` to serve on (SPDK's own is /var/tmp/spdk.sock)")
	scenarioName := fs.String("scenario", "", "built-in scenario to start from: "+strings.Join(scenarioNames(), ", ")+" (default rejoin)")
	seedPath := fs.String("seed", "", "JSON `file` of lvstores, lvols and raids to start from (the form is in the command doc)")
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *scenarioName != "" && *seedPath != "" {
		return cli.Usagef("-scenario and -seed both given: give one")
	}
	var seed *Seed
	var err error
	if *seedPath != "" {
		seed, err = readSeed(*seedPath)
	} else {
		seed, err = scenario(or(*scenarioName, "rejoin"))
	}
	if err != nil {
		return err
	}
	if err := refuseLive(*socket); err != nil {
		return err
	}
	srv, err := spdktest.Start(*socket, spdktest.Options{})
	if err != nil {
		return fmt.Errorf("-socket %s: %w", *socket, err)
	}
	defer srv.Close()
	if err := seed.apply(srv); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	fmt.Fprintf(stdout, "socket: %s\n", srv.SocketPath())
	fmt.Fprintf(stdout, "fake-spdk ready: %s in %s, %s, %s, %s; stop with Ctrl-C\n",
		cli.Count(len(srv.Lvols()), "lvol"), cli.Count(len(seed.Lvstores), "lvstore"), cli.Count(len(srv.RaidNames()), "RAID bdev"),
		cli.Count(len(seed.Subsystems), "NVMe-oF subsystem"), cli.Count(len(srv.ControllerNames()), "NVMe controller"))
	if ready != nil {
		ready <- srv.SocketPath()
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "fake-spdk stopped")
	return nil
}

// refuseLive fails if a server answers on path: spdktest replaces a stale
// socket, and a live SPDK's socket must not be taken from it.
func refuseLive(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil // nothing there, or not a socket: spdktest refuses that itself
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil // stale
	}
	c.Close()
	return fmt.Errorf("-socket %s: a server is listening there (a real SPDK?); stop it or choose another path", path)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
