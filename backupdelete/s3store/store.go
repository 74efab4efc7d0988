package s3store

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhstore"
	"github.com/caretaker-storage/caretaker/internal/backoff"
	"github.com/caretaker-storage/caretaker/internal/clocks"
	"k8s.io/utils/clock"
)

// Defaults of Options' tuning fields.
const (
	DefaultMaxConfigBytes    = 256 << 20
	DefaultRequestTimeout    = 30 * time.Second
	DefaultMaxAttempts       = 5
	DefaultRetryInitial      = 200 * time.Millisecond
	DefaultRetryMax          = 5 * time.Second
	DefaultDeleteConcurrency = 8
	DefaultListPageSize      = 1000
	DefaultMaxResponseBytes  = 16 << 20
	DefaultMaxListPages      = 100_000
	// MaxDeleteBatch is S3's limit of keys per DeleteObjects request.
	MaxDeleteBatch = 1000
)

func (o Options) checkTuning() error {
	if o.ListPageSize > DefaultListPageSize {
		return &ConfigError{Field: "ListPageSize", Reason: "more than S3's 1000 keys per page"}
	}
	if o.MaxAttempts < 0 || o.DeleteConcurrency < 0 || o.ListPageSize < 0 || o.RequestTimeout < 0 ||
		o.MaxConfigBytes < 0 || o.MaxResponseBytes < 0 || o.LockWait < 0 || o.LockCheckInterval < 0 || o.MaxListPages < 0 {
		return &ConfigError{Field: "Options", Reason: "a negative duration, size or count"}
	}
	return nil
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.RequestTimeout, DefaultRequestTimeout)
	def(&o.RetryInitial, DefaultRetryInitial)
	def(&o.RetryMax, DefaultRetryMax)
	if o.MaxConfigBytes <= 0 {
		o.MaxConfigBytes = DefaultMaxConfigBytes
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.DeleteConcurrency <= 0 {
		o.DeleteConcurrency = DefaultDeleteConcurrency
	}
	if o.ListPageSize <= 0 {
		o.ListPageSize = DefaultListPageSize
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxListPages <= 0 {
		o.MaxListPages = DefaultMaxListPages
	}
	return o
}

// Store is a backupstore in an S3 bucket, in Longhorn's object layout
// under the target's prefix. It implements backupdelete.Backupstore and
// backupdelete.CompletedBackupDeleter, and has fsstore.Store's reading and
// writing methods, so the two are interchangeable (see Backupstore in
// package backupdelete's examples).
//
// A Store is safe for concurrent use; concurrent deletions in one volume
// coordinate through lock objects, like separate processes would.
type Store struct {
	client *s3.Client
	target Target
	opts   Options
	clock  clock.Clock
	retry  backoff.Policy
	// secrets are redacted from every error text this package makes.
	secrets []string

	stats stats
	// noMultiDelete: the server answered DeleteObjects with
	// NotImplemented once; from then on this Store deletes one object
	// per request.
	noMultiDelete atomic.Bool

	// leaks holds the volumes where a collection of this Store removed
	// a cfg and did not finish (or skipped) deleting its blocks: the
	// next deletion there lists every block object.
	leaks *lhstore.Leaks
}

// New checks opts and returns a Store for its target; a wrong setting is
// a *ConfigError. It sends no request: Check does (Longhorn's driver
// lists the prefix once when it loads, to test the connection).
func New(opts Options) (_ *Store, err error) {
	defer prefixErr(&err)
	cfg := opts
	k, err := cfg.check()
	if err != nil {
		return nil, err
	}
	opts = cfg.withDefaults()
	// The Store keeps only the tuning: the connection is in the client
	// built below, and no copy of a credential stays in opts.
	opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken, opts.CACert = "", "", "", nil
	opts.HTTPProxy, opts.HTTPSProxy, opts.DialContext = "", "", nil
	s := &Store{
		target: k.target,
		opts:   opts,
		clock:  clocks.Or(opts.Clock),
		retry:  backoff.Policy{Initial: opts.RetryInitial, Max: opts.RetryMax},
	}
	secrets := []string{cfg.SecretAccessKey, cfg.SessionToken, cfg.AccessKeyID}
	for _, p := range []*url.URL{k.httpProxy, k.httpsProxy} {
		// A proxy's password could come back in a transport error. A
		// very short one is not searched for: it would mangle every
		// message, and the proxy's String never shows it anyway.
		if p == nil {
			continue
		}
		if pw, ok := p.User.Password(); ok && len(pw) >= 6 {
			secrets = append(secrets, pw, url.QueryEscape(pw))
		}
	}
	for _, sec := range secrets {
		if sec != "" {
			s.secrets = append(s.secrets, sec)
		}
	}
	s.stats.byOp = map[string]*atomic.Int64{}
	s.leaks = lhstore.NewLeaks(true)

	var creds aws.CredentialsProvider = aws.AnonymousCredentials{}
	if cfg.AccessKeyID != "" {
		creds = credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	}
	httpClient := &http.Client{
		Transport: &boundedTransport{next: newTransport(k), limit: opts.MaxResponseBytes},
		// Never follow a redirect: a 3xx is answered to us, and is an
		// error (ErrRedirect). A redirect could lead the signed request,
		// or the next one, to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s.client = s3.New(s3.Options{
		Region:       k.region,
		Credentials:  creds,
		HTTPClient:   httpClient,
		UsePathStyle: k.pathStyle,
		BaseEndpoint: endpointString(k.endpoint),
		// Retries are ours (internal/backoff), counted per attempt.
		Retryer: aws.NopRetryer{},
		// As Longhorn's s3_service.go newInstance: checksums only where
		// the API requires them (DeleteObjects), so that S3-compatible
		// stores without aws-chunked trailers work.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return s, nil
}

func endpointString(u *url.URL) *string {
	if u == nil {
		return nil
	}
	return aws.String(strings.TrimSuffix(u.String(), "/"))
}

// newTransport is http.DefaultTransport's settings with the Options' CA
// and proxies instead of the process environment's.
func newTransport(k checked) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if k.roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: k.roots, MinVersion: tls.VersionTLS12}
	}
	tr.Proxy = func(req *http.Request) (*url.URL, error) {
		p := k.httpProxy
		if req.URL.Scheme == "https" {
			p = k.httpsProxy
		}
		if p == nil || !useProxy(k.noProxy, req.URL.Hostname(), portOf(req.URL)) {
			return nil, nil
		}
		return p, nil
	}
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if k.dial != nil {
		tr.DialContext = k.dial
	}
	return tr
}

