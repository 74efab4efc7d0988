//go:build unix

package fsstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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
	for _, lister := range []string{"platform", "os.Root"} {
		t.Run(lister, func(t *testing.T) {
			v := newLonghornVolume(t, t.TempDir(), "vol-a")
			seen := map[string]bool{}
			for i := 0; len(seen) < 64; i++ {
				ck := checksum(fmt.Sprint("block ", i))
				if !seen[ck[0:2]] {
					seen[ck[0:2]] = true
					v.block(ck)
				}
			}
			root, err := os.OpenRoot(v.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			newLister := newBucketLister
			if lister == "os.Root" {
				newLister = func(vol *os.Root, _ *os.File) (bucketLister, error) { return rootLister{vol}, nil }
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			asked := 0
			removed, _, err := sweepBlocksWith(ctx, root, newLister, func([]byte) bool {
				mu.Lock()
				defer mu.Unlock()
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
}
