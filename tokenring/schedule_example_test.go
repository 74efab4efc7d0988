package tokenring_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// nineNodes is fake-scylla's nine-nodes scenario as a Topology: three
// racks of three nodes, shop at NetworkTopologyStrategy with factor 3, so
// every range has one replica per rack.
func nineNodes() tokenring.Topology {
	cluster := tokenringtest.RackedCluster(9)
	ring := tokenring.Ring{Locations: map[string]tokenring.Location{}}
	for _, n := range cluster.Nodes {
		ring.Locations[n.Endpoint] = tokenring.Location{Datacenter: n.Datacenter, Rack: n.Rack}
		for _, s := range n.Tokens {
			t, _ := tokenring.ParseToken(s)
			ring.Owners = append(ring.Owners, tokenring.TokenOwner{Token: t, Endpoint: n.Endpoint})
		}
	}
	return tokenring.Topology{Ring: ring, Keyspaces: map[string]tokenring.Replication{
		"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3}},
	}}
}

// The whole plan for nine nodes that all need a cleanup: one rack per
// wave, because nodes of two racks share ranges.
func ExampleScheduler_Waves() {
	s, err := tokenring.NewScheduler(nineNodes(), tokenring.ScheduleLimits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	all := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.9"}
	waves, _ := s.Waves(all, nil)
	b, _ := json.Marshal(map[string][][]string{"waves": waves})
	fmt.Println(string(b))
	// Output:
	// {"waves":[["10.0.0.1","10.0.0.4","10.0.0.7"],["10.0.0.2","10.0.0.5","10.0.0.8"],["10.0.0.3","10.0.0.6","10.0.0.9"]]}
}

// What to start now, from a reconcile loop: 10.0.0.2 runs (rack r2), so
// its rack goes on, up to the limit of two per datacenter, and every other
// node waits with the reason.
func ExampleScheduler_Next() {
	s, _ := tokenring.NewScheduler(nineNodes(), tokenring.ScheduleLimits{MaxPerDatacenter: 2})
	needed := []string{"10.0.0.1", "10.0.0.3", "10.0.0.5", "10.0.0.8"}
	step, _ := s.Next(needed, []string{"10.0.0.2"})
	fmt.Println("start:", step.Start)
	for _, h := range step.Held {
		fmt.Println("held:", h.Endpoint, h.Reason, h.By)
	}
	// Output:
	// start: [10.0.0.5]
	// held: 10.0.0.1 ReplicaBusy [10.0.0.2 10.0.0.5]
	// held: 10.0.0.3 ReplicaBusy [10.0.0.2 10.0.0.5]
	// held: 10.0.0.8 DatacenterFull [10.0.0.2 10.0.0.5]
}

// Running the plan with a CleanupDriver over the fake API, one server per
// node. Its state store records what is done and what runs, so a new
// driver on the same store resumes where this one stopped.
func ExampleCleanupDriver() {
	topo := nineNodes()
	cluster := tokenringtest.RackedCluster(9)
	nodes := map[string]*tokenringtest.MemNode{}
	for _, n := range cluster.Nodes {
		view := cluster.Clone()
		view.Local = n.Endpoint
		nodes[n.Endpoint] = tokenringtest.NewMemNode(view)
	}
	s, _ := tokenring.NewScheduler(topo, tokenring.ScheduleLimits{})
	store := &tokenring.MemCleanupStateStore{}
	d, err := tokenring.NewCleanupDriver(tokenring.CleanupDriverOptions{Scheduler: s, CleanerFor: func(ep string) (tokenring.Cleaner, error) { return nodes[ep], nil }, Store: store})
	if err != nil {
		fmt.Println(err)
		return
	}

	needed := slices.Sorted(maps.Keys(nodes))
	report, err := d.Run(context.Background(), needed)
	fmt.Println("done:", len(report.Done), err)
	state, _ := store.Load(context.Background())
	fmt.Println("recorded done:", len(state.Done), "running:", len(state.Running))
	fmt.Println("10.0.0.5 cleaned:", nodes["10.0.0.5"].Cleaned())
	// Output:
	// done: 9 <nil>
	// recorded done: 9 running: 0
	// 10.0.0.5 cleaned: [shop]
}

// Two datacenters that each hold every range (factor 2 in each): by
// default a node shares ranges with nodes of the other datacenter, so the
// datacenters take turns; WithinDatacenter, for clients that read at
// LOCAL_QUORUM, counts only replicas in one datacenter, and both clean at
// once.
func ExampleConflictScope() {
	ring := tokenring.Ring{Locations: map[string]tokenring.Location{}}
	for i, ep := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		ring.Locations[ep] = tokenring.Location{Datacenter: fmt.Sprintf("dc%d", i%2+1), Rack: "r1"}
		ring.Owners = append(ring.Owners, tokenring.TokenOwner{Token: tokenring.Token((i + 1) * 10), Endpoint: ep})
	}
	topo := tokenring.Topology{Ring: ring, Keyspaces: map[string]tokenring.Replication{
		"shop": {Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 2, "dc2": 2}},
	}}
	for _, scope := range []tokenring.ConflictScope{tokenring.AcrossDatacenters, tokenring.WithinDatacenter} {
		s, err := tokenring.NewScheduler(topo, tokenring.ScheduleLimits{ConflictScope: scope})
		if err != nil {
			fmt.Println(err)
			return
		}
		waves, _ := s.Waves([]string{"a", "b", "c", "d", "e", "f", "g", "h"}, nil)
		fmt.Println(scope, waves)
	}
	// Output:
	// AcrossDatacenters [[a e] [b f] [c g] [d h]]
	// WithinDatacenter [[a b e f] [c d g h]]
}

