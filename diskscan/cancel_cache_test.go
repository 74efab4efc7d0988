package diskscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// cancelAtCheck is a context that ends at its n-th Err call: run with
// n = 1, 2, ... it cancels a scan at every point where the scan looks.
type cancelAtCheck struct {
	context.Context
	n, calls atomic.Int64
	once     sync.Once
	done     chan struct{}
}

func newCancelAtCheck(n int64) *cancelAtCheck {
	c := &cancelAtCheck{Context: context.Background(), done: make(chan struct{})}
	c.n.Store(n)
	return c
}

func (c *cancelAtCheck) Err() error {
	if c.calls.Add(1) >= c.n.Load() {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

func (c *cancelAtCheck) Done() <-chan struct{} { return c.done }

// TestScanCancelledAtEveryCheckLeavesACacheThatTellsTheTruth guards the
// cache state a cancellation leaves: a scan is cancelled at its first,
// second, ... look at the context (so while it lists, while it classifies
// the listing in chunks, while it validates), each time with the expected
// set just changed and, every other time, the directory too; the
// directory changes again before the next scan, so that it relists and
// may reuse verdicts of the cancelled classification. The next
// scans, with the set before and after, must each report exactly what a
// fresh Orphans (no cache) reports: a partial relist or classification
// must never be taken for a complete one.
func TestScanCancelledAtEveryCheckLeavesACacheThatTellsTheTruth(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	var refsA, refsB []ReplicaRef
	for i := range 2*chunkSize + 50 {
		name := fmt.Sprintf("pvc-own%05d-r-%08d", i, i)
		must(t, os.Mkdir(filepath.Join(rd, name), 0o755))
		ref := ReplicaRef{Name: name, DiskID: d.UUID, DataDirectoryName: name}
		refsA = append(refsA, ref)
		// B no longer expects one in a hundred, spread over every chunk.
		if i%100 != 0 {
			refsB = append(refsB, ref)
		}
	}
	for i := range 6 {
		replica(t, d, fmt.Sprintf("pvc-lost%02d-r-%08d", i, i), disktest.Replica{Size: 1 << 20})
	}
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			exp := NewStaticExpected(refsA...)
			opts := Options{Clock: settled.Clock, ScanWorkers: workers}
			o := newOrphans(t, exp, opts, d)
			check := func(what string) {
				t.Helper()
				got, err := o.Report(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				want, err := newOrphans(t, exp, opts, d).Report(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: the cached scan reports %d orphans, %d owned, %d skipped; a fresh one %d, %d, %d",
						what, len(got.Disks[0].Orphans), got.Disks[0].Owned, len(got.Disks[0].Skipped),
						len(want.Disks[0].Orphans), want.Disks[0].Owned, len(want.Disks[0].Skipped))
				}
			}
			check("first scan")
			sets := [2][]ReplicaRef{refsA, refsB}
			for n := int64(1); ; n++ {
				before, after := sets[n%2], sets[(n+1)%2]
				exp.Replace(after)
				if n%2 == 0 {
					name := fmt.Sprintf("new%d-%05d", workers, n)
					must(t, os.Mkdir(filepath.Join(rd, name), 0o755))
				}
				ctx := newCancelAtCheck(n)
				_, err := o.Report(ctx)
				if err == nil {
					if n < 3 {
						t.Fatalf("a scan looked at its context only %d times", n)
					}
					t.Logf("cancelled at each of %d checks", n-1)
					return // cancelled at every check
				}
				// Changed again, so the next scan lists afresh and may
				// reuse the verdicts of the last classification. The new
				// entries are no data names: skipped without validation,
				// they add no look at the context, so the loop ends.
				must(t, os.Mkdir(filepath.Join(rd, fmt.Sprintf("re%d-%05d", workers, n)), 0o755))
				exp.Replace(before)
				check(fmt.Sprintf("cancelled at check %d, then the set before", n))
				exp.Replace(after)
				check(fmt.Sprintf("cancelled at check %d, then the set after", n))
			}
		})
	}
}
