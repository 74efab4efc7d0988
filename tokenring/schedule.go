package tokenring

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// ScheduleLimits bound the cleanups a Scheduler lets run at once. The zero
// value is the documented defaults: at most DefaultMaxPerDatacenter
// cleanups per datacenter, all in one rack of it.
//
// scylla-operator starts a cleanup Job on every node that needs one in a
// single pass (syncJobs in pkg/controller/scyllacluster/sync_jobs.go
// applies every Job MakeJobs returns); scylla-operator#3015 asks instead
// for cleanups rack by rack, with at most a configurable number of nodes
// at once (6 by default in that proposal). The defaults follow it: one
// rack of a datacenter at a time, at most 6 nodes of it.
type ScheduleLimits struct {
	// MaxPerDatacenter is the most cleanups running at once in one
	// datacenter, those already running included. Zero means
	// DefaultMaxPerDatacenter; negative is ErrInvalidLimits.
	MaxPerDatacenter int `json:"maxPerDatacenter,omitempty"`
	// RacksTogether lifts the one-rack-at-a-time rule: cleanups of one
	// datacenter may then run in several racks at once (still never two
	// replicas of one range, and never more than MaxPerDatacenter).
	RacksTogether bool `json:"racksTogether,omitempty"`
	// ConflictScope says which replicas of a common range count as
	// conflicting: those anywhere in the cluster (AcrossDatacenters, the
	// zero value) or only those of one datacenter (WithinDatacenter).
	// Another value is ErrInvalidLimits.
	ConflictScope ConflictScope `json:"conflictScope,omitempty"`
}

// ConflictScope is ScheduleLimits.ConflictScope: where two replicas of a
// common range must sit for their cleanups never to run together.
//
// A cleanup rewrites the SSTables of every range its node holds, and the
// node serves its reads slowly while it compacts. AcrossDatacenters keeps
// the literal rule, never two replicas of one range at once, wherever
// they are: it fits SimpleStrategy keyspaces (whose replicas ignore
// datacenters), clients that read at QUORUM or ALL across datacenters,
// and a datacenter that is the only copy of another one's data during a
// failover. Its cost: when keyspaces replicate to every datacenter, nearly
// every node of one datacenter shares a range with nodes of the others,
// so the datacenters take turns instead of cleaning side by side.
//
// WithinDatacenter counts only replicas in the same datacenter: with
// NetworkTopologyStrategy and clients at LOCAL_QUORUM or LOCAL_ONE, a
// read is served by the replicas of the client's own datacenter, so what
// a cleanup endangers is the redundancy of the datacenter it runs in, and
// the datacenters may clean at once. scylla-operator#3015 frames its
// limits per rack, that is inside one datacenter (rack by rack, at most a
// number of nodes per rack at once); WithinDatacenter lets each
// datacenter follow those limits independently.
type ConflictScope int

// The conflict scopes.
const (
	// AcrossDatacenters: two nodes conflict when they replicate a common
	// range, whatever their datacenters. The default.
	AcrossDatacenters ConflictScope = iota
	// WithinDatacenter: two nodes conflict when they replicate a common
	// range and sit in the same datacenter.
	WithinDatacenter
)

// String returns the scope's name: "AcrossDatacenters" or
// "WithinDatacenter".
func (c ConflictScope) String() string {
	switch c {
	case AcrossDatacenters:
		return "AcrossDatacenters"
	case WithinDatacenter:
		return "WithinDatacenter"
	}
	return fmt.Sprintf("ConflictScope(%d)", int(c))
}

// MarshalText encodes the scope by its name, so JSON reads
// "WithinDatacenter"; an unknown value is ErrInvalidLimits.
func (c ConflictScope) MarshalText() ([]byte, error) {
	if c != AcrossDatacenters && c != WithinDatacenter {
		return nil, fmt.Errorf("%w: %v", ErrInvalidLimits, c)
	}
	return []byte(c.String()), nil
}

// UnmarshalText decodes a name String returns; another is
// ErrInvalidLimits.
func (c *ConflictScope) UnmarshalText(b []byte) error {
	switch string(b) {
	case "AcrossDatacenters":
		*c = AcrossDatacenters
	case "WithinDatacenter":
		*c = WithinDatacenter
	default:
		return fmt.Errorf("%w: conflict scope %q: want AcrossDatacenters or WithinDatacenter", ErrInvalidLimits, b)
	}
	return nil
}

