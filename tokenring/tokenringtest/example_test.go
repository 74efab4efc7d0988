package tokenringtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"

	"github.com/caretaker-storage/caretaker/internal/testrun"
)

// A host's own RingSource (here the in-memory node stands in for it) runs
// the whole suite in one line of its test:
//
//	func TestMySource(t *testing.T) { tokenringtest.RunConformanceTests(t, harness) }
//
// The example runs that test function itself (quietly, see runTest), so
// that it can print the outcome.
func ExampleRunConformanceTests() {
	harness := tokenringtest.Harness{
		RingSource: func(_ *testing.T, c tokenringtest.Cluster) tokenring.RingSource {
			return tokenringtest.NewMemNode(c)
		},
	}
	ok := testrun.Passes("TestHost", func(t *testing.T) { tokenringtest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}

// The fake ScyllaDB API serves a cluster in the real wire format; a
// tokenring.Client reads it as it would read a node.
func ExampleNewServer() {
	srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: []tokenringtest.Node{
		{Endpoint: "10.0.0.1", HostID: "host-1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"50", "-100"}},
		{Endpoint: "10.0.0.2", HostID: "host-2", Datacenter: "dc1", Rack: "r2", Tokens: []string{"7"}},
	}}, tokenringtest.ServerOptions{})
	defer srv.Close()
	c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	tokens, err := c.Tokens(context.Background())
	fmt.Println(tokens, err)
	// Output: [-100 7 50] <nil>
}
