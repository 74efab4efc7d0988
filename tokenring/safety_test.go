package tokenring_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// witness is a second origin a redirect points at. It records every
// Authorization header it receives, and answers like a healthy ScyllaDB
// would, so a client that followed the redirect would also get a
// believable answer.
type witness struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits int
	auth []string
}

func newWitness(t *testing.T, tls bool) *witness {
	t.Helper()
	w := &witness{}
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.hits++
		if a := r.Header.Get("Authorization"); a != "" {
			w.auth = append(w.auth, a)
		}
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`["-100","-20","50","300"]`))
	})
	if tls {
		w.srv = httptest.NewTLSServer(h)
	} else {
		w.srv = httptest.NewServer(h)
	}
	t.Cleanup(w.srv.Close)
	return w
}

func (w *witness) seen() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hits, append([]string(nil), w.auth...)
}

// redirector answers every request with a redirect to target + the path.
func redirector(t *testing.T, tls bool, status int, target string) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, target+r.URL.RequestURI(), status)
	})
	var s *httptest.Server
	if tls {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

// TestAgentTokenNeverFollowsARedirect: the Manager Agent's bearer token
// goes only to the configured origin. A redirect to another port of the
// same host over plain HTTP (which Go's client would follow *with* the
// Authorization header, since it compares host names without ports), to
// another host name, or to another TLS origin is refused with ErrRedirect,
// and the second origin never sees a request.
func TestAgentTokenNeverFollowsARedirect(t *testing.T) {
	for _, tc := range []struct {
		name       string
		witnessTLS bool
		host       string // host name the redirect names
		status     int
	}{
		{"downgrade to http on the same host", false, "127.0.0.1", http.StatusFound},
		{"downgrade to http, 307 keeps the method", false, "127.0.0.1", http.StatusTemporaryRedirect},
		{"permanent redirect to another TLS origin", true, "127.0.0.1", http.StatusPermanentRedirect},
		{"another host name", false, "localhost", http.StatusMovedPermanently},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWitness(t, tc.witnessTLS)
			target := strings.Replace(w.srv.URL, "127.0.0.1", tc.host, 1)
			agent := redirector(t, true, tc.status, target)
			// The host's own client trusts both test certificates and would
			// follow any redirect: the tokenring client must not.
			hostClient := agent.Client()
			if tc.witnessTLS {
				hostClient.Transport.(*http.Transport).TLSClientConfig.RootCAs.AddCert(w.srv.Certificate())
			}
			hostClient.CheckRedirect = func(*http.Request, []*http.Request) error { return nil }
			c, err := tokenring.NewClient(agent.URL, tokenring.ClientOptions{AuthToken: "s3cret", HTTPClient: hostClient})
			if err != nil {
				t.Fatal(err)
			}
			tokens, err := c.Tokens(context.Background())
			if !errors.Is(err, tokenring.ErrRedirect) || tokens != nil {
				t.Fatalf("Tokens = %v, %v; want ErrRedirect", tokens, err)
			}
			if tokenring.IsRetryable(err) {
				t.Errorf("a redirect is called retryable: %v", err)
			}
			var apiErr *tokenring.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || !strings.Contains(apiErr.Message, target) {
				t.Errorf("error %v does not name the status and where it pointed", err)
			}
			if hits, auth := w.seen(); hits != 0 || len(auth) != 0 {
				t.Fatalf("the redirect target got %d requests, Authorization headers %q", hits, auth)
			}
			if hostClient.CheckRedirect == nil {
				t.Error("NewClient changed the host's http.Client")
			}
		})
	}
}

