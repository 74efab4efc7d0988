package orphan_test

import (
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// planInput builds a node with ten disks, n candidates of which 1% are
// orphans, and a record for half of the orphans.
func planInput(n int) orphan.Input { return planInputWithOrphans(n, 100) }

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

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		in := planInput(n)
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				orphan.Decide(in)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// BenchmarkDecideAllOrphans is the worst case: every candidate needs a name.
func BenchmarkDecideAllOrphans(b *testing.B) {
	const n = 100_000
	in := planInputWithOrphans(n, 1)
	b.ReportAllocs()
	for b.Loop() {
		orphan.Decide(in)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
