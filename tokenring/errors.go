package tokenring

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Errors of the REST client, for errors.Is.
var (
	// ErrNotFound: the API answered 404, or a host's source does not know
	// the thing asked for. ScyllaDB answers 404 for a path it does not
	// serve (an older version, or a proxy that does not route it), not for
	// a missing keyspace: see ErrKeyspaceNotFound. It is caretaker's one
	// NotFound class, the same value as orphan.ErrNotFound and the others,
	// so errors.Is matches across packages.
	ErrNotFound = errclass.ErrNotFound
	// ErrKeyspaceNotFound: ScyllaDB said the keyspace asked for does not
	// exist (it was dropped). See Client.CleanupKeyspace for the exact
	// replies that prove it.
	ErrKeyspaceNotFound = errors.New("tokenring: keyspace does not exist")
	// ErrRedirect: the API answered with a redirect. ScyllaDB's API and the
	// Manager Agent never redirect, and following one could send the
	// agent's bearer token to another origin, or over plain HTTP: the
	// client never follows redirects. The *APIError in the chain holds
	// the status and the Location it pointed to.
	ErrRedirect = errclass.New("tokenring", "redirect refused", errclass.ErrRedirect)
	// ErrInvalidURL: NewClient was given a base URL it cannot use (no
	// scheme, a scheme other than http or https, no host, credentials,
	// a query or a fragment).
	ErrInvalidURL = errors.New("tokenring: invalid base URL")
	// ErrTokenWithoutTLS: ClientOptions.AuthToken was set with an http
	// base URL. The Manager Agent's token is only ever sent over TLS.
	ErrTokenWithoutTLS = errors.New("tokenring: refusing to send the agent's bearer token without TLS")
	// ErrMalformedReply: the reply is not the JSON shape the API
	// documents (truncated, wrong types, trailing garbage).
	ErrMalformedReply = errclass.New("tokenring", "malformed reply", errclass.ErrMalformed)
	// ErrTooLarge: a reply exceeded ClientOptions.MaxReplyBytes. The error
	// wraps a *bounded.TooLargeError naming the request and the limit. It
	// is caretaker's one "too large" class, the same value in every
	// package, so errors.Is matches an oversized reply, meta file or RPC
	// reply alike.
	ErrTooLarge = bounded.ErrTooLarge
)

// APIError is a non-2xx reply.
type APIError struct {
	Method     string
	Path       string
	StatusCode int
	// Message is ScyllaDB's error message, or the start of the body; for
	// a redirect, where it pointed.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("tokenring: %s %s: HTTP %d: %s", e.Method, e.Path, e.StatusCode, e.Message)
}

// Is makes a 404 match ErrNotFound and a 3xx match ErrRedirect (and so
// the redirect class of every package). Nothing
// else matches ErrNotFound: a message that merely says "does not exist"
// proves nothing about what is missing.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	}
	// A 3xx matches the redirect class: ErrRedirect and every other
	// package's redirect sentinel.
	if errors.Is(target, errclass.ErrRedirect) {
		return e.StatusCode >= 300 && e.StatusCode <= 399
	}
	return false
}

// IsRetryable reports whether asking again later may succeed: network
// failures, 5xx, 429, 408, ErrNotJoined (joining finishes) and
// ErrInconsistentRing (the ring was changing between two replies) are;
// malformed and oversized replies, redirects, other 4xx (a missing
// keyspace among them), unparseable tokens, configuration errors and the
// caller's own cancelled or expired context are not.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNotJoined), errors.Is(err, ErrInconsistentRing):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrMalformedReply), errors.Is(err, ErrTooLarge), errors.Is(err, ErrNotMurmur3),
		errors.Is(err, ErrRedirect), errors.Is(err, ErrKeyspaceNotFound),
		errors.Is(err, ErrInvalidURL), errors.Is(err, ErrTokenWithoutTLS):
		return false
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		c := apiErr.StatusCode
		return c >= 500 || c == http.StatusTooManyRequests || c == http.StatusRequestTimeout
	}
	return true
}