// TestPlainClientRefusesRedirects: without a token nothing can leak, but a
// redirect is still not the configured node answering: ScyllaDB's API
// never redirects, so the call fails instead of trusting another origin.
func TestPlainClientRefusesRedirects(t *testing.T) {
	w := newWitness(t, false)
	api := redirector(t, false, http.StatusFound, w.srv.URL)
	c, err := tokenring.NewClient(api.URL, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tokens(context.Background()); !errors.Is(err, tokenring.ErrRedirect) {
		t.Fatalf("Tokens: %v, want ErrRedirect", err)
	}
	if err := c.CleanupKeyspace(context.Background(), "ks"); !errors.Is(err, tokenring.ErrRedirect) {
		t.Fatalf("CleanupKeyspace: %v, want ErrRedirect", err)
	}
	if hits, _ := w.seen(); hits != 0 {
		t.Fatalf("the redirect target got %d requests", hits)
	}
}

// TestNewClientConfigurationErrors: the token never goes over plain HTTP,
// and a URL without a scheme gets a message that says so and shows the fix.
func TestNewClientConfigurationErrors(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:10001", "HTTP://127.0.0.1:10001"} {
		if _, err := tokenring.NewClient(u, tokenring.ClientOptions{AuthToken: "s3cret"}); !errors.Is(err, tokenring.ErrTokenWithoutTLS) {
			t.Errorf("NewClient(%q) with a token: %v, want ErrTokenWithoutTLS", u, err)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"127.0.0.1:10000", `has no scheme: write "http://127.0.0.1:10000"`},
		{"localhost:10000", `has no scheme: write "http://localhost:10000"`},
		{"scylla-0.scylla.svc:10001", `has no scheme: write "http://scylla-0.scylla.svc:10001"`},
		{"10.0.0.1", `has no scheme: write "http://10.0.0.1"`},
		{"", "empty"},
		{"ftp://127.0.0.1", `scheme "ftp"`},
		{"http://user:pw@127.0.0.1:10000", "credentials"},
		{"http://", "no host"},
		{"http://127.0.0.1:10000/?x=1", "query"},
	} {
		_, err := tokenring.NewClient(tc.url, tokenring.ClientOptions{})
		if !errors.Is(err, tokenring.ErrInvalidURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewClient(%q) = %v; want ErrInvalidURL saying %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("NewClient(%q) error repeats the password: %v", tc.url, err)
		}
	}
}

// TestRunCleanupCountsOnlyProvenCleanups: a keyspace is Cleaned only when
// ScyllaDB answered the cleanup with its success reply (HTTP 200, body 0);
// it is Dropped only when ScyllaDB said, in its own words, that this very
// keyspace does not exist. Anything else fails the keyspace.
func TestRunCleanupCountsOnlyProvenCleanups(t *testing.T) {
	const path = "/storage_service/keyspace_cleanup/gone"
	for _, tc := range []struct {
		name        string
		status      int
		body        string
		wantDropped bool
		wantErr     error
	}{
		{"ScyllaDB today: Can't find a keyspace", 400, `{"message": "Can't find a keyspace gone", "code": 400}`, true, nil},
		{"ScyllaDB before 5.x: Keyspace ... Does not exist", 400, `{"message": "Keyspace gone Does not exist", "code": 400}`, true, nil},
		{"404: the endpoint is missing, not the keyspace", 404, `{"message": "Not found", "code": 404}`, false, tokenring.ErrNotFound},
		{"404 with an empty body", 404, ``, false, tokenring.ErrNotFound},
		{"400 about another keyspace", 400, `{"message": "Can't find a keyspace other", "code": 400}`, false, nil},
		{"400 about a table", 400, `{"message": "Table gone.t does not exist", "code": 400}`, false, nil},
		{"400 that merely contains the words", 400, `{"message": "cleanup: Keyspace gone Does not exist yet on shard 3", "code": 400}`, false, nil},
		{"500 topology change", 500, `{"message": "Can not perform cleanup operation when topology changes", "code": 500}`, false, nil},
		{"200 with an empty body", 200, ``, false, tokenring.ErrMalformedReply},
		{"200 null", 200, `null`, false, tokenring.ErrMalformedReply},
		{"200 with a string", 200, `"0"`, false, tokenring.ErrMalformedReply},
		{"200 with another number", 200, `1`, false, tokenring.ErrMalformedReply},
		{"200 with an HTML page", 200, `<html>ok</html>`, false, tokenring.ErrMalformedReply},
		{"200 with an object", 200, `{}`, false, tokenring.ErrMalformedReply},
		{"200 oversized", 200, strings.Repeat(" ", 2048) + "0", false, tokenring.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tokenringtest.NewServer(tokenringtest.Cluster{Local: "10.0.0.1", Nodes: testNodes}, tokenringtest.ServerOptions{})
			defer srv.Close()
			setKeyspaces(srv, []tokenringtest.Keyspace{{Name: "ks1"}, {Name: "gone"}})
			srv.Override(http.MethodPost, path, tc.status, tc.body)
			c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{MaxReplyBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			report, err := tokenring.RunCleanup(context.Background(), c)
			if !reflect.DeepEqual(report.Cleaned, []string{"ks1"}) {
				t.Errorf("cleaned %v, want only ks1: gone was never cleaned", report.Cleaned)
			}
			if tc.wantDropped {
				if err != nil || !reflect.DeepEqual(report.Dropped, []string{"gone"}) || len(report.Failed) != 0 {
					t.Fatalf("report %+v, error %v; want gone dropped, no failure", report, err)
				}
				return
			}
			if err == nil || report.Failed["gone"] == nil || len(report.Dropped) != 0 {
				t.Fatalf("report %+v, error %v; want gone failed", report, err)
			}
			if tc.wantErr != nil && !errors.Is(report.Failed["gone"], tc.wantErr) {
				t.Errorf("failure %v does not wrap %v", report.Failed["gone"], tc.wantErr)
			}
			if errors.Is(report.Failed["gone"], tokenring.ErrKeyspaceNotFound) {
				t.Errorf("failure %v claims the keyspace is gone", report.Failed["gone"])
			}
		})
	}
}

