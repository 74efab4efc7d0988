//go:build linux

package diskscan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// rootValidation validates name on d through the root path (validateRoot),
// the one taken where the descriptor path cannot tell.
func rootValidation(t *testing.T, o *Orphans, d Disk, name string) validation {
	t.Helper()
	root, err := os.OpenRoot(filepath.Join(d.Path, ReplicasDir))
	must(t, err)
	defer root.Close()
	return o.validateRoot(context.Background(), root, nil, name)
}

// TestSizeWalkDeepChainIsSkipped: a valid replica directory holding a
// chain of 6,000 nested directories is skipped with the reason, by both
// the scan (descriptor path) and the root path, after opening no more than
// MaxWalkDepth directories: the walk stops at the bound instead of
// resolving thousands of paths (on the starting commit the scan took
// minutes here and reported it as an orphan).
func TestSizeWalkDeepChainIsSkipped(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	const name = "pvc-deep-r-0000abcd"
	dir := replica(t, d, name, disktest.Replica{})
	nestChain(t, dir, 6000, 100)
	f := newFixture(t, d)
	rep := f.scan().Disks[0]
	reason, skipped := skippedReasons(rep)[name]
	if len(rep.Orphans) != 0 || !skipped || !strings.Contains(reason, fmt.Sprintf("more than %d levels deep", MaxWalkDepth)) {
		t.Fatalf("orphans %v, skipped %q (%v)", orphanNames(rep), reason, skipped)
	}
	if opens := f.o.walkOpens.Load(); opens > MaxWalkDepth {
		t.Errorf("the walk opened %d directories for a bound of %d", opens, MaxWalkDepth)
	}
	if entries := f.o.walkEntries.Load(); entries > 3*(MaxWalkDepth+1) {
		t.Errorf("the walk looked at %d entries for a bound of %d levels", entries, MaxWalkDepth)
	}

	o := newOrphans(t, NewStaticExpected(), settled, d)
	v := rootValidation(t, o, d, name)
	if !v.present || v.entry.reason != reason {
		t.Fatalf("root path: %+v %+v, want the reason %q", v, v.entry, reason)
	}
	if opens := o.walkOpens.Load(); opens > MaxWalkDepth {
		t.Errorf("root path: the walk opened %d directories for a bound of %d", opens, MaxWalkDepth)
	}
}

// TestSizeWalkDeepestAllowed: a chain of exactly MaxWalkDepth directories
// is an orphan whose size counts the files at every level, both paths
// agree, and Delete purges it (the scan and the purge have the same
// bound); one more level makes it skipped.
func TestSizeWalkDeepestAllowed(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	const ok, deeper = "pvc-ok-r-00000001", "pvc-deeper-r-00000002"
	nestChain(t, replica(t, d, ok, disktest.Replica{NoImage: true}), MaxWalkDepth, 1)
	nestChain(t, replica(t, d, deeper, disktest.Replica{NoImage: true}), MaxWalkDepth+1, 1)
	f := newFixture(t, d)
	f.expect(d, "pvc-kept-r-00000009") // an expected set that is not empty, so Delete may purge
	rep := f.scan().Disks[0]
	if names := orphanNames(rep); len(names) != 1 || names[0] != ok {
		t.Fatalf("orphans %v, skipped %v", names, skippedReasons(rep))
	}
	if _, skipped := skippedReasons(rep)[deeper]; !skipped {
		t.Fatalf("%s not skipped: %v", deeper, skippedReasons(rep))
	}
	got := rep.Orphans[0]
	if got.SizeUnknown != "" || got.AllocatedBytes < MaxWalkDepth*4096 {
		t.Errorf("%s: %d bytes (%q), want at least %d", ok, got.AllocatedBytes, got.SizeUnknown, MaxWalkDepth*4096)
	}
	if opens := f.o.walkOpens.Load(); opens != 2*MaxWalkDepth {
		t.Errorf("the walks opened %d directories, want %d (each level once)", opens, 2*MaxWalkDepth)
	}
	o := newOrphans(t, NewStaticExpected(), settled, d)
	if v := rootValidation(t, o, d, ok); v.entry.reason != "" || v.entry.allocated != got.AllocatedBytes {
		t.Errorf("root path: %+v, want %d bytes", v.entry, got.AllocatedBytes)
	}
	if err := f.o.Delete(context.Background(), record(t, d, ok)); err != nil {
		t.Fatalf("Delete of a tree the scan walked whole: %v", err)
	}
	if exists(t, filepath.Join(d.Path, ReplicasDir, ok)) {
		t.Error("still there after Delete")
	}
}