// Target returns the parsed target URL.
func (s *Store) Target() Target { return s.target }

// Stats counts a Store's requests. Each attempt of a request counts
// once, under its S3 operation name (ListObjectsV2, GetObject,
// PutObject, DeleteObject, DeleteObjects). It never holds a
// credential.
type Stats struct {
	// Requests is the number of requests sent, by operation.
	Requests map[string]int64
	// Retries is how many of them were retries of a failed attempt.
	Retries int64
	// MultiDeleteUnsupported: the server answered a DeleteObjects with
	// NotImplemented, and this Store now deletes one object per request.
	MultiDeleteUnsupported bool
}

// Total is the number of requests sent.
func (st Stats) Total() int64 {
	var n int64
	for _, v := range st.Requests {
		n += v
	}
	return n
}

// String lists the counts by operation, sorted.
func (st Stats) String() string {
	ops := make([]string, 0, len(st.Requests))
	for op := range st.Requests {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	for i, op := range ops {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(op + "=" + strconv.FormatInt(st.Requests[op], 10))
	}
	return b.String()
}

// Stats returns the requests sent so far.
func (s *Store) Stats() Stats { return s.stats.snapshot(s.noMultiDelete.Load()) }

// ResetStats sets the counts to zero (the multi-delete memory stays).
func (s *Store) ResetStats() { s.stats.reset() }

type stats struct {
	mu      sync.Mutex
	byOp    map[string]*atomic.Int64
	retries atomic.Int64
}

func (st *stats) count(op string, retry bool) {
	st.mu.Lock()
	c := st.byOp[op]
	if c == nil {
		c = new(atomic.Int64)
		st.byOp[op] = c
	}
	st.mu.Unlock()
	c.Add(1)
	if retry {
		st.retries.Add(1)
	}
}

func (st *stats) snapshot(noMulti bool) Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := Stats{Requests: map[string]int64{}, Retries: st.retries.Load(), MultiDeleteUnsupported: noMulti}
	for op, c := range st.byOp {
		if v := c.Load(); v > 0 {
			out.Requests[op] = v
		}
	}
	return out
}

func (st *stats) reset() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.byOp {
		c.Store(0)
	}
	st.retries.Store(0)
}

// String names the Store by its target; printing a Store never shows its
// client or credentials.
func (s *Store) String() string { return "s3store.Store(" + s.target.String() + ")" }

// GoString is String, for %#v.
func (s *Store) GoString() string { return s.String() }
