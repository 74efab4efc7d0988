// Command scylla-cleanup inspects a ScyllaDB node's token ring through its
// REST API and says which nodes need a cleanup, and why.
//
//	# the node's ring hash (as scylla-operator would annotate it) and membership
//	go run ./examples/scylla-cleanup -api http://127.0.0.1:10000
//
//	# save the ring and replication now, before scaling
//	go run ./examples/scylla-cleanup -save before.json \
//	    -keyspace shop=NetworkTopologyStrategy:dc1=3,dc2=3 -keyspace logs=SimpleStrategy:2
//
//	# after scaling: who lost ranges (needs cleanup) and who only gained
//	go run ./examples/scylla-cleanup -baseline before.json
//
//	# run the cleanup on this node (stop running cleanups, clean every
//	# non-local vnode keyspace); without -yes it only lists the keyspaces
//	# it would clean and exits 3
//	go run ./examples/scylla-cleanup -run-cleanup -yes
//
//	# after scaling: clean this node only if it lost ranges, and only the
//	# keyspaces in which it lost them (-all cleans every keyspace anyway)
//	go run ./examples/scylla-cleanup -baseline before.json -run-cleanup -yes
//
//	# plan the cleanups of every node (or, with -baseline, of those that
//	# lost ranges): waves of nodes that may clean together, never two
//	# replicas of one range at once, at most 6 per datacenter, one rack of
//	# it at a time (-max-per-dc N, -rack-at-a-time=false change that). The
//	# replication of every keyspace comes from the cluster (describe_ring);
//	# a -keyspace that places replicas elsewhere is refused
//	go run ./examples/scylla-cleanup -plan
//	go run ./examples/scylla-cleanup -plan -json
//
//	# datacenters that replicate each other clean side by side when only
//	# replicas in one datacenter must not clean together (clients at
//	# LOCAL_QUORUM)
//	go run ./examples/scylla-cleanup -plan -conflicts dc
//
//	# run the plan: each node as soon as the rules allow, through its own
//	# API (-node-api ENDPOINT=URL, or -api's scheme and port on the
//	# endpoint's address); -state records the progress, and the same
//	# command after a restart resumes without cleaning a done node again
//	go run ./examples/scylla-cleanup -plan -run-cleanup -yes -state cleanup.json
//
// Right before each node's cleanup, -plan -run-cleanup reads from -api the
// ring and the nodes joining, leaving, moving and down, and asks every node
// of the ring for its host ID again: while a node is down or the ring
// changes, no cleanup starts (the node is tried again after its backoff;
// see the README). Single-node -run-cleanup -yes (what a cleanup Job's pod
// runs) reads the ring and those lists from -api once more right before
// it sends anything, and refuses (exit 4) while the cluster is not
// stable; scylla-operator's cleanup Job (runCleanup in its
// pkg/cmd/operator/cleanupjob.go) checks nothing first.
//
// Exit codes: 0 done (or nothing to do), 1 failed, 2 bad usage, 3 dry run
// that would clean, 4 refused by a safety rule.
//
// Through the Scylla Manager Agent, use -api https://host:10001 with
// -agent-token-file and, for a private CA, -ca-file.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// keyspaceFlags collects repeated -keyspace name=Strategy:settings flags.
type keyspaceFlags map[string]tokenring.Replication

func (k keyspaceFlags) String() string { return fmt.Sprint(map[string]tokenring.Replication(k)) }

func (k keyspaceFlags) Set(spec string) error {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=Strategy:settings, got %q", spec)
	}
	class, settings, _ := strings.Cut(rest, ":")
	strategy, err := tokenring.ParseStrategy(class)
	if err != nil {
		return err
	}
	r := tokenring.Replication{Strategy: strategy}
	switch strategy {
	case tokenring.SimpleStrategy:
		if r.ReplicationFactor, err = strconv.Atoi(settings); err != nil {
			return fmt.Errorf("keyspace %s: replication factor %q: %w", name, settings, err)
		}
	case tokenring.NetworkTopologyStrategy:
		r.Datacenters = map[string]int{}
		for _, dcrf := range strings.Split(settings, ",") {
			dc, rf, ok := strings.Cut(dcrf, "=")
			n, err := strconv.Atoi(rf)
			if !ok || dc == "" || err != nil {
				return fmt.Errorf("keyspace %s: want dc=factor, got %q", name, dcrf)
			}
			if _, dup := r.Datacenters[dc]; dup {
				return fmt.Errorf("keyspace %s: datacenter %s given twice", name, dc)
			}
			r.Datacenters[dc] = n
		}
	}
	// Factors alone can be checked now (no replicas anywhere, negative);
	// datacenters need the ring, and are checked once it is read.
	if err := (tokenring.Topology{Keyspaces: map[string]tokenring.Replication{name: r}}).Validate(); err != nil &&
		!errors.Is(err, tokenring.ErrUnknownDatacenter) {
		return err
	}
	k[name] = r
	return nil
}

