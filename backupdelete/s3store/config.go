package s3store

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// The variables of Longhorn's backup-target secret that configure an S3
// target, by the names Longhorn's engine reads them (longhorn/backupstore
// s3/s3.go getCustomCerts; s3/s3_service.go newInstance; the credentials
// and session token through aws-sdk-go-v2's environment configuration,
// which s3_service.go's config.LoadDefaultConfig reads; the proxies
// through Go's http.ProxyFromEnvironment, which the transport that
// longhorn/backupstore http/client.go GetClient clones from
// http.DefaultTransport consults).
const (
	EnvAccessKeyID        = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey    = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken       = "AWS_SESSION_TOKEN"
	EnvRegion             = "AWS_REGION" // used when the URL names no region
	EnvEndpoints          = "AWS_ENDPOINTS"
	EnvCert               = "AWS_CERT"
	EnvVirtualHostedStyle = "VIRTUAL_HOSTED_STYLE"
	EnvHTTPProxy          = "HTTP_PROXY"
	EnvHTTPSProxy         = "HTTPS_PROXY"
	EnvNoProxy            = "NO_PROXY"
)

// ErrConfig is wrapped by every *ConfigError.
var ErrConfig = errors.New("s3store: invalid configuration")

// ConfigError says which part of an Options (or target URL) is wrong. It
// never holds a credential.
type ConfigError struct {
	Field  string // "URL", "Endpoint", "CACert", ...
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("s3store: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Target is a parsed backup target URL.
type Target struct {
	// Bucket is the S3 bucket.
	Bucket string
	// Region is the region named in the URL ("" when the URL has none:
	// Longhorn then takes AWS_REGION).
	Region string
	// Prefix is the key prefix every object of the backupstore lives
	// under, without leading slashes (Longhorn trims them: "leading '/'
	// can cause mystery problems for s3"). The layout's paths are joined
	// to it as Longhorn's updatePath does (path.Join), so a trailing
	// slash is dropped.
	Prefix string
}

// String is the URL as Longhorn prints it: s3://bucket[@region]/prefix.
func (t Target) String() string {
	s := "s3://" + t.Bucket
	if t.Region != "" {
		s += "@" + t.Region
	}
	return s + "/" + t.Prefix
}

// ParseURL parses a backup target URL exactly as Longhorn's S3 driver
// does (longhorn/backupstore s3/s3.go initFunc and s3/s3_service.go
// newService): s3://bucket@region/path, or s3://bucket/path with the
// region from AWS_REGION. The scheme must be s3; the bucket and the path
// must not be empty (a path of "/" is accepted, as there, and means the
// bucket's root); leading slashes are trimmed from the path, and a
// trailing one dropped. A path with empty, "." or ".." elements inside is
// refused: Longhorn's filepath.Join would silently clean it into another
// prefix. A URL with a password (s3://bucket:secret@region/) is refused, so that a credential
// never rides in a URL that gets logged.
func ParseURL(raw string) (_ Target, err error) {
	defer prefixErr(&err)
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input in its error; the input may hold a
		// password, so say only what kind of error it was.
		return Target{}, &ConfigError{Field: "URL", Reason: "not a URL"}
	}
	if u.Scheme != "s3" {
		return Target{}, &ConfigError{Field: "URL", Reason: fmt.Sprintf("scheme %q, want s3", u.Scheme)}
	}
	var t Target
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return Target{}, &ConfigError{Field: "URL", Reason: "a password in the URL; pass credentials in the Options"}
		}
		t.Region, t.Bucket = u.Host, u.User.Username()
	} else {
		t.Bucket = u.Host
	}
	if t.Bucket == "" || u.Path == "" {
		return Target{}, &ConfigError{Field: "URL", Reason: "must be either s3://bucket@region/path/, or s3://bucket/path"}
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Target{}, &ConfigError{Field: "URL", Reason: "a query or fragment, which Longhorn would take as part of no key"}
	}
	t.Prefix = strings.TrimLeft(u.Path, "/")
	if strings.Contains(t.Prefix, "//") || strings.Contains("/"+t.Prefix+"/", "/../") || strings.Contains("/"+t.Prefix+"/", "/./") {
		return Target{}, &ConfigError{Field: "URL", Reason: "the path has empty, . or .. elements"}
	}
	t.Prefix = strings.TrimSuffix(t.Prefix, "/")
	return t, nil
}

