//go:build unix

package fsstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestCancelledSweepStopsListing guards a full collection's cancellation:
// once ctx ends nothing more is unlinked, and the sweep must also stop
// going through the buckets (on a large volume, tens of thousands of
// listings, each a round trip on NFS), not list the rest of the volume
// past the context, and must say it stopped. Each of 64 first-level
// buckets holds one unreferenced block; ctx is cancelled at the first
// decision. At most the buckets already being swept by the other workers
// may still be asked about, and nothing after the cancellation is
// unlinked.
func TestCancelledSweepStopsListing(t *testing.T) {
	eachLister(t, func(t *testing.T, v *lhVolume, sweep sweepFunc) {
		seen := map[string]bool{}
		for i := 0; len(seen) < 64; i++ {
			ck := checksum(fmt.Sprint("block ", i))
			if !seen[ck[0:2]] {
				seen[ck[0:2]] = true
				v.block(ck)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		asked := 0
		removed, _, err := sweep(ctx, func([]byte) bool {
			asked++
			cancel()
			return true
		})
		if removed != 0 {
			t.Fatalf("%d blocks unlinked after the context ended", removed)
		}
		if asked > removeWorkers {
			t.Fatalf("asked about %d blocks in 64 buckets after the context ended at the first; want at most %d (the buckets in flight)", asked, removeWorkers)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("sweep stopped by its context returned %v, want context.Canceled (the sweep is incomplete)", err)
		}
	})
}
