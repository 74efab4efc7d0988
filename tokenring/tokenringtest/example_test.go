package tokenringtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
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
	ok := runTest(func(t *testing.T) { tokenringtest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}

// runTest runs f as a test and reports whether it passed. The test's own
// progress lines (go test -v prints them) go to the null device, so the
// example's output is the same with and without -v.
func runTest(f func(t *testing.T)) bool {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	defer null.Close()
	stdout := os.Stdout
	os.Stdout = null
	defer func() { os.Stdout = stdout }()
	return testing.RunTests(func(_, _ string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "TestMySource", F: f}})
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