// DefaultMaxPerDatacenter is ScheduleLimits.MaxPerDatacenter's default:
// the per-rack limit scylla-operator#3015 proposes, which is a limit per
// datacenter too while one rack runs at a time.
const DefaultMaxPerDatacenter = 6

// HoldReason says why a node that needs a cleanup is not started now. Its
// values are few and fixed.
type HoldReason string

// The reasons a node is held back, checked in this order.
const (
	// HoldReplicaBusy: the node replicates a range (of some keyspace)
	// that a node running or starting a cleanup also replicates (in the
	// same datacenter, under WithinDatacenter).
	HoldReplicaBusy HoldReason = "ReplicaBusy"
	// HoldDatacenterFull: its datacenter already runs
	// ScheduleLimits.MaxPerDatacenter cleanups.
	HoldDatacenterFull HoldReason = "DatacenterFull"
	// HoldOtherRack: another rack of its datacenter runs cleanups, and
	// ScheduleLimits.RacksTogether is false.
	HoldOtherRack HoldReason = "OtherRack"
)

// Hold is one node held back, and why.
type Hold struct {
	Endpoint string     `json:"endpoint"`
	Reason   HoldReason `json:"reason"`
	// By lists, sorted, the nodes running or starting a cleanup that hold
	// it back: those sharing a range with it (HoldReplicaBusy), or those
	// of its datacenter (HoldDatacenterFull, HoldOtherRack).
	By []string `json:"by"`
}

// ScheduleStep is what to do now: the cleanups to start, and why each
// other node that needs one waits.
type ScheduleStep struct {
	// Start lists, sorted, the nodes whose cleanup to start now.
	Start []string `json:"start"`
	// Held lists, sorted by endpoint, every node that needs a cleanup,
	// is not running one and is not in Start.
	Held []Hold `json:"held,omitempty"`
}

// Errors of the Scheduler, for errors.Is; the wrapping error names the
// endpoint or the limit. Bad topologies fail with Topology.Validate's
// errors (ErrInvalidRing, ErrInvalidReplication, ErrUnknownDatacenter).
var (
	// ErrUnknownEndpoint: a node said to need or run a cleanup owns no
	// token of the ring the Scheduler was built on.
	ErrUnknownEndpoint = errors.New("tokenring: endpoint not in the ring")
	// ErrInvalidLimits: a ScheduleLimits field is out of range.
	ErrInvalidLimits = errors.New("tokenring: invalid schedule limits")
)

// Scheduler decides which cleanups may run together, for one topology. It
// holds which nodes share a range (in any keyspace) and where each node
// sits; Next and Waves are pure functions of that and their arguments.
//
// A Scheduler is immutable once built and safe for concurrent use. Build
// a new one whenever the ring, a location or a replication changes.
type Scheduler struct {
	limits ScheduleLimits
	// names are the ring's endpoints, sorted; indexes below are into it.
	names []string
	index map[string]int
	dc    []int // datacenter number per node
	rack  []int // rack number per node, unique across datacenters
	// dcNames names the datacenter numbers.
	dcNames []string
	// conflict is a bit matrix: row i has bit j set when nodes i and j
	// replicate a common range (and, under WithinDatacenter, sit in one
	// datacenter).
	conflict []uint64
	words    int
}

