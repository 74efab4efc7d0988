package hostkit

import "time"

// RetryPolicy doubles a delay from Initial up to Max: the wait after the
// n-th failure in a row is Initial·2^(n-1), capped at Max. The caller
// counts the failures, so one value serves any number of loops
// (k8s.io/apimachinery/pkg/util/wait.Backoff keeps its state in the
// value instead).
type RetryPolicy struct {
	Initial time.Duration // the first delay
	Max     time.Duration // the ceiling
}

// DefaultRetry is the policy both example hosts use: a quarter of a
// second, doubling up to half a minute.
var DefaultRetry = RetryPolicy{Initial: 250 * time.Millisecond, Max: 30 * time.Second}

// Delay is the wait after the n-th failure in a row; no failure (n ≤ 0)
// waits nothing.
func (p RetryPolicy) Delay(failures int) time.Duration {
	if failures <= 0 || p.Initial <= 0 {
		return 0
	}
	d := p.Initial
	for i := 1; i < failures && d < p.Max; i++ {
		d *= 2
	}
	return min(d, max(p.Max, p.Initial))
}
