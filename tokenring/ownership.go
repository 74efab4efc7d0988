package tokenring

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
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

// Replication is a keyspace's replication settings. Snapshot.Validate
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

// Snapshot is what the analysis compares: a ring and the replication of
// each vnode keyspace (leave tablet keyspaces out: ScyllaDB cleans those
// itself, and the ring says nothing about where their data lives).
type Snapshot struct {
	Ring      Ring                   `json:"ring"`
	Keyspaces map[string]Replication `json:"keyspaces"`
}

// Validate checks that the snapshot can be analysed and that each
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
// both snapshots; hosts call it too before keeping a snapshot as a
// baseline. The error names the keyspace.
func (s Snapshot) Validate() error {
	names := endpointNames{ids: map[string]int32{}}
	if _, err := compileRing(s.Ring, &names); err != nil {
		return err
	}
	var dcs map[string]bool // of the ring's endpoints; built on first need
	for _, ks := range slices.Sorted(maps.Keys(s.Keyspaces)) {
		r := s.Keyspaces[ks]
		if err := validateReplication(r); err != nil {
			return fmt.Errorf("keyspace %q: %w", ks, err)
		}
		if r.Strategy != NetworkTopologyStrategy {
			continue
		}
		if dcs == nil {
			var err error
			if dcs, err = ringDatacenters(s.Ring); err != nil {
				return fmt.Errorf("keyspace %q: %w", ks, err)
			}
		}
		for _, dc := range slices.Sorted(maps.Keys(r.Datacenters)) {
			if r.Datacenters[dc] > 0 && !dcs[dc] {
				return fmt.Errorf("keyspace %q: %w: %w: datacenter %q (factor %d) has no endpoint in the ring; the ring has %s",
					ks, ErrInvalidReplication, ErrUnknownDatacenter, dc, r.Datacenters[dc], describeDatacenters(dcs))
			}
		}
	}
	return nil
}

