package tokenring_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

var testNodes = []tokenringtest.Node{
	{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"-100", "50"}},
	{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r2", Tokens: []string{"-20", "300"}},
	{Endpoint: "10.0.0.3", HostID: "h3", Datacenter: "dc1", Rack: "r1"}, // joining: no tokens yet
}

func newFake(t *testing.T, opts tokenringtest.ServerOptions, local string) (*tokenringtest.Server, *tokenring.Client) {
	t.Helper()
	srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: local, Nodes: testNodes}, opts)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") && !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("fake server is not on loopback: %s", srv.URL)
	}
	copts := tokenring.ClientOptions{AuthToken: opts.AuthToken}
	if opts.AuthToken != "" {
		copts.HTTPClient = srv.Client()
	}
	c, err := tokenring.NewClient(srv.URL, copts)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func TestClientReadsTheRing(t *testing.T) {
	ctx := context.Background()
	_, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")

	tokens, err := c.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-100", "-20", "50", "300"}; !reflect.DeepEqual(tokens, want) {
		t.Fatalf("Tokens = %v, want %v (sorted numerically, as ScyllaDB does)", tokens, want)
	}
	hash, m, err := tokenring.ReadTokenRingHash(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if hash != tokenring.HashTokens(tokens) || m.Endpoint != "10.0.0.1" || m.HostID != "h1" || m.OwnTokens != 2 {
		t.Fatalf("hash %s membership %+v", hash, m)
	}

	ring, err := tokenring.ReadRing(ctx, c, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(ring.Owners) != 4 || ring.Owners[0] != (tokenring.TokenOwner{Token: -100, Endpoint: "10.0.0.1"}) {
		t.Fatalf("owners %v", ring.Owners)
	}
	if ring.Locations["10.0.0.2"] != (tokenring.Location{Datacenter: "dc1", Rack: "r2"}) || len(ring.Locations) != 2 {
		t.Fatalf("locations %v", ring.Locations)
	}
}

func TestJoiningNodeGetsNotJoinedNotAHash(t *testing.T) {
	_, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.3")
	_, _, err := tokenring.ReadTokenRingHash(context.Background(), c)
	if !errors.Is(err, tokenring.ErrNotJoined) || !tokenring.IsRetryable(err) {
		t.Fatalf("error = %v, want a retryable ErrNotJoined", err)
	}
}

func TestClientThroughTheAgent(t *testing.T) {
	srv, c := newFake(t, tokenringtest.ServerOptions{AuthToken: "s3cret"}, "10.0.0.2")
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatal("agent mode is not TLS")
	}
	if _, _, err := tokenring.ReadTokenRingHash(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	wrong, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{AuthToken: "nope", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *tokenring.APIError
	if _, err := wrong.Tokens(context.Background()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || tokenring.IsRetryable(err) {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := tokenring.NewClient("http://127.0.0.1:1", tokenring.ClientOptions{AuthToken: "x"}); err == nil {
		t.Fatal("a bearer token over plain HTTP was accepted")
	}
}

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:10000", "ftp://127.0.0.1", "http://", "http://127.0.0.1:10000/?x=1", "http://%zz"} {
		if _, err := tokenring.NewClient(u, tokenring.ClientOptions{}); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
}

func TestClientRejectsBadReplies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		path   string
		status int
		body   string
		call   func(*tokenring.Client) error
		want   error
	}{
		{"truncated", "/storage_service/tokens", 200, `["1","2"`, tokensCall, tokenring.ErrMalformedReply},
		{"wrong type", "/storage_service/tokens", 200, `[1,2]`, tokensCall, tokenring.ErrMalformedReply},
		{"trailing garbage", "/storage_service/tokens", 200, `["1"] ["2"]`, tokensCall, tokenring.ErrMalformedReply},
		{"not JSON", "/storage_service/tokens", 200, `<html>`, tokensCall, tokenring.ErrMalformedReply},
		{"oversized", "/storage_service/tokens", 200, `["` + strings.Repeat("1", 2048) + `"]`, tokensCall, tokenring.ErrTooLarge},
		{"non-Murmur3 tokens", "/storage_service/tokens", 200, `["0x1f"]`, hashCall, tokenring.ErrNotMurmur3},
		{"RandomPartitioner tokens", "/storage_service/tokens", 200, `["85070591730234615865843651857942052864"]`, hashCall, tokenring.ErrNotMurmur3},
		{"bad token in map", "/storage_service/tokens_endpoint", 200, `[{"key":"abc","value":"10.0.0.1"}]`, ringCall, tokenring.ErrNotMurmur3},
		{"empty endpoint in map", "/storage_service/tokens_endpoint", 200, `[{"key":"1","value":""}]`, ringCall, tokenring.ErrMalformedReply},
		{"host id map with numbers", "/storage_service/host_id", 200, `[{"key":"10.0.0.1","value":7}]`, hashCall, tokenring.ErrMalformedReply},
		{"host id map with empty id", "/storage_service/host_id", 200, `[{"key":"10.0.0.1","value":""}]`, hashCall, tokenring.ErrMalformedReply},
		{"empty local host id", "/storage_service/hostid/local", 200, `""`, hashCall, tokenring.ErrMalformedReply},
		{"404", "/storage_service/tokens", 404, `{"message":"Not found","code":404}`, tokensCall, tokenring.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: testNodes}, tokenringtest.ServerOptions{})
			defer srv.Close()
			srv.Override(http.MethodGet, tc.path, tc.status, tc.body)
			c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{MaxReplyBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			var tooLarge *bounded.TooLargeError
			if tc.want == tokenring.ErrTooLarge && (!errors.As(err, &tooLarge) || tooLarge.Limit != 1024) {
				t.Fatalf("error = %v, want a *bounded.TooLargeError naming the 1024-byte limit", err)
			}
			if tokenring.IsRetryable(err) {
				t.Fatalf("%v is called retryable", err)
			}
		})
	}
	_ = ctx
}

