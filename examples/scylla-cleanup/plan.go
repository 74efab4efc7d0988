package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/hashicorp/go-multierror"
	"golang.org/x/sync/errgroup"
)

// planJSON is what -plan -json prints.
type planJSON struct {
	Waves [][]string `json:"waves"`
}

// plan prints the cluster's cleanup plan (to out as JSON with -json, to w
// otherwise) and, with -run-cleanup -yes, runs it (follow).
func plan(w, out io.Writer, c config, topo tokenring.Topology, analysis *tokenring.Analysis, opts tokenring.ClientOptions, local, hash string) error {
	if len(topo.Keyspaces) == 0 {
		return errors.New("-plan: the cluster has no keyspace whose replicas the token ring places (none but local and tablet keyspaces): no node shares a range, nothing to plan")
	}
	var needed []string
	if analysis != nil {
		needed = analysis.NeedsCleanup()
	} else {
		needed = ringEndpoints(topo.Ring)
	}
	limits := tokenring.ScheduleLimits{MaxPerDatacenter: c.maxPerDC, RacksTogether: !c.rackAtATime}
	if c.conflicts == conflictsDC {
		limits.ConflictScope = tokenring.WithinDatacenter
	}
	sched, err := tokenring.NewScheduler(topo, limits)
	if err != nil {
		return fmt.Errorf("-plan: %w", err)
	}
	waves, err := sched.Waves(needed, nil)
	if err != nil {
		return fmt.Errorf("-plan: %w", err)
	}
	if c.json {
		b, err := json.Marshal(planJSON{Waves: waves})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}

	limits = sched.Limits()
	rule := "one rack of a datacenter at a time"
	if limits.RacksTogether {
		rule = "racks together"
	}
	never := "never two replicas of one range"
	if limits.ConflictScope == tokenring.WithinDatacenter {
		never += " in one datacenter"
	}
	fmt.Fprintf(w, "cleanup plan: %s in %s (at most %d at once per datacenter, %s, %s)\n",
		cli.Count(len(needed), "node"), cli.Count(len(waves), "wave"), limits.MaxPerDatacenter, rule, never)
	for i, wave := range waves {
		fmt.Fprintf(w, "wave %d: %s (%s)\n", i+1, strings.Join(wave, ", "), racksOf(topo.Ring, wave))
	}
	if !c.runCleanup {
		return nil
	}
	if !c.yes {
		fmt.Fprintf(w, "dry run: -run-cleanup would clean %s under the rules above, each as soon as they allow; add -yes to run it\n", cli.Count(len(needed), "node"))
		return cli.DryRun("cleaned")
	}
	return follow(w, c, sched, needed, opts, local, analysis, hash, topo)
}

