package diskscan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Longhorn's default disk path is "/var/lib/longhorn/" with the trailing
// slash, and the orphan name is hashed over that exact string: a disk
// whose path ends in a slash scans, names its records over the slashed
// path, and purges.
func TestDiskPathWithTrailingSlash(t *testing.T) {
	base := t.TempDir()
	d := makeDisk(t, base, "n", "d", "u")
	d.Path += "/"
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	kept := replica(t, d, "pvc-kept-r-00000001", disktest.Replica{})
	f := newFixture(t, d)
	f.exp.Add(ReplicaRef{NodeID: "n", DiskID: "u", DiskPath: d.Path, DataDirectoryName: "pvc-kept-r-00000001"})
	rep := f.scan().Disks[0]
	if rep.Status.Health != orphan.HealthReady || !equalStrings(orphanNames(rep), []string{"pvc-lost-r-deadbeef"}) {
		t.Fatalf("scan: %+v", rep)
	}
	it := rep.Orphans[0].Item
	if got := it.Param(orphan.ParamDiskPath); got != d.Path || !strings.HasSuffix(got, "/") {
		t.Fatalf("DiskPath parameter %q, want %q", got, d.Path)
	}
	rec, err := orphan.NewRecord(it, testTime)
	must(t, err)
	sum := sha256.Sum256([]byte(strings.Join([]string{"n", "d", d.Path, "u", "pvc-lost-r-deadbeef"}, "-")))
	if want := "orphan-" + hex.EncodeToString(sum[:]); rec.Name != want {
		t.Fatalf("record name %s, want %s (hashed over the slashed path)", rec.Name, want)
	}
	rec.DeletionRequested = true
	if err := f.o.Delete(context.Background(), rec); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if exists(t, lost) || !exists(t, filepath.Join(kept, MetaFile)) {
		t.Fatalf("after purge: lost exists %v, kept exists %v", exists(t, lost), exists(t, kept))
	}

	// The Deleter and the Judge compare the record's path with the host's
	// as strings: a record made over the path without the slash hashed to
	// another name, so it is not this disk's record.
	replica(t, d, "pvc-other-r-00000002", disktest.Replica{})
	unslashed := record(t, Disk{NodeID: "n", Name: "d", Path: strings.TrimSuffix(d.Path, "/"), UUID: "u"}, "pvc-other-r-00000002")
	if err := f.o.Delete(context.Background(), unslashed); !errorsIs(err, orphan.ErrPreconditionFailed, ErrDiskChanged) {
		t.Fatalf("Delete of a record over the unslashed path: %v", err)
	}
	if !exists(t, filepath.Join(d.Path, ReplicasDir, "pvc-other-r-00000002")) {
		t.Fatal("refused purge deleted the directory")
	}
}

// The evidence the orphan core's guard weighs, and the Deleter's own
// refusal on an empty expected set at the moment of deletion.
func TestNoneExpected(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	f := newFixture(t, d)

	st := f.scan().Snapshot().Scopes[d.Scope()]
	if st.Health != orphan.HealthReady || !st.NoneExpected || st.OwnedUnlisted != 0 {
		t.Fatalf("empty expected set: scope %+v, want Ready and NoneExpected", st)
	}
	err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrNoneExpected) {
		t.Fatalf("Delete with nothing expected: %v", err)
	}
	if !exists(t, filepath.Join(lost, MetaFile)) {
		t.Fatal("refused purge deleted the directory")
	}

	// Expected replicas: counted as owned-and-unlisted, not NoneExpected.
	replica(t, d, "pvc-a-r-00000001", disktest.Replica{})
	replica(t, d, "pvc-b-r-00000002", disktest.Replica{})
	f.expect(d, "pvc-a-r-00000001", "pvc-b-r-00000002", "pvc-c-r-00000003") // c not on this disk yet
	st = f.scan().Snapshot().Scopes[d.Scope()]
	if st.NoneExpected || st.OwnedUnlisted != 2 {
		t.Fatalf("two owned directories: scope %+v, want OwnedUnlisted 2", st)
	}

	// A disk without a replicas directory is Ready and still says whether
	// anything is expected.
	bare := makeDisk(t, t.TempDir(), "n", "bare", "ub")
	must(t, os.Remove(filepath.Join(bare.Path, ReplicasDir)))
	g := newFixture(t, bare)
	if st := g.scan().Snapshot().Scopes[bare.Scope()]; st.Health != orphan.HealthReady || !st.NoneExpected {
		t.Fatalf("disk without replicas dir: %+v", st)
	}

	// The explicit opt-out purges.
	allow := settled
	allow.AllowNoneExpected = true
	h := newFixtureWith(t, allow, d)
	h.scan()
	if err := h.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef")); err != nil {
		t.Fatalf("Delete with AllowNoneExpected: %v", err)
	}
	if exists(t, lost) {
		t.Fatal("AllowNoneExpected did not purge")
	}
}

// The expected set emptied between the checks and the removal: the
// directory is renamed back.
func TestNoneExpectedAfterRename(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	lost := replica(t, d, "pvc-lost-r-deadbeef", disktest.Replica{})
	f := newFixture(t, d)
	f.expect(d, "pvc-live-r-00000001")
	f.scan()
	f.o.hooks.afterTombstone = func(string, string) { f.exp.Replace(nil) }
	err := f.o.Delete(context.Background(), record(t, d, "pvc-lost-r-deadbeef"))
	if !errorsIs(err, orphan.ErrPreconditionFailed, ErrNoneExpected) {
		t.Fatalf("Delete: %v", err)
	}
	if !exists(t, filepath.Join(lost, MetaFile)) {
		t.Fatal("not renamed back")
	}
}

// A scan stops at its context between unexpected entries (each costs a
// meta read and a size walk), and what it learned part way is not cached.
func TestScanStopsAtItsContext(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	for _, n := range []string{"pvc-a-r-00000001", "pvc-b-r-00000002", "pvc-c-r-00000003"} {
		replica(t, d, n, disktest.Replica{Written: 64 << 10})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := ExpectedFunc(func(context.Context, Disk) (NameSet, error) {
		cancel() // the context ends once the listing is done
		return NameSet{"pvc-live-r-00000009": {}}, nil
	})
	inv := newOrphans(t, src, settled, d)
	if _, err := inv.Report(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Report: %v, want context.Canceled", err)
	}
	inv.expected = ExpectedFunc(func(context.Context, Disk) (NameSet, error) { return NameSet{"pvc-live-r-00000009": {}}, nil })
	rep, err := inv.Report(context.Background())
	must(t, err)
	if dr := rep.Disks[0]; len(dr.Orphans) != 3 || dr.OrphanBytes < 3*(64<<10) {
		t.Fatalf("rescan: %d orphans, %d bytes", len(dr.Orphans), dr.OrphanBytes)
	}
}
