package diskscan_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// TestWhenLoadedLeavesTheDiskUndecided: while the gate says not loaded,
// the scan finds no orphan on a disk whose live replica the (empty) set
// does not name yet, and a purge of it is refused; once loaded, the live
// replica is owned and only the unclaimed one is an orphan.
func TestWhenLoadedLeavesTheDiskUndecided(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "disk-1")
	if err := diskscantest.NewDisk(path, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"pvc-1-r-0a1b2c3d", "pvc-2-r-4e5f6a7b"} {
		if err := diskscantest.MakeReplica(path, n, diskscantest.Replica{}); err != nil {
			t.Fatal(err)
		}
	}
	set := diskscan.NewStaticExpected() // the host's cache, not filled yet
	var loaded atomic.Bool
	o, err := diskscan.NewOrphans(diskscan.WhenLoaded(set, loaded.Load), diskscan.Options{AllowNoneExpected: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetDisks(diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: path, UUID: "uuid-1"}); err != nil {
		t.Fatal(err)
	}
	snap, err := o.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Items) != 0 {
		t.Fatalf("not loaded: the scan found %d orphans, want none (the disk is undecided)", len(snap.Items))
	}
	var scope orphan.ScopeStatus
	for _, st := range snap.Scopes {
		scope = st
	}
	if scope.Health == orphan.HealthReady {
		t.Errorf("not loaded: the disk's scope is Ready; want it undecided")
	}
	rec, err := orphan.NewRecord(orphan.Item{Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{orphan.ParamDataName: "pvc-1-r-0a1b2c3d", orphan.ParamDiskName: "disk-1", orphan.ParamDiskUUID: "uuid-1", orphan.ParamDiskPath: path}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx, rec); !errors.Is(err, diskscan.ErrNotLoaded) {
		t.Errorf("not loaded: Delete = %v, want ErrNotLoaded", err)
	}
	if _, err := os.Stat(filepath.Join(path, "replicas", "pvc-1-r-0a1b2c3d")); err != nil {
		t.Fatal("not loaded: the live replica's directory is gone")
	}

	set.Replace([]diskscan.ReplicaRef{{DiskID: "uuid-1", DataDirectoryName: "pvc-1-r-0a1b2c3d"}})
	loaded.Store(true)
	if snap, err = o.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if len(snap.Items) != 1 || snap.Items[0].Param(orphan.ParamDataName) != "pvc-2-r-4e5f6a7b" {
		t.Fatalf("loaded: the scan found %v, want only pvc-2-r-4e5f6a7b", snap.Items)
	}
}

// TestClaimsOnNeverMissesAStaticClaim: for any replica and any disks of a
// node, if StaticExpected reports the replica's directory on one of the
// node's disks, ClaimsOn says the replica can claim on the node. A
// node-local cache that keeps only such replicas loses no claim.
func TestClaimsOnNeverMissesAStaticClaim(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	ctx := context.Background()
	for round := range 5000 {
		r := diskscan.ReplicaRef{
			Name:              "r",
			NodeID:            pick("", "node-1", "node-2"),
			DiskID:            pick("", "uuid-1", "uuid-2", "uuid-3"),
			DiskPath:          pick("", "/var/lib/longhorn", "/var/lib/longhorn/", "/mnt/disk"),
			DataDirectoryName: pick("", "pvc-1-r-0a1b2c3d"),
		}
		uuids := map[string]bool{}
		var disks []diskscan.Disk
		for _, u := range []string{"uuid-1", "uuid-2"} {
			if rng.IntN(2) == 0 {
				uuids[u] = true
				disks = append(disks, diskscan.Disk{NodeID: "node-1", Name: "d" + u, Path: pick("/var/lib/longhorn", "/mnt/disk", "/other"), UUID: u})
			}
		}
		set := diskscan.NewStaticExpected(r)
		claimed := false
		for _, d := range disks {
			names, err := set.Expected(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			claimed = claimed || names.Has(r.DataDirectoryName)
		}
		if claimed && !r.ClaimsOn("node-1", uuids) {
			t.Fatalf("round %d: StaticExpected reports %+v on node-1's disks %v, but ClaimsOn is false", round, r, disks)
		}
	}
	// And it is not everything: a replica of another node's disk claims
	// nothing here.
	if (diskscan.ReplicaRef{NodeID: "node-1", DiskID: "uuid-9", DataDirectoryName: "pvc-1-r-0a1b2c3d"}).ClaimsOn("node-1", map[string]bool{"uuid-1": true}) {
		t.Error("a replica whose disk UUID is not the node's claims on it")
	}
}