// A CleanupDriver that asks, right before each node's cleanup, whether
// the cluster still meets Decide's preconditions: here the cluster
// started scaling after the campaign was planned, so no cleanup starts.
func ExampleCleanupDriver_precondition() {
	cluster := tokenringtest.RackedCluster(9)
	nodes := map[string]*tokenringtest.MemNode{}
	for _, n := range cluster.Nodes {
		view := cluster.Clone()
		view.Local = n.Endpoint
		nodes[n.Endpoint] = tokenringtest.NewMemNode(view)
	}
	s, _ := tokenring.NewScheduler(nineNodes(), tokenring.ScheduleLimits{})
	generation := int64(7)
	status := func() tokenring.ClusterStatus { // the host reads its ScyllaCluster's status here
		return tokenring.ClusterStatus{Generation: generation, ObservedGeneration: &generation, Conditions: []metav1.Condition{
			{Type: tokenring.StatefulSetControllerProgressingCondition, Status: metav1.ConditionTrue},
			{Type: tokenring.AvailableCondition, Status: metav1.ConditionTrue},
			{Type: tokenring.DegradedCondition, Status: metav1.ConditionFalse},
		}}
	}
	d, err := tokenring.NewCleanupDriver(tokenring.CleanupDriverOptions{
		Scheduler: s, Store: &tokenring.MemCleanupStateStore{}, MaxAttempts: 1,
		CleanerFor: func(ep string) (tokenring.Cleaner, error) { return nodes[ep], nil },
		Precondition: func(ctx context.Context, endpoint string) error {
			return tokenring.ClusterPreconditions(status())
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	report, err := d.Run(context.Background(), slices.Sorted(maps.Keys(nodes)))
	fmt.Println("done:", len(report.Done), "refused:", errors.Is(err, tokenring.ErrPreconditionUnmet))
	fmt.Println(report.Failed["10.0.0.5"])
	fmt.Println("10.0.0.5 cleaned:", nodes["10.0.0.5"].Cleaned())
	// Output:
	// done: 0 refused: true
	// tokenring: cleanup precondition not met: Waiting for the StatefulSet controller to finish progressing
	// 10.0.0.5 cleaned: []
}
