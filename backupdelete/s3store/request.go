package s3store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Error classes. A *RequestError wraps exactly one of them (and, for
// ErrMalformed and ErrTooLarge, also backupdelete.ErrCorrupt; for a
// missing object, backupdelete.ErrNotFound).
var (
	// ErrAccessDenied: the server refused our credentials or their
	// rights (403, InvalidAccessKeyId, SignatureDoesNotMatch, an expired
	// token). Not retried.
	ErrAccessDenied = errors.New("s3store: access denied")
	// ErrNoSuchBucket: the target's bucket does not exist. Not retried.
	ErrNoSuchBucket = errors.New("s3store: no such bucket")
	// ErrRedirect: the server answered with a redirect (3xx), perhaps to
	// another host. It is never followed. Not retried. It is of
	// caretaker's one redirect class: errors.Is matches it with every
	// other package's ErrRedirect.
	ErrRedirect = errclass.New("s3store", "redirect refused", errclass.ErrRedirect)
	// ErrUnreachable: the endpoint could not be reached (no such host,
	// connection refused after every attempt, a TLS failure).
	ErrUnreachable = errors.New("s3store: endpoint unreachable")
	// ErrUnavailable: the server kept failing (503 SlowDown, 500s,
	// timeouts, dropped connections) for every attempt.
	ErrUnavailable = errors.New("s3store: server unavailable")
	// ErrNotImplemented: the server does not implement the operation.
	ErrNotImplemented = errors.New("s3store: not implemented by the server")
	// ErrMalformed: the server's answer is not what S3 answers (bad XML,
	// a listing outside its prefix, a pagination that does not advance,
	// an object shorter than its length). A *RequestError of this class
	// also wraps backupdelete.ErrCorrupt. It is of caretaker's one
	// malformed-input class: errors.Is matches it with
	// backupdelete.ErrCorrupt and every other package's sentinel of the
	// class, and the other way round.
	ErrMalformed = errclass.New("s3store", "malformed answer", errclass.ErrMalformed)
	// ErrTooLarge is caretaker's one "too large" (bounded.ErrTooLarge):
	// an object or a response over its bound. It also wraps
	// backupdelete.ErrCorrupt.
	ErrTooLarge = bounded.ErrTooLarge
	// ErrRequest: any other error answer of the server.
	ErrRequest = errors.New("s3store: request failed")
)

// RequestError is a request that failed: which operation on which key
// (relative to the bucket), what the server answered, and the class. Its
// text never holds a credential.
type RequestError struct {
	Op     string // the S3 operation: GetObject, ListObjectsV2...
	Key    string // the object key or listing prefix; "" for none
	Status int    // the HTTP status, 0 when no answer came
	Code   string // the S3 error code (AccessDenied, SlowDown...), if any
	Class  error  // one of the Err classes above
	// Attempts is how many times the request was sent.
	Attempts int
	msg      string
	extra    []error
	retry    bool // another attempt may succeed
}

func (e *RequestError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s3store: %s %s: %s", e.Op, e.Key, strings.TrimPrefix(e.Class.Error(), "s3store: "))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d", e.Status)
		if e.Code != "" {
			fmt.Fprintf(&b, " %s", e.Code)
		}
		b.WriteString(")")
	} else if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.msg != "" {
		b.WriteString(": " + e.msg)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the class, and backupdelete.ErrCorrupt or
// backupdelete.ErrNotFound where they apply.
func (e *RequestError) Unwrap() []error { return append([]error{e.Class}, e.extra...) }

// retryable reports whether another attempt may succeed.
func (e *RequestError) retryable() bool { return e.retry || e.Class == ErrUnavailable }

// call sends one request with f, retrying retryable failures with
// backoff, each attempt bounded by RequestTimeout and counted under op.
// Nothing is sent once ctx has ended; a wait between attempts ends with
// ctx. The error is a *RequestError, or ctx's error.
func (s *Store) call(ctx context.Context, op, key string, f func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.stats.count(op, attempt > 1)
		actx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		err := f(actx)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		re := s.classify(op, key, err, timedOut)
		re.Attempts = attempt
		if !re.retryable() || attempt >= s.opts.MaxAttempts {
			return re
		}
		if err := s.wait(ctx, s.retry.Delay(attempt)); err != nil {
			return err
		}
	}
}