// follow runs the plan's cleanups through a tokenring.CleanupDriver: each
// node starts as soon as the scheduler allows it beside those running (not
// wave by wave), a failed node is retried with backoff, and with -state
// the driver's record of what is done and what runs is kept in a file,
// so that a new run resumes: it re-runs first the nodes that were
// running, and never again those that are done. Each attempt is preceded
// by liveCheck: no request reaches a node while the cluster is not stable.
func follow(w io.Writer, c config, sched *tokenring.Scheduler, needed []string, opts tokenring.ClientOptions, local string,
	analysis *tokenring.Analysis, hash string, topo tokenring.Topology) error {
	keyspaces := topo.Keyspaces
	var store tokenring.CleanupStateStore = &tokenring.MemCleanupStateStore{}
	if c.state != "" {
		fs := fileStateStore{path: c.state, hash: hash, keyspaces: keyspaces}
		st, err := fs.Load(context.Background())
		if errors.Is(err, errOtherRing) {
			return cli.Refused(err)
		}
		if err != nil {
			return err
		}
		if len(st.Done)+len(st.Running) > 0 {
			fmt.Fprintf(w, "resuming from %s: %s recorded done, %s recorded running (re-run first)\n",
				c.state, cli.Count(len(st.Done), "node"), cli.Count(len(st.Running), "node"))
		}
		store = fs
	}

	if err := reachNodes(c, opts, needed, local); err != nil {
		return err
	}

	var mu sync.Mutex // the hooks and the cleaners' goroutines print
	printf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format, args...)
	}
	cleaned := 0
	hooks := tokenring.CleanupHooksFunc(func(e tokenring.CleanupEvent) {
		switch e.Outcome {
		case tokenring.CleanupDone:
			cleaned++
			printf("  %s: cleaned %v\n", e.Endpoint, e.Report.Cleaned)
			if len(e.Report.Dropped) > 0 {
				printf("  %s: dropped meanwhile (nothing to clean) %v\n", e.Endpoint, e.Report.Dropped)
			}
		case tokenring.CleanupRetry:
			if errors.Is(e.Err, tokenring.ErrPreconditionUnmet) {
				printf("  %s: not started, the cluster is not stable: %s; retrying after the backoff\n", e.Endpoint, oneLine(e.Err))
				break
			}
			printf("  %s: attempt %d failed: %s; retrying after the backoff\n", e.Endpoint, e.Attempt, oneLine(e.Err))
		case tokenring.CleanupGivenUp:
			printf("  %s: failed, given up after %s: %s\n", e.Endpoint, cli.Count(e.Attempt, "attempt"), oneLine(e.Err))
		case tokenring.CleanupInterrupted:
			printf("  %s: interrupted; it may still be cleaning, and counts as running until it is re-run\n", e.Endpoint)
		}
	})
	cleanerFor := func(ep string) (tokenring.Cleaner, error) {
		printf("  %s: cleaning ...\n", ep)
		return nodeCleaner(c, opts, ep, local, analysis)
	}
	// Right before each attempt, the cluster is read again: a node down
	// or a ring changed since the plan holds every start (liveCheck).
	api, err := tokenring.NewClient(string(c.api), opts)
	if err != nil {
		return fmt.Errorf("-api: %w", err)
	}
	live := liveCheck{api: api, planned: hash, nodes: ringEndpoints(topo.Ring), clientOf: func(ep string) (*tokenring.Client, error) {
		return tokenring.NewClient(nodeAPI(c, ep, local), opts)
	}}
	d, err := tokenring.NewCleanupDriver(tokenring.CleanupDriverOptions{Scheduler: sched, CleanerFor: cleanerFor, Store: store,
		MaxAttempts: c.attempts, Backoff: c.backoff, Hooks: hooks, Precondition: live.check})
	if err != nil {
		return err
	}

	// Ctrl-C stops the run; the driver records what was cut short as
	// running, for the next run to resume.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(w, "cleaning %s, each as soon as the rules above allow ...\n", cli.Count(len(needed), "node"))
	rep, err := d.Run(ctx, needed)
	mu.Lock()
	defer mu.Unlock()
	before := len(rep.Done) - cleaned
	switch {
	case err != nil && c.state != "":
		fmt.Fprintf(w, "stopped: %s done (%d before this run), %s failed; %s records where to resume\n",
			cli.Count(len(rep.Done), "node"), before, cli.Count(len(rep.Failed), "node"), c.state)
	case err != nil:
		fmt.Fprintf(w, "stopped: %s done, %s failed\n", cli.Count(len(rep.Done), "node"), cli.Count(len(rep.Failed), "node"))
	case before > 0:
		fmt.Fprintf(w, "cleaned %s (%d recorded done before this run)\n", cli.Count(cleaned, "node"), before)
	default:
		fmt.Fprintf(w, "cleaned %s\n", cli.Count(cleaned, "node"))
	}
	if err != nil {
		return lineError{err}
	}
	return nil
}

// lineError prints an error, go-multierror's lists included, on one line,
// as the tool's other errors are; errors.Is and errors.As see through it.
type lineError struct{ err error }

func (e lineError) Error() string { return oneLine(e.err) }
func (e lineError) Unwrap() error { return e.err }

// oneLine flattens the lists of go-multierror (the driver's failures, and
// RunCleanup's per keyspace) into "a; b".
func oneLine(err error) string {
	var list *multierror.Error
	if !errors.As(err, &list) || list == nil {
		return err.Error()
	}
	parts := make([]string, 0, len(list.Errors))
	for _, e := range list.Errors {
		parts = append(parts, oneLine(e))
	}
	msg := strings.Join(parts, "; ")
	if outer := err.Error(); err != error(list) && !strings.HasPrefix(outer, list.Error()) {
		// err wraps the list with words of its own: keep them, without
		// the list's multi-line text.
		if prefix, _, ok := strings.Cut(outer, list.Error()); ok {
			return prefix + msg
		}
	}
	return msg
}

// reachTimeout bounds the first request to each node's API.
const reachTimeout = 10 * time.Second

// reachParallel bounds how many nodes reachNodes asks at once.
const reachParallel = 16

