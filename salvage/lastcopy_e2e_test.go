package salvage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// TestFaultedVolumesCopiesThatHoldDataAreNeverAutoPurged is issue 32's
// first case end to end, on real files: diskscan lists a disk's orphaned
// replica directories, salvage.WithCopies inspects them, and a Sweeper
// with auto-deletion of replica data on (no grace period) runs with a
// complete volume list in which pvc-lost is faulted. Every leftover copy
// of pvc-lost that holds its data stays, whether the export can read it
// today or not: its backing image removed from the disk, its backing
// image qcow2, its volume.meta naming a head that is gone, a rebuild that
// did not finish. Directories whose volume.meta is lost or does not parse
// are not replicas to diskscan at all (skipped, and a purge of one by
// name is refused). What the guard still allows: the copy of pvc-lost
// proven to hold no data, the orphan of a deleted volume and the orphan
// of a healthy volume (one the export cannot read) are purged.
func TestFaultedVolumesCopiesThatHoldDataAreNeverAutoPurged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("diskscan runs on Linux")
	}
	ctx := context.Background()
	disk := diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: filepath.Join(t.TempDir(), "disk-1"), UUID: "5c0ffee0-0000-4000-8000-000000000001"}
	if err := diskscantest.NewDisk(disk.Path, disk.Name, disk.UUID); err != nil {
		t.Fatal(err)
	}
	const (
		noBacking  = "pvc-lost-0000000a" // backing image removed from the disk
		qcow2      = "pvc-lost-0000000b" // backing image in qcow2
		badHead    = "pvc-lost-0000000c" // volume.meta damaged: its Head is not there
		noMeta     = "pvc-lost-0000000d" // volume.meta lost, layers intact
		junkMeta   = "pvc-lost-0000000e" // volume.meta does not parse, layers intact
		rebuilding = "pvc-lost-0000000f" // a rebuild that did not finish
		empty      = "pvc-lost-00000010" // created, never written: no data
		gone       = "pvc-gone-00000001" // of a deleted volume
		healthy    = "pvc-ok-00000001"   // of a healthy volume, backing image removed
	)
	data := threeLayers()
	missing := func(r salvagetest.Replica) salvagetest.Replica {
		r.BackingFilePath = "/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"
		return r
	}
	qcowPath := writeQCOW2Backing(t, disk.Path, "img-qcow-0a1b2c3d")
	reb := data
	reb.Rebuilding = true
	for name, r := range map[string]salvagetest.Replica{
		noBacking: missing(data), qcow2: func() salvagetest.Replica { r := data; r.BackingFilePath = qcowPath; return r }(),
		badHead: data, noMeta: data, junkMeta: data, rebuilding: reb, empty: emptyReplica(), gone: data, healthy: missing(data),
	} {
		write(t, disk.Path, name, r)
	}
	bad := data
	bad.Head.Name = "volume-head-009.img"
	rewriteVolumeMeta(t, filepath.Join(disk.Path, "replicas", badHead), bad)
	rm(t, filepath.Join(disk.Path, "replicas", noMeta), "volume.meta")
	overwrite(t, filepath.Join(disk.Path, "replicas", junkMeta), "volume.meta", []byte("{\"Size\": 4194304, \"Hea"))

	var refs []diskscan.ReplicaRef
	for i := range 10 {
		name := fmt.Sprintf("pvc-live%d-0000000%d", i, i)
		if err := diskscantest.MakeReplica(disk.Path, name, diskscantest.Replica{Size: 1 << 20, Written: 4096}); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, diskscan.ReplicaRef{Name: name + "-r", NodeID: disk.NodeID, DiskID: disk.UUID, DiskPath: disk.Path, DataDirectoryName: name})
	}
	inner, err := diskscan.NewOrphans(diskscan.NewStaticExpected(refs...), diskscan.Options{Disks: []diskscan.Disk{disk}})
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := salvage.WithCopies(inner, salvage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := orphan.NewMemStore()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	sweeper, err := orphan.NewSweeper(store, adapter, orphan.SweeperOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	volumes := map[string]orphan.VolumeState{"pvc-lost": orphan.VolumeFaulted, "pvc-ok": orphan.VolumeHealthy}
	for i := range 10 {
		volumes[fmt.Sprintf("pvc-live%d", i)] = orphan.VolumeHealthy
	}
	cycle := orphan.Cycle{Selector: orphan.Selector{NodeID: disk.NodeID},
		Scopes:  map[orphan.Scope]orphan.ScopeStatus{{NodeID: disk.NodeID}: {Health: orphan.HealthReady}},
		Policy:  orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaData}},
		Volumes: volumes, VolumesComplete: true}
	sweep := func() (orphan.Snapshot, orphan.Result) {
		t.Helper()
		snap, err := adapter.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := sweeper.Reconcile(ctx, snap, cycle)
		if err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Minute)
		return snap, res
	}
	dataName := map[string]string{} // record name → directory
	snap, _ := sweep()
	for _, it := range snap.Items {
		n, err := it.Name()
		if err != nil {
			t.Fatal(err)
		}
		dataName[n] = it.Param(orphan.ParamDataName)
	}
	var skipped []string
	for _, s := range snap.Skipped {
		skipped = append(skipped, s.Name)
	}
	if !slices.Contains(skipped, noMeta) || !slices.Contains(skipped, junkMeta) {
		t.Fatalf("skipped %v; want %s and %s there", skipped, noMeta, junkMeta)
	}
	// The records say what each copy holds.
	recs, err := store.List(ctx, orphan.Selector{NodeID: disk.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	// The qcow2 copy is NotRecoverable while the export refuses qcow2
	// backing images; whether or not it can read them, the copy is kept.
	wantCond := map[string]string{noBacking: "NotRecoverable", qcow2: "NotRecoverable|Reusable", badHead: "NotRecoverable", rebuilding: "NotRecoverable",
		empty: "NoData", gone: "Recoverable", healthy: "NotRecoverable"}
	for _, r := range recs {
		c := meta.FindStatusCondition(r.Conditions, orphan.ConditionRecoverable)
		name := dataName[r.Name]
		if c == nil || !slices.Contains(strings.Split(wantCond[name], "|"), c.Reason) {
			t.Errorf("%s: Recoverable condition %+v, want reason %s", name, c, wantCond[name])
			continue
		}
		if c.Reason == "NotRecoverable" && !strings.Contains(c.Message, "holds data the tool cannot export today: ") {
			t.Errorf("%s: message %q does not say the data is there", name, c.Message)
		}
	}
	if len(recs) != len(wantCond) {
		t.Fatalf("%d records, want %d", len(recs), len(wantCond))
	}

	_, res := sweep()
	purged := map[string]bool{}
	for _, n := range res.Purged {
		purged[dataName[n]] = true
	}
	if want := map[string]bool{empty: true, gone: true, healthy: true}; !mapsEqual(purged, want) {
		t.Errorf("purged %v, want %v (refused %+v)", purged, want, res.Refused)
	}
	refused := map[string]string{}
	for _, rf := range res.Refused {
		refused[dataName[rf.Name]] = rf.Reason
	}
	for name, why := range map[string]string{
		noBacking:  "missing-backing-image",
		badHead:    "broken-chain",
		rebuilding: "rebuilding",
	} {
		r := refused[name]
		if !strings.HasPrefix(r, "LastCopy: it holds data of volume pvc-lost, which is faulted") ||
			!strings.Contains(r, "the copy holds data the tool cannot export today: "+why) {
			t.Errorf("%s: refusal %q; want LastCopy saying the tool cannot export it (%s)", name, r, why)
		}
	}
	if r := refused[qcow2]; !strings.HasPrefix(r, "LastCopy: it holds data of volume pvc-lost, which is faulted") {
		t.Errorf("%s: refusal %q; want LastCopy", qcow2, r)
	}
	if strings.Contains(refused[noBacking], "back onto this disk from another node that has it") == false {
		t.Errorf("the refusal of %s does not say what to do: %q", noBacking, refused[noBacking])
	}
	for _, name := range []string{noBacking, qcow2, badHead, noMeta, junkMeta, rebuilding} {
		if _, err := os.Stat(filepath.Join(disk.Path, "replicas", name, "volume-head-002.img")); err != nil {
			t.Errorf("%s lost its data: %v", name, err)
		}
	}
	for _, name := range []string{empty, gone, healthy} {
		if _, err := os.Stat(filepath.Join(disk.Path, "replicas", name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}

	// A directory whose volume.meta is lost or does not parse is no
	// replica to diskscan: even a record made for it by name (a host that
	// lists Longhorn's own Orphans, say) is refused at the purge.
	for _, name := range []string{noMeta, junkMeta} {
		it := orphan.Item{Kind: orphan.KindReplicaData, NodeID: disk.NodeID, DataEngine: orphan.DataEngineV1, Parameters: map[string]string{
			orphan.ParamDataName: name, orphan.ParamDiskName: disk.Name, orphan.ParamDiskUUID: disk.UUID,
			orphan.ParamDiskPath: disk.Path, orphan.ParamDiskType: diskscan.DiskType}}
		rec, err := orphan.NewRecord(it, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := inner.Delete(ctx, rec); !errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Errorf("%s: Delete = %v, want a refusal", name, err)
		}
		if _, err := os.Stat(filepath.Join(disk.Path, "replicas", name, "volume-head-002.img")); err != nil {
			t.Errorf("%s lost its data: %v", name, err)
		}
	}

	// Once pvc-lost is healthy again, its leftovers go: the guard waits
	// for the volume, it does not keep the copies forever.
	volumes["pvc-lost"] = orphan.VolumeHealthy
	for range 3 {
		sweep()
	}
	for _, name := range []string{noBacking, qcow2, badHead, rebuilding} {
		if _, err := os.Stat(filepath.Join(disk.Path, "replicas", name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of the healed volume is still there: %v", name, err)
		}
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
