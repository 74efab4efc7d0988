package tokenringtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// ServerOptions configure NewServer; the zero value is ScyllaDB's own API
// over plain HTTP.
type ServerOptions struct {
	// AuthToken makes the server the Manager Agent: TLS, and requests
	// without "Authorization: Bearer <AuthToken>" get 401.
	AuthToken string
}

// Call records one request the server received.
type Call struct {
	Method string
	Path   string
	Query  string
}

// Server is a fake ScyllaDB REST API serving a MemNode: the token ring,
// host IDs, snitch, keyspaces, describe_ring (Cluster.DescribeRing) and
// cleanup endpoints, with the JSON shapes,
// error bodies and status codes ScyllaDB uses. Create it with NewServer,
// Close it when done; change the cluster, make cleanups fail and read what
// ran through Node.
type Server struct {
	// URL is the base URL to give tokenring.NewClient.
	URL string

	srv   *httptest.Server
	node  *MemNode
	token string

	canned cannedReplies

	mu    sync.Mutex
	calls []Call
}

// NewServer starts a server on 127.0.0.1 playing node c.Local of c.
func NewServer(c Cluster, opts ServerOptions) *Server {
	s := &Server{node: NewMemNode(c), token: opts.AuthToken, canned: cannedReplies{contentType: "application/json"}}
	if opts.AuthToken != "" {
		s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	} else {
		s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	}
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Client returns an *http.Client that trusts the server's TLS certificate;
// pass it as tokenring.ClientOptions.HTTPClient in agent mode.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Node returns the node the server serves: change its cluster, make its
// cleanups fail, and read what it cleaned there.
func (s *Server) Node() *MemNode { return s.node }

// Override answers method and path (without query) with status and the raw
// body, whatever the cluster says: for truncated, oversized or otherwise
// broken replies. Status 0 removes the override.
func (s *Server) Override(method, path string, status int, body string) {
	s.canned.set(method, path, status, body)
}

// Calls returns the requests received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// serve records the call, checks the token, applies an override, and
// otherwise answers from the node.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})
	s.mu.Unlock()

	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		writeError(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	if s.canned.write(w, r) {
		return
	}
	s.route(w, r)
}

// route answers one request the way ScyllaDB's API does.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	ctx, path, n := r.Context(), r.URL.Path, s.node
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case get && path == "/storage_service/hostid/local":
		id, err := n.LocalHostID(ctx)
		if err != nil {
			writeError(w, http.StatusNotFound, "local host ID is not yet set")
			return
		}
		writeJSON(w, id)
	case get && path == "/storage_service/host_id":
		ids, err := n.HostIDs(ctx)
		if err != nil {
			writeFailure(w, err)
			return
		}
		pairs := []tokenring.TokenEndpoint{} // the API's "mapper": key, value
		for _, ep := range slices.Sorted(maps.Keys(ids)) {
			pairs = append(pairs, tokenring.TokenEndpoint{Token: ep, Endpoint: ids[ep]})
		}
		writeJSON(w, pairs)
	case get && (path == "/storage_service/nodes/joining" || path == "/storage_service/nodes/leaving" ||
		path == "/storage_service/nodes/moving" || path == "/gossiper/endpoint/down"):
		st, err := n.NodeStates(ctx)
		if err != nil {
			writeFailure(w, err)
			return
		}
		list := map[string][]string{"/storage_service/nodes/joining": st.Joining, "/storage_service/nodes/leaving": st.Leaving,
			"/storage_service/nodes/moving": st.Moving, "/gossiper/endpoint/down": st.Down}[path]
		if list == nil {
			list = []string{} // ScyllaDB answers an empty list with []
		}
		writeJSON(w, list)
	case get && path == "/storage_service/tokens":
		writeResult(w)(n.Tokens(ctx))
	case get && strings.HasPrefix(path, "/storage_service/tokens/"):
		writeResult(w)(n.EndpointTokens(ctx, strings.TrimPrefix(path, "/storage_service/tokens/")))
	case get && path == "/storage_service/tokens_endpoint":
		writeResult(w)(n.TokenEndpoints(ctx))
	case get && (path == "/snitch/datacenter" || path == "/snitch/rack"):
		host := r.URL.Query().Get("host")
		loc, err := n.Location(ctx, host)
		switch {
		case err != nil:
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("Unknown host %s", host))
		case path == "/snitch/rack":
			writeJSON(w, loc.Rack)
		default:
			writeJSON(w, loc.Datacenter)
		}
	case get && path == "/storage_service/keyspaces":
		s.serveKeyspaces(w, r)
	case get && strings.HasPrefix(path, "/storage_service/describe_ring/"):
		keyspace := strings.TrimPrefix(path, "/storage_service/describe_ring/")
		switch ranges, err := n.DescribeRing(ctx, keyspace); {
		case errors.Is(err, tokenring.ErrKeyspaceNotFound):
			// describe_ring looks the keyspace up with validate_keyspace,
			// as keyspace_cleanup does.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Can't find a keyspace %s", keyspace))
		case errors.Is(err, ErrTabletsKeyspace):
			writeError(w, http.StatusBadRequest, err.Error())
		case err != nil:
			writeFailure(w, err)
		default:
			writeJSON(w, ranges) // an array of the "token_range" model
		}
	case post && strings.HasPrefix(path, "/storage_service/keyspace_cleanup/"):
		keyspace := strings.TrimPrefix(path, "/storage_service/keyspace_cleanup/")
		switch err := n.CleanupKeyspace(ctx, keyspace); {
		case errors.Is(err, tokenring.ErrKeyspaceNotFound):
			// validate_keyspace in api/storage_service.cc throws
			// bad_param_exception(replica::no_such_keyspace(name).what()).
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Can't find a keyspace %s", keyspace))
		case err != nil:
			writeFailure(w, err)
		default:
			writeJSON(w, 0) // the API returns a long
		}
	case post && path == "/compaction_manager/stop_compaction":
		if r.URL.Query().Get("type") == "" {
			writeError(w, http.StatusBadRequest, "missing mandatory parameter 'type'")
			return
		}
		if err := n.StopCleanups(ctx); err != nil {
			writeFailure(w, err)
			return
		}
		writeJSON(w, "")
	default:
		writeError(w, http.StatusNotFound, "Not found")
	}
}

func (s *Server) serveKeyspaces(w http.ResponseWriter, r *http.Request) {
	kind, repl := r.URL.Query().Get("type"), r.URL.Query().Get("replication")
	switch kind {
	case "", "all", "user", "non_local_strategy":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid type %s", kind))
		return
	}
	c, err := s.node.view(r.Context())
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, c.keyspaceNames(kind == "non_local_strategy", repl))
}

// writeResult writes a node's answer, or its failure.
func writeResult(w http.ResponseWriter) func(v any, err error) {
	return func(v any, err error) {
		if err != nil {
			writeFailure(w, err)
			return
		}
		writeJSON(w, v)
	}
}

// writeFailure answers a node's error: a *tokenring.APIError with its own
// status and message (FailCleanup), anything else as a 500.
func writeFailure(w http.ResponseWriter, err error) {
	var apiErr *tokenring.APIError
	if errors.As(err, &apiErr) {
		writeError(w, apiErr.StatusCode, apiErr.Message)
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(errorBody(status, message)))
}

// errorBody is ScyllaDB's error reply shape.
func errorBody(status int, message string) string {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	}{message, status})
	return string(b)
}
