package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// The walkthrough's volume: a faulted volume with three leftover copies on
// two disks.
const (
	demoVolume = "pvc-demo"
	demoSize   = 64 << 20
)

// demoCopy is one leftover copy of the walkthrough.
type demoCopy struct {
	disk, dir string
	replica   salvagetest.Replica
}

// demoMarker is the first block of a copy's head: which copy an export
// came from, readable with head -c.
func demoMarker(text string) salvagetest.Write {
	b := make([]byte, salvagetest.BlockSize)
	copy(b, "LONGHORN SALVAGE DEMO: "+text+"\n")
	return salvagetest.Write{Off: 0, Data: b}
}

// demoCopies returns the walkthrough's copies: the newest (revision 1500)
// on disk-a; a stale one (1200) and one whose rebuild was interrupted on
// disk-b.
func demoCopies() []demoCopy {
	// Both healthy copies share their older snapshot: 1 MiB written at
	// 8 MiB, and a user snapshot over it.
	snapData := salvagetest.Write{Off: 8 << 20, Data: bytes.Repeat([]byte("snapshot data. "), (1<<20)/15)}
	snaps := func() []salvagetest.Layer {
		return []salvagetest.Layer{
			{Name: "volume-snap-3f1c2a9e-5b7d-4c21-9a0e-6d4b8f2e1c3a.img", Writes: []salvagetest.Write{snapData}},
			{Name: "volume-snap-before-upgrade.img", UserCreated: true, Writes: []salvagetest.Write{salvagetest.Block(4096, 'u')}},
		}
	}
	newest := salvagetest.Replica{Size: demoSize, Snapshots: snaps(), Counter: true, Revision: 1500, Dirty: true,
		Head: salvagetest.Layer{Writes: []salvagetest.Write{demoMarker("newest copy, revision 1500"), salvagetest.Block(100, 'n')}}}
	stale := salvagetest.Replica{Size: demoSize, Snapshots: snaps(), Counter: true, Revision: 1200, Dirty: true,
		Head: salvagetest.Layer{Writes: []salvagetest.Write{demoMarker("stale copy, revision 1200")}}}
	// An interrupted rebuild: Rebuilding is still set and the counter was
	// reset to 0 (longhorn-engine controller/rebuild.go), the snapshots
	// only partly copied.
	rebuilding := salvagetest.Replica{Size: demoSize, Snapshots: snaps()[:1], Counter: true, Revision: 0, Rebuilding: true, Dirty: true,
		Head: salvagetest.Layer{Writes: []salvagetest.Write{demoMarker("interrupted rebuild")}}}
	return []demoCopy{
		{"disk-a", demoVolume + "-1a2b3c4d", newest},
		{"disk-b", demoVolume + "-5e6f7a8b", stale},
		{"disk-b", demoVolume + "-9c0d1e2f", rebuilding},
	}
}

// prepareDemo writes the walkthrough's disks into dir, which must be new
// or empty.
func prepareDemo(dir string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return errors.New("-prepare " + dir + ": not empty; give a new or empty directory")
	}
	for i, disk := range []string{"disk-a", "disk-b"} {
		d := filepath.Join(dir, disk)
		if err := os.MkdirAll(filepath.Join(d, "replicas"), 0o755); err != nil {
			return err
		}
		cfg := fmt.Sprintf(`{"diskName":%q,"diskUUID":"8b0c6a52-1d3e-4f7a-9c2b-5e6d7f80a1b%d","diskDriver":"","state":"ready"}`, disk, i)
		if err := os.WriteFile(filepath.Join(d, "longhorn-disk.cfg"), []byte(cfg), 0o644); err != nil {
			return err
		}
	}
	for _, c := range demoCopies() {
		if err := salvagetest.WriteReplica(filepath.Join(dir, c.disk, "replicas", c.dir), c.replica); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote volume %s (%d MiB): three copies on %s and %s\n", demoVolume, demoSize>>20,
		filepath.Join(dir, "disk-a"), filepath.Join(dir, "disk-b"))
	fmt.Fprintf(stdout, "next: longhorn-salvage -disk %s -disk %s\n", filepath.Join(dir, "disk-a"), filepath.Join(dir, "disk-b"))
	return nil
}
