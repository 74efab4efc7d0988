package rebuild

import "time"

// Record is the memory the decision needs between two inputs: how
// often rebuilding was given up, until when to wait, and how the current
// attempt is going. Hosts store it with the volume (in memory or in a
// status field) and pass it back unchanged. Losing it once resets the
// backoff and restarts the current attempt's stall clock (the ticket is
// adopted as a new attempt); a host that never passes it back gets no
// stall limit, so a hung rebuild would keep its volume.
type Record struct {
	// Failures counts consecutive attempts that were given up.
	Failures int `json:"failures,omitempty"`
	// RetryAt: no new ticket before this time.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// LastFailure says why the last attempt was given up.
	LastFailure string `json:"lastFailure,omitempty"`

	// The current attempt; zero while there is no ticket.
	AttemptStartedAt time.Time `json:"attemptStartedAt,omitzero"`
	LastProgressAt   time.Time `json:"lastProgressAt,omitzero"`
	SawAttached      bool      `json:"sawAttached,omitempty"`
	BestHealthy      int       `json:"bestHealthy,omitempty"`
	// BestProgress is the highest Volume.RebuildProgress seen since the
	// attempt started, a replica became healthy or a rebuild failed.
	BestProgress   int64     `json:"bestProgress,omitempty"`
	WasRebuilding  bool      `json:"wasRebuilding,omitempty"`
	FailedRebuilds int       `json:"failedRebuilds,omitempty"`
	LastFailedAt   time.Time `json:"lastFailedAt,omitzero"` // newest Replica.LastFailedAt seen
}

// startAttempt begins following a ticket. Failures that happened before it
// are not the attempt's.
func (r Record) startAttempt(now time.Time, v Volume) Record {
	r = r.endAttempt()
	r.AttemptStartedAt, r.LastProgressAt = now, now
	r.BestHealthy, r.LastFailedAt = v.HealthyReplicas(), v.lastFailure()
	r.BestProgress = v.RebuildProgress() // progress from before the attempt is not the attempt's
	return r
}

// sane clamps a record that cannot come from this clock: times after now
// would stretch a stall or a backoff without bound.
func (r Record) sane(now time.Time, o Options) Record {
	if limit := now.Add(o.backoff().Max); r.RetryAt.After(limit) {
		r.RetryAt = limit
	}
	if r.AttemptStartedAt.After(now) {
		r.AttemptStartedAt = now
	}
	if r.LastProgressAt.After(now) {
		r.LastProgressAt = now
	}
	if r.BestProgress < 0 {
		r.BestProgress = 0
	}
	if r.Failures < 0 || r.Failures > maxFailures {
		r.Failures = maxFailures // keeps Failures++ from overflowing
	}
	return r
}

// maxFailures is far beyond the doublings that reach any MaxBackoff.
const maxFailures = 1 << 20

// endAttempt keeps the backoff and drops the current attempt.
func (r Record) endAttempt() Record {
	return Record{Failures: r.Failures, RetryAt: r.RetryAt, LastFailure: r.LastFailure}
}
