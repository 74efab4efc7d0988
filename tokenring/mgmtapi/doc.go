// Package mgmtapi runs a Cassandra node's cleanup through the Management
// API for Apache Cassandra (k8ssandra/management-api-for-apache-cassandra,
// the sidecar cass-operator and k8ssandra run in every Cassandra pod, on
// port 8080). Its Cleaner implements tokenring.Cleaner, so
// tokenring.RunCleanup, and anything else that drives a Cleaner, cleans a
// Cassandra node the way it cleans a ScyllaDB node.
//
// # In short
//
//	c, err := mgmtapi.New("http://10.0.0.1:8080", mgmtapi.Options{})
//	report, err := tokenring.RunCleanup(ctx, c)
//
// Build one Cleaner per node (each pod has its own Management API); give
// ctx a deadline that fits a cleanup (minutes to hours).
//
// # What it calls
//
// Paths and shapes are those of management-api-server's resources:
//
//   - GET /api/v0/ops/keyspace lists the keyspaces (a JSON array of
//     names; ?keyspaceName=X lists only X, or nothing when X does not
//     exist), and GET /api/v0/ops/keyspace/replication?keyspaceName=X
//     reads X's replication map ({"class": ..., ...}; HTTP 404 "Get
//     keyspace replication failed. Keyspace 'X' does not exist.").
//     CleanupKeyspaces keeps every keyspace whose class is not
//     LocalStrategy, as Cassandra's cleanup of all keyspaces does.
//   - POST /api/v1/ops/keyspace/cleanup with the JSON body
//     {"keyspace_name": X, "tables": [], "jobs": N} starts the cleanup
//     as a job and answers HTTP 202 with the job's UUID as text/plain
//     (the v0 path of the same name blocks until the cleanup ends, which
//     no context can bound on the node's side; it is not used).
//   - GET /api/v0/ops/executor/job?job_id=ID reads the job: a JSON map of
//     strings, {"id", "type": "CLEANUP", "status", "submit_time",
//     "end_time"} and "error" when the status is ERROR; the status is
//     WAITING (queued or running), COMPLETED or ERROR. A job the node does
//     not know is HTTP 404 with {}.
//
// # What counts as done
//
// A keyspace is cleaned only when its job reads COMPLETED. A job that
// ends in ERROR fails the keyspace (*JobError), unless the node then lists
// no such keyspace: it was dropped (tokenring.ErrKeyspaceNotFound, which
// tokenring.RunCleanup reports as Dropped). The node's error text is never
// parsed for that: only its keyspace listing proves a keyspace gone. A job
// ID the node forgot (it keeps jobs in memory, at most 1000: a Cassandra
// restart loses them) is ErrJobNotFound: not done, and worth running again.
//
// The Management API cannot stop a running compaction: StopCleanups waits,
// bounded by ctx, until the cleanup jobs this Cleaner started have ended
// (see Cleaner.StopCleanups). A cleanup cannot be cancelled
// either: when ctx ends, CleanupKeyspace returns and the job goes on in
// the node.
//
// # Errors
//
// ErrJobNotFound and *JobError are this package's; everything else uses
// tokenring's classes: tokenring.ErrKeyspaceNotFound,
// tokenring.ErrMalformedReply (a reply of the wrong shape: null, wrong
// types, trailing data, a job ID that is not a UUID, a status map for
// another job, an unknown status), tokenring.ErrTooLarge (over
// Options.MaxReplyBytes), tokenring.ErrInvalidURL (New), and
// *tokenring.APIError for a non-2xx or redirect reply (never followed).
// tokenring.IsRetryable classifies all of them: a failed or vanished job,
// a 5xx and a network failure are worth retrying; the rest, and the
// caller's own cancelled context, are not.
//
// # Concurrency
//
// A Cleaner is safe for concurrent use and starts no goroutines; every
// call runs on the caller's goroutine and returns when ctx ends. Polling
// waits on Options.Clock, so tests step a fake clock instead of sleeping.
package mgmtapi
