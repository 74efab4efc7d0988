package tokenring

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// Baselines is the record that makes cleanup after provisioning work
// (scylla-operator#3102): per node, the topology its disk is known to be
// clean for. A node's baseline is taken when it is first seen in the ring
// (it streamed exactly what it owned then) or while the cluster held no
// data (nothing could be left behind), and moves forward when a cleanup
// for a newer topology finishes. Baselines.Analyze compares each node with
// its own baseline, so the nodes that lost ranges to a node that joined
// after them are found even when nobody recorded a baseline before the
// join, as during a cluster's first provisioning, one node after another.
//
// It is plain data, JSON-ready: keep it where the host keeps state (a
// ConfigMap, a status field) and give it back after a restart. The
// methods are pure and return a new record; they never change the one
// they are called on, nor the topologies given to them.
type Baselines struct {
	// Topologies are the topologies some node's baseline refers to, each
	// once.
	Topologies []Topology `json:"topologies,omitempty"`
	// Nodes maps each endpoint to its baseline.
	Nodes map[string]Baseline `json:"nodes,omitempty"`
}

// Baseline is one node's baseline.
type Baseline struct {
	// Topology indexes Baselines.Topologies.
	Topology int `json:"topology"`
	// Reason says why the node is clean for that topology.
	Reason BaselineReason `json:"reason"`
}

// BaselineReason says why a node's disk is clean for its baseline.
type BaselineReason string

// The reasons a baseline is taken.
const (
	// BaselineNoData: the cluster held no data when the topology was
	// observed, so nothing on the node's disk can belong to a range it
	// lost before.
	BaselineNoData BaselineReason = "NoData"
	// BaselineJoined: the node was first seen in this topology while the
	// cluster held data: it streamed the ranges it owned at its join and
	// holds nothing else. When several nodes are first seen at once, each
	// gets the ring as it was when it joined (see ObserveOptions.JoinOrder).
	BaselineJoined BaselineReason = "Joined"
	// BaselineCleaned: a cleanup for this topology finished on the node.
	BaselineCleaned BaselineReason = "Cleaned"
	// BaselineNoLoss: the node lost no range between its previous
	// baseline and this topology (it only kept or gained), so it holds
	// nothing this topology does not give it.
	BaselineNoLoss BaselineReason = "NoLoss"
)

// DataPresence says whether the cluster holds data that a range move
// can leave behind.
type DataPresence int

const (
	// DataFromKeyspaces decides with HoldsData: the default.
	DataFromKeyspaces DataPresence = iota
	// DataPresent: the host says the cluster holds data.
	DataPresent
	// DataAbsent: the host says the cluster holds none (for example, it
	// knows that no client has connected yet, and counts the rows of
	// replicated system keyspaces as nothing worth a cleanup).
	DataAbsent
)

// ObserveOptions configure Baselines.Observe; the zero value decides data
// from the keyspaces and knows no join order.
type ObserveOptions struct {
	// Data says whether the cluster holds data now.
	Data DataPresence
	// JoinOrder lists endpoints in the order they joined the ring, as far
	// as the host knows (under a StatefulSet's OrderedReady pod
	// management, ordinal order). It matters only when several nodes are
	// first seen in one observation while the cluster holds data: each
	// then gets, as its baseline, the ring without the nodes that joined
	// after it (a join adds the newcomer's tokens and moves no other
	// node's). A node it does not list, or every node when it is empty,
	// is taken to have joined before all the others first seen with it,
	// which can only ask for more cleanups than needed, never fewer.
	JoinOrder []string
}

// ErrNoBaseline: Baselines.Analyze met a ring member that has no
// baseline; call Observe with that ring first.
var ErrNoBaseline = errors.New("tokenring: node has no baseline")

// ErrInvalidBaselines: a Baselines record that cannot be used (an index
// out of range, an unknown reason, a topology that fails
// Topology.Validate): a corrupt or hand-edited record. Nothing is guessed
// from it.
var ErrInvalidBaselines = errors.New("tokenring: invalid baselines")