// ringDatacenters returns the datacenters of the ring's endpoints.
func ringDatacenters(r Ring) (map[string]bool, error) {
	dcs := map[string]bool{}
	for _, o := range r.Owners {
		loc, ok := r.Locations[o.Endpoint]
		if !ok || loc.Datacenter == "" {
			return nil, fmt.Errorf("%w: %q", ErrMissingLocation, o.Endpoint)
		}
		dcs[loc.Datacenter] = true
	}
	return dcs, nil
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

// Range is the token range (Start, End]. Start == End is the whole ring.
type Range struct {
	Start Token `json:"start"`
	End   Token `json:"end"`
}

// Contains reports whether t falls in the range, honouring the wrap.
func (r Range) Contains(t Token) bool {
	switch {
	case r.Start == r.End:
		return true
	case r.Start < r.End:
		return r.Start < t && t <= r.End
	default: // wraps past the largest token
		return t > r.Start || t <= r.End
	}
}

// KeyspaceChange is how one node's share of one keyspace changed.
type KeyspaceChange struct {
	// Lost are ranges the node held a replica of before and no longer
	// does: their data is still on its disk and only a cleanup removes it.
	Lost []Range `json:"lost,omitempty"`
	// Gained are ranges the node replicates now and did not before:
	// streamed in, nothing stale, no cleanup needed.
	Gained []Range `json:"gained,omitempty"`
}

// NodeChange is one endpoint's change over every analysed keyspace.
type NodeChange struct {
	Endpoint string `json:"endpoint"`
	// Keyspaces holds only the keyspaces where the node lost or gained.
	Keyspaces map[string]KeyspaceChange `json:"keyspaces,omitempty"`
}

// NeedsCleanup reports whether the node lost a range of any keyspace.
func (n NodeChange) NeedsCleanup() bool { return len(n.LostKeyspaces()) > 0 }

// LostKeyspaces lists, sorted, the keyspaces in which the node lost ranges.
func (n NodeChange) LostKeyspaces() []string {
	var names []string
	for name, ch := range n.Keyspaces {
		if len(ch.Lost) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Analysis is the result of Analyze: one entry for every endpoint of the
// after ring. Endpoints that left the ring are not listed: there is no
// node left to clean.
type Analysis struct {
	Nodes map[string]NodeChange `json:"nodes"`
}

// NeedsCleanup lists, sorted, the endpoints that lost ranges.
func (a Analysis) NeedsCleanup() []string {
	var eps []string
	for ep, n := range a.Nodes {
		if n.NeedsCleanup() {
			eps = append(eps, ep)
		}
	}
	sort.Strings(eps)
	return eps
}

// Errors of Analyze, for errors.Is; the wrapping error names the token,
// endpoint or keyspace.
var (
	// ErrInvalidRing: a token owned twice, or an empty endpoint name.
	ErrInvalidRing = errors.New("invalid token ring")
	// ErrInvalidReplication: unknown strategy, a negative factor, no
	// replicas at all, or a datacenter the ring does not have (see
	// Snapshot.Validate).
	ErrInvalidReplication = errors.New("invalid replication")
	// ErrUnknownDatacenter: a NetworkTopologyStrategy keyspace asks for
	// replicas in a datacenter without endpoints in the ring (a typo, or a
	// replication from another cluster). Errors wrapping it also wrap
	// ErrInvalidReplication.
	ErrUnknownDatacenter = errors.New("datacenter not in the ring")
	// ErrMissingLocation: a NetworkTopologyStrategy keyspace is analysed
	// and an endpoint of the ring has no datacenter.
	ErrMissingLocation = errors.New("endpoint without location")
)

// Analyze compares who replicated which token ranges before and after, for
// every keyspace present in both snapshots (a dropped keyspace left nothing
// to clean; a new one had nothing before), and reports per node what it
// lost and gained.
//
// It computes replicas the way ScyllaDB does for vnode keyspaces: a token
// owns (previous token, token]; SimpleStrategy takes the next distinct
// endpoints clockwise; NetworkTopologyStrategy fills each datacenter's
// factor walking clockwise, taking a new rack whenever it meets one and a
// repeated rack only while the datacenter has fewer racks than its factor.
//
// Both snapshots must pass Snapshot.Validate; the error says which one
// failed and why, and nothing is analysed.
//
// Analyze is pure: no I/O, no goroutines, safe to call concurrently on
// snapshots nobody mutates. It costs a few sorts of the rings, not a walk of
// the whole ring per range.
func Analyze(before, after Snapshot) (Analysis, error) {
	if err := before.Validate(); err != nil {
		return Analysis{}, fmt.Errorf("before: %w", err)
	}
	if err := after.Validate(); err != nil {
		return Analysis{}, fmt.Errorf("after: %w", err)
	}
	names := endpointNames{ids: map[string]int32{}}
	b, err := compileRing(before.Ring, &names)
	if err != nil {
		return Analysis{}, fmt.Errorf("before ring: %w", err)
	}
	a, err := compileRing(after.Ring, &names)
	if err != nil {
		return Analysis{}, fmt.Errorf("after ring: %w", err)
	}
	b.finish()
	a.finish()

	result := Analysis{Nodes: make(map[string]NodeChange, len(a.members))}
	for _, id := range a.members {
		result.Nodes[names.list[id]] = NodeChange{Endpoint: names.list[id]}
	}

	keyspaces := make([]string, 0, len(after.Keyspaces))
	for name := range after.Keyspaces {
		if _, ok := before.Keyspaces[name]; ok {
			keyspaces = append(keyspaces, name)
		}
	}
	sort.Strings(keyspaces)

	acc := newChangeAccumulator(len(names.list))
	placedBefore := map[string]placement{}
	placedAfter := map[string]placement{}
	for _, ks := range keyspaces {
		rb, ra := before.Keyspaces[ks], after.Keyspaces[ks]
		if err := validateReplication(rb); err != nil {
			return Analysis{}, fmt.Errorf("keyspace %q before: %w", ks, err)
		}
		if err := validateReplication(ra); err != nil {
			return Analysis{}, fmt.Errorf("keyspace %q after: %w", ks, err)
		}
		if rb.Strategy == LocalStrategy || ra.Strategy == LocalStrategy {
			continue
		}
		if rb.Strategy == EverywhereStrategy && ra.Strategy == EverywhereStrategy {
			// Every member holds everything: only newcomers change.
			for _, id := range a.members {
				if !b.isMember[id] {
					acc.add(id, false, Range{Start: 0, End: 0})
				}
			}
		} else {
			pb, err := placeCached(placedBefore, b, rb)
			if err != nil {
				return Analysis{}, fmt.Errorf("keyspace %q before: %w", ks, err)
			}
			pa, err := placeCached(placedAfter, a, ra)
			if err != nil {
				return Analysis{}, fmt.Errorf("keyspace %q after: %w", ks, err)
			}
			diffPlacements(b, a, pb, pa, acc)
		}
		acc.flush(ks, a.isMember, names.list, result.Nodes)
	}
	return result, nil
}

// endpointNames numbers endpoints so the hot loops compare int32s.
type endpointNames struct {
	ids  map[string]int32
	list []string
}

func (n *endpointNames) id(name string) int32 {
	if id, ok := n.ids[name]; ok {
		return id
	}
	id := int32(len(n.list))
	n.ids[name] = id
	n.list = append(n.list, name)
	return id
}

// compiledRing is a Ring sorted and numbered for the walks.
type compiledRing struct {
	tokens   []Token
	owner    []int32 // endpoint id per token
	members  []int32 // distinct endpoint ids, in id order
	isMember []bool  // by endpoint id; sized when the analysis has all ids
	// locations by endpoint name, for NetworkTopologyStrategy
	locations map[string]Location
	names     *endpointNames
}

func compileRing(r Ring, names *endpointNames) (compiledRing, error) {
	// Number the endpoints first and sort pointer-free (token, id) pairs:
	// sorting the caller's TokenOwners (with their strings) costs several
	// times more, most of it in the garbage collector.
	pairs := make([]ownedToken, len(r.Owners))
	for i, o := range r.Owners {
		if o.Endpoint == "" {
			return compiledRing{}, fmt.Errorf("%w: token %v has no endpoint", ErrInvalidRing, o.Token)
		}
		pairs[i] = ownedToken{token: o.Token, owner: names.id(o.Endpoint)}
	}
	radixSortByToken(pairs)
	c := compiledRing{
		tokens:    make([]Token, len(pairs)),
		owner:     make([]int32, len(pairs)),
		locations: r.Locations,
		names:     names,
	}
	seen := map[int32]bool{}
	for i, p := range pairs {
		if i > 0 && pairs[i-1].token == p.token {
			return compiledRing{}, fmt.Errorf("%w: token %v owned twice (%q and %q)",
				ErrInvalidRing, p.token, names.list[pairs[i-1].owner], names.list[p.owner])
		}
		c.tokens[i], c.owner[i] = p.token, p.owner
		if !seen[p.owner] {
			seen[p.owner] = true
			c.members = append(c.members, p.owner)
		}
	}
	slices.Sort(c.members)
	return c, nil
}

type ownedToken struct {
	token Token
	owner int32
}

// radixSortByToken is a stable LSD radix sort on the token, a byte per
// pass, skipping passes where every key has the same byte. Rings are large
// and their tokens uniformly random, which is radix sort's best case.
func radixSortByToken(pairs []ownedToken) {
	if len(pairs) < 256 {
		slices.SortStableFunc(pairs, func(x, y ownedToken) int { return cmp.Compare(x.token, y.token) })
		return
	}
	key := func(t Token) uint64 { return uint64(t) ^ 1<<63 } // signed order as unsigned
	src, dst := pairs, make([]ownedToken, len(pairs))
	for shift := uint(0); shift < 64; shift += 8 {
		var count [256]int
		for _, p := range src {
			count[byte(key(p.token)>>shift)]++
		}
		if count[byte(key(src[0].token)>>shift)] == len(src) {
			continue
		}
		pos := 0
		for b, n := range count {
			count[b] = pos
			pos += n
		}
		for _, p := range src {
			b := byte(key(p.token) >> shift)
			dst[count[b]] = p
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &pairs[0] {
		copy(pairs, src)
	}
}

// finish sizes isMember once every endpoint of both rings has an id.
func (c *compiledRing) finish() {
	if len(c.isMember) == len(c.names.list) {
		return
	}
	c.isMember = make([]bool, len(c.names.list))
	for _, id := range c.members {
		c.isMember[id] = true
	}
}

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

// placement holds the replicas of every token's range: perToken endpoint
// ids for token i at reps[i*perToken:]. Every range of a ring has the same
// number of replicas, because each walk can always complete.
type placement struct {
	perToken int
	reps     []int32
	// everyone marks EverywhereStrategy: every member replicates every
	// range, kept symbolic instead of members × tokens entries.
	everyone bool
}

func (p placement) of(i int) []int32 { return p.reps[i*p.perToken : (i+1)*p.perToken] }

// placeCached computes a placement once per distinct replication setting:
// clusters often have many keyspaces with identical settings.
func placeCached(cache map[string]placement, c compiledRing, r Replication) (placement, error) {
	key := replicationKey(r)
	if p, ok := cache[key]; ok {
		return p, nil
	}
	var p placement
	var err error
	switch r.Strategy {
	case SimpleStrategy:
		p = placeSimple(c, r.ReplicationFactor)
	case NetworkTopologyStrategy:
		p, err = placeNetworkTopology(c, r.Datacenters)
	case EverywhereStrategy:
		p = placement{everyone: true}
	}
	if err != nil {
		return placement{}, err
	}
	cache[key] = p
	return p, nil
}

func replicationKey(r Replication) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", r.Strategy, r.ReplicationFactor)
	dcs := make([]string, 0, len(r.Datacenters))
	for dc := range r.Datacenters {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs)
	for _, dc := range dcs {
		fmt.Fprintf(&b, "/%q=%d", dc, r.Datacenters[dc])
	}
	return b.String()
}

// placeSimple walks clockwise from each token collecting distinct endpoints.
func placeSimple(c compiledRing, rf int) placement {
	k := min(rf, len(c.members))
	p := placement{perToken: k, reps: make([]int32, 0, len(c.tokens)*k)}
	if k == 0 {
		return p
	}
	n := len(c.tokens)
	for i := range n {
		start := len(p.reps)
		for step := 0; step < n && len(p.reps)-start < k; step++ {
			ep := c.owner[(i+step)%n]
			if !slices.Contains(p.reps[start:], ep) {
				p.reps = append(p.reps, ep)
			}
		}
	}
	return p
}

// placeNetworkTopology fills each datacenter separately. That equals
// ScyllaDB's single walk over the whole ring: a datacenter's choice depends
// only on its own endpoints in ring order, and racks and endpoints never
// span datacenters. Walking each datacenter's own sub-ring is what keeps
// this cheap: the walk stops after a handful of that datacenter's tokens
// instead of crossing every other datacenter's.
func placeNetworkTopology(c compiledRing, factors map[string]int) (placement, error) {
	dcs := make([]string, 0, len(factors))
	for dc, rf := range factors {
		if rf > 0 {
			dcs = append(dcs, dc)
		}
	}
	sort.Strings(dcs)
	// dcOf numbers each endpoint's datacenter by its place in dcs, or -1
	// for datacenters the keyspace does not replicate to.
	dcOf := make([]int, len(c.names.list))
	for _, id := range c.members {
		name := c.names.list[id]
		loc, ok := c.locations[name]
		if !ok || loc.Datacenter == "" {
			return placement{}, fmt.Errorf("%w: %q", ErrMissingLocation, name)
		}
		dcOf[id] = -1
		if k, found := slices.BinarySearch(dcs, loc.Datacenter); found {
			dcOf[id] = k
		}
	}

	type dcPlan struct {
		sub     []int   // global token indexes of this datacenter's tokens
		rackOf  []int32 // rack number per endpoint id (only this dc's)
		nodes   int
		racks   int
		perTok  int
		repeats int
		reps    []int32 // perTok per sub position
	}
	plans := make([]dcPlan, 0, len(dcs))
	perToken := 0
	for dcIndex, dc := range dcs {
		pl := dcPlan{rackOf: make([]int32, len(c.names.list))}
		rackIDs := map[string]int32{}
		for _, id := range c.members {
			if dcOf[id] != dcIndex {
				continue
			}
			pl.nodes++
			rack := c.locations[c.names.list[id]].Rack
			r, ok := rackIDs[rack]
			if !ok {
				r = int32(len(rackIDs))
				rackIDs[rack] = r
			}
			pl.rackOf[id] = r
		}
		if pl.nodes == 0 {
			continue
		}
		// Tokens per node are roughly even: size sub once instead of growing it.
		pl.sub = make([]int, 0, len(c.owner)/len(c.members)*pl.nodes+pl.nodes)
		for i, ep := range c.owner {
			if dcOf[ep] == dcIndex {
				pl.sub = append(pl.sub, i)
			}
		}
		pl.racks = len(rackIDs)
		rf := factors[dc]
		pl.perTok = min(rf, pl.nodes)
		pl.repeats = rf - pl.racks
		pl.reps = fillDatacenter(c.owner, pl.sub, pl.rackOf, pl.perTok, pl.repeats)
		perToken += pl.perTok
		plans = append(plans, pl)
	}

	n := len(c.tokens)
	p := placement{perToken: perToken, reps: make([]int32, n*perToken)}
	offset := 0
	for _, pl := range plans {
		// A range's replicas in this datacenter are those of the first of
		// its tokens at or after the range's end, wrapping to the first.
		next := 0
		for i := range n {
			for next < len(pl.sub) && pl.sub[next] < i {
				next++
			}
			s := next
			if s == len(pl.sub) {
				s = 0
			}
			copy(p.reps[i*perToken+offset:], pl.reps[s*pl.perTok:(s+1)*pl.perTok])
		}
		offset += pl.perTok
	}
	return p, nil
}

// fillDatacenter runs ScyllaDB's per-datacenter replica selection from every
// position of the datacenter's sub-ring.
func fillDatacenter(owner []int32, sub []int, rackOf []int32, perTok, repeats int) []int32 {
	reps := make([]int32, 0, len(sub)*perTok)
	var racksSeen []int32
	for s := range sub {
		start := len(reps)
		left, repeatsLeft := perTok, repeats
		racksSeen = racksSeen[:0]
		for step := 0; step < len(sub) && left > 0; step++ {
			ep := owner[sub[(s+step)%len(sub)]]
			rack := rackOf[ep]
			switch {
			case !slices.Contains(racksSeen, rack):
				racksSeen = append(racksSeen, rack)
				reps = append(reps, ep)
				left--
			case repeatsLeft > 0 && !slices.Contains(reps[start:], ep):
				reps = append(reps, ep)
				repeatsLeft--
				left--
			}
		}
	}
	return reps
}

// diffPlacements sweeps the union of both rings' tokens. Each elementary
// interval (previous union token, union token] lies inside exactly one range
// of each ring, so comparing the two replica sets there is exact.
func diffPlacements(b, a compiledRing, pb, pa placement, acc *changeAccumulator) {
	bt, at := b.tokens, a.tokens
	if len(bt) == 0 && len(at) == 0 {
		return
	}
	// The first interval wraps: it starts after the largest token of both.
	var prev Token
	switch {
	case len(bt) == 0:
		prev = at[len(at)-1]
	case len(at) == 0:
		prev = bt[len(bt)-1]
	default:
		prev = max(bt[len(bt)-1], at[len(at)-1])
	}
	var none []int32
	i, j := 0, 0
	for i < len(bt) || j < len(at) {
		var u Token
		switch {
		case j >= len(at):
			u = bt[i]
		case i >= len(bt):
			u = at[j]
		default:
			u = min(bt[i], at[j])
		}
		repsB, repsA := none, none
		switch {
		case pb.everyone:
			repsB = b.members
		case len(bt) > 0 && pb.perToken > 0:
			repsB = pb.of(i % len(bt))
		}
		switch {
		case pa.everyone:
			repsA = a.members
		case len(at) > 0 && pa.perToken > 0:
			repsA = pa.of(j % len(at))
		}
		if !slices.Equal(repsB, repsA) {
			r := Range{Start: prev, End: u}
			for _, ep := range repsB {
				if !holds(pa, a, repsA, ep) {
					acc.add(ep, true, r)
				}
			}
			for _, ep := range repsA {
				if !holds(pb, b, repsB, ep) {
					acc.add(ep, false, r)
				}
			}
		}
		if i < len(bt) && bt[i] == u {
			i++
		}
		if j < len(at) && at[j] == u {
			j++
		}
		prev = u
	}
}

// holds reports whether ep is among reps, in O(1) when reps is every member.
func holds(p placement, c compiledRing, reps []int32, ep int32) bool {
	if p.everyone {
		return c.isMember[ep]
	}
	return slices.Contains(reps, ep)
}

// changeAccumulator collects one keyspace's ranges per endpoint id, merging
// a range into the previous one when they touch.
type changeAccumulator struct {
	lost, gained [][]Range
	touched      []int32
	isTouched    []bool
}

func newChangeAccumulator(endpoints int) *changeAccumulator {
	return &changeAccumulator{
		lost:      make([][]Range, endpoints),
		gained:    make([][]Range, endpoints),
		isTouched: make([]bool, endpoints),
	}
}

func (c *changeAccumulator) add(ep int32, lost bool, r Range) {
	if !c.isTouched[ep] {
		c.isTouched[ep] = true
		c.touched = append(c.touched, ep)
	}
	list := &c.gained[ep]
	if lost {
		list = &c.lost[ep]
	}
	if n := len(*list); n > 0 && (*list)[n-1].End == r.Start && (*list)[n-1].Start != (*list)[n-1].End {
		(*list)[n-1].End = r.End
		return
	}
	*list = append(*list, r)
}

// flush moves the keyspace's changes of current members into nodes and
// resets the accumulator for the next keyspace.
func (c *changeAccumulator) flush(keyspace string, isMember []bool, names []string, nodes map[string]NodeChange) {
	for _, ep := range c.touched {
		lost, gained := joinWrap(c.lost[ep]), joinWrap(c.gained[ep])
		c.lost[ep], c.gained[ep], c.isTouched[ep] = nil, nil, false
		if int(ep) >= len(isMember) || !isMember[ep] || (len(lost) == 0 && len(gained) == 0) {
			continue
		}
		n := nodes[names[ep]]
		if n.Keyspaces == nil {
			n.Keyspaces = map[string]KeyspaceChange{}
		}
		n.Keyspaces[keyspace] = KeyspaceChange{Lost: lost, Gained: gained}
		nodes[names[ep]] = n
	}
	c.touched = c.touched[:0]
}

// joinWrap merges the last range into the first when they meet across the
// wrap; if they were the only pieces, the result is the whole ring.
func joinWrap(rs []Range) []Range {
	if len(rs) < 2 {
		return rs
	}
	first, last := rs[0], rs[len(rs)-1]
	if last.End == first.Start && first.Start != first.End && last.Start != last.End {
		rs[0].Start = last.Start
		rs = rs[:len(rs)-1]
	}
	return rs
}
