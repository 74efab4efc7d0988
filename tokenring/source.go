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

// ErrNotJoined: the node owns no tokens of its own yet (it is joining, or
// left), so its view of the ring is not worth a hash. Wait and ask again.
var ErrNotJoined = errors.New("node has not joined the token ring")

// ErrInconsistentRing: the node's replies disagree with each other: it
// owns tokens, but the ring it reports (GET /storage_service/tokens) is
// empty or lacks some of them. The ring was changing between the two
// calls, or a reply is stale; hashing it would record a ring the node
// is not in. Ask again later (IsRetryable says so).
var ErrInconsistentRing = errors.New("ring reply does not hold the node's own tokens")

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
	m, _, err := readMembership(ctx, src)
	return m, err
}

// readMembership is ReadMembership that also returns the own tokens, parsed.
func readMembership(ctx context.Context, src RingSource) (Membership, []Token, error) {
	hostID, err := src.LocalHostID(ctx)
	if err != nil {
		return Membership{}, nil, fmt.Errorf("local host ID: %w", err)
	}
	ids, err := src.HostIDs(ctx)
	if err != nil {
		return Membership{}, nil, fmt.Errorf("host ID map: %w", err)
	}
	var endpoints []string
	for ep, id := range ids {
		if id == hostID {
			endpoints = append(endpoints, ep)
		}
	}
	if len(endpoints) == 0 {
		return Membership{HostID: hostID}, nil, fmt.Errorf("%w: host ID %s is not in the host ID map", ErrNotJoined, hostID)
	}
	if len(endpoints) > 1 {
		sort.Strings(endpoints)
		return Membership{HostID: hostID}, nil, fmt.Errorf("%w: host ID %s maps to several endpoints %v", ErrMalformedReply, hostID, endpoints)
	}
	return readOwnTokens(ctx, src, hostID, endpoints[0])
}

// readOwnTokens reads and parses the endpoint's own tokens.
func readOwnTokens(ctx context.Context, src RingSource, hostID, endpoint string) (Membership, []Token, error) {
	m := Membership{HostID: hostID, Endpoint: endpoint}
	raw, err := src.EndpointTokens(ctx, endpoint)
	if err != nil {
		return m, nil, fmt.Errorf("tokens of %s: %w", endpoint, err)
	}
	m.OwnTokens = len(raw)
	if len(raw) == 0 {
		return m, nil, fmt.Errorf("%w: %s owns no tokens", ErrNotJoined, endpoint)
	}
	own, err := ParseTokens(raw)
	if err != nil {
		return m, nil, fmt.Errorf("tokens of %s: %w", endpoint, err)
	}
	return m, own, nil
}

// ReadTokenRingHash returns the value for CurrentTokenRingHashAnnotation, the
// way scylla-operator's sidecar computes it, but only for a node that
// ReadMembership accepts: a joining node gets ErrNotJoined, not a hash of
// a ring it is not part of yet. The tokens must parse as Murmur3 tokens;
// they are hashed as returned. A ring reply that is empty or lacks any of
// the node's own tokens is ErrInconsistentRing, never a hash: the
// operator would otherwise record (and later clean up against) a ring the
// node is not in. scylla-operator's sidecar hashes whatever the reply is.
func ReadTokenRingHash(ctx context.Context, src RingSource) (string, Membership, error) {
	m, own, err := readMembership(ctx, src)
	if err != nil {
		return "", m, err
	}
	tokens, err := src.Tokens(ctx)
	if err != nil {
		return "", m, fmt.Errorf("tokens: %w", err)
	}
	ring, err := ParseTokens(tokens)
	if err != nil {
		return "", m, fmt.Errorf("tokens: %w", err)
	}
	inRing := make(map[Token]bool, len(ring))
	for _, t := range ring {
		inRing[t] = true
	}
	missing := 0
	for _, t := range own {
		if !inRing[t] {
			missing++
		}
	}
	if missing > 0 {
		return "", m, fmt.Errorf("%w: %s owns %d tokens, %d of them missing from the %d-token ring reply",
			ErrInconsistentRing, m.Endpoint, len(own), missing, len(ring))
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