// HoldsData is DataFromKeyspaces' rule: a topology holds data when it has
// any keyspace that is not LocalStrategy. Replicated system keyspaces
// count (system_auth, system_distributed, system_traces): they hold rows
// from the first node's start, and they are what scylla-operator#3102
// found left stale after provisioning, slowing a later decommission. A
// host that wants to skip such cheap cleanups says DataAbsent.
func HoldsData(t Topology) bool {
	for _, r := range t.Keyspaces {
		if r.Strategy != LocalStrategy {
			return true
		}
	}
	return false
}

// Observe records what a node's baseline is for every member of now's
// ring, and returns the new record. Call it on every reconcile, and
// always before a node starts joining (scylla-operator waits for each
// member Service's annotations before it scales a rack: the same
// moment), so that each join is seen:
//
//   - with no data (opts.Data, or HoldsData), every member's baseline
//     becomes now, reason BaselineNoData;
//   - with data, a member without a baseline gets one, reason
//     BaselineJoined: now, or now without the nodes first seen with it
//     that joined after it (ObserveOptions.JoinOrder); a member with a
//     baseline keeps it while it lost ranges since (its cleanup is due),
//     and otherwise moves on to now, reason BaselineNoLoss (so a range it
//     gains and later loses is still seen, and a keyspace created later
//     is compared from a recent ring);
//   - a keyspace now has that a baseline lacks is added to it, with its
//     replication as first seen (NetworkTopologyStrategy factors only for
//     the datacenters that baseline's ring has): it was created after the
//     baseline, so the node may hold its rows for every range the node
//     owned then. Analyze would otherwise skip it as "new", and miss
//     exactly the ranges lost after data was first written;
//   - nodes that left the ring are forgotten (one that comes back joins
//     anew), and topologies nobody refers to are dropped.
//
// now must pass Topology.Validate, and b must pass Validate; otherwise
// the error says why and b is not changed. With data, Observe runs the
// package's Analyze once per distinct baseline, as Baselines.Analyze does.
func (b Baselines) Observe(now Topology, opts ObserveOptions) (Baselines, error) {
	if err := now.Validate(); err != nil {
		return b, errclass.Wrapf("tokenring", err, "observed topology")
	}
	if err := b.Validate(); err != nil {
		return b, err
	}
	members := ringMembers(now.Ring)
	hasData := opts.Data == DataPresent || (opts.Data == DataFromKeyspaces && HoldsData(now))
	out := Baselines{Nodes: make(map[string]Baseline, len(members))}
	if !hasData {
		out.Topologies = []Topology{now}
		for _, ep := range members {
			out.Nodes[ep] = Baseline{Topology: 0, Reason: BaselineNoData}
		}
		return out, nil
	}

	// Members with a baseline keep it, with the keyspaces created since;
	// those that lost nothing since move on to now.
	groups := map[int][]string{}
	var newcomers []string
	for _, ep := range members {
		if old, ok := b.Nodes[ep]; ok {
			groups[old.Topology] = append(groups[old.Topology], ep)
		} else {
			newcomers = append(newcomers, ep)
		}
	}
	nowIdx := -1
	useNow := func() int {
		if nowIdx < 0 {
			nowIdx = len(out.Topologies)
			out.Topologies = append(out.Topologies, now)
		}
		return nowIdx
	}
	for _, oldIdx := range slices.Sorted(maps.Keys(groups)) {
		base := adoptKeyspaces(b.Topologies[oldIdx], now)
		a, err := Analyze(base, now)
		if err != nil {
			return b, errclass.Wrapf("tokenring", err, "baseline of %q", groups[oldIdx])
		}
		keptIdx := -1
		unchanged := reflect.DeepEqual(base, now)
		for _, ep := range groups[oldIdx] {
			reason := b.Nodes[ep].Reason
			switch {
			case a.Nodes[ep].NeedsCleanup():
				if keptIdx < 0 {
					keptIdx = len(out.Topologies)
					out.Topologies = append(out.Topologies, base)
				}
				out.Nodes[ep] = Baseline{Topology: keptIdx, Reason: reason}
			case unchanged:
				out.Nodes[ep] = Baseline{Topology: useNow(), Reason: reason}
			default:
				out.Nodes[ep] = Baseline{Topology: useNow(), Reason: BaselineNoLoss}
			}
		}
	}
	if len(newcomers) == 1 {
		out.Nodes[newcomers[0]] = Baseline{Topology: useNow(), Reason: BaselineJoined}
	}
	if len(newcomers) <= 1 {
		return out, nil
	}

	// Several nodes first seen together: rebuild the ring each joined.
	order := map[string]int{}
	for i, ep := range opts.JoinOrder {
		if _, dup := order[ep]; !dup {
			order[ep] = i
		}
	}
	for _, ep := range newcomers {
		exclude := map[string]bool{}
		if pos, known := order[ep]; known {
			for _, other := range newcomers {
				if op, ok := order[other]; other != ep && (!ok || op > pos) {
					exclude[other] = true
				}
			}
		} else {
			for _, other := range newcomers {
				exclude[other] = other != ep
			}
		}
		joined := withoutEndpoints(now, exclude)
		if err := joined.Validate(); err != nil {
			return b, errclass.Wrapf("tokenring", err, "ring when %s joined", ep)
		}
		idx := slices.IndexFunc(out.Topologies, func(t Topology) bool { return reflect.DeepEqual(t, joined) })
		if idx < 0 {
			idx = len(out.Topologies)
			out.Topologies = append(out.Topologies, joined)
		}
		out.Nodes[ep] = Baseline{Topology: idx, Reason: BaselineJoined}
	}
	return out, nil
}

