package tokenring_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestClientConformance: the REST Client, against the fake ScyllaDB API,
// honours every contract it implements.
func TestClientConformance(t *testing.T) {
	tokenringtest.RunConformanceTests(t, tokenringtest.Harness{
		RingSource: func(t *testing.T, c tokenringtest.Cluster) tokenring.RingSource {
			_, client := serveCluster(t, c)
			return client
		},
		LocationSource: func(t *testing.T, c tokenringtest.Cluster) tokenring.LocationSource {
			_, client := serveCluster(t, c)
			return client
		},
		Cleaner: func(t *testing.T, c tokenringtest.Cluster) tokenringtest.CleanerHarness {
			srv, client := serveCluster(t, c)
			return tokenringtest.CleanerHarness{
				Cleaner:   client,
				Cleaned:   srv.Node().Cleaned,
				StopCalls: srv.Node().StopCalls,
				FailCleanup: func(ks string) {
					srv.Node().FailCleanup(ks, &tokenring.APIError{StatusCode: http.StatusInternalServerError, Message: "compaction failed"})
				},
			}
		},
	})
}

// serveCluster starts a fake ScyllaDB API on loopback presenting c, and a
// REST client for it.
func serveCluster(t *testing.T, c tokenringtest.Cluster) (*tokenringtest.Server, *tokenring.Client) {
	t.Helper()
	srv := tokenringtest.NewServer(c, tokenringtest.ServerOptions{})
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("fake server is not on loopback: %s", srv.URL)
	}
	client, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, client
}
