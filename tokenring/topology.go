package tokenring

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Location is where an endpoint sits, as the snitch reports it.
type Location struct {
	Datacenter string `json:"datacenter"`
	Rack       string `json:"rack"`
}

// TokenOwner is one entry of GET /storage_service/tokens_endpoint, parsed.
type TokenOwner struct {
	Token    Token  `json:"token"`
	Endpoint string `json:"endpoint"`
}

// Ring is the token ring as one node saw it: which endpoint owns each token,
// and where each endpoint sits. Owners may come in any order. Endpoints are
// compared as plain strings, so use one naming (IP address or host ID) for
// both rings of an analysis.
type Ring struct {
	Owners []TokenOwner `json:"owners"`
	// Locations is required for every endpoint of the ring as soon as a
	// NetworkTopologyStrategy keyspace is analysed.
	Locations map[string]Location `json:"locations,omitempty"`
}

// Strategy is a keyspace's replication strategy class, short name.
type Strategy string

// The replication strategies ScyllaDB uses for vnode keyspaces.
const (
	// SimpleStrategy puts replicas on the next ReplicationFactor distinct
	// endpoints clockwise, ignoring topology.
	SimpleStrategy Strategy = "SimpleStrategy"
	// NetworkTopologyStrategy fills each datacenter's factor walking
	// clockwise, preferring racks not used yet.
	NetworkTopologyStrategy Strategy = "NetworkTopologyStrategy"
	// LocalStrategy keeps data on the node that wrote it (system tables):
	// never replicated, never cleaned, skipped by the analysis.
	LocalStrategy Strategy = "LocalStrategy"
	// EverywhereStrategy replicates everything to every node: a member
	// never loses a range while it stays in the ring.
	EverywhereStrategy Strategy = "EverywhereStrategy"
)

// ParseStrategy accepts a short name or a fully qualified class name
// ("org.apache.cassandra.locator.NetworkTopologyStrategy") as system_schema
// shows it. An unknown class is an error wrapping ErrInvalidReplication.
func ParseStrategy(class string) (Strategy, error) {
	short := class[strings.LastIndexByte(class, '.')+1:]
	switch s := Strategy(short); s {
	case SimpleStrategy, NetworkTopologyStrategy, LocalStrategy, EverywhereStrategy:
		return s, nil
	}
	return "", fmt.Errorf("%w: unknown replication strategy class %q", ErrInvalidReplication, class)
}

// Replication is a keyspace's replication settings. Topology.Validate
// says which settings are consistent with a ring.
type Replication struct {
	Strategy Strategy `json:"strategy"`
	// ReplicationFactor is SimpleStrategy's factor, at least 1.
	ReplicationFactor int `json:"replication_factor,omitempty"`
	// Datacenters is NetworkTopologyStrategy's factor per datacenter. At
	// least one factor is positive; a datacenter with a positive factor
	// must have endpoints in the ring (ErrUnknownDatacenter otherwise). A
	// factor of 0 means no replicas there: that is how a datacenter is
	// drained before it is removed, and it may name a datacenter that is
	// gone.
	Datacenters map[string]int `json:"datacenters,omitempty"`
}

// Topology is what the analysis compares: a ring and the replication of
// each vnode keyspace (leave tablet keyspaces out: ScyllaDB cleans those
// itself, and the ring says nothing about where their data lives).
type Topology struct {
	Ring      Ring                   `json:"ring"`
	Keyspaces map[string]Replication `json:"keyspaces"`
}

// Validate checks that the topology can be analysed and that each
// keyspace's replication is consistent with the ring:
//
//   - the ring: no token owned twice, no empty endpoint (ErrInvalidRing);
//   - a known strategy, no negative factor, and replicas somewhere:
//     SimpleStrategy with a factor of at least 1, NetworkTopologyStrategy
//     with at least one positive factor (ErrInvalidReplication);
//   - NetworkTopologyStrategy: every endpoint of the ring has a
//     datacenter (ErrMissingLocation), and every datacenter with a
//     positive factor has endpoints in the ring (ErrUnknownDatacenter,
//     which also matches ErrInvalidReplication).
//
// A replication that asks for no replicas, or for replicas in a
// datacenter the ring does not have, would make every node of the ring
// (or of the other datacenters) look as if it lost its ranges, and so ask
// for cleanups everywhere; ScyllaDB itself refuses both (a factor of 0
// everywhere leaves no replica, and an unknown datacenter is an
// "Unrecognized strategy option" in validate_replication_strategy,
// locator/abstract_replication_strategy.cc). Analyze calls Validate on
// both topologies; hosts call it too before keeping a topology as a
// baseline. The error names the keyspace.
func (s Topology) Validate() error {
	_, err := s.compile(&endpointNames{ids: map[string]int32{}})
	return err
}

