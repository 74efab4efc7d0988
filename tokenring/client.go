package tokenring

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// DefaultMaxReplyBytes bounds reply bodies when ClientOptions leaves it 0:
// 64 MiB holds the tokens_endpoint map of a ring with a million tokens.
const DefaultMaxReplyBytes = 64 << 20

// ClientOptions configure NewClient; the zero value talks plain HTTP to
// ScyllaDB's own API.
type ClientOptions struct {
	// AuthToken is the Scylla Manager Agent's token, sent as
	// "Authorization: Bearer <token>" to the base URL's origin and nowhere
	// else. It requires an https base URL (ErrTokenWithoutTLS otherwise).
	AuthToken string
	// TLSConfig is used for https; nil means the system roots.
	TLSConfig *tls.Config
	// HTTPClient replaces the default client (TLSConfig is then unused).
	// The Client uses a copy whose CheckRedirect refuses every redirect,
	// whatever the host's client would do; the host's value is not
	// changed. The default has no overall timeout: ctx bounds each call,
	// and a keyspace cleanup may legitimately take hours.
	HTTPClient *http.Client
	// MaxReplyBytes bounds every reply body; 0 means DefaultMaxReplyBytes.
	MaxReplyBytes int64
}

// Client talks to one node's ScyllaDB REST API, directly
// (http://host:10000) or through the Scylla Manager Agent
// (https://host:10001 with a bearer token). It implements RingSource,
// LocationSource and Cleaner, and is safe for concurrent use.
//
// It never follows a redirect (ErrRedirect), so every request, and the
// bearer token with it, goes to the base URL's origin only. Replies are
// read up to ClientOptions.MaxReplyBytes; a reply of JSON null, where the
// API always answers a value, is ErrMalformedReply.
type Client struct {
	base     string
	token    string
	http     *http.Client
	maxReply int64
}

// NewClient checks baseURL and returns a client for it. A base URL it
// cannot use is an error wrapping ErrInvalidURL that says what is wrong
// (a URL without a scheme shows the URL with one); a token with an http
// base URL is ErrTokenWithoutTLS.
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	if opts.AuthToken != "" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: base URL %q: use https (the Manager Agent listens on https://host:10001)", ErrTokenWithoutTLS, baseURL)
	}
	c := &Client{
		base:     strings.TrimSuffix(u.String(), "/"),
		token:    opts.AuthToken,
		maxReply: opts.MaxReplyBytes,
	}
	if c.maxReply <= 0 {
		c.maxReply = DefaultMaxReplyBytes
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient // a copy: the host's client keeps its own redirect policy
	} else {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = opts.TLSConfig
		hc.Transport = transport
	}
	// Go's client follows redirects and keeps the Authorization header when
	// only the port or the scheme changes (it compares host names), so an
	// answer "302 http://same-host:80/..." would send the token in clear.
	// Never follow: the 3xx reply comes back to call, which refuses it.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c, nil
}

// parseBaseURL accepts http(s)://host[:port][/prefix] and explains what
// is wrong with anything else.
func parseBaseURL(raw string) (*url.URL, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("tokenring: base URL %q: %w: %s", redactURL(raw), ErrInvalidURL, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(raw) == "" {
		return nil, invalid("empty; want http://host:10000 (ScyllaDB) or https://host:10001 (the Manager Agent)")
	}
	if !strings.Contains(raw, "://") {
		// "10.0.0.1:10000" does not parse, and "localhost:10000" parses
		// with the scheme "localhost": say what was meant.
		return nil, invalid("has no scheme: write %q (ScyllaDB's API) or %q (the Manager Agent)", "http://"+raw, "https://"+raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalid("%v", redactError(err, raw))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, invalid("scheme %q: want http or https", u.Scheme)
	case u.User != nil:
		return nil, invalid("credentials in the URL are not supported (the agent's token goes in ClientOptions.AuthToken)")
	case u.Host == "":
		return nil, invalid("no host")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, invalid("a query is not allowed")
	case u.Fragment != "":
		return nil, invalid("a fragment is not allowed")
	}
	return u, nil
}

// redactURL hides a password in a URL for error messages.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
}

// redactError keeps url.Parse's reason without repeating the URL, which may
// hold a password.
func redactError(err error, raw string) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return strings.ReplaceAll(err.Error(), raw, "<url>")
}