func tokensCall(c *tokenring.Client) error {
	_, err := c.Tokens(context.Background())
	return err
}

func hashCall(c *tokenring.Client) error {
	_, _, err := tokenring.ReadTokenRingHash(context.Background(), c)
	return err
}

func ringCall(c *tokenring.Client) error {
	_, err := tokenring.ReadRing(context.Background(), c, nil)
	return err
}

func TestServerErrorsAreRetryable(t *testing.T) {
	srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
	srv.Override(http.MethodGet, "/storage_service/tokens", 500, `{"message":"boom","code":500}`)
	_, err := c.Tokens(context.Background())
	var apiErr *tokenring.APIError
	if !errors.As(err, &apiErr) || apiErr.Message != "boom" || !tokenring.IsRetryable(err) {
		t.Fatalf("error = %v", err)
	}
}

func TestClientHonoursContext(t *testing.T) {
	_, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Tokens(ctx); !errors.Is(err, context.Canceled) || tokenring.IsRetryable(err) {
		t.Fatalf("error = %v", err)
	}
}

func TestRunCleanup(t *testing.T) {
	srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
	setKeyspaces(srv, []tokenringtest.Keyspace{
		{Name: "system", Local: true}, {Name: "ks1"}, {Name: "broken"}, {Name: "tablets", Tablets: true}, {Name: "ks2"},
	})
	srv.Node().FailCleanup("broken", &tokenring.APIError{StatusCode: 500, Message: "compaction failed"})

	report, err := tokenring.RunCleanup(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), `keyspace "broken"`) || !strings.Contains(err.Error(), "compaction failed") {
		t.Fatalf("error = %v", err)
	}
	if want := []string{"ks1", "broken", "ks2"}; !reflect.DeepEqual(report.Keyspaces, want) {
		t.Errorf("keyspaces %v, want %v (no local, no tablets)", report.Keyspaces, want)
	}
	if want := []string{"ks1", "ks2"}; !reflect.DeepEqual(report.Cleaned, want) || !reflect.DeepEqual(srv.Node().Cleaned(), want) {
		t.Errorf("cleaned %v / server %v, want %v: a failure must not stop the rest", report.Cleaned, srv.Node().Cleaned(), want)
	}
	if len(report.Failed) != 1 || report.Failed["broken"] == nil {
		t.Errorf("failed %v", report.Failed)
	}
	if srv.Node().StopCalls() != 1 {
		t.Errorf("running cleanups were stopped %d times", srv.Node().StopCalls())
	}
	calls := srv.Calls()
	if calls[0].Path != "/compaction_manager/stop_compaction" || calls[0].Query != "type=CLEANUP" {
		t.Errorf("first call %+v, want stopping cleanups first", calls[0])
	}
}

// setKeyspaces replaces the keyspaces of the server's cluster.
func setKeyspaces(srv *tokenringtest.Server, keyspaces []tokenringtest.Keyspace) {
	srv.Node().Update(func(c *tokenringtest.Cluster) { c.Keyspaces = keyspaces })
}

// TestClientReadsNodeStates: the nodes joining (a host ID and no tokens),
// leaving, moving and down, from the four lists nodetool status reads;
// an empty entry is a malformed reply, a failed list an error.
func TestClientReadsNodeStates(t *testing.T) {
	srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
	ctx := context.Background()
	st, err := c.NodeStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Changing() || !slices.Equal(st.Joining, []string{"10.0.0.3"}) || len(st.Leaving)+len(st.Moving)+len(st.Down) != 0 {
		t.Fatalf("NodeStates = %+v, want only 10.0.0.3 joining", st)
	}
	srv.Node().Update(func(cl *tokenringtest.Cluster) {
		cl.Nodes = cl.Nodes[:2]
		cl.Nodes[1].Down = true
	})
	if st, err = c.NodeStates(ctx); err != nil || st.Changing() || !slices.Equal(st.Down, []string{"10.0.0.2"}) {
		t.Fatalf("NodeStates = %+v, %v; want 10.0.0.2 down, nothing changing", st, err)
	}
	srv.Node().Update(func(cl *tokenringtest.Cluster) { cl.Nodes[0].Leaving, cl.Nodes[1].Moving = true, true })
	if st, err = c.NodeStates(ctx); err != nil || !slices.Equal(st.Leaving, []string{"10.0.0.1"}) || !slices.Equal(st.Moving, []string{"10.0.0.2"}) {
		t.Fatalf("NodeStates = %+v, %v; want 10.0.0.1 leaving, 10.0.0.2 moving", st, err)
	}
	srv.Override(http.MethodGet, "/storage_service/nodes/moving", http.StatusOK, `["10.0.0.2", ""]`)
	if _, err := c.NodeStates(ctx); !errors.Is(err, tokenring.ErrMalformedReply) {
		t.Fatalf("an empty entry: %v, want ErrMalformedReply", err)
	}
	srv.Override(http.MethodGet, "/storage_service/nodes/moving", 0, "")
	srv.Override(http.MethodGet, "/gossiper/endpoint/down", http.StatusInternalServerError, `{"message": "boom", "code": 500}`)
	if _, err := c.NodeStates(ctx); err == nil {
		t.Fatal("a failed list read as no node down")
	}
}
