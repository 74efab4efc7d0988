package diskscan_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// A disk with one replica the cluster expects, one it does not, and a
// directory that is not a replica.
func ExampleOrphans_Report() {
	base, _ := os.MkdirTemp("", "diskscan-example-")
	defer os.RemoveAll(base)
	path := filepath.Join(base, "disk-1")
	diskscantest.NewDisk(path, "disk-1", "uuid-1")
	diskscantest.MakeReplica(path, "pvc-1-r-0a1b2c3d", diskscantest.Replica{})
	diskscantest.MakeReplica(path, "pvc-2-r-4e5f6a7b", diskscantest.Replica{Size: 8 << 20, Written: 1 << 20})
	diskscantest.MakeReplica(path, "pvc-3-r-8c9d", diskscantest.Replica{})

	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{DiskID: "uuid-1", DataDirectoryName: "pvc-1-r-0a1b2c3d"})
	orphans, _ := diskscan.NewOrphans(expected, diskscan.Options{
		Disks: []diskscan.Disk{{NodeID: "node-1", Name: "disk-1", Path: path, UUID: "uuid-1"}},
		// At most 4 unexpected directories validated at once (0: DefaultScanWorkers).
		ScanWorkers: 4,
	})
	report, _ := orphans.Report(context.Background())
	for _, d := range report.Disks {
		fmt.Printf("%s: %s, %d entries, %d owned\n", d.Disk.Scope(), d.Status.Health, d.Entries, d.Owned)
		for _, o := range d.Orphans {
			fmt.Printf("orphan %s: volume of %d MiB, about %d MiB on disk\n", o.Name, o.Meta.Size>>20, (o.AllocatedBytes+512<<10)>>20)
		}
		for _, s := range d.Skipped {
			fmt.Printf("skipped %s: %s\n", s.Name, s.Reason)
		}
	}
	// Output:
	// node-1/disk-1: Ready, 3 entries, 1 owned
	// orphan pvc-2-r-4e5f6a7b: volume of 8 MiB, about 1 MiB on disk
	// skipped pvc-3-r-8c9d: name does not end in -<8 letters or digits>
}

// Purging refuses anything it cannot prove orphaned at that moment.
func ExampleOrphans_Delete() {
	base, _ := os.MkdirTemp("", "diskscan-example-")
	defer os.RemoveAll(base)
	path := filepath.Join(base, "disk-1")
	diskscantest.NewDisk(path, "disk-1", "uuid-1")
	diskscantest.MakeReplica(path, "pvc-1-r-0a1b2c3d", diskscantest.Replica{})
	diskscantest.MakeReplica(path, "pvc-2-r-4e5f6a7b", diskscantest.Replica{})
	os.Symlink("/", filepath.Join(path, "replicas", "pvc-9-r-99999999"))

	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{DiskID: "uuid-1", DataDirectoryName: "pvc-1-r-0a1b2c3d"})
	orphans, _ := diskscan.NewOrphans(expected, diskscan.Options{})
	orphans.SetDisks(diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: path, UUID: "uuid-1"})
	snap, _ := orphans.Scan(context.Background()) // also pins the disk's filesystem ID

	for _, data := range []string{"pvc-2-r-4e5f6a7b", "pvc-9-r-99999999", ".."} {
		it := snap.Items[0]
		it.Parameters = maps.Clone(it.Parameters)
		it.Parameters[orphan.ParamDataName] = data
		rec, err := orphan.NewRecord(it, time.Time{})
		if err != nil {
			// Item.Name refuses a path-like name; a record written by
			// hand can still carry one.
			rec = orphan.Record{Name: "orphan-by-hand", Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine, Parameters: it.Parameters}
		}
		err = orphans.Delete(context.Background(), rec)
		switch {
		case err == nil:
			fmt.Println(data, "purged")
		case errors.Is(err, diskscan.ErrNotReplica):
			fmt.Println(data, "refused: not a replica directory")
		case errors.Is(err, diskscan.ErrUnsafePath):
			fmt.Println(data, "refused: unsafe name")
		}
	}
	_, err := os.Stat("/etc")
	fmt.Println("/etc still there:", err == nil)
	// Output:
	// pvc-2-r-4e5f6a7b purged
	// pvc-9-r-99999999 refused: not a replica directory
	// .. refused: unsafe name
	// /etc still there: true
}