// apiFlag is the -api value, checked when the flag is parsed so that a
// URL without a scheme is reported as such, with the fix.
type apiFlag string

func (a *apiFlag) String() string { return string(*a) }

func (a *apiFlag) Set(v string) error {
	if _, err := tokenring.NewClient(v, tokenring.ClientOptions{}); err != nil {
		return err
	}
	*a = apiFlag(v)
	return nil
}

// nodeAPIFlags collects repeated -node-api ENDPOINT=URL flags.
type nodeAPIFlags map[string]string

func (n nodeAPIFlags) String() string { return fmt.Sprint(map[string]string(n)) }

func (n nodeAPIFlags) Set(spec string) error {
	ep, u, ok := strings.Cut(spec, "=")
	if !ok || ep == "" {
		return fmt.Errorf("want ENDPOINT=URL, got %q", spec)
	}
	if _, err := tokenring.NewClient(u, tokenring.ClientOptions{}); err != nil {
		return fmt.Errorf("node %s: %w", ep, err)
	}
	if _, dup := n[ep]; dup {
		return fmt.Errorf("node %s given twice", ep)
	}
	n[ep] = u
	return nil
}

// config is the parsed command line.
type config struct {
	api               apiFlag
	tokenFile, caFile string
	save, baseline    string
	runCleanup, yes   bool
	all               bool
	timeout           time.Duration
	keyspaces         keyspaceFlags
	// The cluster-wide plan.
	plan, json  bool
	maxPerDC    int
	rackAtATime bool
	conflicts   string // conflictsCluster or conflictsDC
	nodeAPIs    nodeAPIFlags
	state       string // -state FILE for -plan -run-cleanup
	attempts    int
	// backoff is the driver's wait between a node's attempts; the zero
	// value is tokenring's default (30 s doubling to 10 min). Tests
	// shorten it; no flag sets it.
	backoff tokenring.CleanupBackoff
}

// The values of -conflicts.
const (
	conflictsCluster = "cluster" // tokenring.AcrossDatacenters
	conflictsDC      = "dc"      // tokenring.WithinDatacenter
)

var command = cli.Command{
	Refuses: true,
	Name:    "scylla-cleanup",
	Usage:   "scylla-cleanup [-api URL] [-save FILE -keyspace SPEC... | -baseline FILE [-keyspace SPEC]...] [-plan [-json] [-max-per-dc N] [-rack-at-a-time=false] [-conflicts dc|cluster] [-node-api ENDPOINT=URL]... [-state FILE] [-attempts N]] [-run-cleanup [-all] [-yes]]",
	About: "scylla-cleanup inspects a ScyllaDB node's token ring through its REST API (or the Scylla Manager Agent) " +
		"and prints the node's token ring hash, as scylla-operator annotates it. With -save it records the ring and " +
		"the -keyspace replication before scaling; with -baseline it says which nodes lost ranges since (they need a " +
		"cleanup) and which only gained. With -run-cleanup -yes it runs a cleanup on this node; without -yes it lists " +
		"the keyspaces it would clean, cleans nothing and exits 3. With -baseline, -run-cleanup cleans only if this " +
		"node lost ranges, and only the keyspaces in which it lost them, unless -all is given. With -plan it reads every keyspace's " +
		"replication from the cluster (GET /storage_service/describe_ring/{keyspace}; a -keyspace that disagrees is an error) " +
		"and plans the cleanups of the whole cluster (or, with -baseline, of the nodes that lost ranges) in waves that never clean two " +
		"replicas of one range together (with -conflicts dc: never two in one datacenter), and -plan -run-cleanup -yes runs " +
		"them, each node as soon as the rules allow, recording its progress in -state FILE so that a new run resumes.",
}

