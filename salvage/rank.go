package salvage

import (
	"cmp"
	"slices"
	"time"
)

// Basis says by what a volume's candidates were ranked.
type Basis string

// The bases of a ranking.
const (
	// BasisRevisionCounter: every recoverable candidate has a revision
	// counter; the highest is the freshest. The engine marks every replica
	// below the highest counter ERR when it starts (longhorn-engine
	// pkg/controller/control.go checkReplicasRevisionCounter).
	BasisRevisionCounter Basis = "revision-counter"
	// BasisHeadFile: some candidate has no counter (disabled by default
	// since Longhorn v1.7), so the engine's salvage rule for that case
	// applies (pkg/controller/control.go
	// salvageRevisionCounterDisabledReplicas): among the candidates whose
	// head image was modified within 5 seconds (lastModifyCheckPeriod) of
	// the newest head, the one with the largest allocated head
	// (util.GetHeadFileModifyTimeAndSize: st_blocks × 512) wins, ties to
	// the newer head. The engine marks the others ERR; here they follow,
	// newest head first. longhorn-manager first narrows the candidates by
	// the replica objects' failure and health times, which a directory
	// does not carry.
	BasisHeadFile Basis = "head-file"
	// BasisNone: the candidate is not recoverable and is not ranked.
	BasisNone Basis = "none"
)

// lastModifyCheckPeriod is the engine's window around the newest head
// (longhorn-engine pkg/controller/control.go).
const lastModifyCheckPeriod = 5 * time.Second

// Ranking is one candidate's place among its volume's candidates.
type Ranking struct {
	// Rank is 1 for the best recoverable candidate of its volume, 2 for
	// the next...; 0 when it is not recoverable.
	Rank  int
	Basis Basis
}

// Rank ranks replica directories of one or more volumes (grouped by
// Inspection.Volume; candidates of different volumes are never compared),
// across disks and nodes, by the engine's own notion of freshness. It
// returns one Ranking per candidate, in the input's order. Only
// recoverable candidates are ranked; a rebuilding or damaged one gets
// rank 0, so it is never above a recoverable one. Ties that the engine
// leaves open are broken by the directory's path, so the result does not
// depend on the input's order.
func Rank(cands []*Inspection) []Ranking {
	out := make([]Ranking, len(cands))
	byVolume := map[string][]int{}
	var volumes []string
	for i, c := range cands {
		out[i] = Ranking{Basis: BasisNone}
		if c == nil || !c.Recoverable {
			continue
		}
		if _, ok := byVolume[c.Volume]; !ok {
			volumes = append(volumes, c.Volume)
		}
		byVolume[c.Volume] = append(byVolume[c.Volume], i)
	}
	for _, v := range volumes {
		idx := byVolume[v]
		basis := BasisRevisionCounter
		for _, i := range idx {
			if !cands[i].HasRevision {
				basis = BasisHeadFile
			}
		}
		var newest time.Time
		for _, i := range idx {
			if t := cands[i].HeadModTime; t.After(newest) {
				newest = t
			}
		}
		recent := func(c *Inspection) bool { return c.HeadModTime.Add(lastModifyCheckPeriod).After(newest) }
		slices.SortFunc(idx, func(a, b int) int {
			x, y := cands[a], cands[b]
			if basis == BasisRevisionCounter {
				if c := cmp.Compare(y.Revision, x.Revision); c != 0 {
					return c
				}
			}
			if rx, ry := recent(x), recent(y); rx != ry {
				if rx {
					return -1
				}
				return 1
			} else if rx {
				if c := cmp.Compare(y.HeadAllocated, x.HeadAllocated); c != 0 {
					return c
				}
			}
			if c := y.HeadModTime.Compare(x.HeadModTime); c != 0 {
				return c
			}
			if c := cmp.Compare(y.HeadAllocated, x.HeadAllocated); c != 0 {
				return c
			}
			return cmp.Compare(x.Dir, y.Dir)
		})
		for r, i := range idx {
			out[i] = Ranking{Rank: r + 1, Basis: basis}
		}
	}
	return out
}
