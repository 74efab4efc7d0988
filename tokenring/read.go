package tokenring

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// ErrNotJoined: the node owns no tokens of its own yet (it is joining, or
// left), so its view of the ring is not worth a hash. Wait and ask again.
var ErrNotJoined = errors.New("tokenring: node has not joined the token ring")

// ErrInconsistentRing: the node's replies disagree with each other: it
// owns tokens, but the ring it reports (GET /storage_service/tokens) is
// empty or lacks some of them. The ring was changing between the two
// calls, or a reply is stale; hashing it would record a ring the node
// is not in. Ask again later (IsRetryable says so).
var ErrInconsistentRing = errors.New("tokenring: ring reply does not hold the node's own tokens")

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
		return Membership{}, nil, errclass.Wrapf("tokenring", err, "local host ID")
	}
	ids, err := src.HostIDs(ctx)
	if err != nil {
		return Membership{}, nil, errclass.Wrapf("tokenring", err, "host ID map")
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
		return m, nil, errclass.Wrapf("tokenring", err, "tokens of %s", endpoint)
	}
	m.OwnTokens = len(raw)
	if len(raw) == 0 {
		return m, nil, fmt.Errorf("%w: %s owns no tokens", ErrNotJoined, endpoint)
	}
	own, err := ParseTokens(raw)
	if err != nil {
		return m, nil, errclass.Wrapf("tokenring", err, "tokens of %s", endpoint)
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
		return "", m, errclass.Wrapf("tokenring", err, "tokens")
	}
	ring, err := ParseTokens(tokens)
	if err != nil {
		return "", m, errclass.Wrapf("tokenring", err, "tokens")
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
		return Ring{}, errclass.Wrapf("tokenring", err, "token endpoints")
	}
	ring := Ring{Owners: make([]TokenOwner, 0, len(pairs))}
	var endpoints []string
	seen := map[string]bool{}
	for i, p := range pairs {
		t, err := ParseToken(p.Token)
		if err != nil {
			return Ring{}, errclass.Wrapf("tokenring", err, "token endpoints entry %d", i)
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
			return Ring{}, errclass.Wrapf("tokenring", err, "location of %s", ep)
		}
		ring.Locations[ep] = loc
	}
	return ring, nil
}
