// Package scyllatest is a fake ScyllaDB REST API on net/http/httptest for
// tests of code that uses package tokenring: the token ring, host IDs,
// snitch, keyspaces and cleanup endpoints, with the JSON shapes ScyllaDB
// returns. It listens on 127.0.0.1 only.
//
// A Server plays one node of a cluster whose ring the test sets with
// SetNodes. With Options.AuthToken it plays the Scylla Manager Agent
// instead: TLS, and every request must carry the bearer token.
//
// All methods are safe for concurrent use, including while the server
// handles requests.
package scyllatest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Node is one node of the fake cluster.
type Node struct {
	Endpoint   string // IP address, as ScyllaDB names endpoints
	HostID     string
	Datacenter string
	Rack       string
	// Tokens are the node's normal tokens; none while it joins.
	Tokens []string
}

// Keyspace is one keyspace of the fake cluster.
type Keyspace struct {
	Name string
	// Local keyspaces (LocalStrategy) are left out of type=non_local_strategy.
	Local bool
	// Tablets keyspaces are left out of replication=vnodes.
	Tablets bool
}

// Options configure NewServer; the zero value is ScyllaDB's own API over
// plain HTTP.
type Options struct {
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

// Server is the fake API. Create it with NewServer, Close it when done.
type Server struct {
	// URL is the base URL to give tokenring.NewClient.
	URL string

	srv   *httptest.Server
	token string

	mu         sync.Mutex
	local      string
	nodes      []Node
	keyspaces  []Keyspace
	failures   map[string]cannedReply // by keyspace
	overrides  map[string]cannedReply // by "METHOD path"
	calls      []Call
	cleaned    []string
	stopCalled int
}

type cannedReply struct {
	status int
	body   string
}

// NewServer starts a server on 127.0.0.1 with an empty cluster.
func NewServer(opts Options) *Server {
	s := &Server{token: opts.AuthToken, failures: map[string]cannedReply{}, overrides: map[string]cannedReply{}}
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

// SetNodes replaces the cluster; local is the endpoint of the node this
// server plays (its host ID answers /storage_service/hostid/local).
func (s *Server) SetNodes(local string, nodes []Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.local = local
	s.nodes = make([]Node, len(nodes))
	for i, n := range nodes {
		n.Tokens = slices.Clone(n.Tokens)
		s.nodes[i] = n
	}
}

// SetKeyspaces replaces the keyspaces.
func (s *Server) SetKeyspaces(keyspaces []Keyspace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keyspaces = slices.Clone(keyspaces)
}

// FailCleanup makes cleanups of keyspace answer status with ScyllaDB's
// error body carrying message; status 0 removes the failure.
func (s *Server) FailCleanup(keyspace string, status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == 0 {
		delete(s.failures, keyspace)
		return
	}
	s.failures[keyspace] = cannedReply{status: status, body: errorBody(status, message)}
}

// Override answers method and path (without query) with status and the raw
// body, whatever the cluster says: for truncated, oversized or otherwise
// broken replies. Status 0 removes the override.
func (s *Server) Override(method, path string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := method + " " + path
	if status == 0 {
		delete(s.overrides, key)
		return
	}
	s.overrides[key] = cannedReply{status: status, body: body}
}

// Calls returns the requests received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Cleaned returns the keyspaces cleaned so far, in order.
func (s *Server) Cleaned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cleaned)
}

// StopCleanupCalls returns how many times cleanups were stopped.
func (s *Server) StopCleanupCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopCalled
}