// parseArgs parses the command line; errors name the flag and what is
// wrong with it. -h prints the help to stdout and returns flag.ErrHelp.
func parseArgs(args []string, stdout, stderr io.Writer) (config, error) {
	c := config{api: "http://127.0.0.1:10000", keyspaces: keyspaceFlags{}, nodeAPIs: nodeAPIFlags{}}
	fs := command.FlagSet()
	fs.Var(&c.api, "api", "ScyllaDB REST API, http://host:10000, or the Manager Agent, https://host:10001")
	fs.StringVar(&c.tokenFile, "agent-token-file", "", "file holding the Scylla Manager Agent's auth token (needs an https -api)")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM CA bundle to trust for an https -api")
	fs.StringVar(&c.save, "save", "", "write the current ring and the -keyspace replication to this file")
	fs.StringVar(&c.baseline, "baseline", "", "a file written earlier by -save: report who lost and who gained ranges since")
	fs.BoolVar(&c.runCleanup, "run-cleanup", false, "run a cleanup on this node (it rewrites SSTables: use off-peak); needs -yes")
	fs.BoolVar(&c.yes, "yes", false, "confirm -run-cleanup; without it, -run-cleanup only lists the keyspaces it would clean")
	fs.BoolVar(&c.all, "all", false, "with -baseline, make -run-cleanup clean every keyspace even if this node lost no ranges")
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "deadline for reading the ring (a cleanup has no deadline)")
	fs.Var(c.keyspaces, "keyspace", "name=SimpleStrategy:RF or name=NetworkTopologyStrategy:dc1=RF,dc2=RF (repeatable)")
	fs.BoolVar(&c.plan, "plan", false, "plan the cleanups of the cluster in waves (with -run-cleanup: clean every node of the plan)")
	fs.BoolVar(&c.json, "json", false, `with -plan, print only the plan as JSON: {"waves": [["10.0.0.1", ...], ...]}`)
	fs.IntVar(&c.maxPerDC, "max-per-dc", 0, fmt.Sprintf("with -plan, at most this many cleanups at once per datacenter (0: %d)", tokenring.DefaultMaxPerDatacenter))
	fs.BoolVar(&c.rackAtATime, "rack-at-a-time", true, "with -plan, clean one rack of a datacenter at a time (false: racks together, when they share no range)")
	fs.StringVar(&c.conflicts, "conflicts", conflictsCluster, "with -plan, which replicas of a range never clean together: cluster (anywhere) or dc (in one datacenter; for clients at LOCAL_QUORUM)")
	fs.StringVar(&c.state, "state", "", "with -plan -run-cleanup, record what is done and what runs in this JSON file, and resume from it")
	fs.IntVar(&c.attempts, "attempts", 0, fmt.Sprintf("with -plan -run-cleanup, tries per node before giving it up (0: %d)", tokenring.DefaultCleanupMaxAttempts))
	fs.Var(c.nodeAPIs, "node-api", "with -plan -run-cleanup, the API of one node, ENDPOINT=URL (repeatable; default: -api's scheme and port on the endpoint)")
	if err := command.Parse(fs, args, stdout, stderr); err != nil {
		return config{}, err
	}
	switch {
	case !c.plan && (c.json || c.maxPerDC != 0 || !c.rackAtATime || c.conflicts != conflictsCluster || len(c.nodeAPIs) > 0):
		return config{}, cli.Usagef("-json, -max-per-dc, -rack-at-a-time, -conflicts and -node-api only change -plan, which was not given")
	case c.conflicts != conflictsCluster && c.conflicts != conflictsDC:
		return config{}, cli.Usagef("-conflicts %q: want cluster (replicas anywhere never clean together) or dc (replicas in one datacenter never do)", c.conflicts)
	case (c.state != "" || c.attempts != 0) && !(c.plan && c.runCleanup):
		return config{}, cli.Usagef("-state and -attempts only change -plan -run-cleanup")
	case c.attempts < 0:
		return config{}, cli.Usagef("-attempts %d: want 0 (the default, %d) or more", c.attempts, tokenring.DefaultCleanupMaxAttempts)
	case c.maxPerDC < 0:
		return config{}, cli.Usagef("-max-per-dc %d: want 0 (the default, %d) or more", c.maxPerDC, tokenring.DefaultMaxPerDatacenter)
	case c.plan && c.save != "":
		return config{}, cli.Usagef("-plan and -save conflict: save a baseline before scaling, plan the cleanups after")
	case c.json && c.runCleanup:
		return config{}, cli.Usagef("-json prints the plan only: drop -run-cleanup, or -json to follow the plan")
	case c.save != "" && c.baseline != "":
		return config{}, cli.Usagef("-save and -baseline conflict: save a baseline before scaling, compare with it after")
	case c.save != "" && len(c.keyspaces) == 0:
		return config{}, cli.Usagef("-save needs -keyspace: a baseline without the replication cannot say who lost ranges")
	case c.all && !c.runCleanup:
		return config{}, cli.Usagef("-all only changes -run-cleanup, which was not given")
	}
	if err := cli.YesWithout(c.yes && !c.runCleanup, "-run-cleanup"); err != nil {
		return config{}, err
	}
	return c, nil
}