// RecordCleanup makes at the baseline of endpoint, reason
// BaselineCleaned: call it when a cleanup that ran for topology at
// finished (ActionRecordCleanup; at is the "now" of the analysis
// that started it). endpoint must own tokens in at.
func (b Baselines) RecordCleanup(endpoint string, at Topology) (Baselines, error) {
	if err := at.Validate(); err != nil {
		return b, errclass.Wrapf("tokenring", err, "cleaned topology")
	}
	if err := b.Validate(); err != nil {
		return b, err
	}
	if !slices.Contains(ringMembers(at.Ring), endpoint) {
		return b, fmt.Errorf("%w: %q owns no token in the cleaned topology", ErrNotJoined, endpoint)
	}
	out := Baselines{Nodes: maps.Clone(b.Nodes), Topologies: slices.Clone(b.Topologies)}
	if out.Nodes == nil {
		out.Nodes = map[string]Baseline{}
	}
	idx := slices.IndexFunc(out.Topologies, func(t Topology) bool { return reflect.DeepEqual(t, at) })
	if idx < 0 {
		idx = len(out.Topologies)
		out.Topologies = append(out.Topologies, at)
	}
	out.Nodes[endpoint] = Baseline{Topology: idx, Reason: BaselineCleaned}
	return out.compact(), nil
}

// Analyze compares every member of now's ring with its own baseline,
// running the package's Analyze once per distinct baseline, and returns
// one Analysis of all members: pass it in DecideOptions.Analysis. A
// keyspace now has and a baseline lacks is compared as Observe would add
// it, never skipped. A member without a baseline is an error wrapping
// ErrNoBaseline (call Observe first): treating it as new is the very
// mistake that leaves nodes uncleaned after provisioning.
func (b Baselines) Analyze(now Topology) (Analysis, error) {
	if err := b.Validate(); err != nil {
		return Analysis{}, err
	}
	members := ringMembers(now.Ring)
	byBaseline := map[int][]string{}
	var missing []string
	for _, ep := range members {
		bl, ok := b.Nodes[ep]
		if !ok {
			missing = append(missing, ep)
			continue
		}
		byBaseline[bl.Topology] = append(byBaseline[bl.Topology], ep)
	}
	if len(missing) > 0 {
		return Analysis{}, fmt.Errorf("%w: %q", ErrNoBaseline, missing)
	}
	out := Analysis{Nodes: make(map[string]NodeChange, len(members))}
	for _, idx := range slices.Sorted(maps.Keys(byBaseline)) {
		a, err := Analyze(adoptKeyspaces(b.Topologies[idx], now), now)
		if err != nil {
			return Analysis{}, errclass.Wrapf("tokenring", err, "baseline of %q", byBaseline[idx])
		}
		for _, ep := range byBaseline[idx] {
			out.Nodes[ep] = a.Nodes[ep]
		}
	}
	return out, nil
}

