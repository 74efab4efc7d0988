package spdkrpc_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// BenchmarkRoundTrip measures one small call (bdev_lvol_get_lvstores,
// one lvstore in the result, decoded into []Lvstore) with 1 and 16
// concurrent callers sharing one Client, against its floor in the same
// run: the same trivial server (startTrivialServer: SPDK's wire format at
// the least cost a server can), reached by raw connections that write a
// fixed request and read the reply up to its "\n", with no encoding,
// decoding or matching of ids. The floor of 16 callers is 16 such raw
// connections, each a caller in its own loop: what 16 independent callers
// cost with no client between them and the socket. One raw connection
// pipelining 16 requests per write is not their floor: it is one caller
// that knows all 16 requests in advance, which callers arriving on their
// own never are. Floor and client run in alternating chunks so that the
// machine's noise falls on both. The context is Background, as in the
// floor. The cancellable-callers runs pass a context that can end, as
// hosts do (a reconcile's): the client then arranges, once per call, for
// its end to interrupt the call's write or read.
//
// Metrics: µs-median and calls/s of the client, floor-µs-median and
// floor-calls/s of the floor, x-floor-rtt (median round trip over the
// floor's; the target for one caller is ≤ 1.5) and x-floor-rate (calls/s
// over the floor's; the target for 16 callers is ≥ 0.9). ns/op and
// allocs/op are the client's alone. cpu-ns/call and floor-cpu-ns/call are
// the CPU time the whole process (callers and server) spent per call,
// and x-floor-cpu their ratio: a second yardstick beside the rates, which
// on a shared machine swing with what else runs, while CPU per call shows
// what a quiet machine, where 16 callers are bound by CPU, would see.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		callers     int
		cancellable bool
	}{{1, false}, {16, false}, {1, true}, {16, true}} {
		callers := bc.callers
		name := fmt.Sprintf("callers=%d", callers)
		if bc.cancellable {
			name = "cancellable-" + name
		}
		b.Run(name, func(b *testing.B) {
			path := startTrivialServer(b)
			c := fixture.NewClient(b, spdkrpc.ClientOptions{SocketPath: path})
			b.Cleanup(func() { c.Close() })
			raw := make([]*rawCaller, callers)
			for g := range raw {
				raw[g] = newRawCaller(b, path)
			}
			ctx := context.Background()
			if bc.cancellable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				b.Cleanup(cancel)
			}
			clientCall := func(int) error {
				_, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
				return err
			}
			floorCall := func(g int) error { return raw[g].roundTrip() }
			var client, floor roundTrips
			// Warm both up (dial, buffers) outside the measurement.
			floor.run(b, callers, callers*100, floorCall)
			client.run(b, callers, callers*100, clientCall)
			client, floor = roundTrips{}, roundTrips{}
			b.ReportAllocs()
			b.ResetTimer()
			const chunk = 512
			for done := 0; done < b.N; {
				n := min(chunk, b.N-done)
				b.StopTimer()
				floor.run(b, callers, n, floorCall)
				b.StartTimer()
				client.run(b, callers, n, clientCall)
				done += n
			}
			b.StopTimer()
			cm, fm := client.median(), floor.median()
			b.ReportMetric(cm.Seconds()*1e6, "µs-median")
			b.ReportMetric(fm.Seconds()*1e6, "floor-µs-median")
			b.ReportMetric(client.rate(), "calls/s")
			b.ReportMetric(floor.rate(), "floor-calls/s")
			b.ReportMetric(float64(cm)/float64(fm), "x-floor-rtt")
			b.ReportMetric(client.rate()/floor.rate(), "x-floor-rate")
			b.ReportMetric(client.cpuPerCall(), "cpu-ns/call")
			b.ReportMetric(floor.cpuPerCall(), "floor-cpu-ns/call")
			b.ReportMetric(client.cpuPerCall()/floor.cpuPerCall(), "x-floor-cpu")
		})
	}
}

// roundTrips collects the latency of every call and the wall time of the
// runs that made them.
type roundTrips struct {
	lat     []time.Duration
	elapsed time.Duration
	cpu     time.Duration // user and system CPU time of the process
}

// run makes n calls from callers goroutines, call(g) being goroutine g's.
func (r *roundTrips) run(b *testing.B, callers, n int, call func(g int) error) {
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	cpu0 := processCPU(b)
	start := time.Now()
	for g := range callers {
		m := n / callers
		if g < n%callers {
			m++
		}
		lat[g] = make([]time.Duration, 0, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range m {
				t0 := time.Now()
				if err := call(g); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r.elapsed += time.Since(start)
	r.cpu += processCPU(b) - cpu0
	for _, l := range lat {
		r.lat = append(r.lat, l...)
	}
}

func (r *roundTrips) median() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[len(r.lat)/2]
}

func (r *roundTrips) rate() float64 {
	return float64(len(r.lat)) / r.elapsed.Seconds()
}

// cpuPerCall is the CPU time the process (client or raw callers, and the
// server) spent per call, in ns: unlike the rates, it hardly depends on
// what else the machine runs, so it shows what a quiet machine would.
func (r *roundTrips) cpuPerCall() float64 {
	return float64(r.cpu.Nanoseconds()) / float64(len(r.lat))
}
