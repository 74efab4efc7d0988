package spdk_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// BenchmarkRoundTrip measures one small call (bdev_lvol_get_lvstores with
// one lvstore) over the Unix socket against spdktest, with 1 and 16
// concurrent callers sharing one Client. It reports the median latency
// and the call rate.
func BenchmarkRoundTrip(b *testing.B) {
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			srv := startServer(b)
			must(srv.AddLvstore("disk-1"))(b)
			c := newClient(b, srv, spdk.ClientOptions{})
			ctx := context.Background()
			if _, err := spdk.BdevLvolGetLvstores(ctx, c); err != nil {
				b.Fatal(err)
			}
			lat := make([][]time.Duration, callers)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for g := range callers {
				n := b.N / callers
				if g < b.N%callers {
					n++
				}
				lat[g] = make([]time.Duration, 0, n)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						t0 := time.Now()
						if _, err := spdk.BdevLvolGetLvstores(ctx, c); err != nil {
							b.Error(err)
							return
						}
						lat[g] = append(lat[g], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "µs-median")
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
			}
		})
	}
}

// bigNode fills a server with 1k RAID bdevs and 10k lvols: 2.5k replicas,
// each with two snapshots and a rebuilding lvol.
func bigNode(b *testing.B) *spdktest.Server {
	srv := startServer(b)
	must(srv.AddLvstore("disk-1"))(b)
	for i := range 2500 {
		r := fmt.Sprintf("vol%04d-r-%08x", i, i)
		must(srv.AddLvol("disk-1", r))(b)
		must(srv.Snapshot("disk-1", r, r+"-snap-a"))(b)
		must(srv.Snapshot("disk-1", r, r+"-snap-b"))(b)
		must(srv.AddLvol("disk-1", r+"-rebuilding"))(b)
	}
	for i := range 1000 {
		must(srv.AddRaid(fmt.Sprintf("vol%04d-e-0", i), "x", "y"))(b)
	}
	return srv
}

// BenchmarkScan lists and classifies 10k lvols and 1k RAID bdevs through
// the socket (the fake's own encoding included).
func BenchmarkScan(b *testing.B) {
	srv := bigNode(b)
	c := newClient(b, srv, spdk.ClientOptions{})
	inv := newOrphans(b, c, noRecords)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		snap, err := inv.Scan(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Items) != 3500 {
			b.Fatalf("%d items", len(snap.Items))
		}
	}
}

// BenchmarkClassify is the pure part of the scan: 10k lvols and 1k RAID
// bdevs already decoded.
func BenchmarkClassify(b *testing.B) {
	srv := bigNode(b)
	c := newClient(b, srv, spdk.ClientOptions{})
	lvols := must(spdk.BdevLvolGetLvols(context.Background(), c, ""))(b)
	raids := must(spdk.BdevRaidGetBdevs(context.Background(), c, ""))(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rt := spdk.Classify(lvols, raids)
		if len(rt.Replicas) != 2500 || len(rt.Engines) != 1000 {
			b.Fatalf("%d replicas, %d engines", len(rt.Replicas), len(rt.Engines))
		}
	}
}
