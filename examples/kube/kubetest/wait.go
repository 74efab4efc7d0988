package kubetest

import (
	"testing"
	"time"
)

// WaitTimeout is how long the examples' tests wait for a host to act.
const WaitTimeout = 60 * time.Second

// WaitFor polls cond every 100 ms until it returns nil, and fails the
// test with cond's last answer after timeout (WaitTimeout when zero).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if timeout <= 0 {
		timeout = WaitTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the API server with a deadline
	}
}