// TestRunCleanupAgainstTheFakeDroppedKeyspace: the fake answers a keyspace
// dropped after the listing as ScyllaDB does; RunCleanup reports it as
// dropped, not cleaned.
func TestRunCleanupAgainstTheFakeDroppedKeyspace(t *testing.T) {
	srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
	setKeyspaces(srv, []tokenringtest.Keyspace{{Name: "ks1"}})
	srv.Override(http.MethodGet, "/storage_service/keyspaces", 200, `["gone","ks1"]`)
	report, err := tokenring.RunCleanup(context.Background(), c)
	if err != nil || !reflect.DeepEqual(report.Cleaned, []string{"ks1"}) || !reflect.DeepEqual(report.Dropped, []string{"gone"}) {
		t.Fatalf("report %+v, error %v", report, err)
	}
}

// TestRunCleanupRefusesABadListing: a keyspace list that is null or not a
// list stops the run before anything is cleaned.
func TestRunCleanupRefusesABadListing(t *testing.T) {
	for _, body := range []string{`null`, `{"keyspaces":["ks1"]}`, `["ks1"`, ``} {
		srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
		setKeyspaces(srv, []tokenringtest.Keyspace{{Name: "ks1"}})
		srv.Override(http.MethodGet, "/storage_service/keyspaces", 200, body)
		report, err := tokenring.RunCleanup(context.Background(), c)
		if !errors.Is(err, tokenring.ErrMalformedReply) || len(report.Cleaned) != 0 || len(srv.Node().Cleaned()) != 0 {
			t.Errorf("listing %q: report %+v, error %v; want ErrMalformedReply and nothing cleaned", body, report, err)
		}
	}
}

// TestTokenRingHashNeedsTheNodesOwnTokens: the hash is only computed over a
// ring reply that holds the node's own tokens. null is a malformed reply;
// an empty ring, or one without the node's tokens, disagrees with the
// node's own answer and is retried, never hashed.
func TestTokenRingHashNeedsTheNodesOwnTokens(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		want             error
	}{
		{"ring null", "/storage_service/tokens", `null`, tokenring.ErrMalformedReply},
		{"ring empty", "/storage_service/tokens", `[]`, tokenring.ErrInconsistentRing},
		{"ring without the node's tokens", "/storage_service/tokens", `["-20","300"]`, tokenring.ErrInconsistentRing},
		{"ring with half of them", "/storage_service/tokens", `["-100","-20","300"]`, tokenring.ErrInconsistentRing},
		{"own tokens null", "/storage_service/tokens/10.0.0.1", `null`, tokenring.ErrMalformedReply},
		{"own tokens empty", "/storage_service/tokens/10.0.0.1", `[]`, tokenring.ErrNotJoined},
		{"own tokens not Murmur3", "/storage_service/tokens/10.0.0.1", `["x"]`, tokenring.ErrNotMurmur3},
		{"host ID map null", "/storage_service/host_id", `null`, tokenring.ErrMalformedReply},
		{"host ID map empty", "/storage_service/host_id", `[]`, tokenring.ErrNotJoined},
		{"local host ID null", "/storage_service/hostid/local", `null`, tokenring.ErrMalformedReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
			srv.Override(http.MethodGet, tc.path, 200, tc.body)
			hash, _, err := tokenring.ReadTokenRingHash(context.Background(), c)
			if hash != "" || !errors.Is(err, tc.want) {
				t.Fatalf("ReadTokenRingHash = %q, %v; want no hash and %v", hash, err, tc.want)
			}
		})
	}
	if !tokenring.IsRetryable(tokenring.ErrInconsistentRing) {
		t.Error("an inconsistent ring is not retryable: the node was changing between two replies")
	}
}