// Options is everything a Store needs to reach its bucket, and how it
// behaves there. OptionsFromEnv fills the connection from the variables
// of Longhorn's backup-target secret; the tuning fields' zero values are
// the documented defaults. The credentials are never logged, never part
// of an error and never in Stats.
type Options struct {
	// URL is the backup target, s3://bucket@region/path (see ParseURL).
	URL string
	// Region is used when the URL names none (Longhorn: AWS_REGION). With
	// neither, "us-east-1".
	Region string

	// AccessKeyID and SecretAccessKey sign every request (AWS signature
	// version 4). Both or neither: neither sends anonymous requests.
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken goes with temporary credentials (AWS STS); optional.
	SessionToken string

	// Endpoint is the S3 service's base URL for an S3-compatible store
	// (MinIO, Ceph RGW, versitygw...), e.g. "https://minio.example:9000";
	// empty means AWS. Longhorn: AWS_ENDPOINTS.
	Endpoint string
	// CACert is extra PEM certificates trusted besides the system's, for
	// an endpoint with a private CA. Longhorn: AWS_CERT.
	CACert []byte
	// VirtualHostedStyle is Longhorn's VIRTUAL_HOSTED_STYLE: "true" puts
	// the bucket in the host name (bucket.endpoint), "false" in the path
	// (endpoint/bucket). Empty: path style with a custom Endpoint,
	// virtual-hosted style on AWS, as Longhorn decides.
	VirtualHostedStyle string

	// HTTPProxy, HTTPSProxy and NoProxy are the proxy settings for plain
	// and TLS endpoints, and the hosts that bypass them, with the meaning
	// of the variables of the same names (see net/http's
	// ProxyFromEnvironment). Empty: no proxy.
	HTTPProxy  string
	HTTPSProxy string
	NoProxy    string

	// DialContext, if set, opens the store's TCP connections (to the
	// endpoint, or to the proxy when one is used) instead of a net.Dialer
	// with a 10 s timeout: for a host with a dialer or resolver of its own
	// (a service mesh, a fixed address for the endpoint's name), and for
	// tests that resolve a bucket's virtual host name to a local server.
	// TLS, the proxies and the bounds on responses apply as without it.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// The fields below tune the store; their zero values are the
	// documented defaults.

	// Clock times the lock protocol (the settle wait, lock expiry,
	// refresh, waiting for a conflicting lock) and the waits between
	// retries; default the real clock.
	Clock clock.Clock
	// LockWait is how long a deletion waits for a conflicting lock
	// before failing with backupdelete.ErrLocked. Zero fails after the
	// first look, about LockSettle after the attempt, as Longhorn's
	// FileLock.Lock does.
	LockWait time.Duration
	// LockCheckInterval is how often a waiting taker looks again;
	// default 10 s.
	LockCheckInterval time.Duration
	// MaxConfigBytes bounds the size of a cfg object read; a larger one
	// is corrupt. Default 256 MiB, as fsstore's.
	MaxConfigBytes int64
	// FullCollection makes every deletion list all block objects of the
	// volume, as Longhorn does. By default only the deleted backup's
	// blocks are candidates (see the package documentation).
	FullCollection bool

	// RequestTimeout bounds each request (each attempt of it), reading
	// its response included; default 30 s.
	RequestTimeout time.Duration
	// MaxAttempts is how many times a request is tried when it fails
	// with a retryable error (503 SlowDown, a 500, a timeout, a dropped
	// connection); default 5.
	MaxAttempts int
	// RetryInitial and RetryMax are the backoff between attempts:
	// RetryInitial doubling up to RetryMax; default 200 ms and 5 s.
	RetryInitial time.Duration
	RetryMax     time.Duration
	// DeleteConcurrency bounds the single-object deletes in flight where
	// the server has no multi-object delete; default 8 (Longhorn's
	// maxConcurrentExactFileRemovals, s3/s3.go). It also bounds the cfg
	// reads of a collection in flight.
	DeleteConcurrency int
	// ListPageSize is the MaxKeys of each listing request; default (and
	// at most) 1000, S3's page size. A listing of a volume's backups that
	// ends on a page of exactly this many keys is listed again in pages
	// half as large, which must agree (see the package documentation,
	// "Listings that lie").
	ListPageSize int
	// MaxResponseBytes bounds the body of every response other than an
	// object read (a listing page, a multi-object delete's result, an
	// error); default 16 MiB. Going over is ErrTooLarge and
	// backupdelete.ErrCorrupt: a hostile or broken server cannot make a
	// listing eat the memory.
	MaxResponseBytes int64
	// MaxListPages bounds the pages of one listing; default 100,000
	// (100 million keys at S3's 1000 a page: a volume's blocks of 2 MiB
	// each up to 200 TiB). Going over is ErrTooLarge and
	// backupdelete.ErrCorrupt: a server whose listing never ends, each
	// page with a new continuation token, cannot keep a deletion
	// listing until its context ends.
	MaxListPages int
}

