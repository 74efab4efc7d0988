package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// planJSON is what -plan -json prints.
type planJSON struct {
	Waves [][]string `json:"waves"`
}

// plan prints the cluster's cleanup plan (to out as JSON with -json, to w
// otherwise) and, with -run-cleanup -yes, follows it wave after wave.
func plan(w, out io.Writer, c config, topo tokenring.Topology, analysis *tokenring.Analysis, opts tokenring.ClientOptions, local string) error {
	if len(topo.Keyspaces) == 0 {
		return errors.New("-plan needs the replication: pass -keyspace (or a -baseline saved with it): without it no two nodes seem to share a range")
	}
	var needed []string
	if analysis != nil {
		needed = analysis.NeedsCleanup()
	} else {
		seen := map[string]bool{}
		for _, o := range topo.Ring.Owners {
			if !seen[o.Endpoint] {
				seen[o.Endpoint] = true
				needed = append(needed, o.Endpoint)
			}
		}
		slices.Sort(needed)
	}
	limits := tokenring.ScheduleLimits{MaxPerDatacenter: c.maxPerDC, RacksTogether: !c.rackAtATime}
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
	fmt.Fprintf(w, "cleanup plan: %s in %s (at most %d at once per datacenter, %s, never two replicas of one range)\n",
		cli.Count(len(needed), "node"), cli.Count(len(waves), "wave"), limits.MaxPerDatacenter, rule)
	for i, wave := range waves {
		fmt.Fprintf(w, "wave %d: %s (%s)\n", i+1, strings.Join(wave, ", "), racksOf(topo.Ring, wave))
	}
	if !c.runCleanup {
		return nil
	}
	if !c.yes {
		fmt.Fprintf(w, "dry run: -run-cleanup would clean %s wave after wave as above; add -yes to run it\n", cli.Count(len(needed), "node"))
		return cli.DryRun("cleaned")
	}
	for i, wave := range waves {
		fmt.Fprintf(w, "wave %d: cleaning %s ...\n", i+1, strings.Join(wave, ", "))
		reports := make([]tokenring.CleanupReport, len(wave))
		errs := make([]error, len(wave))
		var wg sync.WaitGroup
		for k, ep := range wave {
			cleaner, err := nodeCleaner(c, opts, ep, local, analysis)
			if err != nil {
				errs[k] = err
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				reports[k], errs[k] = tokenring.RunCleanup(context.Background(), cleaner)
			}()
		}
		wg.Wait()
		var failed []error
		for k, ep := range wave {
			if errs[k] != nil {
				fmt.Fprintf(w, "  %s: failed: %v\n", ep, errs[k])
				failed = append(failed, fmt.Errorf("node %s: %w", ep, errs[k]))
				continue
			}
			fmt.Fprintf(w, "  %s: cleaned %v\n", ep, reports[k].Cleaned)
		}
		if len(failed) > 0 {
			// The next waves may hold replicas of the failed nodes' ranges:
			// stop here, as a cleanup Job that failed stops scylla-operator.
			return fmt.Errorf("wave %d failed; later waves not started: %w", i+1, errors.Join(failed...))
		}
	}
	fmt.Fprintf(w, "cleaned %s in %s\n", cli.Count(len(needed), "node"), cli.Count(len(waves), "wave"))
	return nil
}

// nodeCleaner is the Cleaner of one node: its -node-api, this node's
// -api, or -api's scheme and port on the endpoint's address. With a
// baseline (and no -all) it cleans only the keyspaces the node lost.
func nodeCleaner(c config, opts tokenring.ClientOptions, ep, local string, analysis *tokenring.Analysis) (tokenring.Cleaner, error) {
	api, ok := c.nodeAPIs[ep]
	if !ok && ep == local {
		api, ok = string(c.api), true
	}
	if !ok {
		u, err := url.Parse(string(c.api))
		if err != nil {
			return nil, err
		}
		switch host, port := ep, u.Port(); {
		case port != "":
			u.Host = net.JoinHostPort(host, port)
		case strings.Contains(host, ":"):
			u.Host = "[" + host + "]" // IPv6
		default:
			u.Host = host
		}
		api = u.String()
	}
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