// TestNullRepliesAreMalformed: ScyllaDB answers every list endpoint with a
// JSON array; null is never "nothing".
func TestNullRepliesAreMalformed(t *testing.T) {
	ctx := context.Background()
	for path, call := range map[string]func(*tokenring.Client) error{
		"/storage_service/tokens":          func(c *tokenring.Client) error { _, err := c.Tokens(ctx); return err },
		"/storage_service/tokens/10.0.0.2": func(c *tokenring.Client) error { _, err := c.EndpointTokens(ctx, "10.0.0.2"); return err },
		"/storage_service/tokens_endpoint": func(c *tokenring.Client) error { _, err := c.TokenEndpoints(ctx); return err },
		"/storage_service/host_id":         func(c *tokenring.Client) error { _, err := c.HostIDs(ctx); return err },
		"/storage_service/keyspaces":       func(c *tokenring.Client) error { _, err := c.CleanupKeyspaces(ctx); return err },
		"/snitch/datacenter":               func(c *tokenring.Client) error { _, err := c.Location(ctx, "10.0.0.1"); return err },
		"/snitch/rack":                     func(c *tokenring.Client) error { _, err := c.Location(ctx, "10.0.0.1"); return err },
	} {
		srv, c := newFake(t, tokenringtest.ServerOptions{}, "10.0.0.1")
		srv.Override(http.MethodGet, path, 200, " null\n")
		if err := call(c); !errors.Is(err, tokenring.ErrMalformedReply) {
			t.Errorf("%s answering null: %v, want ErrMalformedReply", path, err)
		}
	}
}

// TestStalledReplyEndsWithTheContext: a server that sends its headers and
// then nothing (a stuck proxy, a half-dead node) cannot hold a call past
// its context, and a cleanup cut short that way is a failure, not done.
func TestStalledReplyEndsWithTheContext(t *testing.T) {
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte(`["1",`))
		rw.(http.Flusher).Flush()
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(context.Context) error{
		"Tokens":          func(ctx context.Context) error { _, err := c.Tokens(ctx); return err },
		"CleanupKeyspace": func(ctx context.Context) error { return c.CleanupKeyspace(ctx, "ks") },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		<-started // the reply is half sent and stalls
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || tokenring.IsRetryable(err) || errors.Is(err, tokenring.ErrKeyspaceNotFound) {
			t.Errorf("%s with a stalled reply: %v; want context.Canceled", name, err)
		}
	}
}

// FuzzCleanupReply answers a cleanup with any status and body and checks
// that RunCleanup counts the keyspace cleaned only for ScyllaDB's success
// reply (2xx, 0), dropped only for ScyllaDB's exact message about this
// keyspace with a 400, and failed otherwise; it never panics.
func FuzzCleanupReply(f *testing.F) {
	f.Add(200, "0")
	f.Add(200, " 0\n")
	f.Add(200, "null")
	f.Add(404, `{"message":"Not found","code":404}`)
	f.Add(400, `{"message":"Can't find a keyspace ks","code":400}`)
	f.Add(400, `{"message":"Keyspace ks Does not exist","code":400}`)
	f.Add(400, `{"message":"Keyspace ks does not exist","code":400}`)
	f.Add(302, ``)
	f.Add(500, `{"message":"Can not perform cleanup operation when topology changes","code":500}`)
	srv := tokenringtest.NewServer(tokenringtest.Cluster{}, tokenringtest.ServerOptions{})
	defer srv.Close()
	setKeyspaces(srv, []tokenringtest.Keyspace{{Name: "ks"}})
	c, err := tokenring.NewClient(srv.URL, tokenring.ClientOptions{MaxReplyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 200 || status > 599 {
			return // net/http cannot send it
		}
		srv.Override(http.MethodPost, "/storage_service/keyspace_cleanup/ks", status, body)
		report, err := tokenring.RunCleanup(context.Background(), c)
		trimmed := strings.TrimSpace(body)
		if status == http.StatusNoContent {
			trimmed = "" // net/http sends no body with it
		}
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal([]byte(body), &msg)
		exact := strings.TrimSpace(msg.Message) == "Can't find a keyspace ks" || strings.TrimSpace(msg.Message) == "Keyspace ks Does not exist"
		switch {
		case status >= 200 && status <= 299 && trimmed == "0":
			if err != nil || !reflect.DeepEqual(report.Cleaned, []string{"ks"}) {
				t.Fatalf("success reply %d %q: %+v, %v", status, body, report, err)
			}
		case status == 400 && exact:
			if err != nil || !reflect.DeepEqual(report.Dropped, []string{"ks"}) || len(report.Cleaned) != 0 {
				t.Fatalf("missing-keyspace reply %q: %+v, %v", body, report, err)
			}
		default:
			if err == nil || report.Failed["ks"] == nil || len(report.Cleaned)+len(report.Dropped) != 0 {
				t.Fatalf("reply %d %q: %+v, %v; want a failure", status, body, report, err)
			}
		}
	})
}