// NewScheduler builds the Scheduler of topology t under limits.
//
// Every endpoint of the ring needs a datacenter and a rack in
// t.Ring.Locations, whatever the strategies (the limits are per
// datacenter and rack): otherwise ErrMissingLocation. A ring without
// tokens is ErrInvalidRing, and t must pass Topology.Validate.
//
// Two nodes conflict when they replicate a common range of any keyspace
// of t (LocalStrategy keyspaces replicate nothing; EverywhereStrategy
// makes every pair conflict), replicas computed as Analyze computes them.
// Under AcrossDatacenters (the default) replicas in different
// datacenters count too: a cleanup rewrites the SSTables of every range
// the node holds, so two replicas of one range cleaning at once leave the
// range fewer untouched copies, whatever their datacenters. Under
// WithinDatacenter only two replicas in one datacenter conflict; see
// ConflictScope for when each fits.
//
// It costs one sweep of the ring per distinct replication, and a bit
// matrix of nodes² bits.
func NewScheduler(t Topology, limits ScheduleLimits) (*Scheduler, error) {
	if limits.MaxPerDatacenter < 0 {
		return nil, fmt.Errorf("%w: MaxPerDatacenter %d: want 0 (the default, %d) or more", ErrInvalidLimits, limits.MaxPerDatacenter, DefaultMaxPerDatacenter)
	}
	if limits.MaxPerDatacenter == 0 {
		limits.MaxPerDatacenter = DefaultMaxPerDatacenter
	}
	if limits.ConflictScope != AcrossDatacenters && limits.ConflictScope != WithinDatacenter {
		return nil, fmt.Errorf("%w: %v: want AcrossDatacenters (the default) or WithinDatacenter", ErrInvalidLimits, limits.ConflictScope)
	}
	if len(t.Ring.Owners) == 0 {
		return nil, fmt.Errorf("%w: the ring has no tokens: nothing to schedule against", ErrInvalidRing)
	}
	names := endpointNames{ids: map[string]int32{}}
	c, err := t.compile(&names)
	if err != nil {
		return nil, err
	}
	c.finish()

	s := &Scheduler{limits: limits, index: map[string]int{}}
	for _, id := range c.members {
		s.names = append(s.names, names.list[id])
	}
	sort.Strings(s.names)
	dcs, racks := map[string]int{}, map[Location]int{}
	for i, ep := range s.names {
		s.index[ep] = i
		loc, ok := t.Ring.Locations[ep]
		if !ok || loc.Datacenter == "" || loc.Rack == "" {
			return nil, fmt.Errorf("%w: %q has no datacenter and rack (%+v): the limits are per datacenter and rack", ErrMissingLocation, ep, loc)
		}
		d, ok := dcs[loc.Datacenter]
		if !ok {
			d = len(s.dcNames)
			dcs[loc.Datacenter] = d
			s.dcNames = append(s.dcNames, loc.Datacenter)
		}
		r, ok := racks[loc]
		if !ok {
			r = len(racks)
			racks[loc] = r
		}
		s.dc = append(s.dc, d)
		s.rack = append(s.rack, r)
	}
	s.words = (len(s.names) + 63) / 64
	s.conflict = make([]uint64, len(s.names)*s.words)
	if err := s.markConflicts(t, c, names); err != nil {
		return nil, err
	}
	return s, nil
}

// Next decides which cleanups to start now. needed are the nodes that
// need a cleanup (Analysis.NeedsCleanup, less those done); running are
// those running one now, and count against every rule until they finish.
// A node in both is running, and neither started nor held. Duplicates
// and order do not matter: the same sets give the same step.
//
// Candidates are taken in a fixed order: most conflicts with the other
// candidates first (they are the hardest to place), then by name. Each
// starts unless it shares a range with a node running or starting, its
// datacenter is full, or another rack of its datacenter runs (unless
// RacksTogether): then it is held, with the reason. So when nothing runs,
// the first candidate always starts: as long as cleanups finish, every
// node gets its turn, however the input is ordered.
//
// An endpoint that is not in the ring is ErrUnknownEndpoint.
func (s *Scheduler) Next(needed, running []string) (ScheduleStep, error) {
	cand, active, err := s.resolve(needed, running)
	if err != nil {
		return ScheduleStep{}, err
	}
	start, held := s.pick(s.byConflicts(cand), active, true)
	step := ScheduleStep{Start: s.endpoints(start), Held: held}
	return step, nil
}

// Waves plans the whole cleanup: a list of waves, each a set of nodes
// (sorted) that may run together under every rule, covering each needed
// node that is not running exactly once. Nodes in running are taken to
// run during the first wave and to finish with it; when nothing can start
// beside them, to finish before the first wave.
//
// The waves are those Next gives when each wave finishes before the next
// starts, unless the plain greedy (candidates by name, each started when
// the rules allow) needs fewer waves: then Waves returns the greedy's. So
// Waves never needs more waves than that greedy, and node v lands in a
// wave no later than 1 + the number of other needed nodes that conflict
// with v (Conflicts) or sit in v's datacenter (each earlier wave that left v
// out started one of them first, for the limits or the conflict), plus
// one when running holds v back in the first wave.
func (s *Scheduler) Waves(needed, running []string) ([][]string, error) {
	cand, active, err := s.resolve(needed, running)
	if err != nil {
		return nil, err
	}
	smart, err := s.plan(cand, active, s.byConflicts)
	if err != nil {
		return nil, err
	}
	greedy, err := s.plan(cand, active, func(c []int) []int { return c })
	if err != nil {
		return nil, err
	}
	if len(greedy) < len(smart) {
		smart = greedy
	}
	waves := make([][]string, len(smart))
	for i, w := range smart {
		waves[i] = s.endpoints(w)
	}
	return waves, nil
}

