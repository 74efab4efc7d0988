package mgmtapi

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
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/clocks"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// Defaults of Options.
const (
	// DefaultPollInterval is how often a running job's status is read:
	// a cleanup takes minutes to hours, and each read is one CQL call
	// inside the node.
	DefaultPollInterval = 5 * time.Second
	// DefaultMaxReplyBytes bounds reply bodies: a keyspace list of ten
	// thousand long names fits many times over.
	DefaultMaxReplyBytes = 4 << 20
	// DefaultPollFailures is how many status reads in a row may fail
	// (network, HTTP 5xx) before CleanupKeyspace gives up on a job.
	DefaultPollFailures = 3
)

// Paths of the Management API this package calls, from
// k8ssandra/management-api-for-apache-cassandra's management-api-server.
const (
	// cleanupPath: resources/v1/KeyspaceOpsResources.java, cleanup
	// ("cleanup_v1"): POST a KeyspaceRequest, HTTP 202 with the job ID as
	// text/plain.
	cleanupPath = "/api/v1/ops/keyspace/cleanup"
	// jobPath: resources/K8OperatorResources.java, getJobStatus: GET
	// ?job_id=, HTTP 200 with a JSON map of strings, 404 with {} for a job
	// the executor does not know.
	jobPath = "/api/v0/ops/executor/job"
	// keyspacesPath: resources/KeyspaceOpsResources.java, list: GET
	// [?keyspaceName=], a JSON array of names.
	keyspacesPath = "/api/v0/ops/keyspace"
	// replicationPath: resources/KeyspaceOpsResources.java,
	// getReplication: GET ?keyspaceName=, the keyspace's replication map
	// from system_schema.keyspaces, or 404.
	replicationPath = "/api/v0/ops/keyspace/replication"
)

// Job statuses (management-api-agent-common util/Job.java, JobStatus).
const (
	statusWaiting   = "WAITING"
	statusCompleted = "COMPLETED"
	statusError     = "ERROR"
)

// Errors of this package, for errors.Is. The package also reports
// tokenring's classes: tokenring.ErrKeyspaceNotFound, ErrMalformedReply,
// ErrTooLarge, ErrRedirect, ErrInvalidURL, and *tokenring.APIError for a
// non-2xx reply; tokenring.IsRetryable classifies every error.
var (
	// ErrJobNotFound: the node no longer knows the cleanup job it started
	// (HTTP 404 for its ID). The Management API keeps jobs in the memory
	// of the agent inside Cassandra, at most 1000 of them
	// (util/JobExecutor.java): a Cassandra restart or a thousand later
	// jobs lose it. Whether it finished is unknown, so the cleanup is not
	// done; a cleanup may be run again (IsRetryable is true).
	ErrJobNotFound = errors.New("mgmtapi: cleanup job vanished")
)

// JobError is a cleanup job that ended with status ERROR and the keyspace
// still exists. Message is the job's "error" field: the failure's message
// as the node's Java code wrote it. tokenring.IsRetryable reports true.
type JobError struct {
	JobID    string
	Keyspace string
	Message  string
}

// Error implements error.
func (e *JobError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "(no error message)"
	}
	return fmt.Sprintf("mgmtapi: cleanup job %s of keyspace %q failed: %s", e.JobID, e.Keyspace, msg)
}

// Options configure New; the zero value talks plain HTTP and polls every
// DefaultPollInterval on the real clock.
type Options struct {
	// TLSConfig is used for https (the Management API's mutual TLS); nil
	// means the system roots and no client certificate.
	TLSConfig *tls.Config
	// HTTPClient replaces the default client (TLSConfig is then unused).
	// The Cleaner uses a copy that never follows redirects. ctx bounds
	// each request; there is no overall timeout.
	HTTPClient *http.Client
	// MaxReplyBytes bounds every reply body; 0 means DefaultMaxReplyBytes.
	MaxReplyBytes int64
	// PollInterval is the wait between two reads of a running job's
	// status; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// PollFailures is how many status reads in a row may fail with a
	// retryable error before the job is given up; 0 means
	// DefaultPollFailures, negative means none may.
	PollFailures int
	// Jobs is the "jobs" of each cleanup request: how many of the
	// keyspace's tables Cassandra cleans at once. 0 means 1, as the
	// Management API itself reads 0 (models/KeyspaceRequest.java).
	Jobs int
	// Clock paces the polling; nil is the real clock.
	Clock clock.Clock
}

