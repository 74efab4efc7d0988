// Command longhorn-disk lists the orphaned replica directories of a
// Longhorn v1 filesystem disk on a real node, with their sizes, and
// purges them only when asked explicitly.
//
//	kubectl get replicas.longhorn.io -n longhorn-system -o json > replicas.json
//	longhorn-disk -disk /var/lib/longhorn/ -node worker-1 -replicas replicas.json
//	longhorn-disk -disk /var/lib/longhorn/ -node worker-1 -replicas replicas.json -purge pvc-1-0a1b2c3d -yes
//
// Dry-run is the default: without -yes nothing is deleted, the tool says
// what it would purge and exits 3. Exit codes: 0 done (or nothing to
// do), 1 failed, 2 bad usage, 3 dry run that would purge, 4 refused by a
// safety rule (a disk that is not ready, a replica list that looks
// broken, a purge's re-check). A purge goes
// through diskscan's Orphans (Judge, then Delete), which re-checks the disk's UUID and filesystem,
// the directory and its volume.meta, mounts inside it, and the expected
// replicas at the moment it acts, and never follows symbolic links.
//
// The replica list must be the whole cluster's, taken after the scan
// would start: a directory whose replica object is missing from the list
// is reported as an orphan. Without -n longhorn-system, kubectl prints an
// empty list, which would make every replica look orphaned; so -purge and
// -purge-all are refused when the list expects nothing on the disk beside
// valid replica directories (override: -allow-empty-expected), or when
// every valid replica directory of the disk is unexpected and there are at
// least 3 of them (override: -allow-mass). Pass -disk as the node spec
// holds it (Longhorn's default is /var/lib/longhorn/ with the slash: the
// orphan names hash that string). Pass -disk-uuid
// (node.status.diskStatus) so a disk whose config changed is caught;
// without it the UUID in longhorn-disk.cfg is trusted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/orphan"
)

