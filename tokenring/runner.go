package tokenring

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-multierror"
)

// CleanupReport says what a RunCleanup did.
type CleanupReport struct {
	// Keyspaces are the keyspaces the node listed for cleanup, in order.
	Keyspaces []string
	// Cleaned are those cleaned (or dropped meanwhile).
	Cleaned []string
	// Failed maps each keyspace whose cleanup failed to its error.
	Failed map[string]error
}

// RunCleanup does what scylla-operator's cleanup Job does, on one node:
// stop cleanup compactions already running, list the keyspaces to clean
// (local and tablet keyspaces are not listed: see Cleaner), and clean them
// one at a time. A failing keyspace does not stop the others; every
// failure is in the report and in the returned *multierror.Error.
//
// It returns early only when it cannot start (stopping or listing failed)
// or ctx ends; keyspaces not reached then are neither Cleaned nor Failed.
// Call it from one goroutine per node; it starts none itself.
func RunCleanup(ctx context.Context, c Cleaner) (CleanupReport, error) {
	var report CleanupReport
	if err := c.StopCleanups(ctx); err != nil {
		return report, fmt.Errorf("stop running cleanups: %w", err)
	}
	keyspaces, err := c.CleanupKeyspaces(ctx)
	if err != nil {
		return report, fmt.Errorf("list keyspaces: %w", err)
	}
	report.Keyspaces = keyspaces
	var failures *multierror.Error
	for _, ks := range keyspaces {
		if err := ctx.Err(); err != nil {
			failures = multierror.Append(failures, err)
			break
		}
		err := c.CleanupKeyspace(ctx, ks)
		if err != nil && !errors.Is(err, ErrNotFound) {
			if report.Failed == nil {
				report.Failed = map[string]error{}
			}
			report.Failed[ks] = err
			failures = multierror.Append(failures, fmt.Errorf("keyspace %q: %w", ks, err))
			continue
		}
		report.Cleaned = append(report.Cleaned, ks)
	}
	return report, failures.ErrorOrNil()
}