// The JSON kubectl prints for Longhorn's replicas is the expected set.
func ExampleParseReplicaList() {
	list := `{"apiVersion":"v1","kind":"List","items":[
	  {"metadata":{"name":"pvc-1-r-aaaa1111"},"spec":{"nodeID":"node-1","diskID":"uuid-1","diskPath":"/var/lib/longhorn/","dataDirectoryName":"pvc-1-0a1b2c3d"}}]}`
	refs, err := diskscan.ParseReplicaList(strings.NewReader(list), 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	set, _ := diskscan.NewStaticExpected(refs...).Expected(context.Background(), diskscan.Disk{UUID: "uuid-1"})
	fmt.Println(len(refs), set.Has("pvc-1-0a1b2c3d"))

	_, err = diskscan.ParseReplicaList(strings.NewReader(list[:60]), 0)
	fmt.Println(errors.Is(err, diskscan.ErrCorrupt))
	// Output:
	// 1 true
	// true
}

// The host's loop: the same as for every other adapter, apart from the
// constructor and SetDisks.
func ExampleNewOrphans() {
	base, _ := os.MkdirTemp("", "diskscan-example-")
	defer os.RemoveAll(base)
	path := filepath.Join(base, "disk-1") + "/" // as the node spec spells it
	diskscantest.NewDisk(path, "disk-1", "uuid-1")
	diskscantest.MakeReplica(path, "pvc-1-r-0a1b2c3d", diskscantest.Replica{})
	diskscantest.MakeReplica(path, "pvc-2-r-4e5f6a7b", diskscantest.Replica{})

	ctx := context.Background()
	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{DiskID: "uuid-1", DataDirectoryName: "pvc-1-r-0a1b2c3d"})
	orphans, err := diskscan.NewOrphans(expected, diskscan.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// From the host's Node object, and again whenever it changes.
	if err := orphans.SetDisks(diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: path, UUID: "uuid-1"}); err != nil {
		fmt.Println(err)
		return
	}
	store := orphan.NewMemStore()
	s, err := orphan.NewSweeper(store, orphans, orphan.SweeperOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A host runs orphan.NewMonitor(orphans, ...) and takes its latest
	// observation; one scan stands in for it here.
	snap, err := orphans.Scan(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, res, err := s.Reconcile(ctx, snap, orphan.Cycle{
		Selector: orphan.Selector{NodeID: "node-1"},
		Scopes:   map[orphan.Scope]orphan.ScopeStatus{{NodeID: "node-1"}: {Health: orphan.HealthReady}},
	})
	recs, _ := store.List(ctx, orphan.Selector{})
	fmt.Println(len(res.Created), "record created, error:", err)
	fmt.Println(recs[0].Param(orphan.ParamDataName), "on", recs[0].Param(orphan.ParamDiskPath) == path)
	// Output:
	// 1 record created, error: <nil>
	// pvc-2-r-4e5f6a7b on true
}

// A one-shot purge in a pod that reaches the host through /host/proc/1, as
// a finalizer reconciling one Orphan does: no earlier scan, the disk's
// filesystem ID given by the host (Longhorn's DiskStat.DiskID). Here a
// directory stands for the host's root and a file for its mount table.
func ExampleOptions_hostRoot() {
	base, _ := os.MkdirTemp("", "diskscan-example-")
	defer os.RemoveAll(base)
	host := filepath.Join(base, "host") // in a pod: "/host/proc/1/root"
	mountInfo := filepath.Join(base, "mountinfo")
	os.WriteFile(mountInfo, []byte("21 1 8:1 / / rw - ext4 /dev/sda1 rw\n"), 0o644)
	onHost := filepath.Join(host, "var", "lib", "longhorn")
	diskscantest.NewDisk(onHost, "disk-1", "uuid-1")
	diskscantest.MakeReplica(onHost, "pvc-2-r-4e5f6a7b", diskscantest.Replica{})
	diskID, _ := diskscan.FSID(onHost) // what Longhorn's disk monitor reports

	expected := diskscan.NewStaticExpected(diskscan.ReplicaRef{DiskID: "uuid-1", DataDirectoryName: "pvc-1-r-0a1b2c3d"})
	for _, fsid := range []string{"00000000beef", diskID} {
		orphans, err := diskscan.NewOrphans(expected, diskscan.Options{
			HostRoot:      host,      // "/host/proc/1/root"
			HostMountInfo: mountInfo, // "/host/proc/1/mountinfo"
			Disks:         []diskscan.Disk{{NodeID: "node-1", Name: "disk-1", Path: "/var/lib/longhorn/", UUID: "uuid-1", FSID: fsid}},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		rec, _ := orphan.NewRecord(orphan.Item{
			Kind: orphan.KindReplicaData, NodeID: "node-1", DataEngine: orphan.DataEngineV1,
			Parameters: map[string]string{
				orphan.ParamDataName: "pvc-2-r-4e5f6a7b",
				orphan.ParamDiskName: "disk-1",
				orphan.ParamDiskUUID: "uuid-1",
				orphan.ParamDiskPath: "/var/lib/longhorn/",
				orphan.ParamDiskType: diskscan.DiskType,
			},
		}, time.Time{})
		switch err := orphans.Delete(context.Background(), rec); {
		case errors.Is(err, diskscan.ErrDiskChanged):
			fmt.Println("filesystem", fsid, "refused: another filesystem")
		case err == nil:
			_, err := os.Stat(filepath.Join(onHost, "replicas", "pvc-2-r-4e5f6a7b"))
			fmt.Println("host's filesystem: purged, gone:", os.IsNotExist(err))
		default:
			fmt.Println(err)
		}
	}
	// Output:
	// filesystem 00000000beef refused: another filesystem
	// host's filesystem: purged, gone: true
}
