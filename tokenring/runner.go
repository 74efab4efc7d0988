package tokenring

import (
	"context"
	"errors"

	"github.com/hashicorp/go-multierror"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// CleanupReport says what a RunCleanup did.
type CleanupReport struct {
	// Keyspaces are the keyspaces the node listed for cleanup, in order.
	Keyspaces []string
	// Cleaned are those the node said it cleaned.
	Cleaned []string
	// Dropped are those the node said do not exist any more (dropped after
	// the listing; see Client.CleanupKeyspace for the exact replies): there
	// is nothing left to clean, and they are not counted as cleaned.
	Dropped []string
	// Failed maps each keyspace whose cleanup failed to its error.
	Failed map[string]error
}

// RunCleanup does what scylla-operator's cleanup Job does, on one node:
// stop cleanup compactions already running, list the keyspaces to clean
// (local and tablet keyspaces are not listed: see Cleaner), and clean them
// one at a time. A keyspace is Cleaned only when the Cleaner said so (nil),
// Dropped only for an error wrapping ErrKeyspaceNotFound, and Failed for
// anything else, ErrNotFound included. A failing keyspace does not stop
// the others; every failure is in the report and in the returned
// *multierror.Error.
//
// It returns early only when it cannot start (stopping or listing failed)
// or ctx ends; keyspaces not reached then are in none of the lists.
// Call it from one goroutine per node; it starts none itself.
func RunCleanup(ctx context.Context, c Cleaner) (CleanupReport, error) {
	var report CleanupReport
	if err := c.StopCleanups(ctx); err != nil {
		return report, errclass.Wrapf("tokenring", err, "stop running cleanups")
	}
	keyspaces, err := c.CleanupKeyspaces(ctx)
	if err != nil {
		return report, errclass.Wrapf("tokenring", err, "list keyspaces")
	}
	report.Keyspaces = keyspaces
	var failures *multierror.Error
	for _, ks := range keyspaces {
		if err := ctx.Err(); err != nil {
			failures = multierror.Append(failures, err)
			break
		}
		switch err := c.CleanupKeyspace(ctx, ks); {
		case err == nil:
			report.Cleaned = append(report.Cleaned, ks)
		case errors.Is(err, ErrKeyspaceNotFound):
			report.Dropped = append(report.Dropped, ks)
		default:
			if report.Failed == nil {
				report.Failed = map[string]error{}
			}
			report.Failed[ks] = err
			failures = multierror.Append(failures, errclass.Wrapf("tokenring", err, "keyspace %q", ks))
		}
	}
	return report, failures.ErrorOrNil()
}