// Validate checks a record read back from storage: every index in range,
// every reason known, every topology valid. The error wraps
// ErrInvalidBaselines.
func (b Baselines) Validate() error {
	for _, ep := range slices.Sorted(maps.Keys(b.Nodes)) {
		bl := b.Nodes[ep]
		if bl.Topology < 0 || bl.Topology >= len(b.Topologies) {
			return fmt.Errorf("%w: %q refers to topology %d of %d", ErrInvalidBaselines, ep, bl.Topology, len(b.Topologies))
		}
		switch bl.Reason {
		case BaselineNoData, BaselineJoined, BaselineCleaned, BaselineNoLoss:
		default:
			return fmt.Errorf("%w: %q has reason %q", ErrInvalidBaselines, ep, bl.Reason)
		}
	}
	for i, t := range b.Topologies {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%w: topology %d: %w", ErrInvalidBaselines, i, err)
		}
	}
	return nil
}

// compact drops topologies nobody refers to, keeping the order.
func (b Baselines) compact() Baselines {
	used := make([]bool, len(b.Topologies))
	for _, bl := range b.Nodes {
		used[bl.Topology] = true
	}
	newIdx := make([]int, len(b.Topologies))
	var kept []Topology
	for i, t := range b.Topologies {
		if used[i] {
			newIdx[i] = len(kept)
			kept = append(kept, t)
		}
	}
	for ep, bl := range b.Nodes {
		bl.Topology = newIdx[bl.Topology]
		b.Nodes[ep] = bl
	}
	b.Topologies = kept
	return b
}

// ringMembers lists the endpoints that own tokens, sorted.
func ringMembers(r Ring) []string {
	seen := map[string]bool{}
	for _, o := range r.Owners {
		seen[o.Endpoint] = true
	}
	eps := slices.Collect(maps.Keys(seen))
	sort.Strings(eps)
	return eps
}

// adoptKeyspaces returns base with the keyspaces of now it lacks, fitted
// to base's ring; base itself is not changed.
func adoptKeyspaces(base, now Topology) Topology {
	var dcs map[string]bool
	out, cloned := base, false
	for _, ks := range slices.Sorted(maps.Keys(now.Keyspaces)) {
		if _, ok := base.Keyspaces[ks]; ok {
			continue
		}
		r := now.Keyspaces[ks]
		if r.Strategy == NetworkTopologyStrategy {
			if dcs == nil {
				dcs = ringDatacenters(base.Ring)
			}
			r = fitDatacenters(r, dcs)
			if r.Datacenters == nil {
				continue // no replica in any datacenter base had
			}
		}
		if !cloned {
			out.Keyspaces, cloned = make(map[string]Replication, len(base.Keyspaces)+1), true
			maps.Copy(out.Keyspaces, base.Keyspaces)
		}
		out.Keyspaces[ks] = r
	}
	return out
}

// withoutEndpoints returns t with the tokens of the excluded endpoints
// removed, and NetworkTopologyStrategy factors fitted to the datacenters
// left.
func withoutEndpoints(t Topology, exclude map[string]bool) Topology {
	out := Topology{Ring: Ring{Locations: t.Ring.Locations}}
	for _, o := range t.Ring.Owners {
		if !exclude[o.Endpoint] {
			out.Ring.Owners = append(out.Ring.Owners, o)
		}
	}
	dcs := ringDatacenters(out.Ring)
	out.Keyspaces = make(map[string]Replication, len(t.Keyspaces))
	for ks, r := range t.Keyspaces {
		if r.Strategy == NetworkTopologyStrategy {
			if r = fitDatacenters(r, dcs); r.Datacenters == nil {
				continue
			}
		}
		out.Keyspaces[ks] = r
	}
	return out
}

// ringDatacenters lists the datacenters of a ring's endpoints.
func ringDatacenters(r Ring) map[string]bool {
	dcs := map[string]bool{}
	for _, o := range r.Owners {
		if loc, ok := r.Locations[o.Endpoint]; ok && loc.Datacenter != "" {
			dcs[loc.Datacenter] = true
		}
	}
	return dcs
}

// fitDatacenters keeps the positive factors of datacenters in dcs; none
// left gives a nil Datacenters.
func fitDatacenters(r Replication, dcs map[string]bool) Replication {
	fitted := map[string]int{}
	for dc, rf := range r.Datacenters {
		if rf > 0 && dcs[dc] {
			fitted[dc] = rf
		}
	}
	if len(fitted) == 0 {
		return Replication{Strategy: r.Strategy}
	}
	return Replication{Strategy: r.Strategy, Datacenters: fitted}
}