// Cleaner runs one Cassandra node's cleanup through its Management API
// for Apache Cassandra (k8ssandra's management-api, on port 8080 of each
// pod). It implements tokenring.Cleaner, and is safe for concurrent use.
type Cleaner struct {
	base         string
	http         *http.Client
	maxReply     int64
	interval     time.Duration
	pollFailures int
	jobs         int
	clock        clock.Clock

	mu      sync.Mutex
	pending map[string]bool // cleanup jobs started here and not yet seen ended
}

var _ tokenring.Cleaner = (*Cleaner)(nil)

// New checks baseURL (http or https, a host, an optional path prefix; no
// credentials, query or fragment: an error wrapping
// tokenring.ErrInvalidURL) and returns a Cleaner for it.
func New(baseURL string, opts Options) (*Cleaner, error) {
	u, err := url.Parse(baseURL)
	shown := baseURL
	if at := strings.LastIndexByte(shown, '@'); at >= 0 {
		shown = "<redacted>" + shown[at:] // never echo what may be a password
	}
	invalid := func(why string) error {
		return fmt.Errorf("mgmtapi: base URL %q: %w: %s", shown, tokenring.ErrInvalidURL, why)
	}
	switch {
	case err != nil || !strings.Contains(baseURL, "://"):
		return nil, invalid("want http://host:8080")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, invalid("scheme must be http or https")
	case u.User != nil:
		return nil, invalid("credentials are not supported")
	case u.Host == "":
		return nil, invalid("no host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, invalid("a query or fragment is not allowed")
	}
	c := &Cleaner{
		base:         strings.TrimSuffix(u.String(), "/"),
		maxReply:     opts.MaxReplyBytes,
		interval:     opts.PollInterval,
		pollFailures: opts.PollFailures,
		jobs:         max(opts.Jobs, 1),
		clock:        clocks.Or(opts.Clock),
	}
	if c.maxReply <= 0 {
		c.maxReply = DefaultMaxReplyBytes
	}
	if c.interval <= 0 {
		c.interval = DefaultPollInterval
	}
	switch {
	case c.pollFailures == 0:
		c.pollFailures = DefaultPollFailures
	case c.pollFailures < 0:
		c.pollFailures = 0
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	} else {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = opts.TLSConfig
		hc.Transport = transport
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	return c, nil
}

// StopCleanups implements tokenring.Cleaner. The Management API has no
// operation that stops a compaction (none in its v0, v1 or v2 resources),
// so it waits instead: it returns nil once every cleanup job this Cleaner
// started has ended (COMPLETED or ERROR, or forgotten by a node that
// restarted), reading each one's status every PollInterval, and ctx's
// error if ctx ends first. So a nil return proves that no cleanup this
// Cleaner started runs on the node, which is what tokenring's
// CleanupDriver asks before a node whose cleanup failed stops holding the
// nodes that share its ranges. A job started by another process (an
// earlier run of the host) is not known here; a new job waits behind it in
// the agent's one-thread job executor, reported WAITING, which
// CleanupKeyspace waits out like any other. CleanerFor gives one Cleaner
// per endpoint, so its jobs are known across attempts.
func (c *Cleaner) StopCleanups(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mgmtapi: stop cleanups: %w", err)
		}
		c.mu.Lock()
		ids := make([]string, 0, len(c.pending))
		for id := range c.pending {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		if len(ids) == 0 {
			return nil
		}
		slices.Sort(ids)
		for _, id := range ids {
			status, _, err := c.jobStatus(ctx, id)
			if (err == nil && status != statusWaiting) || errors.Is(err, ErrJobNotFound) {
				c.ended(id)
			}
		}
		c.mu.Lock()
		left := len(c.pending)
		c.mu.Unlock()
		if left == 0 {
			return nil
		}
		t := c.clock.NewTimer(c.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("mgmtapi: stop cleanups: %d cleanup job(s) still running, and the Management API cannot stop them: %w", left, ctx.Err())
		case <-t.C():
		}
	}
}

// started and ended track the cleanup jobs this Cleaner started.
func (c *Cleaner) started(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]bool{}
	}
	c.pending[id] = true
}

func (c *Cleaner) ended(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}

