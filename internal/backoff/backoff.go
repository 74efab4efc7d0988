// Package backoff is caretaker's one exponential backoff. It keeps no
// state of its own: the caller stores the failure count, or the start and
// delay of its last attempt, in its own record, so the cores that use it
// stay pure functions of their input.
package backoff

import (
	"math"
	"time"
)

// Policy doubles a delay from Initial up to Max. The zero value has no
// delay at all; packages fill their own documented defaults with Or.
type Policy struct {
	Initial time.Duration // the first delay
	Max     time.Duration // the ceiling; below Initial it is raised to Initial
}

// Or returns p with each zero or negative field replaced by def's.
func (p Policy) Or(def Policy) Policy {
	if p.Initial <= 0 {
		p.Initial = def.Initial
	}
	if p.Max <= 0 {
		p.Max = def.Max
	}
	return p
}

func (p Policy) ceiling() time.Duration { return max(p.Max, p.Initial) }

// Delay is the wait after the n-th failure in a row: Initial·2^(n-1),
// capped at Max. No failure (n ≤ 0) waits nothing.
func (p Policy) Delay(failures int) time.Duration {
	if failures <= 0 || p.Initial <= 0 {
		return 0
	}
	ceil := p.ceiling()
	d := p.Initial
	for i := 1; i < failures && d < ceil; i++ {
		if d > ceil/2 { // doubling would pass the ceiling, or overflow
			return ceil
		}
		d *= 2
	}
	return min(d, ceil)
}

// Next is the delay for an attempt starting at now, when the previous one
// started at last (zero: none) after waiting delay. It is Initial the
// first time, then doubles up to Max; like Kubernetes' flowcontrol.Backoff
// (which Longhorn uses), an item left alone for twice the ceiling starts
// again from Initial.
func (p Policy) Next(last time.Time, delay time.Duration, now time.Time) time.Duration {
	ceil := p.ceiling()
	if last.IsZero() || (ceil <= math.MaxInt64/2 && now.Sub(last) >= 2*ceil) {
		return p.Initial
	}
	if delay > ceil/2 { // doubling would pass the ceiling, or overflow
		return ceil
	}
	return min(max(2*delay, p.Initial), ceil)
}
