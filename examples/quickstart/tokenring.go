package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// runTokenRing scales a six-node, three-rack datacenter out by one node on
// a fake ScyllaDB REST API (127.0.0.1 only) and compares scylla-operator's
// hash trigger, which cleans every old node, with the ownership trigger,
// which cleans only the nodes that lost ranges.
func runTokenRing(ctx context.Context, w io.Writer, dir string) error {
	srv := tokenringtest.NewServer(tokenringtest.Cluster{}, tokenringtest.ServerOptions{})
	defer srv.Close()
	client, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})
	if err != nil {
		return err
	}

	// Six nodes, two per rack, eight tokens each; keyspace "shop" keeps
	// one replica per rack (NetworkTopologyStrategy, RF 3, three racks).
	var nodes []tokenringtest.Node
	for i := range 6 {
		nodes = append(nodes, tokenringtest.Node{
			Endpoint: fmt.Sprintf("10.0.0.%d", i+1), HostID: fmt.Sprintf("host-%d", i+1),
			Datacenter: "dc1", Rack: fmt.Sprintf("r%d", i%3+1), Tokens: tokenringtest.GenerateTokens(uint64(i+1), 8),
		})
	}
	srv.Node().SetCluster(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: nodes,
		Keyspaces: []tokenringtest.Keyspace{{Name: "system", Local: true}, {Name: "shop"}}})
	keyspaces := map[string]tokenring.Replication{"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3}}}

	oldHash, m, err := tokenring.ReadTokenRingHash(ctx, client)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "node %s owns %s; ring hash %s...\n", m.Endpoint, cli.Count(m.OwnTokens, "token"), oldHash[:16])
	beforeRing, err := tokenring.ReadRing(ctx, client, client)
	if err != nil {
		return err
	}
	before := tokenring.Topology{Ring: beforeRing, Keyspaces: keyspaces}
	if err := tokenringSaveJSON(filepath.Join(dir, "baseline.json"), before); err != nil {
		return err
	}
	fmt.Fprintf(w, "saved the baseline ring (%s, %s) to baseline.json\n", cli.Count(len(beforeRing.Owners), "token"), cli.Count(len(beforeRing.Locations), "node"))

	// A seventh node joins rack r1. While it streams it owns no tokens:
	// its ring view gets no hash.
	joining := tokenringtest.Node{Endpoint: "10.0.0.7", HostID: "host-7", Datacenter: "dc1", Rack: "r1"}
	srv.Node().Update(func(c *tokenringtest.Cluster) { c.Local, c.Nodes = "10.0.0.7", append(nodes, joining) })
	if _, _, err := tokenring.ReadTokenRingHash(ctx, client); err != nil {
		fmt.Fprintf(w, "10.0.0.7 while joining: %v\n", err)
	}
	joining.Tokens = tokenringtest.GenerateTokens(7, 8)
	nodes = append(nodes, joining)
	srv.Node().Update(func(c *tokenringtest.Cluster) { c.Local, c.Nodes = "10.0.0.1", nodes })
	newHash, _, err := tokenring.ReadTokenRingHash(ctx, client)
	if err != nil {
		return err
	}
	afterRing, err := tokenring.ReadRing(ctx, client, client)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "10.0.0.7 joined rack r1; ring hash now %s...\n", newHash[:16])

	analysis, err := tokenring.Analyze(before, tokenring.Topology{Ring: afterRing, Keyspaces: keyspaces})
	if err != nil {
		return err
	}
	status := tokenring.ClusterStatus{Generation: 5, ObservedGeneration: tokenringPtr(int64(5)), Conditions: []metav1.Condition{
		{Type: tokenring.StatefulSetControllerProgressingCondition, Status: metav1.ConditionFalse},
		{Type: tokenring.AvailableCondition, Status: metav1.ConditionTrue},
		{Type: tokenring.DegradedCondition, Status: metav1.ConditionFalse},
	}}
	fmt.Fprintf(w, "%-9s %-4s %-30s %-27s %s\n", "node", "rack", "hash trigger", "ownership trigger", "why")
	hashJobs, ownershipJobs := 0, 0
	var toClean []string
	for _, n := range nodes {
		annotations := map[string]string{tokenring.CurrentTokenRingHashAnnotation: newHash}
		if n.Endpoint != joining.Endpoint {
			annotations[tokenring.LastCleanedUpTokenRingHashAnnotation] = oldHash // cleaned for the old ring
		}
		member := tokenring.Member{Name: n.Endpoint, Endpoint: n.Endpoint, Annotations: annotations}
		byHash := tokenring.Decide(member, status, tokenring.DecideOptions{})
		byOwnership := tokenring.Decide(member, status, tokenring.DecideOptions{Trigger: tokenring.TriggerOwnership, Analysis: &analysis})
		if byHash.Action == tokenring.ActionStartCleanup {
			hashJobs++
		}
		if byOwnership.Action == tokenring.ActionStartCleanup {
			ownershipJobs++
			toClean = append(toClean, n.Endpoint)
		}
		fmt.Fprintf(w, "%-9s %-4s %-30s %-27s %s\n", n.Endpoint, n.Rack,
			byHash.Action.String()+"/"+byHash.Reason, byOwnership.Action.String()+"/"+byOwnership.Reason, tokenringWhy(analysis.Nodes[n.Endpoint]))
	}
	fmt.Fprintf(w, "cleanup Jobs: %d with the hash trigger, %d with the ownership trigger\n", hashJobs, ownershipJobs)

	// What one of those Jobs does, against the fake node.
	sort.Strings(toClean)
	if len(toClean) > 0 {
		report, err := tokenring.RunCleanup(ctx, client)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "cleanup of %s: stopped running cleanups, cleaned %v (local keyspaces skipped)\n", toClean[0], report.Cleaned)
	}
	return nil
}

// tokenringWhy summarises a node's change over all keyspaces.
func tokenringWhy(n tokenring.NodeChange) string {
	lost, gained := 0, 0
	for _, ch := range n.Keyspaces {
		lost += len(ch.Lost)
		gained += len(ch.Gained)
	}
	switch {
	case lost > 0:
		return "lost " + cli.Count(lost, "range")
	case gained > 0:
		return "only gained " + cli.Count(gained, "range")
	}
	return "kept exactly its ranges"
}

func tokenringPtr[T any](v T) *T { return &v }

func tokenringSaveJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