// CleanupKeyspaces implements tokenring.Cleaner: the keyspaces the node
// lists, in its order, without those whose replication class is
// LocalStrategy (system, system_schema): the keyspaces Cassandra's own
// cleanup of every keyspace visits (StorageService
// getNonLocalStrategyKeyspaces, which the Management API calls for a
// blank keyspace_name). Replicated system keyspaces (system_auth,
// system_distributed, system_traces) are listed: a node that lost ranges
// keeps their rows too. A keyspace dropped between the listing and the
// replication read (HTTP 404 "Get keyspace replication failed. Keyspace
// '<name>' does not exist.") is left out.
func (c *Cleaner) CleanupKeyspaces(ctx context.Context) ([]string, error) {
	names, err := c.listKeyspaces(ctx, "")
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, ks := range names {
		if isLocalSystemKeyspace(ks) {
			continue
		}
		local, err := c.isLocalStrategy(ctx, ks)
		switch {
		case errors.Is(err, tokenring.ErrKeyspaceNotFound):
			continue
		case err != nil:
			return nil, err
		case !local:
			out = append(out, ks)
		}
	}
	return out, nil
}

// CleanupKeyspace implements tokenring.Cleaner. It asks whether the
// keyspace exists (an empty listing for it is tokenring.ErrKeyspaceNotFound,
// and no job starts), starts the cleanup job, then reads the job's status
// every PollInterval until it ends:
//
//   - COMPLETED, for the job ID it was given, is the only success;
//   - ERROR fails: a keyspace the node no longer lists then is
//     tokenring.ErrKeyspaceNotFound (dropped during the cleanup), anything
//     else a *JobError;
//   - a 404 for the job is ErrJobNotFound, never success;
//   - a status read that fails retryably (network, 5xx) is tried again on
//     the next tick, up to PollFailures in a row.
//
// A reply that is not the documented shape (a job ID that is not a UUID,
// a status map with another ID, an unknown status, a non-string value) is
// tokenring.ErrMalformedReply. When ctx ends the call returns ctx's error;
// the job goes on inside the node. The Management API answers system and
// system_schema with HTTP 200 "OK" and no job (nothing to clean): that is
// success for those two names only.
//
// A COMPLETED job proves that Cassandra's forceKeyspaceCleanup returned
// without an exception; the agent discards the status it returns
// (NodeOpsProvider.forceKeyspaceCleanup), so a cleanup Cassandra counted
// as aborted also reads COMPLETED. Nothing in the API tells them apart.
func (c *Cleaner) CleanupKeyspace(ctx context.Context, keyspace string) error {
	if keyspace == "" {
		return errors.New("mgmtapi: CleanupKeyspace: empty keyspace")
	}
	if err := c.exists(ctx, keyspace); err != nil {
		return err
	}
	id, err := c.startCleanup(ctx, keyspace)
	if err != nil || id == "" {
		return err
	}
	c.started(id)
	return c.await(ctx, keyspace, id)
}

// startCleanup posts the cleanup request and returns the job's ID ("" for
// the API's "OK" to a local system keyspace).
func (c *Cleaner) startCleanup(ctx context.Context, keyspace string) (string, error) {
	req, _ := json.Marshal(struct {
		KeyspaceName string   `json:"keyspace_name"`
		Tables       []string `json:"tables"`
		Jobs         int      `json:"jobs"`
	}{keyspace, []string{}, c.jobs})
	status, body, err := c.do(ctx, http.MethodPost, cleanupPath, nil, req, "text/plain")
	if err != nil {
		return "", err
	}
	reply := strings.TrimSpace(string(body))
	switch {
	case status == http.StatusOK && reply == "OK" && isLocalSystemKeyspace(keyspace):
		return "", nil
	case status != http.StatusAccepted:
		return "", fmt.Errorf("mgmtapi: POST %s: %w: want HTTP 202 and a job ID, got HTTP %d %q", cleanupPath, tokenring.ErrMalformedReply, status, shorten(reply))
	case !isUUID(reply):
		return "", fmt.Errorf("mgmtapi: POST %s: %w: job ID %q is not a UUID", cleanupPath, tokenring.ErrMalformedReply, shorten(reply))
	}
	return reply, nil
}

