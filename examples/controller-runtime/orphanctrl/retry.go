package orphanctrl

import "time"

// retryPolicy doubles a delay from Initial up to Max: the wait after the
// n-th failure in a row is Initial·2^(n-1), capped at Max. It is a few
// lines of its own so that this example copies into another module
// without anything but caretaker's public packages
// (k8s.io/apimachinery/pkg/util/wait.Backoff would serve as well, but it
// keeps its state in the value, and here the caller counts failures).
type retryPolicy struct {
	Initial time.Duration // the first delay
	Max     time.Duration // the ceiling
}

// Delay is the wait after the n-th failure in a row; no failure (n ≤ 0)
// waits nothing.
func (p retryPolicy) Delay(failures int) time.Duration {
	if failures <= 0 || p.Initial <= 0 {
		return 0
	}
	d := p.Initial
	for i := 1; i < failures && d < p.Max; i++ {
		d *= 2
	}
	return min(d, max(p.Max, p.Initial))
}
