package salvage_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// Inspect two leftover copies of a faulted volume and pick the one to
// export.
func ExampleRank() {
	disk, err := os.MkdirTemp("", "disk")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(disk)
	replicas := filepath.Join(disk, "replicas")
	if err := os.Mkdir(replicas, 0o700); err != nil {
		log.Fatal(err)
	}
	good := salvagetest.Replica{Size: 1 << 20, Counter: true, Revision: 1500,
		Head: salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(0, 'x')}}}
	stale := good
	stale.Revision = 1200
	rebuilding := good
	rebuilding.Revision, rebuilding.Rebuilding = 9000, true
	for name, r := range map[string]salvagetest.Replica{"pvc-1-0a1b2c3d": stale, "pvc-1-4e5f6a7b": good, "pvc-1-8c9d0e1f": rebuilding} {
		if err := salvagetest.WriteReplica(filepath.Join(replicas, name), r); err != nil {
			log.Fatal(err)
		}
	}

	var cands []*salvage.Inspection
	for _, name := range []string{"pvc-1-0a1b2c3d", "pvc-1-4e5f6a7b", "pvc-1-8c9d0e1f"} {
		in, err := salvage.Inspect(context.Background(), filepath.Join(replicas, name), salvage.Options{})
		if err != nil {
			log.Fatal(err)
		}
		cands = append(cands, in)
	}
	for i, rk := range salvage.Rank(cands) {
		in := cands[i]
		fmt.Printf("%s revision %d rank %d %v\n", filepath.Base(in.Dir), in.Revision, rk.Rank, in.ReasonStrings())
	}
	// Output:
	// pvc-1-0a1b2c3d revision 1200 rank 2 []
	// pvc-1-4e5f6a7b revision 1500 rank 1 []
	// pvc-1-8c9d0e1f revision 9000 rank 0 [rebuilding: volume.meta: a rebuild into this replica did not finish (the data it holds is still there: export it as it is with a forced export (longhorn-salvage -force), or keep it until a better copy is found)]
}

// Inspect a copy whose newest snapshot image is gone: the engine would
// create it empty and read older data through it; Inspect says why the
// copy cannot be trusted.
func ExampleInspect() {
	dir, err := os.MkdirTemp("", "replicas")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r := salvagetest.Replica{Size: 1 << 20, Snapshots: []salvagetest.Layer{{}, {Name: "volume-snap-nightly.img"}}}
	replica := filepath.Join(dir, "pvc-1-0a1b2c3d")
	if err := salvagetest.WriteReplica(replica, r); err != nil {
		log.Fatal(err)
	}
	if err := os.Remove(filepath.Join(replica, "volume-snap-nightly.img")); err != nil {
		log.Fatal(err)
	}

	in, err := salvage.Inspect(context.Background(), replica, salvage.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Volume, in.Meta.Format, in.Recoverable)
	fmt.Println(in.Chain().Layers)
	for _, r := range in.Reasons {
		fmt.Println(r.Kind, r.File)
	}
	// Output:
	// pvc-1 v1.1.1-v1.11 false
	// [volume-head-002.img volume-snap-nightly.img volume-snap-0.img]
	// missing-layer volume-snap-nightly.img
}

// Tell a copy that holds the volume's data from one that holds none: a
// replica created and never written is NoData, and the last-copy guard
// does not keep it; once one block is written it holds data, and a copy
// whose backing image is gone from its disk holds data too, although the
// export cannot read it today. (On Linux: the proof asks the filesystem
// with SEEK_DATA.)
func ExampleInspection_NoData() {
	disk, err := os.MkdirTemp("", "disk")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(disk)
	replicas := filepath.Join(disk, "replicas")
	if err := os.Mkdir(replicas, 0o700); err != nil {
		log.Fatal(err)
	}
	fresh := salvagetest.Replica{Size: 1 << 20}
	written := salvagetest.Replica{Size: 1 << 20, Head: salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(3, 'x')}}}
	noBacking := written
	noBacking.BackingFilePath = "/host/var/lib/longhorn/backing-images/ubuntu-0a1b2c3d/backing"
	for _, c := range []struct {
		name string
		r    salvagetest.Replica
	}{{"pvc-1-0a1b2c3d", fresh}, {"pvc-1-4e5f6a7b", written}, {"pvc-1-8c9d0e1f", noBacking}} {
		dir := filepath.Join(replicas, c.name)
		if err := salvagetest.WriteReplica(dir, c.r); err != nil {
			log.Fatal(err)
		}
		in, err := salvage.Inspect(context.Background(), dir, salvage.Options{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s recoverable=%v noData=%v\n", c.name, in.Recoverable, in.NoData)
	}
	// Output:
	// pvc-1-0a1b2c3d recoverable=true noData=true
	// pvc-1-4e5f6a7b recoverable=true noData=false
	// pvc-1-8c9d0e1f recoverable=false noData=false
}