func main() {
	os.Exit(runCommand(os.Args[1:], os.Stdout, os.Stderr))
}

// runCommand is the tool's command line: it parses args and returns the
// exit code.
func runCommand(args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args, stdout, stderr)
	if err != nil {
		return command.Exit(err, stderr)
	}
	return command.Exit(run(stdout, c), stderr)
}

func run(w io.Writer, c config) error {
	out := w // the human report; with -json, only the plan is printed
	if c.json {
		w = io.Discard
	}
	api := string(c.api)
	opts := tokenring.ClientOptions{}
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return fmt.Errorf("-agent-token-file: %w", err)
		}
		opts.AuthToken = strings.TrimSpace(string(b))
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return fmt.Errorf("-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-ca-file %s: no PEM certificates", c.caFile)
		}
		opts.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client, err := tokenring.NewClient(api, opts)
	if err != nil {
		return fmt.Errorf("-api: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	hash, m, err := tokenring.ReadTokenRingHash(ctx, client)
	switch {
	case errors.Is(err, tokenring.ErrNotJoined):
		fmt.Fprintf(w, "node %s (host ID %s) has not joined the ring: no hash\n", m.Endpoint, m.HostID)
	case err != nil:
		return err
	default:
		fmt.Fprintf(w, "node %s (host ID %s) owns %s\n", m.Endpoint, m.HostID, cli.Count(m.OwnTokens, "token"))
		fmt.Fprintf(w, "%s: %s\n", tokenring.CurrentTokenRingHashAnnotation, hash)
	}

	var analysis *tokenring.Analysis // from -baseline
	var topo tokenring.Topology      // the ring now, and the replication
	if c.save != "" || c.baseline != "" || c.plan {
		var now tokenring.Topology
		if c.plan {
			// The replication comes from the cluster; -keyspace only
			// overrides it where it places replicas the same way.
			if now, err = planTopology(ctx, client, c.keyspaces); err != nil {
				return err
			}
		} else {
			ring, err := tokenring.ReadRing(ctx, client, client)
			if err != nil {
				return err
			}
			now = tokenring.Topology{Ring: ring, Keyspaces: c.keyspaces}
		}
		ring := now.Ring
		topo = now
		if err := now.Validate(); err != nil {
			// A datacenter typo would make every node look as if it lost
			// its ranges: refuse before saving or reporting anything.
			return fmt.Errorf("-keyspace does not match the ring: %w", err)
		}
		if c.save != "" {
			if err := writeTopology(c.save, now); err != nil {
				return fmt.Errorf("-save: %w", err)
			}
			fmt.Fprintf(w, "saved %s of %s and %s to %s\n", cli.Count(len(ring.Owners), "token"), cli.Count(len(ring.Locations), "endpoint"), cli.Count(len(c.keyspaces), "keyspace"), c.save)
		}
		if c.baseline != "" {
			a, keyspaces, err := report(w, c.baseline, now)
			if err != nil {
				return err
			}
			analysis = &a
			topo.Keyspaces = keyspaces
		}
	}
	if c.plan {
		return plan(w, out, c, topo, analysis, opts, m.Endpoint, hash)
	}

	if !c.runCleanup {
		return nil
	}
	var cleaner tokenring.Cleaner = client
	if analysis != nil && !c.all {
		// The baseline says what this node lost: clean only that, as
		// scylla-operator cleans only the nodes whose token ring hash
		// changed.
		lost := analysis.Nodes[m.Endpoint].LostKeyspaces()
		if len(lost) == 0 {
			fmt.Fprintf(w, "no cleanup needed on %s: node %s lost no ranges since the baseline (-all cleans anyway)\n", api, m.Endpoint)
			return nil
		}
		cleaner = onlyKeyspaces{Cleaner: client, keep: lost}
	}
	if !c.yes {
		// Listing is read-only; stopping running cleanups is not, so the
		// dry run does not do it.
		keyspaces, err := cleaner.CleanupKeyspaces(ctx)
		if err != nil {
			return fmt.Errorf("listing the keyspaces a cleanup would clean: %w", err)
		}
		if len(keyspaces) == 0 {
			fmt.Fprintf(w, "no cleanup needed on %s: no keyspace to clean\n", api)
			return nil
		}
		fmt.Fprintf(w, "dry run: -run-cleanup would stop running cleanups on %s and clean %s %v; add -yes to run it\n", api, cli.Count(len(keyspaces), "keyspace"), keyspaces)
		return cli.DryRun("cleaned")
	}
	// Right before the cleanup, the cluster is read again: this is the
	// command a cleanup Job's pod runs, and the pod may start long after
	// the Job was created on a stable cluster. A node down or joining,
	// leaving or moving meanwhile refuses (exit 4), so that the Job fails
	// and its controller decides again, instead of cleaning.
	if err := nodeCheck(client, hash).check(ctx, m.Endpoint); err != nil {
		return cli.Refused(fmt.Errorf("not cleaning %s, the cluster is not stable: %w", api, err))
	}
	fmt.Fprintf(w, "cleaning up %s ...\n", api)
	rep, err := tokenring.RunCleanup(context.Background(), cleaner)
	fmt.Fprintf(w, "cleaned %v\n", rep.Cleaned)
	if len(rep.Dropped) > 0 {
		fmt.Fprintf(w, "dropped meanwhile (nothing to clean) %v\n", rep.Dropped)
	}
	for ks, kerr := range rep.Failed {
		fmt.Fprintf(w, "failed %s: %v\n", ks, kerr)
	}
	return err
}

// onlyKeyspaces is a Cleaner that lists for cleanup only the keyspaces
// in keep (those the node lost ranges of) among those the node lists.
type onlyKeyspaces struct {
	tokenring.Cleaner
	keep []string
}

func (o onlyKeyspaces) CleanupKeyspaces(ctx context.Context) ([]string, error) {
	all, err := o.Cleaner.CleanupKeyspaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ks := range all {
		if slices.Contains(o.keep, ks) {
			out = append(out, ks)
		}
	}
	return out, nil
}

// report prints who lost and who gained ranges since baseline, and
// returns the analysis.
func report(w io.Writer, baseline string, now tokenring.Topology) (tokenring.Analysis, map[string]tokenring.Replication, error) {
	b, err := os.ReadFile(baseline)
	if err != nil {
		return tokenring.Analysis{}, nil, fmt.Errorf("-baseline: %w", err)
	}
	var before tokenring.Topology
	if err := json.Unmarshal(b, &before); err != nil {
		return tokenring.Analysis{}, nil, fmt.Errorf("-baseline %s: %w", baseline, err)
	}
	if len(now.Keyspaces) == 0 {
		now.Keyspaces = before.Keyspaces // replication unchanged unless given
	}
	if len(now.Keyspaces) == 0 {
		return tokenring.Analysis{}, nil, errors.New("no keyspaces: pass -keyspace when saving or now")
	}
	a, err := tokenring.Analyze(before, now)
	if err != nil {
		return tokenring.Analysis{}, nil, err
	}
	endpoints := make([]string, 0, len(a.Nodes))
	for ep := range a.Nodes {
		endpoints = append(endpoints, ep)
	}
	sort.Strings(endpoints)
	for _, ep := range endpoints {
		n := a.Nodes[ep]
		lost, gained := 0, 0
		for _, ch := range n.Keyspaces {
			lost += len(ch.Lost)
			gained += len(ch.Gained)
		}
		switch {
		case n.NeedsCleanup():
			fmt.Fprintf(w, "%-16s needs cleanup: lost %s of %s\n", ep, cli.Count(lost, "range"), strings.Join(n.LostKeyspaces(), ", "))
		case gained > 0:
			fmt.Fprintf(w, "%-16s no cleanup: only gained %s\n", ep, cli.Count(gained, "range"))
		default:
			fmt.Fprintf(w, "%-16s no cleanup: unchanged\n", ep)
		}
	}
	return a, now.Keyspaces, nil
}

func writeTopology(path string, s tokenring.Topology) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