var command = cli.Command{
	Refuses: true,
	Name:    "longhorn-disk",
	Usage:   "longhorn-disk -disk PATH -node NODE -replicas FILE [-purge NAME]... [-purge-all] [-yes]\n       longhorn-disk -prepare DIR",
	About: "longhorn-disk lists the orphaned replica directories of a Longhorn v1 filesystem disk on this node, " +
		"with their sizes, judged against the cluster's replica list (take it with: " + kubectlReplicas + " > replicas.json). " +
		"It purges orphans only when asked with -purge or -purge-all and -yes; without -yes it says what it would purge, " +
		"deletes nothing and exits 3. Purges are refused when the replica list looks broken (see -allow-empty-expected and -allow-mass).",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// names is a repeatable string flag.
type names []string

func (n *names) String() string     { return fmt.Sprint(*n) }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := command.FlagSet()
	diskPath := fl.String("disk", "", "the disk's path (required)")
	node := fl.String("node", "", "this node's name, as in replica spec.nodeID (required)")
	replicas := fl.String("replicas", "", "`file` (a regular file, or - for stdin) with the output of\n"+kubectlReplicas+" (required)")
	diskName := fl.String("disk-name", "", "the disk's name in the node spec (default: diskName in longhorn-disk.cfg, else the path's base name)")
	diskUUID := fl.String("disk-uuid", "", "the disk UUID the node status expects (default: trust longhorn-disk.cfg)")
	fsid := fl.String("fsid", "", "the filesystem ID to expect (default: the one seen now)")
	var purge names
	fl.Var(&purge, "purge", "data directory `name` to purge (repeatable)")
	purgeAll := fl.Bool("purge-all", false, "purge every orphan found")
	yes := fl.Bool("yes", false, "really delete; without it purging is a dry run")
	allowEmpty := fl.Bool("allow-empty-expected", false, "purge even though the replica list expects nothing on this disk\n(usually the list is from the wrong namespace or cluster)")
	prepareDir := fl.String("prepare", "", "create a throw-away disk and replica list in this new `directory` to try the tool on, and print how")
	allowMass := fl.Bool("allow-mass", false, fmt.Sprintf("purge even though every valid replica directory of the disk is unexpected\n(%d or more of them)", massMin))
	if err := command.Parse(fl, args, stdout, stderr); err != nil {
		return command.Exit(err, stderr)
	}
	if *prepareDir != "" {
		if fl.NFlag() > 1 {
			return command.Exit(cli.Usagef("-prepare takes no other flag"), stderr)
		}
		return command.Exit(prepare(stdout, *prepareDir), stderr)
	}
	var missing []string
	for _, f := range []struct{ name, value string }{{"-disk", *diskPath}, {"-node", *node}, {"-replicas", *replicas}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return command.Exit(cli.Usagef("%s required (-disk, -node and -replicas are)", strings.Join(missing, ", ")), stderr)
	}
	if len(purge) > 0 && *purgeAll {
		return command.Exit(cli.Usagef("-purge and -purge-all conflict: name the directories, or purge them all"), stderr)
	}
	if err := cli.YesWithout(*yes && len(purge) == 0 && !*purgeAll, "-purge", "-purge-all"); err != nil {
		return command.Exit(err, stderr)
	}
	fail := func(err error) int { return command.Exit(err, stderr) }

	// The path is kept as given (a trailing slash included): it is part
	// of the orphan names. Only a relative path is made absolute.
	path := *diskPath
	if !filepath.IsAbs(path) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return fail(err)
		}
		path = abs
	}
	refs, err := readReplicas(*replicas)
	if err != nil {
		return fail(err)
	}
	disk, err := describeDisk(path, *node, *diskName, *diskUUID, *fsid)
	if err != nil {
		return fail(err)
	}
	orphans, err := diskscan.NewOrphans(diskscan.NewStaticExpected(refs...), diskscan.Options{
		Disks:             []diskscan.Disk{disk},
		AllowNoneExpected: *allowEmpty, // only purges look at it, after suspiciousList
	})
	if err != nil {
		return fail(err)
	}
	report, err := orphans.Report(ctx)
	if err != nil {
		return fail(err)
	}
	d := report.Disks[0]
	printReport(stdout, d, refs)
	if d.Status.Health != orphan.HealthReady {
		if len(purge) > 0 || *purgeAll {
			return fail(cli.Refused(fmt.Errorf("disk is %s: nothing is purged", d.Status.Health)))
		}
		return cli.ExitFailed
	}

	if len(purge) > 0 || *purgeAll {
		if err := suspiciousList(d, *allowEmpty, *allowMass); err != nil {
			return fail(cli.Refused(err))
		}
	}
	targets, err := selectTargets(d, purge, *purgeAll)
	if err != nil {
		return fail(err)
	}
	if len(targets) == 0 {
		return 0
	}
	if !*yes {
		fmt.Fprintf(stdout, "\ndry run: would purge %s (%s); add -yes to delete\n", cli.Count(len(targets), "directory"), human(sumBytes(targets)))
		for _, o := range targets {
			fmt.Fprintf(stdout, "  %s\n", o.Name)
		}
		return fail(cli.DryRun("purged"))
	}
	status := cli.ExitOK
	var freed int64
	fmt.Fprintln(stdout)
	for _, o := range targets {
		rec, err := orphan.NewRecord(o.Item, time.Now())
		if err == nil {
			var v orphan.Verdict
			if v, err = orphans.Judge(ctx, o.Item); err == nil && v.Outcome != orphan.OutcomeOrphan {
				err = fmt.Errorf("not purged: %s (%s)", v.Outcome, v.Reason)
			}
		}
		if err == nil {
			err = orphans.Delete(ctx, rec)
		}
		switch {
		case err == nil:
			freed += o.AllocatedBytes
			fmt.Fprintf(stdout, "purged  %s (%s)\n", o.Name, human(o.AllocatedBytes))
		case errors.Is(err, orphan.ErrPreconditionFailed):
			if status == cli.ExitOK {
				status = cli.ExitRefused // a failure elsewhere outranks it
			}
			fmt.Fprintf(stdout, "refused %s: %v\n", o.Name, err)
		default:
			status = cli.ExitFailed
			fmt.Fprintf(stdout, "failed  %s: %v\n", o.Name, err)
		}
	}
	if err := orphans.FinishInterrupted(ctx); err != nil {
		status = cli.ExitFailed
		fmt.Fprintf(stdout, "finishing interrupted purges: %v\n", err)
	}
	fmt.Fprintf(stdout, "reclaimed %s\n", human(freed))
	return status
}

