package diskscan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
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
	lost := replica(t, d, "pvc-lost-r-deadbeef", diskscantest.Replica{})
	kept := replica(t, d, "pvc-kept-r-00000001", diskscantest.Replica{})
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
	if err := f.del.Delete(context.Background(), rec); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if exists(t, lost) || !exists(t, filepath.Join(kept, MetaFile)) {
		t.Fatalf("after purge: lost exists %v, kept exists %v", exists(t, lost), exists(t, kept))
	}

	// The Deleter and the Judge compare the record's path with the host's
	// as strings: a record made over the path without the slash hashed to
	// another name, so it is not this disk's record.
	replica(t, d, "pvc-other-r-00000002", diskscantest.Replica{})
	unslashed := record(t, Disk{NodeID: "n", Name: "d", Path: strings.TrimSuffix(d.Path, "/"), UUID: "u"}, "pvc-other-r-00000002")
	if err := f.del.Delete(context.Background(), unslashed); !errorsIs(err, orphan.ErrPreconditionFailed, ErrDiskChanged) {
		t.Fatalf("Delete of a record over the unslashed path: %v", err)
	}
	if !exists(t, filepath.Join(d.Path, ReplicasDir, "pvc-other-r-00000002")) {
		t.Fatal("refused purge deleted the directory")
	}
}