// Conflicts reports whether two endpoints of the ring replicate a common
// range (under WithinDatacenter: and sit in one datacenter), so that
// their cleanups never run together. An endpoint not in the ring is
// ErrUnknownEndpoint.
func (s *Scheduler) Conflicts(a, b string) (bool, error) {
	i, ok := s.index[a]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownEndpoint, a)
	}
	j, ok := s.index[b]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownEndpoint, b)
	}
	return s.conflicts(i, j), nil
}

// Limits returns the limits in force, defaults filled in.
func (s *Scheduler) Limits() ScheduleLimits { return s.limits }

// --- the algorithm -------------------------------------------------------

// markConflicts sweeps the ring once per distinct replication, backwards
// as Analyze does (partCursor derives each token's replicas from the next
// token's), and marks every pair of replicas of each range (mark leaves
// out the pairs the scope does not count).
func (s *Scheduler) markConflicts(t Topology, c compiledRing, names endpointNames) error {
	ids := make([]int, len(names.list)) // compiled id → index in s.names
	for id, ep := range names.list {
		ids[id] = s.index[ep]
	}
	cache := map[string]placement{}
	done := map[string]bool{}
	var reps []int32
	for _, ks := range slices.Sorted(maps.Keys(t.Keyspaces)) {
		r := t.Keyspaces[ks]
		key := replicationKey(r)
		if r.Strategy == LocalStrategy || done[key] {
			continue
		}
		done[key] = true
		if r.Strategy == EverywhereStrategy {
			for i := range s.names {
				for j := range s.names {
					if i != j {
						s.mark(i, j)
					}
				}
			}
			continue
		}
		p, err := placeCached(cache, c, r)
		if err != nil {
			return errclass.Wrapf("tokenring", err, "keyspace %q", ks)
		}
		cur := newCursors(c, p)
		for i := len(c.owner) - 1; i >= 0; i-- {
			ep := c.owner[i]
			k := p.partOf[ep]
			if k < 0 && i < len(c.owner)-1 {
				continue // no part moves: the same replicas as the range after
			}
			if k >= 0 {
				if err := cur[k].back(p, &p.parts[k], ep); err != nil {
					return errclass.Wrapf("tokenring", err, "keyspace %q", ks)
				}
			}
			reps = reps[:0]
			for k := range cur {
				reps = append(reps, cur[k].reps...)
			}
			if i == len(c.owner)-1 || p.parts[k].needsWalks() {
				for a := range reps {
					for b := a + 1; b < len(reps); b++ {
						s.mark(ids[reps[a]], ids[reps[b]])
					}
				}
				continue
			}
			// Without rack repeats the part's replicas here are ep and
			// some of those of the range after (partCursor.back), and the
			// other parts did not move: every pair without ep was marked
			// for that range already.
			for _, x := range reps {
				if x != ep {
					s.mark(ids[ep], ids[x])
				}
			}
		}
	}
	return nil
}

func (s *Scheduler) mark(i, j int) {
	if s.limits.ConflictScope == WithinDatacenter && s.dc[i] != s.dc[j] {
		return
	}
	s.conflict[i*s.words+j/64] |= 1 << (j % 64)
	s.conflict[j*s.words+i/64] |= 1 << (i % 64)
}

func (s *Scheduler) conflicts(i, j int) bool {
	return s.conflict[i*s.words+j/64]&(1<<(j%64)) != 0
}

