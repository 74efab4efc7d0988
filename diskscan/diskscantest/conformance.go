// Package diskscantest helps test code built on package diskscan: one
// conformance suite, RunConformanceTests, for the interface a host
// implements (diskscan.ExpectedSource), and builders of Longhorn-style v1
// filesystem disks on a real filesystem for tests, examples and
// benchmarks: a disk config, replica directories with a volume.meta
// written the way the engine writes it (a temporary file renamed over the
// old one), and sparse head images.
//
// The adapter itself, diskscan.Orphans, is checked with
// orphantest.RunConformanceTests on disks these builders make.
package diskscantest

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan"
)

// Harness says what RunConformanceTests checks: one field per interface
// of package diskscan that a host implements. Nil fields are skipped.
type Harness struct {
	// ExpectedSource makes a new diskscan.ExpectedSource that expects
	// nothing yet, and the function that makes it expect a directory.
	// It is called once per subtest.
	ExpectedSource func(t *testing.T) (diskscan.ExpectedSource, ExpectFunc)
}

// ExpectFunc makes the source it came with expect the data directory name
// on disk, as a replica object with spec.diskID disk.UUID, spec.nodeID
// disk.NodeID, spec.diskPath disk.Path and spec.dataDirectoryName name
// appearing in the cluster would. It may be called while the source is in
// use. Implementations call t.Fatal on their own failures.
type ExpectFunc func(t *testing.T, disk diskscan.Disk, name string)

// RunConformanceTests checks every implementation h names against the
// contracts of package diskscan: "ExpectedSource" for h.ExpectedSource.
// A Harness with nothing set is a test failure. caretaker's
// StaticExpected and ExpectedFunc run it; so can a host's informer-backed
// source:
//
//	func TestExpectedSource(t *testing.T) {
//		diskscantest.RunConformanceTests(t, diskscantest.Harness{
//			ExpectedSource: func(t *testing.T) (diskscan.ExpectedSource, diskscantest.ExpectFunc) {
//				src := newReplicaIndex(t)
//				return src, func(t *testing.T, d diskscan.Disk, name string) { src.add(t, d, name) }
//			},
//		})
//	}
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.ExpectedSource == nil {
		t.Fatal("diskscantest: the Harness sets nothing to test")
	}
	t.Run("ExpectedSource", func(t *testing.T) { runExpectedSourceTests(t, h.ExpectedSource) })
}

// The disks the ExpectedSource section asks about. Longhorn's default
// path has a trailing slash.
var (
	diskA = diskscan.Disk{NodeID: "node-1", Name: "disk-a", Path: "/var/lib/longhorn/", UUID: "uuid-a"}
	diskB = diskscan.Disk{NodeID: "node-1", Name: "disk-b", Path: "/mnt/disk-b", UUID: "uuid-b"}
)

// hangGuard turns a call that hangs into a failure; it is not a timing
// assertion.
const hangGuard = 30 * time.Second

func runExpectedSourceTests(t *testing.T, newSource func(t *testing.T) (diskscan.ExpectedSource, ExpectFunc)) {
	ctx := context.Background()
	expected := func(t *testing.T, src diskscan.ExpectedSource, d diskscan.Disk) diskscan.NameSet {
		t.Helper()
		set, err := src.Expected(ctx, d)
		if err != nil {
			t.Fatalf("Expected(%s): %v", d.Scope(), err)
		}
		return set
	}

	t.Run("UnknownDiskIsEmptyNotAnError", func(t *testing.T) {
		src, _ := newSource(t)
		if set := expected(t, src, diskA); len(set) != 0 {
			t.Fatalf("a source that expects nothing returned %v", set)
		}
	})

	t.Run("ExpectsWhatTheClusterExpects", func(t *testing.T) {
		src, expect := newSource(t)
		expect(t, diskA, "pvc-1-r-0000000a")
		expect(t, diskA, "pvc-2-r-0000000b")
		expect(t, diskB, "pvc-3-r-0000000c")
		set := expected(t, src, diskA)
		for _, n := range []string{"pvc-1-r-0000000a", "pvc-2-r-0000000b"} {
			if !set.Has(n) {
				t.Errorf("Expected(%s) lacks %s: its live directory would look orphaned", diskA.Scope(), n)
			}
		}
		if set.Has("pvc-9-r-0000000f") {
			t.Errorf("Expected(%s) has a name nobody expects", diskA.Scope())
		}
		if !expected(t, src, diskB).Has("pvc-3-r-0000000c") {
			t.Errorf("Expected(%s) lacks pvc-3-r-0000000c", diskB.Scope())
		}
	})

	// Longhorn's disk is its UUID: the same disk reached through a path
	// spelt another way (the trailing slash of the default path) still
	// expects its replicas, or a live directory would look orphaned.
	t.Run("DiskIsItsUUIDWhateverThePathSpelling", func(t *testing.T) {
		src, expect := newSource(t)
		expect(t, diskA, "pvc-1-r-0000000a")
		unslashed := diskA
		unslashed.Path = "/var/lib/longhorn"
		if !expected(t, src, unslashed).Has("pvc-1-r-0000000a") {
			t.Fatalf("the disk of UUID %s at %q lost the replica expected at %q", diskA.UUID, unslashed.Path, diskA.Path)
		}
	})

	// A set handed out is read-only for both sides: a later change makes
	// a new set, so a scan holding the old one sees a consistent view.
	t.Run("HandedOutSetIsNeverModified", func(t *testing.T) {
		src, expect := newSource(t)
		expect(t, diskA, "pvc-1-r-0000000a")
		first := expected(t, src, diskA)
		before := maps.Clone(first)
		expect(t, diskA, "pvc-2-r-0000000b")
		if !maps.Equal(first, before) {
			t.Fatalf("a set handed out changed from %v to %v", before, first)
		}
		if !expected(t, src, diskA).Has("pvc-2-r-0000000b") {
			t.Fatalf("the new replica is not expected after Expect")
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		src, expect := newSource(t)
		expect(t, diskA, "pvc-0-r-00000000")
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					set, err := src.Expected(ctx, diskA)
					if err != nil {
						t.Errorf("concurrent Expected: %v", err)
						return
					}
					n := 0
					for range set { // reading a set while Expect runs: the race detector watches
						n++
					}
					if !set.Has("pvc-0-r-00000000") {
						t.Errorf("concurrent Expected lost a replica")
						return
					}
				}
			}()
		}
		for i := range 20 {
			expect(t, diskA, "pvc-x-r-"+string(rune('a'+i))+"0000000")
		}
		wg.Wait()
	})

	t.Run("ReturnsAtACancelledContext", func(t *testing.T) {
		src, expect := newSource(t)
		expect(t, diskA, "pvc-1-r-0000000a")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		type answer struct {
			set diskscan.NameSet
			err error
		}
		done := make(chan answer, 1)
		go func() {
			set, err := src.Expected(cctx, diskA)
			done <- answer{set, err}
		}()
		select {
		case a := <-done:
			// An error, or an answer: an answer must still be right.
			if a.err == nil && !a.set.Has("pvc-1-r-0000000a") {
				t.Fatalf("Expected with a cancelled context answered %v without error", a.set)
			}
		case <-time.After(hangGuard):
			t.Fatal("Expected with a cancelled context did not return")
		}
	})
}