// GenerateTokens returns count distinct random Murmur3 tokens, the same for
// the same seed, formatted as ScyllaDB prints them.
func GenerateTokens(seed uint64, count int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := make(map[int64]bool, count)
	out := make([]string, 0, count)
	for len(out) < count {
		t := int64(r.Uint64())
		if t == -1<<63 || seen[t] { // the minimum token is never a node's
			continue
		}
		seen[t] = true
		out = append(out, strconv.FormatInt(t, 10))
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})

	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		writeError(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	if o, ok := s.overrides[r.Method+" "+r.URL.Path]; ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(o.status)
		_, _ = w.Write([]byte(o.body))
		return
	}

	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/storage_service/hostid/local":
		n, ok := s.node(s.local)
		if !ok || n.HostID == "" {
			writeError(w, http.StatusNotFound, "local host ID is not yet set")
			return
		}
		writeJSON(w, n.HostID)
	case r.Method == http.MethodGet && path == "/storage_service/host_id":
		var pairs []keyValue
		for _, n := range s.nodes {
			if len(n.Tokens) > 0 { // only nodes that own tokens
				pairs = append(pairs, keyValue{Key: n.Endpoint, Value: n.HostID})
			}
		}
		slices.SortFunc(pairs, func(a, b keyValue) int { return strings.Compare(a.Key, b.Key) })
		writeJSON(w, nonNil(pairs))
	case r.Method == http.MethodGet && path == "/storage_service/tokens":
		var all []string
		for _, n := range s.nodes {
			all = append(all, n.Tokens...)
		}
		sortTokens(all)
		writeJSON(w, nonNil(all))
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/storage_service/tokens/"):
		n, _ := s.node(strings.TrimPrefix(path, "/storage_service/tokens/"))
		own := slices.Clone(n.Tokens)
		sortTokens(own)
		writeJSON(w, nonNil(own))
	case r.Method == http.MethodGet && path == "/storage_service/tokens_endpoint":
		var pairs []keyValue
		for _, n := range s.nodes {
			for _, t := range n.Tokens {
				pairs = append(pairs, keyValue{Key: t, Value: n.Endpoint})
			}
		}
		slices.SortFunc(pairs, func(a, b keyValue) int { return compareTokens(a.Key, b.Key) })
		writeJSON(w, nonNil(pairs))
	case r.Method == http.MethodGet && (path == "/snitch/datacenter" || path == "/snitch/rack"):
		n, ok := s.node(r.URL.Query().Get("host"))
		if !ok {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("Unknown host %s", r.URL.Query().Get("host")))
			return
		}
		if path == "/snitch/rack" {
			writeJSON(w, n.Rack)
		} else {
			writeJSON(w, n.Datacenter)
		}
	case r.Method == http.MethodGet && path == "/storage_service/keyspaces":
		s.serveKeyspaces(w, r)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/storage_service/keyspace_cleanup/"):
		s.serveCleanup(w, strings.TrimPrefix(path, "/storage_service/keyspace_cleanup/"))
	case r.Method == http.MethodPost && path == "/compaction_manager/stop_compaction":
		if r.URL.Query().Get("type") == "" {
			writeError(w, http.StatusBadRequest, "missing mandatory parameter 'type'")
			return
		}
		s.stopCalled++
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
	names := []string{}
	for _, ks := range s.keyspaces {
		if kind == "non_local_strategy" && ks.Local {
			continue
		}
		if (repl == "vnodes" && ks.Tablets) || (repl == "tablets" && !ks.Tablets) {
			continue
		}
		names = append(names, ks.Name)
	}
	writeJSON(w, names)
}

func (s *Server) serveCleanup(w http.ResponseWriter, keyspace string) {
	if !slices.ContainsFunc(s.keyspaces, func(k Keyspace) bool { return k.Name == keyspace }) {
		// validate_keyspace in api/storage_service.cc throws
		// bad_param_exception(replica::no_such_keyspace(name).what()).
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Can't find a keyspace %s", keyspace))
		return
	}
	if f, ok := s.failures[keyspace]; ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(f.body))
		return
	}
	s.cleaned = append(s.cleaned, keyspace)
	writeJSON(w, 0) // the API returns a long
}

func (s *Server) node(endpoint string) (Node, bool) {
	for _, n := range s.nodes {
		if n.Endpoint == endpoint {
			return n, true
		}
	}
	return Node{}, false
}

// keyValue is the API's "mapper" model.
type keyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// sortTokens orders tokens numerically, as ScyllaDB's sorted_tokens does.
func sortTokens(tokens []string) { slices.SortFunc(tokens, compareTokens) }

func compareTokens(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
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
