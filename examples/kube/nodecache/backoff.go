package nodecache

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Backoff429 is an http.RoundTripper for an agent's client that waits
// and tries again when the API server sheds load with 429 Too Many
// Requests (API priority and fairness does, in a restart storm). It waits
// at least what the answer's Retry-After says, plus a random share of a
// delay that doubles with each 429 in a row (Base, 2·Base, … up to Cap),
// so that agents refused together do not all come back in the same
// second. Only requests that can be sent again unchanged are retried:
// those without a body, or whose body GetBody can produce anew; after
// Tries 429s in a row the last answer is returned as it is (client-go's
// own retries, and the informers' backoff, take it from there).
//
// Retried counts the requests sent again. It is safe for concurrent use.
type Backoff429 struct {
	Next  http.RoundTripper // nil: http.DefaultTransport
	Clock clock.Clock       // nil: the real clock
	// Rand returns a number in [0, 1); nil uses math/rand/v2.
	Rand func() float64
	// Tries bounds the attempts of one request (0: 8); Base and Cap bound
	// the random part of the wait (0: 500 ms and 30 s).
	Tries     int
	Base, Cap time.Duration

	Retried atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (b *Backoff429) RoundTrip(r *http.Request) (*http.Response, error) {
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	tries, base, maxWait := b.Tries, b.Base, b.Cap
	if tries <= 0 {
		tries = 8
	}
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if maxWait <= 0 {
		maxWait = 30 * time.Second
	}
	for n := 1; ; n++ {
		resp, err := next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || n >= tries {
			return resp, err
		}
		again, ok := rewind(r)
		if !ok {
			return resp, nil
		}
		wait := retryAfter(resp.Header.Get("Retry-After")) + b.jitter(min(base<<(n-1), maxWait))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err := b.sleep(r.Context(), wait); err != nil {
			return nil, err
		}
		b.Retried.Add(1)
		r = again
	}
}

// jitter is a random duration in [0, d).
func (b *Backoff429) jitter(d time.Duration) time.Duration {
	f := b.Rand
	if f == nil {
		f = rand.Float64
	}
	return time.Duration(f() * float64(d))
}

func (b *Backoff429) sleep(ctx context.Context, d time.Duration) error {
	c := b.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// rewind returns a request to send again: r itself when it has no body,
// a clone with a fresh body from GetBody otherwise; false when the body
// cannot be had again.
func rewind(r *http.Request) (*http.Request, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, true
	}
	if r.GetBody == nil {
		return nil, false
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, false
	}
	c := r.Clone(r.Context())
	c.Body = body
	return c, true
}

// retryAfter reads a Retry-After header in seconds (the form the API
// server sends); anything else is no wait.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(v)
	if err != nil || s <= 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, 5*time.Minute)
}
