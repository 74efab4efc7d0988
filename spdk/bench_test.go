package spdk_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// bigNode fills a server with 1k RAID bdevs and 10k lvols: 2.5k replicas,
// each with two snapshots and a rebuilding lvol.
func bigNode(b *testing.B) *spdktest.Server {
	srv := fixture.Start(b)
	fixture.Must(srv.AddLvstore("disk-1"))(b)
	for i := range 2500 {
		r := fmt.Sprintf("vol%04d-r-%08x", i, i)
		fixture.Must(srv.AddLvol("disk-1", r))(b)
		fixture.Must(srv.Snapshot("disk-1", r, r+"-snap-a"))(b)
		fixture.Must(srv.Snapshot("disk-1", r, r+"-snap-b"))(b)
		fixture.Must(srv.AddLvol("disk-1", r+"-rebuilding"))(b)
	}
	for i := range 1000 {
		fixture.Must(srv.AddRaid(fmt.Sprintf("vol%04d-e-0", i), "x", "y"))(b)
	}
	return srv
}

// BenchmarkScan lists and classifies 10k lvols and 1k RAID bdevs through
// the socket (the fake's own encoding included).
func BenchmarkScan(b *testing.B) {
	srv := bigNode(b)
	c := fixture.Client(b, srv, spdkrpc.ClientOptions{})
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
	c := fixture.Client(b, srv, spdkrpc.ClientOptions{})
	lvols := fixture.Must(spdkrpc.BdevLvolGetLvols(context.Background(), c, ""))(b)
	raids := fixture.Must(spdkrpc.BdevRaidGetBdevs(context.Background(), c, ""))(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rt := spdk.Classify(lvols, raids)
		if len(rt.Replicas) != 2500 || len(rt.Engines) != 1000 {
			b.Fatalf("%d replicas, %d engines", len(rt.Replicas), len(rt.Engines))
		}
	}
}
