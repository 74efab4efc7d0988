// Package clocks holds caretaker's clock convention: every Options struct
// has a field "Clock clock.Clock" (k8s.io/utils/clock), nil meaning the
// real clock, and reads it through Or.
package clocks

import "k8s.io/utils/clock"

// Or returns c, or the real clock when c is nil.
func Or(c clock.Clock) clock.Clock {
	if c == nil {
		return clock.RealClock{}
	}
	return c
}