// OptionsFromEnv builds the Options for the target URL from the variables of
// Longhorn's backup-target secret, read through getenv (os.Getenv, or a
// lookup in the secret's data). Only the variables named by the Env
// constants are read. It checks nothing: New does.
func OptionsFromEnv(targetURL string, getenv func(string) string) Options {
	c := Options{
		URL:                targetURL,
		Region:             getenv(EnvRegion),
		AccessKeyID:        getenv(EnvAccessKeyID),
		SecretAccessKey:    getenv(EnvSecretAccessKey),
		SessionToken:       getenv(EnvSessionToken),
		Endpoint:           getenv(EnvEndpoints),
		VirtualHostedStyle: getenv(EnvVirtualHostedStyle),
		HTTPProxy:          getenv(EnvHTTPProxy),
		HTTPSProxy:         getenv(EnvHTTPSProxy),
		NoProxy:            getenv(EnvNoProxy),
	}
	if cert := getenv(EnvCert); cert != "" {
		c.CACert = []byte(cert)
	}
	return c
}

// checked is an Options that passed check.
type checked struct {
	target                Target
	region                string
	endpoint              *url.URL // nil: AWS
	pathStyle             bool
	roots                 *x509.CertPool // nil: the system's
	httpProxy, httpsProxy *url.URL
	noProxy               []string
	dial                  func(ctx context.Context, network, addr string) (net.Conn, error)
}

// check validates everything up front, so that a wrong setting is a
// ConfigError at New, not a puzzling failure at the first request.
func (c Options) check() (checked, error) {
	var k checked
	var err error
	if k.target, err = ParseURL(c.URL); err != nil {
		return k, err
	}
	k.region = k.target.Region
	if k.region == "" {
		k.region = c.Region
	}
	if k.region == "" {
		k.region = "us-east-1"
	}
	if strings.ContainsAny(k.region, "/?#@: \t\r\n") {
		return k, &ConfigError{Field: "Region", Reason: fmt.Sprintf("%q is not a region name", k.region)}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return k, &ConfigError{Field: "credentials", Reason: "an access key ID and a secret access key go together: one of them is empty"}
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		return k, &ConfigError{Field: "credentials", Reason: "a session token without an access key"}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return k, &ConfigError{Field: "Endpoint", Reason: "want http(s)://host[:port][/path], with no user information"}
		}
		k.endpoint = u
	}
	switch c.VirtualHostedStyle {
	case "true":
		k.pathStyle = false
	case "false":
		k.pathStyle = true
	case "":
		k.pathStyle = k.endpoint != nil
	default:
		return k, &ConfigError{Field: "VirtualHostedStyle", Reason: fmt.Sprintf("%q, want \"true\", \"false\" or empty", c.VirtualHostedStyle)}
	}
	if len(c.CACert) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(c.CACert) {
			return k, &ConfigError{Field: "CACert", Reason: "no PEM certificate could be read"}
		}
		k.roots = pool
	}
	for _, p := range []struct {
		field, val string
		dst        **url.URL
	}{{"HTTPProxy", c.HTTPProxy, &k.httpProxy}, {"HTTPSProxy", c.HTTPSProxy, &k.httpsProxy}} {
		if p.val == "" {
			continue
		}
		u, err := parseProxy(p.val)
		if err != nil {
			return k, &ConfigError{Field: p.field, Reason: err.Error()}
		}
		*p.dst = u
	}
	for _, n := range strings.Split(c.NoProxy, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			k.noProxy = append(k.noProxy, n)
		}
	}
	if err := c.checkTuning(); err != nil {
		return k, err
	}
	k.dial = c.DialContext
	return k, nil
}

