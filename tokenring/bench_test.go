package tokenring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The scale: 1000 nodes × 256 tokens, 3 datacenters with 3 racks
// each, NetworkTopologyStrategy RF 3 per datacenter; "after" adds one node
// per datacenter, as a scale-out would. BenchmarkAnalyze measures its
// yardstick, sorting the same 256k tokens, in the same run (x-sort);
// BenchmarkSortTokens is that yardstick alone:
//
//	go test -run='^$' -bench='Analyze|SortTokens|HashTokens' -benchmem ./tokenring/

const (
	benchNodes  = 1000
	benchTokens = 256
)

func benchRing(r *rand.Rand, nodes int, prefix string) Ring {
	ring := Ring{Locations: map[string]Location{}}
	for n := range nodes {
		ep := fmt.Sprintf("%s%d", prefix, n)
		ring.Locations[ep] = Location{Datacenter: fmt.Sprintf("dc%d", n%3), Rack: fmt.Sprintf("r%d", (n/3)%3)}
		for range benchTokens {
			ring.Owners = append(ring.Owners, TokenOwner{Token: Token(r.Uint64()), Endpoint: ep})
		}
	}
	return ring
}

func benchTopologies() (Topology, Topology) {
	r := rand.New(rand.NewPCG(1, 2))
	before := benchRing(r, benchNodes, "10.0.")
	added := benchRing(r, 3, "10.1.")
	after := Ring{Owners: append(slices.Clone(before.Owners), added.Owners...), Locations: map[string]Location{}}
	for ep, loc := range before.Locations {
		after.Locations[ep] = loc
	}
	for ep, loc := range added.Locations {
		after.Locations[ep] = loc
	}
	ks := map[string]Replication{"ks": {Strategy: NetworkTopologyStrategy, Datacenters: map[string]int{"dc0": 3, "dc1": 3, "dc2": 3}}}
	return Topology{Ring: before, Keyspaces: ks}, Topology{Ring: after, Keyspaces: ks}
}

// BenchmarkAnalyze reports, besides the usual figures, x-sort: the time
// of Analyze over the time of slices.Sort on a fresh copy of the same 256k
// tokens (the before ring's), measured in the same iterations so that a
// busy machine slows both alike. The target is x-sort ≤ 2. ns/op,
// B/op and allocs/op are Analyze's alone: the sort runs with the timer
// stopped, on a buffer allocated once.
func BenchmarkAnalyze(b *testing.B) {
	before, after := benchTopologies()
	tokens := make([]Token, len(before.Ring.Owners))
	for i, o := range before.Ring.Owners {
		tokens[i] = o.Token
	}
	work := make([]Token, len(tokens))
	var analyzing, sorting time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		copy(work, tokens)
		start := time.Now()
		slices.Sort(work)
		sorting += time.Since(start)
		b.StartTimer()

		start = time.Now()
		a, err := Analyze(before, after)
		analyzing += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if len(a.NeedsCleanup()) == 0 {
			b.Fatal("a scale-out where nobody lost ranges")
		}
	}
	b.ReportMetric(float64(analyzing)/float64(sorting), "x-sort")
	b.ReportMetric(float64(sorting.Nanoseconds())/float64(b.N), "sort-ns/op")
}

func BenchmarkSortTokens(b *testing.B) {
	before, _ := benchTopologies()
	tokens := make([]Token, len(before.Ring.Owners))
	for i, o := range before.Ring.Owners {
		tokens[i] = o.Token
	}
	work := make([]Token, len(tokens))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		copy(work, tokens)
		slices.Sort(work)
	}
}

func BenchmarkHashTokens(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	tokens := make([]string, benchNodes*benchTokens)
	for i := range tokens {
		tokens[i] = strconv.FormatInt(int64(r.Uint64()), 10)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = HashTokens(tokens)
	}
}