// reachNodes asks each node to clean, before any cleanup starts, for its
// host ID: a node whose API cannot be reached fails the run at once with
// the address tried and the flag that names another, instead of each
// cleanup retrying it with backoff for minutes. The nodes are asked
// concurrently, so a cluster of unreachable nodes costs one reachTimeout,
// not one per node; the message keeps the order of needed.
func reachNodes(c config, opts tokenring.ClientOptions, needed []string, local string) error {
	clients := make([]*tokenring.Client, len(needed))
	for i, ep := range needed {
		api := nodeAPI(c, ep, local)
		client, err := tokenring.NewClient(api, opts)
		if err != nil {
			return cli.Usagef("the API of %s (%s): %w", ep, api, err)
		}
		clients[i] = client
	}
	failed := make([]string, len(needed))
	var g errgroup.Group
	g.SetLimit(reachParallel)
	for i, ep := range needed {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
			defer cancel()
			if _, err := clients[i].LocalHostID(ctx); err != nil {
				failed[i] = fmt.Sprintf("%s at %s (%s)", ep, nodeAPI(c, ep, local), oneLine(err))
			}
			return nil
		})
	}
	_ = g.Wait() // every goroutine returns nil; failures are in failed
	var unreachable []string
	for _, f := range failed {
		if f != "" {
			unreachable = append(unreachable, f)
		}
	}
	if len(unreachable) > 0 {
		return fmt.Errorf("cannot reach the REST API of %s: %s; nothing was cleaned. Pass each node's API as "+
			"-node-api ENDPOINT=URL (fake-scylla -every-node prints them ready to paste)",
			cli.Count(len(unreachable), "node"), strings.Join(unreachable, "; "))
	}
	return nil
}

// nodeAPI is the URL of one node's API: its -node-api, this node's -api,
// or -api's scheme and port on the endpoint's address.
func nodeAPI(c config, ep, local string) string {
	if api, ok := c.nodeAPIs[ep]; ok {
		return api
	}
	if ep == local {
		return string(c.api)
	}
	u, err := url.Parse(string(c.api))
	if err != nil {
		return string(c.api) // -api was checked when parsed; NewClient says what is wrong
	}
	switch host, port := ep, u.Port(); {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]" // IPv6
	default:
		u.Host = host
	}
	return u.String()
}

// nodeCleaner is the Cleaner of one node: its -node-api, this node's
// -api, or -api's scheme and port on the endpoint's address. With a
// baseline (and no -all) it cleans only the keyspaces the node lost.
func nodeCleaner(c config, opts tokenring.ClientOptions, ep, local string, analysis *tokenring.Analysis) (tokenring.Cleaner, error) {
	api := nodeAPI(c, ep, local)
	client, err := tokenring.NewClient(api, opts)
	if err != nil {
		return nil, fmt.Errorf("the API of %s (%s): %w", ep, api, err)
	}
	var cleaner tokenring.Cleaner = client
	if analysis != nil && !c.all {
		cleaner = onlyKeyspaces{Cleaner: client, keep: analysis.Nodes[ep].LostKeyspaces()}
	}
	return cleaner, nil
}

// ringEndpoints lists, sorted, the endpoints that own tokens in r.
func ringEndpoints(r tokenring.Ring) []string {
	var eps []string
	seen := map[string]bool{}
	for _, o := range r.Owners {
		if !seen[o.Endpoint] {
			seen[o.Endpoint] = true
			eps = append(eps, o.Endpoint)
		}
	}
	slices.Sort(eps)
	return eps
}

// racksOf names the datacenter/rack pairs of a wave's nodes.
func racksOf(r tokenring.Ring, wave []string) string {
	var racks []string
	for _, ep := range wave {
		loc := r.Locations[ep]
		if where := loc.Datacenter + "/" + loc.Rack; !slices.Contains(racks, where) {
			racks = append(racks, where)
		}
	}
	slices.Sort(racks)
	return strings.Join(racks, ", ")
}

// planTopology reads the ring and each keyspace's replication from the
// cluster (tokenring.ReadTopology: GET /storage_service/keyspaces and
// GET /storage_service/describe_ring/{keyspace}), and checks each -keyspace
// against it: one that places replicas where the cluster does not, or names
// a keyspace the ring does not place, is an error that says so.
func planTopology(ctx context.Context, client *tokenring.Client, given keyspaceFlags) (tokenring.Topology, error) {
	topo, err := tokenring.ReadTopology(ctx, client, client, client)
	if err != nil {
		return tokenring.Topology{}, fmt.Errorf("-plan: reading the replication from the cluster: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if _, ok := topo.Keyspaces[name]; !ok {
			return tokenring.Topology{}, fmt.Errorf("-keyspace %s: the cluster has no such keyspace placed by the token ring (it has %s)",
				name, strings.Join(slices.Sorted(maps.Keys(topo.Keyspaces)), ", "))
		}
		ranges, err := client.DescribeRing(ctx, name)
		if err != nil {
			return tokenring.Topology{}, fmt.Errorf("-keyspace %s: %w", name, err)
		}
		if err := tokenring.CheckReplication(topo.Ring, given[name], ranges); err != nil {
			return tokenring.Topology{}, fmt.Errorf("-keyspace %s disagrees with the cluster: %w", name, err)
		}
		topo.Keyspaces[name] = given[name]
	}
	return topo, nil
}