// parseProxy reads a proxy setting as ProxyFromEnvironment does: a bare
// host:port means http://host:port. Its error never repeats the value,
// which may hold a proxy password.
func parseProxy(v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		if u2, err2 := url.Parse("http://" + v); err2 == nil && u2.Host != "" {
			return u2, nil
		}
		return nil, errors.New("not a proxy URL")
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
		return u, nil
	}
	return nil, fmt.Errorf("proxy scheme %q", u.Scheme)
}

// useProxy is NO_PROXY's rule as net/http applies it (golang.org/x/net
// http/httpproxy): "*" bypasses every proxy; an entry matches the host
// itself and, as a domain (with or without a leading dot), its
// subdomains; an IP address or CIDR range matches addresses; an entry
// with a port matches only that port. Loopback hosts never use a proxy.
func useProxy(noProxy []string, host, port string) bool {
	host = strings.ToLower(host)
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return false
	}
	for _, n := range noProxy {
		if n == "*" {
			return false
		}
		np := ""
		if h, p, err := net.SplitHostPort(n); err == nil {
			n, np = h, p
		}
		if np != "" && np != port {
			continue
		}
		if _, cidr, err := net.ParseCIDR(n); err == nil {
			if ip != nil && cidr.Contains(ip) {
				return false
			}
			continue
		}
		if nip := net.ParseIP(n); nip != nil {
			if ip != nil && nip.Equal(ip) {
				return false
			}
			continue
		}
		d := strings.TrimPrefix(strings.TrimPrefix(n, "*"), ".")
		if host == d || strings.HasSuffix(host, "."+d) {
			return false
		}
	}
	return true
}

// portOf is the port of a URL, defaulted from its scheme.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return strconv.Itoa(80)
}

// String prints the Options' connection with its credentials redacted, so that a host
// that logs it (%v, %+v, %s) leaks nothing.
func (c Options) String() string {
	red := func(s string) string {
		if s == "" {
			return ""
		}
		return "[REDACTED]"
	}
	return fmt.Sprintf("{URL:%s Region:%s AccessKeyID:%s SecretAccessKey:%s SessionToken:%s Endpoint:%s CACert:%d bytes VirtualHostedStyle:%s HTTPProxy:%s HTTPSProxy:%s NoProxy:%s}",
		c.URL, c.Region, red(c.AccessKeyID), red(c.SecretAccessKey), red(c.SessionToken), c.Endpoint, len(c.CACert),
		c.VirtualHostedStyle, redactURL(c.HTTPProxy), redactURL(c.HTTPSProxy), c.NoProxy)
}

// GoString is String, for %#v.
func (c Options) GoString() string { return "s3store.Options" + c.String() }

// redactURL hides a proxy setting's password. It reads the setting as
// parseProxy does, so that a bare user:password@host:port (which
// url.Parse takes for a scheme "user" and an opaque rest) is redacted
// too; a setting it cannot read is hidden whole if it may hold user
// information.
func redactURL(v string) string {
	if v == "" {
		return ""
	}
	u, err := parseProxy(v)
	if err != nil {
		if strings.Contains(v, "@") {
			return "[REDACTED]"
		}
		return v
	}
	if u.User == nil {
		return v
	}
	return u.Redacted()
}