// await polls the job until it ends, ctx ends, or the reads keep failing.
func (c *Cleaner) await(ctx context.Context, keyspace, id string) error {
	failures := 0
	for {
		status, msg, err := c.jobStatus(ctx, id)
		if (err == nil && status != statusWaiting) || errors.Is(err, ErrJobNotFound) {
			c.ended(id)
		}
		switch {
		case err == nil && status == statusCompleted:
			return nil
		case err == nil && status == statusError:
			// Was the keyspace dropped under the job? Only the node's own
			// listing proves it; the message is Java's and is not parsed.
			if exErr := c.exists(ctx, keyspace); errors.Is(exErr, tokenring.ErrKeyspaceNotFound) {
				return fmt.Errorf("%w (cleanup job %s failed: %s)", exErr, id, shorten(msg))
			} else if exErr != nil && ctx.Err() != nil {
				return exErr
			}
			return &JobError{JobID: id, Keyspace: keyspace, Message: msg}
		case err == nil:
			failures = 0 // still waiting
		case ctx.Err() != nil || !tokenring.IsRetryable(err) || errors.Is(err, ErrJobNotFound):
			return err
		default:
			failures++
			if failures > c.pollFailures {
				return fmt.Errorf("mgmtapi: cleanup job %s of keyspace %q: %d status reads in a row failed, the last: %w", id, keyspace, failures, err)
			}
		}
		t := c.clock.NewTimer(c.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("mgmtapi: waiting for cleanup job %s of keyspace %q: %w", id, keyspace, ctx.Err())
		case <-t.C():
		}
	}
}

// jobStatus reads one job's status and error message. Releases of the
// Management API before getJobStatus checked for a missing job answer an
// unknown ID with HTTP 500 (the agent dereferenced the null job in
// NodeOpsProvider.getJobStatus): that reads as failing status reads, and
// await gives the job up after PollFailures of them, retryably.
func (c *Cleaner) jobStatus(ctx context.Context, id string) (string, string, error) {
	q := url.Values{"job_id": {id}}
	status, body, err := c.do(ctx, http.MethodGet, jobPath, q, nil, "application/json")
	var apiErr *tokenring.APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		return "", "", fmt.Errorf("mgmtapi: GET %s?job_id=%s: %w: the node does not know the job (Cassandra restarted, or the job left the executor's cache)", jobPath, id, ErrJobNotFound)
	}
	if err != nil {
		return "", "", err
	}
	if status != http.StatusOK {
		return "", "", fmt.Errorf("mgmtapi: GET %s: %w: want HTTP 200, got %d", jobPath, tokenring.ErrMalformedReply, status)
	}
	var job map[string]string
	if err := decodeJSON(body, &job); err != nil {
		return "", "", fmt.Errorf("mgmtapi: GET %s: %w", jobPath, err)
	}
	switch {
	case job["id"] != id:
		return "", "", fmt.Errorf("mgmtapi: GET %s: %w: asked for job %s, got %q", jobPath, tokenring.ErrMalformedReply, id, shorten(job["id"]))
	case job["type"] != "" && job["type"] != "CLEANUP":
		return "", "", fmt.Errorf("mgmtapi: GET %s: %w: job %s is of type %q, not CLEANUP", jobPath, tokenring.ErrMalformedReply, id, shorten(job["type"]))
	}
	switch s := job["status"]; s {
	case statusWaiting, statusCompleted, statusError:
		return s, job["error"], nil
	default:
		return "", "", fmt.Errorf("mgmtapi: GET %s: %w: job %s has status %q; want WAITING, COMPLETED or ERROR", jobPath, tokenring.ErrMalformedReply, id, shorten(s))
	}
}

// exists asks the node whether it has the keyspace; nil if it does, an
// error wrapping tokenring.ErrKeyspaceNotFound if it lists nothing for it.
func (c *Cleaner) exists(ctx context.Context, keyspace string) error {
	names, err := c.listKeyspaces(ctx, keyspace)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == keyspace {
			return nil
		}
	}
	if len(names) > 0 {
		return fmt.Errorf("mgmtapi: GET %s?keyspaceName=%s: %w: listed %q", keyspacesPath, keyspace, tokenring.ErrMalformedReply, names)
	}
	return fmt.Errorf("mgmtapi: keyspace %q: %w: the node lists no such keyspace", keyspace, tokenring.ErrKeyspaceNotFound)
}

