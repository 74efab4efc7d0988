package hostkit_test

import (
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
)

func TestRetryPolicyDoublesToTheCeiling(t *testing.T) {
	p := hostkit.RetryPolicy{Initial: time.Second, Max: 5 * time.Second}
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		if got := p.Delay(n); got != w {
			t.Errorf("Delay(%d) = %v, want %v", n, got, w)
		}
	}
	if got := p.Delay(1 << 30); got != 5*time.Second {
		t.Errorf("Delay(2^30) = %v, want the ceiling", got)
	}
}