func readReplicas(file string) ([]diskscan.ReplicaRef, error) {
	r := io.Reader(os.Stdin)
	if file != "-" {
		f, err := openRegular(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	refs, err := diskscan.ParseReplicaList(r, 0)
	if err != nil {
		return nil, fmt.Errorf("-replicas %s: %w", file, err)
	}
	return refs, nil
}

// openRegular opens a file the tool reads whole, and only if it is a
// regular file: a FIFO (`-replicas <(kubectl ...)` is one) would block the
// open until a writer came, or the read forever. Pipe into "-" instead.
func openRegular(path string) (*os.File, error) {
	f, _, err := safefile.OpenRegular(safefile.Dir{}, path)
	if te := (*safefile.TypeError)(nil); errors.As(err, &te) {
		return nil, fmt.Errorf("%v (to pipe the list in, pass - and use stdin): %w", err, diskscan.ErrNotRegular)
	}
	return f, err
}

// describeDisk fills in what the flags left out from the disk's config.
// With -disk-uuid given, a missing config leaves the name to the path's
// base name (the scan then reports the disk's health).
func describeDisk(path, node, name, uuid, fsid string) (diskscan.Disk, error) {
	if name == "" || uuid == "" {
		f, err := openRegular(filepath.Join(path, diskscan.ConfigFile))
		switch {
		case err != nil && uuid == "":
			return diskscan.Disk{}, fmt.Errorf("no -disk-uuid given and %w", err)
		case err != nil && errors.Is(err, os.ErrNotExist):
			return diskscan.Disk{NodeID: node, Name: filepath.Base(path), Path: path, UUID: uuid, FSID: fsid}, nil
		case err != nil:
			return diskscan.Disk{}, fmt.Errorf("no -disk-name given and %w", err)
		}
		cfg, err := diskscan.ReadDiskConfig(f, 0)
		f.Close()
		if err != nil {
			return diskscan.Disk{}, fmt.Errorf("%s: %w", filepath.Join(path, diskscan.ConfigFile), err)
		}
		if uuid == "" {
			uuid = cfg.DiskUUID
		}
		if name == "" {
			name = cfg.DiskName
		}
	}
	if name == "" {
		name = filepath.Base(path)
	}
	return diskscan.Disk{NodeID: node, Name: name, Path: path, UUID: uuid, FSID: fsid}, nil
}

func printReport(w io.Writer, d diskscan.DiskReport, refs []diskscan.ReplicaRef) {
	fmt.Fprintf(w, "disk %s at %s: UUID %s, filesystem %s\n", d.Disk.Scope(), d.Disk.Path, d.Disk.UUID, d.FSID)
	fmt.Fprintf(w, "health: %s", d.Status.Health)
	if d.Status.Message != "" {
		fmt.Fprintf(w, " (%s)", d.Status.Message)
	}
	fmt.Fprintln(w)
	if d.Status.Health != orphan.HealthReady {
		return
	}
	if !slices.ContainsFunc(refs, func(r diskscan.ReplicaRef) bool { return r.DiskID == d.Disk.UUID }) && d.Entries > 0 {
		fmt.Fprintf(w, "warning: no replica in the list names disk UUID %s: is the list this cluster's, and complete?\n", d.Disk.UUID)
	}
	fmt.Fprintf(w, "%s in replicas/: %d expected, %d orphaned, %d not replicas\n", cli.Count(d.Entries, "entry"), d.Owned, len(d.Orphans), len(d.Skipped))
	for _, o := range d.Orphans {
		fmt.Fprintf(w, "  orphan   %-48s volume %-9s on disk %s\n", o.Name, human(o.Meta.Size), human(o.AllocatedBytes))
	}
	for _, s := range d.Skipped {
		fmt.Fprintf(w, "  skipped  %-48s %s\n", s.Name, s.Reason)
	}
	fmt.Fprintf(w, "orphaned data: %s\n", human(d.OrphanBytes))
}

// kubectlReplicas is the command that prints the replica list the tool
// needs. Without -n longhorn-system it prints an empty list.
const kubectlReplicas = "kubectl get replicas.longhorn.io -n longhorn-system -o json"

// massMin is how many valid replica directories, all unexpected, make a
// replica list suspicious.
const massMin = 3

// suspiciousList refuses purges when the replica list looks like a broken
// view rather than a list of orphans: it expects nothing on the disk
// beside valid replica directories, or none of at least massMin valid
// replica directories.
func suspiciousList(d diskscan.DiskReport, allowEmpty, allowMass bool) error {
	valid := d.Owned + len(d.Orphans)
	switch {
	case d.Status.NoneExpected && len(d.Orphans) > 0 && !allowEmpty:
		return fmt.Errorf("the replica list expects no replica on disk %s (UUID %s), which holds %d valid replica directories: "+
			"is it this cluster's, taken with %q? Nothing is purged; -allow-empty-expected overrides", d.Disk.Name, d.Disk.UUID, len(d.Orphans), kubectlReplicas)
	case !d.Status.NoneExpected && d.Owned == 0 && valid >= massMin && !allowMass:
		return fmt.Errorf("every one of the %d valid replica directories on disk %s is unexpected: "+
			"is the replica list complete and current (%q)? Nothing is purged; -allow-mass overrides", valid, d.Disk.Name, kubectlReplicas)
	}
	return nil
}

func selectTargets(d diskscan.DiskReport, purge []string, all bool) ([]diskscan.OrphanDir, error) {
	if all {
		return d.Orphans, nil
	}
	var out []diskscan.OrphanDir
	for _, name := range purge {
		i := slices.IndexFunc(d.Orphans, func(o diskscan.OrphanDir) bool { return o.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%q is not an orphan found on this disk: nothing is purged", name)
		}
		out = append(out, d.Orphans[i])
	}
	return out, nil
}

func sumBytes(os []diskscan.OrphanDir) int64 {
	var n int64
	for _, o := range os {
		n += o.AllocatedBytes
	}
	return n
}

// human prints a byte count in binary units.
func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
