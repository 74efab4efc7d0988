package salvage_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/salvage"
)

// engineSalvagePick is longhorn-engine's salvageRevisionCounterDisabledReplicas
// (pkg/controller/control.go) written as plainly as it reads: T is the
// newest head mtime; among the candidates whose mtime + 5 s is after T,
// the one with the largest head size, ties to the newer mtime. It returns
// every candidate the engine could pick (its loop keeps the first of
// equals, so any of them, depending on order).
func engineSalvagePick(cands []*salvage.Inspection) map[*salvage.Inspection]bool {
	var last time.Time
	for _, c := range cands {
		if c.HeadModTime.After(last) {
			last = c.HeadModTime
		}
	}
	var best []*salvage.Inspection
	for _, c := range cands {
		if !c.HeadModTime.Add(5 * time.Second).After(last) {
			continue
		}
		switch {
		case len(best) == 0 || c.HeadAllocated > best[0].HeadAllocated ||
			c.HeadAllocated == best[0].HeadAllocated && c.HeadModTime.After(best[0].HeadModTime):
			best = []*salvage.Inspection{c}
		case c.HeadAllocated == best[0].HeadAllocated && c.HeadModTime.Equal(best[0].HeadModTime):
			best = append(best, c)
		}
	}
	out := map[*salvage.Inspection]bool{}
	for _, c := range best {
		out[c] = true
	}
	return out
}

// TestRankProperty checks Rank against the engine's rules on random
// candidates: unrecoverable copies get 0, the recoverable ones of a volume
// get 1..n, rank 1 is a copy the engine would keep, and the order of the
// input does not matter.
func TestRankProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 2000 {
		n := 1 + rng.IntN(7)
		withCounter := rng.IntN(2) == 0
		var cands []*salvage.Inspection
		for i := range n {
			in := &salvage.Inspection{
				Dir:           fmt.Sprintf("/disk-%d/replicas/vol-%d-%08d", rng.IntN(2), rng.IntN(2), i),
				Recoverable:   rng.IntN(4) != 0,
				HasRevision:   withCounter || rng.IntN(8) == 0,
				Revision:      int64(rng.IntN(4)),
				HeadAllocated: int64(rng.IntN(3)) * 4096,
				HeadModTime:   base.Add(time.Duration(rng.IntN(12)) * time.Second),
			}
			in.Volume = in.Dir[len("/disk-0/replicas/"):len("/disk-0/replicas/vol-0")]
			if !in.Recoverable {
				in.Reasons = []salvage.Reason{{Kind: salvage.ReasonRebuilding}}
			}
			cands = append(cands, in)
		}
		got := salvage.Rank(cands)
		shuffled := append([]*salvage.Inspection(nil), cands...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := salvage.Rank(shuffled)
		rankOf := map[*salvage.Inspection]int{}
		for i, c := range shuffled {
			rankOf[c] = again[i].Rank
		}
		byVolume := map[string][]*salvage.Inspection{}
		for i, c := range cands {
			if rankOf[c] != got[i].Rank {
				t.Fatalf("round %d: the rank depends on the input's order", round)
			}
			if !c.Recoverable {
				if got[i].Rank != 0 {
					t.Fatalf("round %d: an unrecoverable copy ranked %d", round, got[i].Rank)
				}
				continue
			}
			byVolume[c.Volume] = append(byVolume[c.Volume], c)
		}
		for v, vc := range byVolume {
			seen := map[int]bool{}
			var first *salvage.Inspection
			counters := true
			for _, c := range vc {
				r := rankOf[c]
				if r < 1 || r > len(vc) || seen[r] {
					t.Fatalf("round %d volume %s: ranks are not 1..%d", round, v, len(vc))
				}
				seen[r] = true
				if r == 1 {
					first = c
				}
				counters = counters && c.HasRevision
			}
			if counters {
				for _, c := range vc {
					if c.Revision > first.Revision {
						t.Fatalf("round %d: rank 1 has counter %d, another %d", round, first.Revision, c.Revision)
					}
				}
			} else if !engineSalvagePick(vc)[first] {
				t.Fatalf("round %d: rank 1 %+v is not the engine's salvage pick among %d", round, first, len(vc))
			}
		}
	}
}
