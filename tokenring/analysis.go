package tokenring

import (
	"fmt"
	"slices"
	"sort"
)

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

// Analyze compares who replicated which token ranges before and after, for
// every keyspace present in both topologies (a dropped keyspace left nothing
// to clean; a new one had nothing before), and reports per node what it
// lost and gained.
//
// It computes replicas the way ScyllaDB does for vnode keyspaces: a token
// owns (previous token, token]; SimpleStrategy takes the next distinct
// endpoints clockwise; NetworkTopologyStrategy fills each datacenter's
// factor walking clockwise, taking a new rack whenever it meets one and a
// repeated rack only while the datacenter has fewer racks than its factor.
//
// Both topologies must pass Topology.Validate; the error says which one
// failed and why, and nothing is analysed.
//
// Analyze is pure: no I/O, no goroutines, safe to call concurrently on
// topologies nobody mutates. It costs a few sorts of the rings, not a walk of
// the whole ring per range.
func Analyze(before, after Topology) (Analysis, error) {
	// Validating compiles each ring (numbers its endpoints and sorts its
	// tokens); the analysis goes on with those compiled rings, so every
	// check of Validate has run on exactly the data analysed.
	names := endpointNames{ids: map[string]int32{}}
	b, err := before.compile(&names)
	if err != nil {
		return Analysis{}, fmt.Errorf("before: %w", err)
	}
	a, err := after.compile(&names)
	if err != nil {
		return Analysis{}, fmt.Errorf("after: %w", err)
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

// diffPlacements sweeps the union of both rings' tokens. Each elementary
// interval (previous union token, union token] lies inside exactly one range
// of each ring, so comparing the two replica sets there is exact.
//
// Most intervals keep their replicas. When both placements have parts of
// the same shape, the sweep compares them part by part, a few int32s, and
// moves on when every part is equal: equal parts make equal replica sets.
// Anything else (a part differs, or the placements differ in shape: a
// strategy or factor change, EverywhereStrategy on one side) takes the
// exact set difference below.
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
	curB, curA := make([]int, len(pb.parts)), make([]int, len(pa.parts))
	sameShape := !pb.everyone && !pa.everyone && len(pb.parts) == len(pa.parts)
	for k := range pb.parts {
		sameShape = sameShape && pb.parts[k].perTok == pa.parts[k].perTok
	}
	// With the same shape, unequal[k] says whether part k differs at the
	// cursors, and differ counts such parts. Only the parts whose cursor
	// moves are compared again: one or two per token.
	var unequal []bool
	differ := 0
	if sameShape {
		unequal = make([]bool, len(pb.parts))
		for k := range pb.parts {
			if !slices.Equal(pb.parts[k].at(0), pa.parts[k].at(0)) {
				unequal[k] = true
				differ++
			}
		}
	}
	d := setDiff{inB: make([]int, len(b.isMember)), inA: make([]int, len(a.isMember))}
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
		if !sameShape || differ > 0 {
			d.diff(b, a, pb, pa, curB, curA, Range{Start: prev, End: u}, acc)
		}
		moved, movedA := -1, -1
		if i < len(bt) && bt[i] == u {
			moved = advance(pb, curB, b.owner[i])
			i++
		}
		if j < len(at) && at[j] == u {
			movedA = advance(pa, curA, a.owner[j])
			j++
		}
		if sameShape {
			for _, k := range [2]int{moved, movedA} {
				if k < 0 {
					continue
				}
				if eq := slices.Equal(pb.parts[k].at(curB[k]), pa.parts[k].at(curA[k])); eq == unequal[k] {
					unequal[k] = !eq
					if eq {
						differ--
					} else {
						differ++
					}
				}
				if movedA == moved {
					break
				}
			}
		}
		prev = u
	}
}

// advance moves the cursor of ep's part past the token the sweep passed,
// and returns that part, or -1 when ep holds no replica.
func advance(p placement, cur []int, ep int32) int {
	if p.everyone {
		return -1
	}
	k := int(p.partOf[ep])
	if k >= 0 {
		if cur[k]++; cur[k] == p.parts[k].tokens {
			cur[k] = 0
		}
	}
	return k
}

// setDiff compares two replica sets exactly, marking each side's members
// with a stamp so that no interval clears anything.
type setDiff struct {
	stamp    int
	inB, inA []int // by endpoint id: stamp when in the set
	repsB    []int32
	repsA    []int32
}

func (d *setDiff) diff(b, a compiledRing, pb, pa placement, curB, curA []int, r Range, acc *changeAccumulator) {
	d.stamp++
	d.repsB = gather(d.repsB[:0], b, pb, curB, d.inB, d.stamp)
	d.repsA = gather(d.repsA[:0], a, pa, curA, d.inA, d.stamp)
	for _, ep := range d.repsB {
		if !(pa.everyone && a.isMember[ep] || d.inA[ep] == d.stamp) {
			acc.add(ep, true, r)
		}
	}
	for _, ep := range d.repsA {
		if !(pb.everyone && b.isMember[ep] || d.inB[ep] == d.stamp) {
			acc.add(ep, false, r)
		}
	}
}

// gather appends the replicas at the cursors and stamps them in mark;
// for EverywhereStrategy it lists the members, whom the caller checks
// with isMember instead.
func gather(reps []int32, c compiledRing, p placement, cur []int, mark []int, stamp int) []int32 {
	if p.everyone {
		return append(reps, c.members...)
	}
	for k := range p.parts {
		for _, ep := range p.parts[k].at(cur[k]) {
			mark[ep] = stamp
			reps = append(reps, ep)
		}
	}
	return reps
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
