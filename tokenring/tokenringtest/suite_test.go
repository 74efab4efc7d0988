package tokenringtest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/scyllatest"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// serve starts a fake ScyllaDB API on loopback presenting c, and a REST
// client for it.
func serve(t *testing.T, c tokenringtest.Cluster) (*scyllatest.Server, *tokenring.Client) {
	t.Helper()
	srv := scyllatest.NewServer(scyllatest.Options{})
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("fake server is not on loopback: %s", srv.URL)
	}
	nodes := make([]scyllatest.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = scyllatest.Node{Endpoint: n.Endpoint, HostID: n.HostID, Datacenter: n.Datacenter, Rack: n.Rack, Tokens: n.Tokens}
	}
	srv.SetNodes(c.Local, nodes)
	keyspaces := make([]scyllatest.Keyspace, len(c.Keyspaces))
	for i, ks := range c.Keyspaces {
		keyspaces[i] = scyllatest.Keyspace{Name: ks.Name, Local: ks.Local, Tablets: ks.Tablets}
	}
	srv.SetKeyspaces(keyspaces)
	client, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, client
}

func TestClientIsARingSource(t *testing.T) {
	tokenringtest.RunRingSourceTests(t, func(t *testing.T, c tokenringtest.Cluster) tokenring.RingSource {
		_, client := serve(t, c)
		return client
	})
}

func TestClientIsACleaner(t *testing.T) {
	tokenringtest.RunCleanerTests(t, func(t *testing.T, c tokenringtest.Cluster) tokenringtest.CleanerHarness {
		srv, client := serve(t, c)
		return tokenringtest.CleanerHarness{
			Cleaner:     client,
			Cleaned:     srv.Cleaned,
			StopCalls:   srv.StopCleanupCalls,
			FailCleanup: func(ks string) { srv.FailCleanup(ks, http.StatusInternalServerError, "compaction failed") },
		}
	})
}

func TestMemNodeIsARingSource(t *testing.T) {
	tokenringtest.RunRingSourceTests(t, func(_ *testing.T, c tokenringtest.Cluster) tokenring.RingSource {
		return tokenringtest.NewMemNode(c)
	})
}

func TestMemNodeIsACleaner(t *testing.T) {
	tokenringtest.RunCleanerTests(t, func(_ *testing.T, c tokenringtest.Cluster) tokenringtest.CleanerHarness {
		n := tokenringtest.NewMemNode(c)
		return tokenringtest.CleanerHarness{
			Cleaner:     n,
			Cleaned:     n.Cleaned,
			StopCalls:   n.StopCalls,
			FailCleanup: func(ks string) { n.FailCleanup(ks, errors.New("compaction failed")) },
		}
	})
}