// LocalHostID implements RingSource.
func (c *Client) LocalHostID(ctx context.Context) (string, error) {
	var id string
	if err := c.call(ctx, http.MethodGet, "/storage_service/hostid/local", nil, &id); err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("%w: GET /storage_service/hostid/local: empty host ID", ErrMalformedReply)
	}
	return id, nil
}

// HostIDs implements RingSource.
func (c *Client) HostIDs(ctx context.Context) (map[string]string, error) {
	var pairs []keyValue
	const path = "/storage_service/host_id"
	if err := c.call(ctx, http.MethodGet, path, nil, &pairs); err != nil {
		return nil, err
	}
	ids := make(map[string]string, len(pairs))
	for i, p := range pairs {
		if p.Key == "" || p.Value == "" {
			return nil, fmt.Errorf("%w: GET %s: entry %d has an empty endpoint or host ID", ErrMalformedReply, path, i)
		}
		if prev, dup := ids[p.Key]; dup && prev != p.Value {
			return nil, fmt.Errorf("%w: GET %s: endpoint %s has two host IDs", ErrMalformedReply, path, p.Key)
		}
		ids[p.Key] = p.Value
	}
	return ids, nil
}

// Tokens implements RingSource.
func (c *Client) Tokens(ctx context.Context) ([]string, error) {
	var tokens []string
	err := c.call(ctx, http.MethodGet, "/storage_service/tokens", nil, &tokens)
	return tokens, err
}

// EndpointTokens implements RingSource.
func (c *Client) EndpointTokens(ctx context.Context, endpoint string) ([]string, error) {
	if endpoint == "" {
		return nil, errors.New("tokenring: EndpointTokens: empty endpoint")
	}
	var tokens []string
	err := c.call(ctx, http.MethodGet, "/storage_service/tokens/"+url.PathEscape(endpoint), nil, &tokens)
	return tokens, err
}

// TokenEndpoints implements RingSource.
func (c *Client) TokenEndpoints(ctx context.Context) ([]TokenEndpoint, error) {
	var pairs []TokenEndpoint
	err := c.call(ctx, http.MethodGet, "/storage_service/tokens_endpoint", nil, &pairs)
	return pairs, err
}

// Location implements LocationSource.
func (c *Client) Location(ctx context.Context, endpoint string) (Location, error) {
	q := url.Values{"host": {endpoint}}
	var loc Location
	if err := c.call(ctx, http.MethodGet, "/snitch/datacenter", q, &loc.Datacenter); err != nil {
		return Location{}, err
	}
	if err := c.call(ctx, http.MethodGet, "/snitch/rack", q, &loc.Rack); err != nil {
		return Location{}, err
	}
	return loc, nil
}

// NodeStates is what one node knows of the nodes changing the ring or
// unreachable, as nodetool status reads it: each field lists endpoints.
type NodeStates struct {
	// Joining: bootstrapping, not yet in the ring
	// (GET /storage_service/nodes/joining).
	Joining []string
	// Leaving: being decommissioned or removed
	// (GET /storage_service/nodes/leaving).
	Leaving []string
	// Moving: moving their tokens (GET /storage_service/nodes/moving).
	Moving []string
	// Down: gossip sees them down (GET /gossiper/endpoint/down).
	Down []string
}

// Changing reports whether any node joins, leaves or moves: the ring's
// ranges are pending.
func (s NodeStates) Changing() bool {
	return len(s.Joining)+len(s.Leaving)+len(s.Moving) > 0
}

// NodeStates reads which nodes the node sees joining, leaving, moving and
// down. An entry that is not a non-empty string is ErrMalformedReply.
func (c *Client) NodeStates(ctx context.Context) (NodeStates, error) {
	var st NodeStates
	for _, q := range []struct {
		path string
		into *[]string
	}{
		{"/storage_service/nodes/joining", &st.Joining},
		{"/storage_service/nodes/leaving", &st.Leaving},
		{"/storage_service/nodes/moving", &st.Moving},
		{"/gossiper/endpoint/down", &st.Down},
	} {
		if err := c.call(ctx, http.MethodGet, q.path, nil, q.into); err != nil {
			return NodeStates{}, err
		}
		for i, ep := range *q.into {
			if ep == "" {
				return NodeStates{}, fmt.Errorf("%w: GET %s: entry %d is empty", ErrMalformedReply, q.path, i)
			}
		}
	}
	return st, nil
}

