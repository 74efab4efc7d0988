package backoff

import (
	"math"
	"testing"
	"time"
)

func TestDelayDoublesToTheCeiling(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 5 * time.Second}
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		if got := p.Delay(n); got != w {
			t.Errorf("Delay(%d) = %v, want %v", n, got, w)
		}
	}
	if got := p.Delay(1 << 30); got != 5*time.Second {
		t.Errorf("Delay(huge) = %v, want the ceiling", got)
	}
	if got := (Policy{Initial: 3 * time.Second, Max: time.Second}).Delay(4); got != 3*time.Second {
		t.Errorf("a Max below Initial: Delay = %v, want Initial", got)
	}
	if got := (Policy{}).Delay(3); got != 0 {
		t.Errorf("zero policy: Delay = %v, want 0", got)
	}
}

func TestNextResetsAfterTwiceTheCeiling(t *testing.T) {
	p := Policy{Initial: 10 * time.Second, Max: time.Minute}
	t0 := time.Unix(1000, 0)
	if got := p.Next(time.Time{}, 0, t0); got != 10*time.Second {
		t.Fatalf("first attempt: %v", got)
	}
	if got := p.Next(t0, 10*time.Second, t0.Add(10*time.Second)); got != 20*time.Second {
		t.Fatalf("second attempt: %v", got)
	}
	if got := p.Next(t0, 40*time.Second, t0.Add(40*time.Second)); got != time.Minute {
		t.Fatalf("capped: %v", got)
	}
	if got := p.Next(t0, time.Minute, t0.Add(2*time.Minute)); got != 10*time.Second {
		t.Fatalf("left alone for twice the ceiling: %v, want Initial", got)
	}
}

func TestOrFillsDefaults(t *testing.T) {
	got := Policy{Max: time.Hour}.Or(Policy{Initial: time.Second, Max: time.Minute})
	if got != (Policy{Initial: time.Second, Max: time.Hour}) {
		t.Fatalf("Or = %+v", got)
	}
}

// TestNoOverflowNearTheLimits: a ceiling near the largest Duration must
// never double into a negative or zero delay.
func TestNoOverflowNearTheLimits(t *testing.T) {
	p := Policy{Initial: 1 << 62, Max: math.MaxInt64}
	for _, n := range []int{1, 2, 3, 64, 1 << 40} {
		if got := p.Delay(n); got < p.Initial {
			t.Fatalf("Delay(%d) = %v, below Initial", n, got)
		}
	}
	t0 := time.Unix(0, 0)
	if got := p.Next(t0, math.MaxInt64-1, t0.Add(time.Second)); got != math.MaxInt64 {
		t.Fatalf("Next after a huge delay = %v, want the ceiling", got)
	}
	if got := (Policy{Initial: time.Second, Max: time.Hour}).Delay(1 << 40); got != time.Hour {
		t.Fatalf("a huge failure count: %v", got)
	}
}