// resolve turns endpoints into sorted, distinct indexes: the candidates
// (needed, not running) and the active (running).
func (s *Scheduler) resolve(needed, running []string) (cand, active []int, err error) {
	isActive := make([]bool, len(s.names))
	for _, ep := range running {
		i, ok := s.index[ep]
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q is said to run a cleanup", ErrUnknownEndpoint, ep)
		}
		if !isActive[i] {
			isActive[i] = true
			active = append(active, i)
		}
	}
	isCand := make([]bool, len(s.names))
	for _, ep := range needed {
		i, ok := s.index[ep]
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q is said to need a cleanup", ErrUnknownEndpoint, ep)
		}
		if !isActive[i] && !isCand[i] {
			isCand[i] = true
			cand = append(cand, i)
		}
	}
	slices.Sort(cand)
	slices.Sort(active)
	return cand, active, nil
}

// byConflicts orders candidates by their conflicts with the other
// candidates, most first, then by name (Welsh and Powell's largest-first
// order for greedy colouring). cand is sorted by name; it is not changed.
func (s *Scheduler) byConflicts(cand []int) []int {
	mask := make([]uint64, s.words)
	for _, i := range cand {
		mask[i/64] |= 1 << (i % 64)
	}
	degree := make(map[int]int, len(cand))
	for _, i := range cand {
		row := s.conflict[i*s.words : (i+1)*s.words]
		n := 0
		for w := range row {
			n += bits.OnesCount64(row[w] & mask[w])
		}
		degree[i] = n
	}
	out := slices.Clone(cand)
	slices.SortStableFunc(out, func(a, b int) int { return degree[b] - degree[a] })
	return out
}

// pick starts, in order, each candidate the rules allow beside active and
// those started before it; with explain, it says why each other waits.
func (s *Scheduler) pick(order, active []int, explain bool) (start []int, held []Hold) {
	perDC := make([]int, len(s.dcNames))
	racksIn := make([]map[int]int, len(s.dcNames)) // rack → active count
	on := slices.Clone(active)
	add := func(i int) {
		perDC[s.dc[i]]++
		if racksIn[s.dc[i]] == nil {
			racksIn[s.dc[i]] = map[int]int{}
		}
		racksIn[s.dc[i]][s.rack[i]]++
	}
	for _, i := range active {
		add(i)
	}
	for _, i := range order {
		reason := HoldReason("")
		switch {
		case slices.ContainsFunc(on, func(j int) bool { return s.conflicts(i, j) }):
			reason = HoldReplicaBusy
		case perDC[s.dc[i]] >= s.limits.MaxPerDatacenter:
			reason = HoldDatacenterFull
		case !s.limits.RacksTogether && len(racksIn[s.dc[i]]) > 0 && (len(racksIn[s.dc[i]]) > 1 || racksIn[s.dc[i]][s.rack[i]] == 0):
			reason = HoldOtherRack
		}
		if reason == "" {
			start = append(start, i)
			on = append(on, i)
			add(i)
			continue
		}
		if explain {
			held = append(held, Hold{Endpoint: s.names[i], Reason: reason})
		}
	}
	// Name every node that holds each one back once all have started,
	// not only those started before it was considered.
	for k := range held {
		i := s.index[held[k].Endpoint]
		for _, j := range on {
			if held[k].Reason == HoldReplicaBusy && s.conflicts(i, j) || held[k].Reason != HoldReplicaBusy && s.dc[i] == s.dc[j] {
				held[k].By = append(held[k].By, s.names[j])
			}
		}
		sort.Strings(held[k].By)
	}
	slices.Sort(start)
	sort.Slice(held, func(a, b int) bool { return held[a].Endpoint < held[b].Endpoint })
	return start, held
}

// plan runs pick wave after wave, with candidates ordered by order each
// wave, until every candidate is placed. active runs in the first wave.
func (s *Scheduler) plan(cand, active []int, order func([]int) []int) ([][]int, error) {
	var waves [][]int
	left := slices.Clone(cand)
	for len(left) > 0 {
		start, _ := s.pick(order(left), active, false)
		if len(start) == 0 {
			if len(active) == 0 {
				// pick always starts the first candidate when nothing
				// runs; looping here would never end.
				return nil, fmt.Errorf("tokenring: internal error: no cleanup can start with nothing running (%d left)", len(left))
			}
			active = nil // the running ones finish first
			continue
		}
		waves = append(waves, start)
		left = slices.DeleteFunc(left, func(i int) bool { _, found := slices.BinarySearch(start, i); return found })
		active = nil
	}
	return waves, nil
}

func (s *Scheduler) endpoints(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = s.names[i]
	}
	return out
}
