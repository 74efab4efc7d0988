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
)

// Errors of the REST client, for errors.Is.
var (
	// ErrNotFound: the API answered 404, or ScyllaDB said the keyspace or
	// endpoint does not exist.
	ErrNotFound = errors.New("not found")
	// ErrMalformedReply: the reply is not the JSON shape the API
	// documents (truncated, wrong types, trailing garbage).
	ErrMalformedReply = errors.New("malformed reply")
	// ErrReplyTooLarge: the reply exceeded ClientOptions.MaxReplyBytes.
	ErrReplyTooLarge = errors.New("reply too large")
)

// DefaultMaxReplyBytes bounds reply bodies when ClientOptions leaves it 0:
// 64 MiB holds the tokens_endpoint map of a ring with a million tokens.
const DefaultMaxReplyBytes = 64 << 20

// APIError is a non-2xx reply.
type APIError struct {
	Method     string
	Path       string
	StatusCode int
	// Message is ScyllaDB's error message, or the start of the body.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("tokenring: %s %s: HTTP %d: %s", e.Method, e.Path, e.StatusCode, e.Message)
}

// Is makes a 404 match ErrNotFound, and also a 400 whose message says the
// thing "does not exist": ScyllaDB answers a dropped keyspace that way.
func (e *APIError) Is(target error) bool {
	if target != ErrNotFound {
		return false
	}
	return e.StatusCode == http.StatusNotFound ||
		(e.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(e.Message), "does not exist"))
}

// IsRetryable reports whether asking again later may succeed: network
// failures, 5xx, 429, 408 and ErrNotJoined (joining finishes) are;
// malformed and oversized replies, other 4xx, unparseable tokens and the
// caller's own cancelled or expired context are not.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNotJoined):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrMalformedReply), errors.Is(err, ErrReplyTooLarge), errors.Is(err, ErrNotMurmur3):
		return false
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		c := apiErr.StatusCode
		return c >= 500 || c == http.StatusTooManyRequests || c == http.StatusRequestTimeout
	}
	return true
}

// ClientOptions configure NewClient; the zero value talks plain HTTP to
// ScyllaDB's own API.
type ClientOptions struct {
	// AuthToken is the Scylla Manager Agent's token, sent as
	// "Authorization: Bearer <token>". It requires an https base URL.
	AuthToken string
	// TLSConfig is used for https; nil means the system roots.
	TLSConfig *tls.Config
	// HTTPClient replaces the default client (TLSConfig is then unused).
	// The default has no overall timeout: ctx bounds each call, and a
	// keyspace cleanup may legitimately take hours.
	HTTPClient *http.Client
	// MaxReplyBytes bounds every reply body; 0 means DefaultMaxReplyBytes.
	MaxReplyBytes int64
}

// Client talks to one node's ScyllaDB REST API, directly
// (http://host:10000) or through the Scylla Manager Agent
// (https://host:10001 with a bearer token). It implements RingSource,
// LocationSource and Cleaner, and is safe for concurrent use.
type Client struct {
	base     string
	token    string
	http     *http.Client
	maxReply int64
}

// NewClient checks baseURL and returns a client for it.
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("tokenring: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("tokenring: base URL %q: want http(s)://host:port", baseURL)
	}
	if opts.AuthToken != "" && u.Scheme != "https" {
		return nil, fmt.Errorf("tokenring: base URL %q: refusing to send the agent's bearer token without TLS", baseURL)
	}
	c := &Client{
		base:     strings.TrimSuffix(u.String(), "/"),
		token:    opts.AuthToken,
		http:     opts.HTTPClient,
		maxReply: opts.MaxReplyBytes,
	}
	if c.maxReply <= 0 {
		c.maxReply = DefaultMaxReplyBytes
	}
	if c.http == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = opts.TLSConfig
		c.http = &http.Client{Transport: transport}
	}
	return c, nil
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

// CleanupKeyspace implements Cleaner.
func (c *Client) CleanupKeyspace(ctx context.Context, keyspace string) error {
	if keyspace == "" {
		return errors.New("tokenring: CleanupKeyspace: empty keyspace")
	}
	return c.call(ctx, http.MethodPost, "/storage_service/keyspace_cleanup/"+url.PathEscape(keyspace), nil, nil)
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

	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxReply+1))
	if err != nil {
		return fmt.Errorf("tokenring: %s %s: reading reply: %w", method, path, err)
	}
	if int64(len(body)) > c.maxReply {
		return fmt.Errorf("tokenring: %s %s: %w: more than %d bytes", method, path, ErrReplyTooLarge, c.maxReply)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: errorMessage(body)}
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("tokenring: %s %s: %w: %v", method, path, ErrMalformedReply, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("tokenring: %s %s: %w: data after the JSON value", method, path, ErrMalformedReply)
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
