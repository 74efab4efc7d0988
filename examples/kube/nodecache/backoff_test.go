package nodecache_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/examples/kube/nodecache"
)

// TestBackoff429HonoursRetryAfterWithJitter: a LIST refused twice with
// 429 and Retry-After: 1 (what priority and fairness answers when it sheds
// load) is sent again only after the second Retry-After names, plus the
// jitter's share of a doubling delay, and then succeeds; the caller sees
// only the success.
func TestBackoff429HonoursRetryAfterWithJitter(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	b := &nodecache.Backoff429{Clock: fc, Rand: func() float64 { return 0.5 }, Base: 400 * time.Millisecond}
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		resp, err := b.RoundTrip(req)
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- resp.Status + " " + string(body)
	}()
	// The first wait: Retry-After's 1 s plus half of 400 ms.
	step(t, fc, &hits, 1, 1199*time.Millisecond)
	step(t, fc, &hits, 2, time.Millisecond)
	// The second: 1 s plus half of 800 ms.
	step(t, fc, &hits, 2, 1399*time.Millisecond)
	step(t, fc, &hits, 3, time.Millisecond)
	if got := <-done; got != "200 OK ok" {
		t.Fatalf("the caller got %q, want the success", got)
	}
	if b.Retried.Load() != 2 {
		t.Fatalf("Retried = %d, want 2", b.Retried.Load())
	}
}

// step waits until the transport sleeps, moves the clock by d, and
// checks the server then has seen want requests (waiting for it when the
// step fired the timer).
func step(t *testing.T, fc *clocktesting.FakeClock, hits *atomic.Int64, want int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the transport never waited")
		}
		time.Sleep(time.Millisecond) // polling another goroutine's state, not timing
	}
	fc.Step(d)
	for hits.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a request it should not have sent would show now
	if got := hits.Load(); got != want {
		t.Fatalf("after the clock moved %s: %d requests, want %d", d, got, want)
	}
}

// TestBackoff429KeepsABodyItCannotResend: a write whose body cannot be
// had again gets its 429 back at once instead of a request sent without
// its body.
func TestBackoff429KeepsABodyItCannotResend(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	b := &nodecache.Backoff429{Clock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("{}")))
	req.GetBody = nil
	resp, err := b.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || hits.Load() != 1 {
		t.Fatalf("got %d after %d requests, want the 429 after one", resp.StatusCode, hits.Load())
	}
}