// listKeyspaces lists every keyspace, or the one named only.
func (c *Cleaner) listKeyspaces(ctx context.Context, only string) ([]string, error) {
	var q url.Values
	if only != "" {
		q = url.Values{"keyspaceName": {only}}
	}
	status, body, err := c.do(ctx, http.MethodGet, keyspacesPath, q, nil, "application/json")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("mgmtapi: GET %s: %w: want HTTP 200, got %d", keyspacesPath, tokenring.ErrMalformedReply, status)
	}
	var names []string
	if err := decodeJSON(body, &names); err != nil {
		return nil, fmt.Errorf("mgmtapi: GET %s: %w", keyspacesPath, err)
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" || seen[n] {
			return nil, fmt.Errorf("mgmtapi: GET %s: %w: entry %d is empty or repeated", keyspacesPath, tokenring.ErrMalformedReply, i)
		}
		seen[n] = true
	}
	return names, nil
}

// isLocalStrategy reads the keyspace's replication class. A keyspace the
// node says does not exist wraps tokenring.ErrKeyspaceNotFound.
func (c *Cleaner) isLocalStrategy(ctx context.Context, keyspace string) (bool, error) {
	q := url.Values{"keyspaceName": {keyspace}}
	status, body, err := c.do(ctx, http.MethodGet, replicationPath, q, nil, "application/json")
	var apiErr *tokenring.APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound &&
		apiErr.Message == fmt.Sprintf("Get keyspace replication failed. Keyspace '%s' does not exist.", keyspace) {
		return false, fmt.Errorf("mgmtapi: keyspace %q: %w: %w", keyspace, tokenring.ErrKeyspaceNotFound, apiErr)
	}
	if err != nil {
		return false, err
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("mgmtapi: GET %s: %w: want HTTP 200, got %d", replicationPath, tokenring.ErrMalformedReply, status)
	}
	var repl map[string]string
	if err := decodeJSON(body, &repl); err != nil {
		return false, fmt.Errorf("mgmtapi: GET %s?keyspaceName=%s: %w", replicationPath, keyspace, err)
	}
	class := repl["class"]
	if class == "" {
		return false, fmt.Errorf("mgmtapi: GET %s?keyspaceName=%s: %w: no replication class", replicationPath, keyspace, tokenring.ErrMalformedReply)
	}
	return class[strings.LastIndexByte(class, '.')+1:] == string(tokenring.LocalStrategy), nil
}

// do performs one request and returns the status and the bounded body of a
// 2xx reply; anything else is an error: a 3xx or non-2xx reply a
// *tokenring.APIError (redirects are never followed).
func (c *Cleaner) do(ctx context.Context, method, path string, query url.Values, body []byte, accept string) (int, []byte, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("mgmtapi: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("mgmtapi: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := bounded.ReadAll(resp.Body, c.maxReply, "reply to "+method+" "+path)
	if err != nil {
		return 0, nil, fmt.Errorf("mgmtapi: %s %s: reading reply: %w", method, path, err)
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return 0, nil, &tokenring.APIError{Method: method, Path: path, StatusCode: resp.StatusCode,
			Message: "redirect to " + shorten(resp.Header.Get("Location")) + " not followed"}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The API's errors are text/plain (the exception's message); a
		// 404 for a job is an empty JSON map.
		return 0, nil, &tokenring.APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: shorten(strings.TrimSpace(string(data)))}
	}
	return resp.StatusCode, data, nil
}

// decodeJSON decodes exactly one JSON value; null, trailing data and wrong
// types are tokenring.ErrMalformedReply.
func decodeJSON(body []byte, out any) error {
	if string(bytes.TrimSpace(body)) == "null" {
		return fmt.Errorf("%w: null", tokenring.ErrMalformedReply)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %v", tokenring.ErrMalformedReply, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON value", tokenring.ErrMalformedReply)
	}
	return nil
}

// isLocalSystemKeyspace: the two keyspaces the Management API refuses to
// clean (KeyspaceOpsResources.cleanup answers "OK" without a job).
func isLocalSystemKeyspace(ks string) bool {
	return strings.EqualFold(ks, "system") || strings.EqualFold(ks, "system_schema")
}

// isUUID accepts the canonical form java.util.UUID.toString writes, which
// is what the executor's job IDs are.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return false
			}
		case !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F'):
			return false
		}
	}
	return true
}

func shorten(s string) string {
	const keep = 200
	if len(s) > keep {
		return s[:keep] + "..."
	}
	return s
}
