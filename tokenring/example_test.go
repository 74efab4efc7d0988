package tokenring_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// The annotation value scylla-operator's sidecar would write for a ring;
// the same as `printf '["-9223372036854775807","0","42"]\n' | openssl
// dgst -sha512 -binary | base64`.
func ExampleHashTokens() {
	fmt.Println(tokenring.HashTokens([]string{"-9223372036854775807", "0", "42"}))
	// Output:
	// VodZzhFP5MhwPuCHo5SdXTqQ7dvo4lgNoWFDxt44J3AOAprwigruFHzws/Fy5BQMFnmU6Kfu+nBdewKJ5x5PNg==
}

// A node's hash, read from its REST API (here the fake), refusing nodes that
// have not joined.
func ExampleReadTokenRingHash() {
	srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: []tokenringtest.Node{
		{Endpoint: "10.0.0.1", HostID: "host-1", Tokens: []string{"-100", "50"}},
		{Endpoint: "10.0.0.2", HostID: "host-2"}, // still joining
	}}, tokenringtest.ServerOptions{})
	defer srv.Close()
	c, _ := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})

	hash, m, err := tokenring.ReadTokenRingHash(context.Background(), c)
	fmt.Println(hash == tokenring.HashTokens([]string{"-100", "50"}), m.Endpoint, m.OwnTokens, err)

	srv.Node().SetCluster(tokenringtest.Cluster{Local: "10.0.0.2"}) // a node that knows nothing yet
	_, _, err = tokenring.ReadTokenRingHash(context.Background(), c)
	fmt.Println(err)
	// Output:
	// true 10.0.0.1 2 <nil>
	// tokenring: local host ID: GET /storage_service/hostid/local: HTTP 404: local host ID is not yet set
}

// A scale-out: D joins between A and B. Only B and C lost ranges; A kept
// exactly what it had, and D is new.
func ExampleAnalyze() {
	ks := map[string]tokenring.Replication{"shop": {Strategy: tokenring.SimpleStrategy, ReplicationFactor: 2}}
	before := tokenring.Topology{Keyspaces: ks, Ring: tokenring.Ring{Owners: []tokenring.TokenOwner{
		{Token: 10, Endpoint: "A"}, {Token: 20, Endpoint: "B"}, {Token: 30, Endpoint: "C"},
	}}}
	after := before
	after.Ring.Owners = append(after.Ring.Owners[:3:3], tokenring.TokenOwner{Token: 15, Endpoint: "D"})

	a, err := tokenring.Analyze(before, after)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("needs cleanup:", a.NeedsCleanup())
	fmt.Println("B lost:", a.Nodes["B"].Keyspaces["shop"].Lost)
	fmt.Println("D gained:", a.Nodes["D"].Keyspaces["shop"].Gained)
	// Output:
	// needs cleanup: [B C]
	// B lost: [{30 10}]
	// D gained: [{30 15}]
}

// The same member under both triggers: the ring changed, but the node only
// gained ranges. scylla-operator's hash rule starts a Job; the ownership
// rule records the new ring as clean without one.
func ExampleDecide() {
	status := tokenring.ClusterStatus{Generation: 2, ObservedGeneration: ptrTo(int64(2)), Conditions: []metav1.Condition{
		{Type: tokenring.AvailableCondition, Status: metav1.ConditionTrue},
		{Type: tokenring.DegradedCondition, Status: metav1.ConditionFalse},
	}}
	oldRing := tokenring.HashTokens([]string{"10", "20"})
	newRing := tokenring.HashTokens([]string{"10", "15", "20"})
	m := tokenring.Member{Name: "scylla-dc1-r1-0", Endpoint: "10.0.0.1", Annotations: map[string]string{
		tokenring.CurrentTokenRingHashAnnotation:       newRing,
		tokenring.LastCleanedUpTokenRingHashAnnotation: oldRing,
	}}
	analysis := tokenring.Analysis{Nodes: map[string]tokenring.NodeChange{"10.0.0.1": {Endpoint: "10.0.0.1"}}}

	byHash := tokenring.Decide(m, status, tokenring.DecideOptions{})
	byOwnership := tokenring.Decide(m, status, tokenring.DecideOptions{Trigger: tokenring.TriggerOwnership, Analysis: &analysis})
	fmt.Println(byHash.Action, byHash.Reason)
	fmt.Println(byOwnership.Action, byOwnership.Reason)

	// Before the annotation exists it is seeded, not treated as a change.
	delete(m.Annotations, tokenring.LastCleanedUpTokenRingHashAnnotation)
	seed := tokenring.Decide(m, status, tokenring.DecideOptions{})
	fmt.Println(seed.Action, seed.TokenRingHash)
	// Output:
	// StartCleanup TokenRingChanged
	// RecordCleanup NoRangesLost
	// Seed NeverCleanedUp
}

func ptrTo[T any](v T) *T { return &v }

// What a cleanup Job does, against the fake API: local and tablet keyspaces
// are not cleaned, and a failing keyspace does not stop the others.
func ExampleRunCleanup() {
	srv := tokenringtest.NewServer(tokenringtest.Cluster{Keyspaces: []tokenringtest.Keyspace{
		{Name: "system", Local: true}, {Name: "orders"}, {Name: "events", Tablets: true}, {Name: "users"},
	}}, tokenringtest.ServerOptions{})
	defer srv.Close()
	srv.Node().FailCleanup("users", &tokenring.APIError{StatusCode: 500, Message: "disk full"})
	c, _ := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})

	report, err := tokenring.RunCleanup(context.Background(), c)
	fmt.Println("cleaned:", report.Cleaned)
	fmt.Println("failed:", len(report.Failed), err != nil)
	// Output:
	// cleaned: [orders]
	// failed: 1 true
}
