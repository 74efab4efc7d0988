package tokenring

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=source.go -destination=mocks/source.go -package=mocks

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
// belong to the caller. tokenringtest.RunRingSourceTests checks all this.
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
// themselves. Same contract as RingSource.
type LocationSource interface {
	// Location returns the endpoint's datacenter and rack
	// (GET /snitch/datacenter?host= and /snitch/rack?host=).
	Location(ctx context.Context, endpoint string) (Location, error)
}

// Cleaner runs a node's cleanup. Calls block until ScyllaDB finishes (a
// keyspace cleanup can take hours: give ctx a matching deadline). Same
// contract as RingSource otherwise; cleaning a keyspace that was dropped
// meanwhile reports ErrNotFound, which RunCleanup treats as done.
// tokenringtest.RunCleanerTests checks the contract.
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
	// (POST /storage_service/keyspace_cleanup/{keyspace}).
	CleanupKeyspace(ctx context.Context, keyspace string) error
}

// TokenEndpoint is one entry of GET /storage_service/tokens_endpoint, as
// the API returns it: both fields are strings.
type TokenEndpoint struct {
	Token    string `json:"key"`
	Endpoint string `json:"value"`
}

// ErrNotJoined: the node owns no tokens of its own yet (it is joining, or
// left), so its view of the ring is not worth a hash. Wait and ask again.
var ErrNotJoined = errors.New("node has not joined the token ring")

// Membership is the node's place in the ring.
type Membership struct {
	HostID   string
	Endpoint string
	// OwnTokens is how many normal tokens the node owns.
	OwnTokens int
}

// ReadMembership checks that the node is a ring member with tokens of its
// own: its host ID appears in the host ID map, and its endpoint owns
// tokens. Otherwise it returns an error wrapping ErrNotJoined.
func ReadMembership(ctx context.Context, src RingSource) (Membership, error) {
	hostID, err := src.LocalHostID(ctx)
	if err != nil {
		return Membership{}, fmt.Errorf("local host ID: %w", err)
	}
	ids, err := src.HostIDs(ctx)
	if err != nil {
		return Membership{}, fmt.Errorf("host ID map: %w", err)
	}
	var endpoints []string
	for ep, id := range ids {
		if id == hostID {
			endpoints = append(endpoints, ep)
		}
	}
	if len(endpoints) == 0 {
		return Membership{HostID: hostID}, fmt.Errorf("%w: host ID %s is not in the host ID map", ErrNotJoined, hostID)
	}
	if len(endpoints) > 1 {
		sort.Strings(endpoints)
		return Membership{HostID: hostID}, fmt.Errorf("%w: host ID %s maps to several endpoints %v", ErrMalformedReply, hostID, endpoints)
	}
	own, err := src.EndpointTokens(ctx, endpoints[0])
	if err != nil {
		return Membership{HostID: hostID, Endpoint: endpoints[0]}, fmt.Errorf("tokens of %s: %w", endpoints[0], err)
	}
	m := Membership{HostID: hostID, Endpoint: endpoints[0], OwnTokens: len(own)}
	if len(own) == 0 {
		return m, fmt.Errorf("%w: %s owns no tokens", ErrNotJoined, m.Endpoint)
	}
	return m, nil
}

// ReadTokenRingHash returns the value for CurrentTokenRingHashAnnotation, the
// way scylla-operator's sidecar computes it, but only for a node that
// ReadMembership accepts: a joining node gets ErrNotJoined, not a hash of
// a ring it is not part of yet. The tokens must parse as Murmur3 tokens;
// they are hashed as returned.
func ReadTokenRingHash(ctx context.Context, src RingSource) (string, Membership, error) {
	m, err := ReadMembership(ctx, src)
	if err != nil {
		return "", m, err
	}
	tokens, err := src.Tokens(ctx)
	if err != nil {
		return "", m, fmt.Errorf("tokens: %w", err)
	}
	if _, err := ParseTokens(tokens); err != nil {
		return "", m, fmt.Errorf("tokens: %w", err)
	}
	return HashTokens(tokens), m, nil
}

// ReadRing reads the token → endpoint map and, if locs is not nil, each
// endpoint's location, into a Ring ready for Analyze.
func ReadRing(ctx context.Context, src RingSource, locs LocationSource) (Ring, error) {
	pairs, err := src.TokenEndpoints(ctx)
	if err != nil {
		return Ring{}, fmt.Errorf("token endpoints: %w", err)
	}
	ring := Ring{Owners: make([]TokenOwner, 0, len(pairs))}
	var endpoints []string
	seen := map[string]bool{}
	for i, p := range pairs {
		t, err := ParseToken(p.Token)
		if err != nil {
			return Ring{}, fmt.Errorf("token endpoints entry %d: %w", i, err)
		}
		if p.Endpoint == "" {
			return Ring{}, fmt.Errorf("%w: token endpoints entry %d has no endpoint", ErrMalformedReply, i)
		}
		ring.Owners = append(ring.Owners, TokenOwner{Token: t, Endpoint: p.Endpoint})
		if !seen[p.Endpoint] {
			seen[p.Endpoint] = true
			endpoints = append(endpoints, p.Endpoint)
		}
	}
	if locs == nil {
		return ring, nil
	}
	sort.Strings(endpoints)
	ring.Locations = make(map[string]Location, len(endpoints))
	for _, ep := range endpoints {
		loc, err := locs.Location(ctx, ep)
		if err != nil {
			return Ring{}, fmt.Errorf("location of %s: %w", ep, err)
		}
		ring.Locations[ep] = loc
	}
	return ring, nil
}