// TestSizeWalkIsLinear: on a wide and nested tree, the walk opens each
// directory exactly once and looks at each entry exactly once, on both
// paths.
func TestSizeWalkIsLinear(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	const name = "pvc-wide-r-00000003"
	dir := replica(t, d, name, disktest.Replica{NoImage: true}) // volume.meta only
	const fanout, depth, files = 4, 3, 3
	dirs, entries := 0, 1 // volume.meta
	var grow func(p string, level int)
	grow = func(p string, level int) {
		for i := range files {
			must(t, os.WriteFile(filepath.Join(p, fmt.Sprintf("f%d", i)), []byte("x"), 0o644))
			entries++
		}
		must(t, os.Symlink("/", filepath.Join(p, "up"))) // never followed, still an entry
		entries++
		if level == depth {
			return
		}
		for i := range fanout {
			sub := filepath.Join(p, fmt.Sprintf("s%d", i))
			must(t, os.Mkdir(sub, 0o755))
			dirs++
			entries++
			grow(sub, level+1)
		}
	}
	grow(dir, 0)
	f := newFixture(t, d)
	rep := f.scan().Disks[0]
	if len(rep.Orphans) != 1 || rep.Orphans[0].SizeUnknown != "" {
		t.Fatalf("orphans %+v, skipped %v", rep.Orphans, skippedReasons(rep))
	}
	if opens, seen := f.o.walkOpens.Load(), f.o.walkEntries.Load(); opens != int64(dirs) || seen != int64(entries) {
		t.Errorf("descriptor path: %d opens, %d entries; the tree has %d directories, %d entries", opens, seen, dirs, entries)
	}
	o := newOrphans(t, NewStaticExpected(), settled, d)
	rootValidation(t, o, d, name)
	if opens, seen := o.walkOpens.Load(), o.walkEntries.Load(); opens != int64(dirs) || seen != int64(entries) {
		t.Errorf("root path: %d opens, %d entries; the tree has %d directories, %d entries", opens, seen, dirs, entries)
	}
}

// TestSizeWalkEntryBound: a directory with more entries than
// MaxWalkEntries stays an orphan with its size unknown and the reason,
// not in OrphanBytes; the walk stops at the bound.
func TestSizeWalkEntryBound(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	const many, few = "pvc-many-r-00000004", "pvc-few-r-00000005"
	dir := replica(t, d, many, disktest.Replica{Written: 8192})
	for i := range 40 {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("volume-snap-%d.img", i)), make([]byte, 4096), 0o644))
	}
	replica(t, d, few, disktest.Replica{Written: 8192})
	opts := settled
	opts.MaxWalkEntries = 10
	f := newFixtureWith(t, opts, d)
	rep := f.scan().Disks[0]
	if names := orphanNames(rep); len(names) != 2 {
		t.Fatalf("orphans %v, skipped %v", names, skippedReasons(rep))
	}
	small, got := rep.Orphans[0], rep.Orphans[1] // sorted by name
	if !strings.Contains(got.SizeUnknown, "more than 10 entries") || got.AllocatedBytes != 0 {
		t.Errorf("%s: size %d, unknown %q", got.Name, got.AllocatedBytes, got.SizeUnknown)
	}
	if small.SizeUnknown != "" || small.AllocatedBytes == 0 || rep.OrphanBytes != small.AllocatedBytes {
		t.Errorf("%s: size %d (%q), total %d", small.Name, small.AllocatedBytes, small.SizeUnknown, rep.OrphanBytes)
	}
	if seen := f.o.walkEntries.Load(); seen > 11+4 { // and the few of the other
		t.Errorf("the walks looked at %d entries for a bound of 10", seen)
	}
	o := newOrphans(t, NewStaticExpected(), opts, d)
	if v := rootValidation(t, o, d, many); v.entry.sizeUnknown != got.SizeUnknown {
		t.Errorf("root path: %+v", v.entry)
	}
}