// classify turns an SDK error into a *RequestError.
func (s *Store) classify(op, key string, err error, timedOut bool) *RequestError {
	re := &RequestError{Op: op, Key: key, Class: ErrRequest}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.Response != nil {
		re.Status = respErr.HTTPStatusCode()
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		re.Code = apiErr.ErrorCode()
		re.msg = apiErr.ErrorMessage()
	}
	var tooLarge *bounded.TooLargeError
	var deser *smithy.DeserializationError
	var netErr net.Error
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.As(err, &tooLarge):
		re.Class, re.msg = ErrTooLarge, tooLarge.Error()
		re.extra = []error{backupdelete.ErrCorrupt}
	case re.Status >= 300 && re.Status < 400:
		re.Class = ErrRedirect
		re.msg = "the server redirected the request; redirects are never followed (check the endpoint and the region)"
	case re.Code == "NoSuchBucket":
		re.Class = ErrNoSuchBucket
	case re.Code == "NoSuchKey" || (re.Status == http.StatusNotFound && re.Code != "NoSuchBucket" && op != "ListObjectsV2"):
		re.Class = ErrRequest
		re.extra = []error{backupdelete.ErrNotFound}
	case re.Status == http.StatusForbidden || re.Status == http.StatusUnauthorized ||
		oneOf(re.Code, "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "AuthorizationHeaderMalformed"):
		re.Class = ErrAccessDenied
	case re.Status == http.StatusNotImplemented || re.Code == "NotImplemented":
		re.Class = ErrNotImplemented
	case re.Status >= 500 || oneOf(re.Code, "SlowDown", "InternalError", "RequestTimeout", "ServiceUnavailable"):
		re.Class = ErrUnavailable
	case errors.As(err, &deser) || errors.Is(err, errMalformed):
		re.Class = ErrMalformed
		re.extra = []error{backupdelete.ErrCorrupt}
		if re.msg == "" {
			re.msg = "the server's answer could not be read as S3's"
		}
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr):
		re.Class, re.msg = ErrUnreachable, "the server's TLS certificate is not trusted (a private CA goes in Options.CACert, Longhorn's AWS_CERT)"
	case timedOut:
		re.Class, re.msg = ErrUnavailable, fmt.Sprintf("no answer within %v", s.opts.RequestTimeout)
	case errors.As(err, &dnsErr):
		re.Class, re.msg = ErrUnreachable, "no such host"
	case errors.Is(err, syscall.ECONNREFUSED):
		// A server restarting refuses connections for a moment: retried,
		// and ErrUnreachable if it goes on (a wrong endpoint).
		re.Class, re.msg, re.retry = ErrUnreachable, "connection refused", true
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || (errors.As(err, &netErr) && netErr.Timeout()):
		re.Class, re.msg = ErrUnavailable, "the connection was dropped"
	case errors.As(err, &netErr):
		re.Class, re.msg = ErrUnreachable, "network error"
	default:
		if re.Status == 0 && re.Code == "" {
			var opErr *smithy.OperationError
			if errors.As(err, &opErr) {
				re.msg = s.redact(opErr.Err.Error())
			}
		}
	}
	if re.Status == http.StatusNotFound && re.Class == ErrRequest && re.Code == "" {
		re.Code = "NotFound"
	}
	re.msg = s.redact(re.msg)
	return re
}

// errMalformed marks our own findings that an answer is not S3's.
var errMalformed = errors.New("malformed answer")

func oneOf(s string, set ...string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// redact removes the credentials from a text that came from the server
// or the SDK.
func (s *Store) redact(msg string) string {
	for _, sec := range s.secrets {
		msg = strings.ReplaceAll(msg, sec, "[REDACTED]")
	}
	return msg
}

// boundedTransport bounds every response body except an object read's
// (which the reader bounds itself, by the object's own limit): a listing
// page or an error document larger than limit fails with a
// *bounded.TooLargeError.
type boundedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	q := req.URL.Query()
	objectRead := req.Method == http.MethodGet && resp.StatusCode < 300 && !q.Has("list-type") &&
		(req.URL.RawQuery == "" || q.Get("x-id") == "GetObject")
	if !objectRead {
		resp.Body = &limitedBody{rc: resp.Body, left: t.limit, limit: t.limit, what: "response to " + req.Method}
	}
	return resp, nil
}

type limitedBody struct {
	rc    io.ReadCloser
	left  int64
	limit int64
	what  string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a
		// longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, &bounded.TooLargeError{What: b.what, Limit: b.limit}
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// wait waits d on the store's clock, or until ctx ends.
func (s *Store) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
