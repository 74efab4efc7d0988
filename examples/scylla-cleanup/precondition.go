package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/tokenring"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// liveCheck is the -plan -run-cleanup precondition (and, as nodeCheck
// builds it, single-node -run-cleanup -yes's): right before each
// node's cleanup attempt it reads the cluster again from the same source
// as the plan's preflight (the ring from -api, every ring node's API) and
// refuses while the cluster is not stable. A campaign runs for hours: a
// node that went down, or a ring that changed (a node joined, left or
// moved its tokens) since the plan, stops every start until it is back.
//
// What it reads maps onto the conditions scylla-operator's cleanup
// controller gates on (tokenring.ClusterPreconditions):
//
//   - the ring hash from -api differs from the plan's, or -api lists a
//     node joining, leaving or moving (tokenring.Client.NodeStates, what
//     nodetool status reads), or cannot be read:
//     StatefulSetControllerProgressing True (the cluster is scaling; a
//     changed ring makes the plan one for another ring);
//   - a node of the ring does not answer its API, or -api's gossip sees
//     a node down: Available False, Degraded True.
//
// What it still allows: a ring that changed since the plan refuses every
// start for good (re-plan); a node that answers its API and that -api's
// gossip does not list down is taken as up; the view is -api's alone.
type liveCheck struct {
	api      *tokenring.Client // -api: where the plan's ring was read
	planned  string            // the plan's ring hash (-api's node's view)
	nodes    []string          // every endpoint of the planned ring; none: gossip's view only
	clientOf func(ep string) (*tokenring.Client, error)
	// changed is the message when the ring hash is not planned's; empty:
	// the -plan message (plan again).
	changed string
}

// check is tokenring.CleanupDriverOptions.Precondition. A refusal says
// what was seen (the node down, the ring changed) after the rule unmet.
func (l liveCheck) check(ctx context.Context, _ string) error {
	st := l.status(ctx)
	err := tokenring.ClusterPreconditions(st)
	if err == nil {
		return nil
	}
	var seen []string
	for _, c := range st.Conditions {
		if c.Message != "" && !slices.Contains(seen, c.Message) {
			seen = append(seen, c.Message)
		}
	}
	if len(seen) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(seen, "; "))
}

// status reads the cluster now and says it as a ScyllaCluster status
// would: one generation, observed, and the three conditions Decide reads.
func (l liveCheck) status(ctx context.Context) tokenring.ClusterStatus {
	gen := int64(1)
	st := tokenring.ClusterStatus{Generation: gen, ObservedGeneration: &gen}
	set := func(typ string, ok bool, reason, msg string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status = metav1.ConditionTrue
		}
		st.Conditions = append(st.Conditions, c)
	}

	readCtx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	hash, _, err := tokenring.ReadTokenRingHash(readCtx, l.api)
	var nodes tokenring.NodeStates
	if err == nil {
		nodes, err = l.api.NodeStates(readCtx)
	}
	switch {
	case err != nil:
		set(tokenring.StatefulSetControllerProgressingCondition, true, "ClusterUnreadable", oneLine(err))
	case hash != l.planned:
		msg := l.changed
		if msg == "" {
			msg = "the token ring changed since the plan (a node joined, left or moved): plan again"
		}
		set(tokenring.StatefulSetControllerProgressingCondition, true, "RingChanged", msg)
	case nodes.Changing():
		var parts []string
		for _, s := range []struct {
			what string
			eps  []string
		}{{"joining", nodes.Joining}, {"leaving", nodes.Leaving}, {"moving", nodes.Moving}} {
			if len(s.eps) > 0 {
				parts = append(parts, s.what+" "+strings.Join(s.eps, ", "))
			}
		}
		set(tokenring.StatefulSetControllerProgressingCondition, true, "RingChanging", "the ring is changing: "+strings.Join(parts, "; "))
	default:
		set(tokenring.StatefulSetControllerProgressingCondition, false, "AsExpected", "")
	}

	down := l.unreachable(ctx)
	for _, ep := range nodes.Down {
		down = append(down, ep+" (down for gossip)")
	}
	msg := ""
	if len(down) > 0 {
		msg = fmt.Sprintf("%s down: %s", cli.Count(len(down), "node"), strings.Join(down, "; "))
	}
	set(tokenring.AvailableCondition, len(down) == 0, "NodesAnswer", msg)
	set(tokenring.DegradedCondition, len(down) > 0, "NodesAnswer", msg)
	return st
}

// unreachable asks every node of the ring for its host ID, concurrently
// as reachNodes does, and lists those that do not answer, in ring order.
func (l liveCheck) unreachable(ctx context.Context) []string {
	failed := make([]string, len(l.nodes))
	var g errgroup.Group
	g.SetLimit(reachParallel)
	for i, ep := range l.nodes {
		g.Go(func() error {
			client, err := l.clientOf(ep)
			if err == nil {
				reqCtx, cancel := context.WithTimeout(ctx, reachTimeout)
				_, err = client.LocalHostID(reqCtx)
				cancel()
			}
			if err != nil {
				failed[i] = fmt.Sprintf("%s (%s)", ep, oneLine(err))
			}
			return nil
		})
	}
	_ = g.Wait() // every goroutine returns nil; failures are in failed
	return slices.DeleteFunc(failed, func(s string) bool { return s == "" })
}

// nodeCheck is the single-node -run-cleanup -yes precondition, asked once
// right before the cleanup: the ring hash from -api must still be hash
// (read when the run started), and -api must list no node joining,
// leaving, moving or down (tokenring.Client.NodeStates). It reads -api
// alone, the node being cleaned: other nodes' APIs are not asked, since
// a cleanup Job's pod may not reach them; gossip's view of them is what
// counts. tokenring.ClusterPreconditions decides, as for -plan.
func nodeCheck(api *tokenring.Client, hash string) liveCheck {
	return liveCheck{api: api, planned: hash,
		changed: "the token ring changed while this run read it (a node joined, left or moved): run again once it is stable"}
}