// tripCtx is a context that is cancelled at its trip-th Err call, so a
// test can cancel a scan in the middle of its work, and counts the calls
// made after that.
type tripCtx struct {
	context.Context
	cancel context.CancelFunc
	trip   int64
	calls  atomic.Int64
}

func newTripCtx(trip int64) *tripCtx {
	ctx, cancel := context.WithCancel(context.Background())
	return &tripCtx{Context: ctx, cancel: cancel, trip: trip}
}

func (c *tripCtx) Err() error {
	if c.calls.Add(1) == c.trip {
		c.cancel()
	}
	return c.Context.Err()
}

// TestSizeWalkCancel: a scan cancelled while it walks a large directory
// fails with the context's error, within a few entries of the cancel.
func TestSizeWalkCancel(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	dir := replica(t, d, "pvc-big-r-00000006", disktest.Replica{NoImage: true})
	for i := range 10 {
		sub := filepath.Join(dir, fmt.Sprint(i))
		must(t, os.Mkdir(sub, 0o755))
		for j := range 100 {
			must(t, os.WriteFile(filepath.Join(sub, fmt.Sprint(j)), nil, 0o644))
		}
	}
	// How many times a whole scan asks; the walk asks at every entry, so
	// half way is inside the walk.
	whole := newTripCtx(-1)
	o := newOrphans(t, NewStaticExpected(), settled, d)
	if _, err := o.Report(whole); err != nil {
		t.Fatal(err)
	}
	total := whole.calls.Load()
	if total < 1000 {
		t.Fatalf("a scan asked ctx %d times: the walk does not check it at every entry", total)
	}
	ctx := newTripCtx(total / 2)
	o = newOrphans(t, NewStaticExpected(), settled, d)
	_, err := o.Report(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled scan: %v, want context.Canceled", err)
	}
	if after := ctx.calls.Load() - ctx.trip; after > 20 {
		t.Errorf("the scan went on for %d checks after the cancel", after)
	}
	if seen := o.walkEntries.Load(); seen >= 1000 {
		t.Errorf("the walk looked at %d entries after being cancelled half way", seen)
	}
}

// TestSizeWalkStaysInItsMount: a tmpfs and a bind mount inside an orphan
// directory are neither entered nor counted, on both paths (the walk
// never crosses a mount, as a purge never does).
func TestSizeWalkStaysInItsMount(t *testing.T) {
	base := t.TempDir()
	d := makeDisk(t, base, "n", "d", "u")
	const name = "pvc-mnt-r-00000007"
	dir := replica(t, d, name, disktest.Replica{Written: 4096})
	o := newOrphans(t, NewStaticExpected(), settled, d)
	before := rootValidation(t, o, d, name).entry.allocated

	mountTmpfs(t, filepath.Join(dir, "tmp"))
	must(t, os.WriteFile(filepath.Join(dir, "tmp", "big"), make([]byte, 1<<20), 0o644))
	src := filepath.Join(base, "elsewhere")
	must(t, os.Mkdir(src, 0o755))
	must(t, os.WriteFile(filepath.Join(src, "big"), make([]byte, 1<<20), 0o644))
	mountBind(t, src, filepath.Join(dir, "bind"))

	f := newFixture(t, d)
	rep := f.scan().Disks[0]
	if len(rep.Orphans) != 1 {
		t.Fatalf("orphans %+v, skipped %v", rep.Orphans, skippedReasons(rep))
	}
	// The two mount points are directories of the orphan's filesystem:
	// only their own blocks may be counted, not the 2 MiB inside.
	if got := rep.Orphans[0].AllocatedBytes; got >= before+1<<20 {
		t.Errorf("descriptor path counted %d bytes, %d without the mounts: it crossed a mount", got, before)
	}
	o = newOrphans(t, NewStaticExpected(), settled, d)
	if got := rootValidation(t, o, d, name).entry.allocated; got >= before+1<<20 {
		t.Errorf("root path counted %d bytes, %d without the mounts: it crossed a mount", got, before)
	}
}
