package tokenring

import (
	"context"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=interfaces.go -destination=mocks/interfaces.go -package=mocks

// RingSource reads the token ring as one node sees it. *Client implements it
// against ScyllaDB's REST API; hosts with another path to the node (a
// sidecar, a CQL session) plug their own.
//
// Contract for every method: the host's reconcile loop or the cleanup tool
// calls it; implementations must be safe for concurrent use; ctx bounds the
// call, and a call cut short by ctx returns an error wrapping ctx.Err()
// (context.Canceled or context.DeadlineExceeded), never ErrNotFound.
// Errors: a reply that cannot be parsed wraps ErrMalformedReply (not
// retryable: asking again gets the same garbage); ErrNotFound means the
// node does not know the thing asked for; anything else (network, 5xx) is
// worth retrying with backoff (IsRetryable tells). Returned maps and slices
// belong to the caller. tokenringtest.RunConformanceTests checks all this.
type RingSource interface {
	// LocalHostID returns the node's own host ID
	// (GET /storage_service/hostid/local).
	LocalHostID(ctx context.Context) (string, error)
	// HostIDs maps endpoint → host ID for every node that owns tokens
	// (GET /storage_service/host_id).
	HostIDs(ctx context.Context) (map[string]string, error)
	// Tokens returns the ring's tokens exactly as the node reported them,
	// for hashing (GET /storage_service/tokens): ScyllaDB lists them in
	// ascending numeric order as canonical decimal strings. Do not sort or
	// reformat: the hash is over the node's own bytes.
	Tokens(ctx context.Context) ([]string, error)
	// EndpointTokens returns the normal tokens of one endpoint, empty
	// while it is still joining (GET /storage_service/tokens/{endpoint}).
	// An endpoint the node does not know gives either no tokens or
	// ErrNotFound; callers treat both as "owns nothing".
	EndpointTokens(ctx context.Context, endpoint string) ([]string, error)
	// TokenEndpoints returns the token → endpoint map of the whole ring
	// (GET /storage_service/tokens_endpoint).
	TokenEndpoints(ctx context.Context) ([]TokenEndpoint, error)
}

// LocationSource says where endpoints sit. Optional: hosts that know the
// topology from their own objects (rack labels) build Ring.Locations
// themselves. Same contract as RingSource; an endpoint the node does not
// know is an error (ScyllaDB answers HTTP 500 "Unknown host"), never an
// empty Location.
type LocationSource interface {
	// Location returns the endpoint's datacenter and rack
	// (GET /snitch/datacenter?host= and /snitch/rack?host=).
	Location(ctx context.Context, endpoint string) (Location, error)
}

// Cleaner runs a node's cleanup. Calls block until ScyllaDB finishes (a
// keyspace cleanup can take hours: give ctx a matching deadline). Same
// contract as RingSource otherwise, except for a missing keyspace:
// CleanupKeyspace of a keyspace the node proved does not exist (dropped
// after the listing) returns an error wrapping ErrKeyspaceNotFound, which
// RunCleanup reports as dropped; every other error, ErrNotFound included
// (a 404 is a path the node does not serve, not a missing keyspace), is a
// failed cleanup. tokenringtest.RunConformanceTests checks the contract.
type Cleaner interface {
	// StopCleanups aborts cleanup compactions already running on the node
	// (POST /compaction_manager/stop_compaction?type=CLEANUP), so a new
	// run does not queue behind an abandoned one.
	StopCleanups(ctx context.Context) error
	// CleanupKeyspaces lists the keyspaces a cleanup must visit: not
	// local, not tablet-based (GET /storage_service/keyspaces
	// ?type=non_local_strategy&replication=vnodes).
	CleanupKeyspaces(ctx context.Context) ([]string, error)
	// CleanupKeyspace cleans one keyspace
	// (POST /storage_service/keyspace_cleanup/{keyspace}). A nil error
	// means the node said the cleanup finished.
	CleanupKeyspace(ctx context.Context, keyspace string) error
}

// TokenEndpoint is one entry of GET /storage_service/tokens_endpoint, as
// the API returns it: both fields are strings.
type TokenEndpoint struct {
	Token    string `json:"key"`
	Endpoint string `json:"value"`
}