// compile is Validate keeping the ring it sorted, so that Analyze sorts
// each ring once.
func (s Topology) compile(names *endpointNames) (compiledRing, error) {
	c, err := compileRing(s.Ring, names)
	if err != nil {
		return compiledRing{}, err
	}
	var dcs map[string]bool // of the ring's endpoints; built on first need
	for _, ks := range slices.Sorted(maps.Keys(s.Keyspaces)) {
		r := s.Keyspaces[ks]
		if err := validateReplication(r); err != nil {
			return compiledRing{}, errclass.Wrapf("tokenring", err, "keyspace %q", ks)
		}
		if r.Strategy != NetworkTopologyStrategy {
			continue
		}
		if dcs == nil {
			if dcs, err = c.datacenters(s.Ring); err != nil {
				return compiledRing{}, errclass.Wrapf("tokenring", err, "keyspace %q", ks)
			}
		}
		for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
			if r.Datacenters[dc] > 0 && !dcs[dc] {
				return compiledRing{}, fmt.Errorf("tokenring: keyspace %q: %w: %w: datacenter %q (factor %d) has no endpoint in the ring; the ring has %s",
					ks, ErrInvalidReplication, ErrUnknownDatacenter, dc, r.Datacenters[dc], describeDatacenters(dcs))
			}
		}
	}
	return c, nil
}

// datacenters returns the datacenters of the ring's endpoints, looking
// each endpoint up once rather than once per token.
func (c compiledRing) datacenters(r Ring) (map[string]bool, error) {
	dcs := map[string]bool{}
	for _, id := range c.members {
		loc, ok := c.locations[c.names.list[id]]
		if !ok || loc.Datacenter == "" {
			return nil, missingLocation(r)
		}
		dcs[loc.Datacenter] = true
	}
	return dcs, nil
}

// missingLocation names the first endpoint, in the ring's order, that
// has no datacenter.
func missingLocation(r Ring) error {
	for _, o := range r.Owners {
		if loc, ok := r.Locations[o.Endpoint]; !ok || loc.Datacenter == "" {
			return fmt.Errorf("%w: %q", ErrMissingLocation, o.Endpoint)
		}
	}
	return ErrMissingLocation
}

func describeDatacenters(dcs map[string]bool) string {
	if len(dcs) == 0 {
		return "no datacenter"
	}
	quoted := make([]string, 0, len(dcs))
	for _, dc := range slices.Sorted(maps.Keys(dcs)) {
		quoted = append(quoted, strconv.Quote(dc))
	}
	return strings.Join(quoted, ", ")
}

// Errors of Analyze, for errors.Is; the wrapping error names the token,
// endpoint or keyspace.
var (
	// ErrInvalidRing: a token owned twice, or an empty endpoint name.
	ErrInvalidRing = errors.New("tokenring: invalid token ring")
	// ErrInvalidReplication: unknown strategy, a negative factor, no
	// replicas at all, or a datacenter the ring does not have (see
	// Topology.Validate).
	ErrInvalidReplication = errors.New("tokenring: invalid replication")
	// ErrUnknownDatacenter: a NetworkTopologyStrategy keyspace asks for
	// replicas in a datacenter without endpoints in the ring (a typo, or a
	// replication from another cluster). Errors wrapping it also wrap
	// ErrInvalidReplication.
	ErrUnknownDatacenter = errors.New("tokenring: datacenter not in the ring")
	// ErrMissingLocation: a NetworkTopologyStrategy keyspace is analysed
	// and an endpoint of the ring has no datacenter.
	ErrMissingLocation = errors.New("tokenring: endpoint without location")
)

func validateReplication(r Replication) error {
	switch r.Strategy {
	case SimpleStrategy:
		if r.ReplicationFactor < 1 {
			return fmt.Errorf("%w: SimpleStrategy replication factor %d: want at least 1", ErrInvalidReplication, r.ReplicationFactor)
		}
	case NetworkTopologyStrategy:
		positive := false
		for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
			rf := r.Datacenters[dc]
			if rf < 0 {
				return fmt.Errorf("%w: datacenter %q has factor %d", ErrInvalidReplication, dc, rf)
			}
			positive = positive || rf > 0
		}
		if !positive {
			return fmt.Errorf("%w: NetworkTopologyStrategy with no datacenter factor above 0 (%v): no replicas anywhere", ErrInvalidReplication, r.Datacenters)
		}
	case LocalStrategy, EverywhereStrategy:
	default:
		return fmt.Errorf("%w: unknown strategy %q", ErrInvalidReplication, r.Strategy)
	}
	return nil
}