// StopCleanups implements Cleaner.
func (c *Client) StopCleanups(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/compaction_manager/stop_compaction", url.Values{"type": {"CLEANUP"}}, nil)
}

// CleanupKeyspaces implements Cleaner.
func (c *Client) CleanupKeyspaces(ctx context.Context) ([]string, error) {
	var names []string
	q := url.Values{"type": {"non_local_strategy"}, "replication": {"vnodes"}}
	err := c.call(ctx, http.MethodGet, "/storage_service/keyspaces", q, &names)
	return names, err
}

// CleanupKeyspace implements Cleaner. Only ScyllaDB's own answers count:
//
//   - success is HTTP 2xx with the body 0 (the handler's json_return_type(0),
//     api/storage_service.cc force_keyspace_cleanup); any other body,
//     empty or null included, is ErrMalformedReply, never "cleaned";
//   - "the keyspace does not exist" is HTTP 400 whose message is exactly
//     what validate_keyspace throws for this keyspace: "Can't find a
//     keyspace <name>" (replica::no_such_keyspace, ScyllaDB 5.x and
//     later) or "Keyspace <name> Does not exist" (older releases); that
//     error wraps ErrKeyspaceNotFound;
//   - everything else fails: a 404 means the path is not served (wraps
//     ErrNotFound), a redirect ErrRedirect, a 500 the cleanup failed
//     (for example "Can not perform cleanup operation when topology
//     changes").
func (c *Client) CleanupKeyspace(ctx context.Context, keyspace string) error {
	if keyspace == "" {
		return errors.New("tokenring: CleanupKeyspace: empty keyspace")
	}
	path := "/storage_service/keyspace_cleanup/" + url.PathEscape(keyspace)
	var result json.RawMessage
	err := c.call(ctx, http.MethodPost, path, nil, &result)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest && keyspaceMissing(apiErr.Message, keyspace) {
		return fmt.Errorf("%w: keyspace %q: %w", ErrKeyspaceNotFound, keyspace, apiErr)
	}
	if err != nil {
		return err
	}
	if string(bytes.TrimSpace(result)) != "0" {
		return fmt.Errorf("%w: POST %s: ScyllaDB answers a finished cleanup with 0, got %s", ErrMalformedReply, path, shorten(string(result)))
	}
	return nil
}

// keyspaceMissing reports whether msg is exactly one of ScyllaDB's messages
// for a keyspace that does not exist, about this keyspace.
func keyspaceMissing(msg, keyspace string) bool {
	msg = strings.TrimSpace(msg)
	return msg == "Can't find a keyspace "+keyspace || msg == "Keyspace "+keyspace+" Does not exist"
}

// keyValue is the API's "mapper" model.
type keyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// call performs one request and decodes the reply into out (nil: the body
// is read, bounded, and discarded).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, out any) error {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return fmt.Errorf("tokenring: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("tokenring: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()

	body, err := bounded.ReadAll(resp.Body, c.maxReply, "reply to "+method+" "+path)
	if err != nil {
		return fmt.Errorf("tokenring: %s %s: reading reply: %w", method, path, err)
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode,
			Message: "redirect to " + shorten(resp.Header.Get("Location")) + " not followed"}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: errorMessage(body)}
	}
	if out == nil {
		return nil
	}
	if string(bytes.TrimSpace(body)) == "null" {
		// Every endpoint we call answers a value; null decodes to "nothing"
		// (a nil list, an empty string), which must not pass for an answer.
		return fmt.Errorf("%w: %s %s: null", ErrMalformedReply, method, path)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrMalformedReply, method, path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: %s %s: data after the JSON value", ErrMalformedReply, method, path)
	}
	return nil
}

// errorMessage extracts ScyllaDB's {"message": ..., "code": ...} or falls
// back to the start of the body.
func errorMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return shorten(e.Message)
	}
	return shorten(strings.TrimSpace(string(body)))
}
