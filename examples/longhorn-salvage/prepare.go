package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// The copies' markers, at the start of the volume (where ext4 leaves the
// first 1024 bytes unused): which copy an export came from, readable with
// head -c.
var demoMarkers = [3]string{"newest copy, revision 1500", "stale copy, revision 1200", "interrupted rebuild"}

func marker(text string) []byte {
	return []byte("LONGHORN SALVAGE DEMO: " + text + "\n")
}

// writeDemo writes the walkthrough's disks into dir (new or empty) and
// returns the copies it wrote, and whether the volume holds an ext4
// filesystem (when mkfs.ext4 is installed).
func writeDemo(ctx context.Context, dir string) ([]demoCopy, bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, false, err
	}
	if len(ents) > 0 {
		return nil, false, errors.New("-prepare " + dir + ": not empty; give a new or empty directory")
	}
	copies, withFS, err := demoCopies(ctx)
	if err != nil {
		return nil, false, err
	}
	for i, disk := range []string{"disk-a", "disk-b"} {
		d := filepath.Join(dir, disk)
		if err := os.MkdirAll(filepath.Join(d, "replicas"), 0o755); err != nil {
			return nil, false, err
		}
		cfg := fmt.Sprintf(`{"diskName":%q,"diskUUID":"8b0c6a52-1d3e-4f7a-9c2b-5e6d7f80a1b%d","diskDriver":"","state":"ready"}`, disk, i)
		if err := os.WriteFile(filepath.Join(d, "longhorn-disk.cfg"), []byte(cfg), 0o644); err != nil {
			return nil, false, err
		}
	}
	for _, c := range copies {
		if err := salvagetest.WriteReplica(filepath.Join(dir, c.disk, "replicas", c.dir), c.replica); err != nil {
			return nil, false, err
		}
	}
	return copies, withFS, nil
}

// prepareDemo is -prepare.
func prepareDemo(ctx context.Context, dir string, stdout io.Writer) error {
	_, withFS, err := writeDemo(ctx, dir)
	if err != nil {
		return err
	}
	what := "no filesystem: mkfs.ext4 was not found"
	if withFS {
		what = "an ext4 filesystem holding hello.txt"
	}
	fmt.Fprintf(stdout, "wrote volume %s (%d MiB, %s): three copies on %s and %s\n", demoVolume, demoSize>>20, what,
		filepath.Join(dir, "disk-a"), filepath.Join(dir, "disk-b"))
	fmt.Fprintf(stdout, "next: longhorn-salvage -disk %s -disk %s\n", filepath.Join(dir, "disk-a"), filepath.Join(dir, "disk-b"))
	return nil
}

// demoCopies returns the walkthrough's copies: the newest (revision 1500)
// on disk-a; a stale one (1200) and one whose rebuild was interrupted on
// disk-b. Each has an older system snapshot and a user snapshot below its
// head. The rebuild was interrupted after the first snapshot was copied:
// Rebuilding is still set and its counter was reset to 0
// (longhorn-engine controller/rebuild.go).
func demoCopies(ctx context.Context) ([]demoCopy, bool, error) {
	snaps, heads, withFS, err := demoLayers(ctx)
	if err != nil {
		return nil, false, err
	}
	replica := func(i int, revision int64, nsnaps int) salvagetest.Replica {
		return salvagetest.Replica{Size: demoSize, Snapshots: snaps[:nsnaps], Counter: true, Revision: revision, Dirty: true,
			Rebuilding: nsnaps < len(snaps), Head: salvagetest.Layer{Writes: heads[i]}}
	}
	return []demoCopy{
		{"disk-a", demoVolume + "-1a2b3c4d", replica(0, 1500, 2)},
		{"disk-b", demoVolume + "-5e6f7a8b", replica(1, 1200, 2)},
		{"disk-b", demoVolume + "-9c0d1e2f", replica(2, 0, 1)},
	}, withFS, nil
}

// demoLayers returns the shared snapshots and each copy's head writes.
// With mkfs.ext4, each copy's image is an ext4 filesystem whose
// hello.txt says which copy it is: the blocks all three images share are
// the older snapshot, the others are each copy's head. Without it, the
// data is made up.
func demoLayers(ctx context.Context) ([]salvagetest.Layer, [3][]salvagetest.Write, bool, error) {
	var heads [3][]salvagetest.Write
	snaps := []salvagetest.Layer{
		{Name: "volume-snap-3f1c2a9e-5b7d-4c21-9a0e-6d4b8f2e1c3a.img"},
		{Name: "volume-snap-before-upgrade.img", UserCreated: true},
	}
	images, err := demoFilesystems(ctx)
	if err != nil {
		return nil, heads, false, err
	}
	if images == nil {
		snaps[0].Writes = []salvagetest.Write{{Off: 8 << 20, Data: bytes.Repeat([]byte("snapshot data. "), (1<<20)/15)}}
		snaps[1].Writes = []salvagetest.Write{salvagetest.Block(4096, 'u')}
		for i, m := range demoMarkers {
			heads[i] = []salvagetest.Write{{Off: 0, Data: marker(m)}}
		}
		return snaps, heads, false, nil
	}
	const bs = salvagetest.BlockSize
	for off := 0; off < demoSize; off += bs {
		b0 := images[0][off : off+bs]
		same := bytes.Equal(b0, images[1][off:off+bs]) && bytes.Equal(b0, images[2][off:off+bs])
		if same {
			if !allZero(b0) {
				snaps[0].Writes = append(snaps[0].Writes, salvagetest.Write{Off: int64(off), Data: b0})
			}
			continue
		}
		for i := range images {
			if b := images[i][off : off+bs]; !allZero(b) {
				heads[i] = append(heads[i], salvagetest.Write{Off: int64(off), Data: b})
			}
		}
	}
	return snaps, heads, true, nil
}

// demoFilesystems makes the three copies' ext4 images with mkfs.ext4, or
// returns nil if it is not installed.
func demoFilesystems(ctx context.Context) ([][]byte, error) {
	images := make([][]byte, len(demoMarkers))
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return nil, nil
	}
	tmp, err := os.MkdirTemp("", "longhorn-salvage-demo-")
	if err != nil {
		return images, err
	}
	defer os.RemoveAll(tmp)
	for i, m := range demoMarkers {
		content := filepath.Join(tmp, fmt.Sprint("content-", i))
		img := filepath.Join(tmp, fmt.Sprint("image-", i))
		if err := os.Mkdir(content, 0o755); err != nil {
			return images, err
		}
		if err := os.WriteFile(filepath.Join(content, "hello.txt"), []byte("written by the "+m+"\n"), 0o644); err != nil {
			return images, err
		}
		if err := os.WriteFile(img, nil, 0o644); err != nil {
			return images, err
		}
		if err := os.Truncate(img, demoSize); err != nil {
			return images, err
		}
		if out, err := exec.CommandContext(ctx, mkfs, "-q", "-F", "-L", demoVolume, "-d", content, img).CombinedOutput(); err != nil {
			return images, fmt.Errorf("mkfs.ext4: %v: %s", err, out)
		}
		data, err := os.ReadFile(img)
		if err != nil {
			return images, err
		}
		if len(data) != demoSize || !allZero(data[:1024]) {
			return images, errors.New("mkfs.ext4 wrote an unexpected image")
		}
		copy(data, marker(m))
		images[i] = data
	}
	return images, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
