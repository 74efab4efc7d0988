package orphan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/orphan"
)

// planInputWithOrphans makes every every-th candidate an orphan.
func planInputWithOrphans(n, every int) orphan.Input {
	// The node's health is given, as a host must: a disk is Ready only
	// under a Ready node.
	in := orphan.Input{Now: testEpoch, Scopes: map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}}}
	for d := range 10 {
		in.Scopes[orphan.Scope{NodeID: "node-1", Disk: fmt.Sprintf("disk-%d", d)}] = orphan.ScopeStatus{Health: orphan.HealthReady}
	}
	in.Candidates = make([]orphan.Candidate, n)
	for i := range n {
		it := replicaItem("node-1", fmt.Sprintf("disk-%d", i%10), fmt.Sprintf("pvc-%08d-%08x", i, i))
		v := orphan.Owned("expected")
		if i%every == 0 {
			v = orphan.Orphan("not expected")
			if i%(2*every) == 0 {
				r, _ := orphan.NewRecord(it, testEpoch)
				in.Records = append(in.Records, r)
			}
		}
		in.Candidates[i] = orphan.Candidate{Item: it, Verdict: v}
	}
	return in
}

// BenchmarkDecide plans a node of ten disks with 1% of the items orphans,
// and with every item an orphan (half of the orphans with a record), at
// the sizes one node has (10^2 to 10^4 items) and far beyond. The
// yardstick in the same run is the floor of any planner over these items:
// reading each item's match key and disk from its Parameters, which is a
// cache miss per item on a large input; the ratio is x-touch.
func BenchmarkDecide(b *testing.B) {
	benchmarkPlanning(b, func(in orphan.Input) func() {
		return func() { orphan.Decide(in) }
	})
}

// BenchmarkPlannerDecide is BenchmarkDecide for a Planner in its steady
// state: the same input as its previous cycle, so its working arrays are
// sized already. The yardsticks are BenchmarkDecide's (x-touch,
// floor-items/s, which includes hashing every orphan), and beside them
// fields-floor-items/s: touching each item and reading every orphan's
// name fields, without hashing.
func BenchmarkPlannerDecide(b *testing.B) {
	benchmarkPlanning(b, func(in orphan.Input) func() {
		var p orphan.Planner
		p.Decide(in) // the previous cycle: the working arrays are sized
		return func() { p.Decide(in) }
	})
}

// benchmarkPlanning times the plan that prepare returns for each mix and
// size, with the yardsticks measured in the same run.
func benchmarkPlanning(b *testing.B, prepare func(orphan.Input) func()) {
	for _, mix := range []struct {
		name  string
		every int
	}{{"orphans=1%", 100}, {"orphans=100%", 1}} {
		for _, n := range []int{100, 1_000, 10_000, 100_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/items=%d", mix.name, n), func(b *testing.B) {
				in := planInputWithOrphans(n, mix.every)
				floor := touchFloor(in.Candidates)
				plan := prepare(in)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					plan()
				}
				perOp := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(n)/perOp, "items/s")
				b.ReportMetric(perOp/floor, "x-touch")
				b.StopTimer()
				b.ReportMetric(float64(n)/(floor+nameFloor(in.Candidates)), "floor-items/s")
				b.ReportMetric(float64(n)/(floor+fieldsFloor(in.Candidates)), "fields-floor-items/s")
			})
		}
	}
}

// fieldsFloor times reading every orphan candidate's name fields (its
// node and the four parameters of Longhorn's formula) without hashing
// them, and returns seconds per pass (the best of three).
func fieldsFloor(cs []orphan.Candidate) float64 {
	return bestOfThree(func() (n int) {
		for _, c := range cs {
			if c.Verdict.Outcome == orphan.OutcomeOrphan {
				p := c.Item.Parameters
				n += len(c.Item.NodeID) + len(p[orphan.ParamDiskName]) + len(p[orphan.ParamDiskPath]) +
					len(p[orphan.ParamDiskUUID]) + len(p[orphan.ParamDataName])
			}
		}
		return n
	})
}

// touchFloor times reading every item's data name and disk, the least a
// planner must look at, and returns seconds per pass (the best of three).
func touchFloor(cs []orphan.Candidate) float64 {
	return bestOfThree(func() (n int) {
		for _, c := range cs {
			n += len(c.Item.Parameters[orphan.ParamDataName]) + len(c.Item.Parameters[orphan.ParamDiskName])
		}
		return n
	})
}

// nameFloor times naming every orphan candidate (Item.Name: SHA-256 over
// its name fields, Longhorn's formula), the least any planner must hash: an
// orphan needs its name to be matched to its record or to get a new one.
// With touchFloor it bounds Decide's speed from above: a goroutine-free
// planner (a pure function of its inputs) cannot beat floor-items/s.
func nameFloor(cs []orphan.Candidate) float64 {
	return bestOfThree(func() (n int) {
		for _, c := range cs {
			if c.Verdict.Outcome == orphan.OutcomeOrphan {
				name, _ := c.Item.Name()
				n += len(name)
			}
		}
		return n
	})
}

// bestOfThree times pass three times and returns the fastest, in seconds.
// What pass returns is kept in sink, so the compiler cannot drop the work.
func bestOfThree(pass func() int) float64 {
	best := 0.0
	for range 3 {
		start := time.Now()
		sink += pass()
		if d := time.Since(start).Seconds(); best == 0 || d < best {
			best = d
		}
	}
	return best
}

var sink int
