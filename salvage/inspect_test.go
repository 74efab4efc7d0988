package salvage_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

const mib = 1 << 20

// newDisk returns a disk path with its replicas directory.
func newDisk(t *testing.T) string {
	t.Helper()
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.MkdirAll(filepath.Join(disk, "replicas"), 0o700); err != nil {
		t.Fatal(err)
	}
	return disk
}

// threeLayers is a healthy replica: two snapshots and a head, written in
// places, with a counter.
func threeLayers() salvagetest.Replica {
	return salvagetest.Replica{
		Size:      4 * mib,
		Snapshots: []salvagetest.Layer{{Writes: []salvagetest.Write{salvagetest.Block(0, 'a'), salvagetest.Block(3, 'a')}}, {Removed: true, Writes: []salvagetest.Write{salvagetest.Block(1, 'b')}}},
		Head:      salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(2, 'c')}},
		Counter:   true, Revision: 42, Dirty: true,
	}
}

func write(t *testing.T, disk, name string, r salvagetest.Replica) string {
	t.Helper()
	dir := filepath.Join(disk, "replicas", name)
	if err := salvagetest.WriteReplica(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

func inspect(t *testing.T, dir string, opts salvage.Options) *salvage.Inspection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	type result struct {
		in  *salvage.Inspection
		err error
	}
	done := make(chan result, 1)
	go func() {
		in, err := salvage.Inspect(ctx, dir, opts)
		done <- result{in, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Inspect(%s): %v", dir, r.err)
		}
		return r.in
	case <-time.After(10 * time.Second):
		t.Fatalf("Inspect(%s) blocked", dir)
	}
	return nil
}

func TestInspectHealthyEveryFormat(t *testing.T) {
	for _, format := range []salvage.MetaFormat{salvage.FormatV010, salvage.FormatV020, salvage.FormatV110, salvage.FormatV111, salvage.FormatV112} {
		t.Run(string(format), func(t *testing.T) {
			disk := newDisk(t)
			r := threeLayers()
			r.Format = format
			dir := write(t, disk, "pvc-1-0a1b2c3d", r)
			in := inspect(t, dir, salvage.Options{})
			if !in.Recoverable || len(in.Reasons) != 0 {
				t.Fatalf("not recoverable: %v", in.ReasonStrings())
			}
			if in.Volume != "pvc-1" || in.Meta.Format != format || in.Meta.Size != 4*mib || !in.Meta.Dirty {
				t.Errorf("volume %q format %q meta %+v", in.Volume, in.Meta.Format, in.Meta)
			}
			if !in.HasRevision || in.Revision != 42 {
				t.Errorf("revision %d %v, want 42", in.Revision, in.HasRevision)
			}
			c := in.Chain()
			if want := r.LayerNames(); !slices.Equal(c.Layers, want) || c.Size != 4*mib || c.BackingFile != "" {
				t.Errorf("chain %+v, want layers %v", c, want)
			}
			if format != salvage.FormatV010 && format != salvage.FormatV020 && !in.Layers[1].Removed {
				t.Errorf("the removed snapshot is not marked Removed: %+v", in.Layers[1])
			}
			if in.Apparent != 3*4*mib || in.Allocated < 4*4096 || in.Allocated > in.Apparent {
				t.Errorf("apparent %d allocated %d", in.Apparent, in.Allocated)
			}
			if in.HeadModTime.IsZero() || in.HeadAllocated < 4096 {
				t.Errorf("head time %v allocated %d", in.HeadModTime, in.HeadAllocated)
			}
		})
	}
}

// mkfifo, symlink, device and directory put something that is not a
// regular file at a path.
func putNonRegular(t *testing.T, path, kind string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "symlink":
		target := filepath.Join(filepath.Dir(path), "elsewhere")
		if err := os.WriteFile(target, bytes.Repeat([]byte{'x'}, 4*mib), 0o600); err != nil {
			t.Fatal(err)
		}
		err = os.Symlink(target, path)
	case "device":
		// /dev/null's numbers: 1, 3.
		err = syscall.Mknod(path, syscall.S_IFCHR|0o600, 1<<8|3)
		if err != nil {
			t.Skipf("mknod not permitted here (%v): run the tests as root to cover a device where a layer should be", err)
		}
	case "dir":
		err = os.Mkdir(path, 0o700)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestInspectDamaged(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, disk, dir string, r salvagetest.Replica)
		opts   salvage.Options
		want   salvage.ReasonKind
	}{
		{"missing layer image", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			rm(t, dir, r.LayerNames()[1])
		}, salvage.Options{}, salvage.ReasonMissingLayer},
		{"missing head image", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			rm(t, dir, r.LayerNames()[0])
		}, salvage.Options{}, salvage.ReasonMissingLayer},
		{"missing layer meta", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			rm(t, dir, r.LayerNames()[2]+".meta")
		}, salvage.Options{}, salvage.ReasonBrokenChain},
		{"parent names a missing snapshot", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			setParent(t, dir, r.LayerNames()[2], "volume-snap-gone.img")
		}, salvage.Options{}, salvage.ReasonBrokenChain},
		{"cycle", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			setParent(t, dir, r.LayerNames()[2], r.LayerNames()[0])
		}, salvage.Options{}, salvage.ReasonCyclicChain},
		{"self parent", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			setParent(t, dir, r.LayerNames()[0], r.LayerNames()[0])
		}, salvage.Options{}, salvage.ReasonCyclicChain},
		{"chain too long", func(*testing.T, string, string, salvagetest.Replica) {}, salvage.Options{MaxChainLength: 2}, salvage.ReasonChainTooLong},
		{"rebuilding", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			r.Rebuilding = true
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonRebuilding},
		{"error state", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			r.Error = "failed to stat volume-head-002.img"
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonErrorState},
		{"short head", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			if err := os.Truncate(filepath.Join(dir, r.LayerNames()[0]), 2*mib); err != nil {
				t.Fatal(err)
			}
		}, salvage.Options{}, salvage.ReasonShortHead},
		{"symlink layer", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, r.LayerNames()[1]), "symlink")
		}, salvage.Options{}, salvage.ReasonNotRegular},
		{"symlink head", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, r.LayerNames()[0]), "symlink")
		}, salvage.Options{}, salvage.ReasonNotRegular},
		{"fifo layer", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, r.LayerNames()[1]), "fifo")
		}, salvage.Options{}, salvage.ReasonNotRegular},
		{"fifo layer meta", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, r.LayerNames()[1]+".meta"), "fifo")
		}, salvage.Options{}, salvage.ReasonNotRegular},
		{"device layer", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, r.LayerNames()[2]), "device")
		}, salvage.Options{}, salvage.ReasonNotRegular},
		{"directory layer", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, r.LayerNames()[2]), "dir")
		}, salvage.Options{}, salvage.ReasonNotRegular},
		{"layer meta not JSON", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			overwrite(t, dir, r.LayerNames()[1]+".meta", []byte("{\"Parent\":"))
		}, salvage.Options{}, salvage.ReasonLayerMeta},
		{"layer meta parent escapes", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			setParent(t, dir, r.LayerNames()[2], "../pvc-2-0a1b2c3d/volume-head-000.img")
		}, salvage.Options{}, salvage.ReasonLayerMeta},
		{"layer meta oversized", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			overwrite(t, dir, r.LayerNames()[1]+".meta", append([]byte(`{"Parent":""}`), bytes.Repeat([]byte(" "), 300)...))
		}, salvage.Options{MaxMetaSize: 250}, salvage.ReasonLayerMeta},
		{"volume.meta missing", func(t *testing.T, _, dir string, _ salvagetest.Replica) {
			rm(t, dir, "volume.meta")
		}, salvage.Options{}, salvage.ReasonVolumeMeta},
		{"volume.meta empty", func(t *testing.T, _, dir string, _ salvagetest.Replica) {
			overwrite(t, dir, "volume.meta", nil)
		}, salvage.Options{}, salvage.ReasonVolumeMeta},
		{"volume.meta oversized", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			overwrite(t, dir, "volume.meta", append(salvagetest.VolumeMeta(r, r.LayerNames()[1]), bytes.Repeat([]byte(" "), 70<<10)...))
		}, salvage.Options{}, salvage.ReasonVolumeMeta},
		{"volume.meta fifo", func(t *testing.T, _, dir string, _ salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, "volume.meta"), "fifo")
		}, salvage.Options{}, salvage.ReasonVolumeMeta},
		{"volume.meta symlink", func(t *testing.T, _, dir string, _ salvagetest.Replica) {
			putNonRegular(t, filepath.Join(dir, "volume.meta"), "symlink")
		}, salvage.Options{}, salvage.ReasonVolumeMeta},
		{"head is a path", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			r.Head.Name = "../../etc/passwd"
			overwrite(t, dir, "volume.meta", salvagetest.VolumeMeta(r, ""))
		}, salvage.Options{}, salvage.ReasonVolumeMeta},
		{"missing backing image", func(t *testing.T, disk, dir string, r salvagetest.Replica) {
			r.BackingFilePath = "/host" + disk + "/backing-images/img-0a1b2c3d/backing"
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonMissingBackingImage},
		{"backing image path unplaceable", func(t *testing.T, _, dir string, r salvagetest.Replica) {
			r.BackingFilePath = "/var/lib/images/base.raw"
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonMissingBackingImage},
		{"backing image symlink", func(t *testing.T, disk, dir string, r salvagetest.Replica) {
			p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, nil)
			if err != nil {
				t.Fatal(err)
			}
			putNonRegular(t, filepath.Join(disk, "backing-images", "img-0a1b2c3d", "backing"), "symlink")
			r.BackingFilePath = p
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonMissingBackingImage},
		{"backing image fifo", func(t *testing.T, disk, dir string, r salvagetest.Replica) {
			p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, nil)
			if err != nil {
				t.Fatal(err)
			}
			putNonRegular(t, filepath.Join(disk, "backing-images", "img-0a1b2c3d", "backing"), "fifo")
			r.BackingFilePath = p
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonMissingBackingImage},
		{"backing image directory is a link", func(t *testing.T, disk, dir string, r salvagetest.Replica) {
			other := filepath.Join(filepath.Dir(disk), "elsewhere")
			p, err := salvagetest.WriteBackingImage(other, "img-0a1b2c3d", 4*mib, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(other, "backing-images"), filepath.Join(disk, "backing-images")); err != nil {
				t.Fatal(err)
			}
			r.BackingFilePath = strings.Replace(p, other, disk, 1)
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonMissingBackingImage},
		{"backing image qcow2, damaged", func(t *testing.T, disk, dir string, r salvagetest.Replica) {
			p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, []salvagetest.Write{{Off: 0, Data: []byte("QFI\xfb\x00\x00\x00\x03")}})
			if err != nil {
				t.Fatal(err)
			}
			r.BackingFilePath = p
			rewriteVolumeMeta(t, dir, r)
		}, salvage.Options{}, salvage.ReasonBackingImageFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			disk := newDisk(t)
			r := threeLayers()
			dir := write(t, disk, "pvc-1-0a1b2c3d", r)
			c.mutate(t, disk, dir, r)
			before := snapshot(t, disk)
			in := inspect(t, dir, c.opts)
			if in.Recoverable || !in.Has(c.want) {
				t.Fatalf("recoverable=%v reasons %v, want %s", in.Recoverable, in.ReasonStrings(), c.want)
			}
			for _, s := range in.ReasonStrings() {
				if s == "" {
					t.Error("empty reason")
				}
			}
			if rk := salvage.Rank([]*salvage.Inspection{in}); rk[0].Rank != 0 {
				t.Errorf("an unrecoverable candidate ranked %d", rk[0].Rank)
			}
			if after := snapshot(t, disk); !equalSnapshots(before, after) {
				t.Errorf("inspection changed the disk:\nbefore %v\nafter  %v", before, after)
			}
			if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); err == nil {
				// A symlink's target must not have been read: its atime
				// is not reliable (relatime), so at least its content
				// must not show in the inspection.
				for _, l := range in.Layers {
					if !l.Present && l.Size != 0 {
						t.Errorf("a link's target was measured: %+v", l)
					}
				}
			}
		})
	}
}

func TestInspectReplicaDirIsASymlink(t *testing.T) {
	disk := newDisk(t)
	dir := write(t, disk, "pvc-1-0a1b2c3d", threeLayers())
	link := filepath.Join(disk, "replicas", "pvc-1-11111111")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, link + "/", link + "/."} {
		in := inspect(t, p, salvage.Options{})
		if in.Recoverable || !in.Has(salvage.ReasonNotDirectory) || len(in.Layers) != 0 {
			t.Fatalf("%s: a link to a replica was followed: %+v", p, in)
		}
	}
	if _, err := salvage.Inspect(context.Background(), filepath.Join(disk, "replicas", "none-00000000"), salvage.Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
}

func TestInspectEncryptedIsRecoverableCiphertext(t *testing.T) {
	disk := newDisk(t)
	r := threeLayers()
	r.Format, r.Encrypted = salvage.FormatV112, true
	in := inspect(t, write(t, disk, "pvc-1-0a1b2c3d", r), salvage.Options{})
	if !in.Recoverable || !in.Encrypted() || !slices.ContainsFunc(in.Notes, func(n string) bool { return strings.Contains(n, "LUKS2") }) {
		t.Fatalf("encrypted: recoverable=%v encrypted=%v notes %v", in.Recoverable, in.Encrypted(), in.Notes)
	}
}

func TestInspectBackingImageUnderTheReplicasDisk(t *testing.T) {
	disk := newDisk(t)
	p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, []salvagetest.Write{salvagetest.Block(5, 'z')})
	if err != nil {
		t.Fatal(err)
	}
	r := threeLayers()
	// volume.meta records the container's path: /host + the node's disk
	// path, which need not be where the disk is mounted now.
	r.BackingFilePath = strings.Replace(p, "/host"+filepath.ToSlash(disk), "/host/var/lib/longhorn", 1)
	in := inspect(t, write(t, disk, "pvc-1-0a1b2c3d", r), salvage.Options{})
	want := filepath.Join(disk, "backing-images", "img-0a1b2c3d", "backing")
	if !in.Recoverable || in.Backing == nil || !in.Backing.Present || in.Chain().BackingFile != want {
		t.Fatalf("recoverable=%v reasons %v backing %+v, want %s", in.Recoverable, in.ReasonStrings(), in.Backing, want)
	}
}

func TestInspectOffChainAndCounterNotes(t *testing.T) {
	disk := newDisk(t)
	dir := write(t, disk, "pvc-1-0a1b2c3d", threeLayers())
	// An abandoned branch after a revert: listed, never read.
	if err := salvagetest.WriteFile(dir, "volume-snap-old.img.meta", []byte(`{"Name":"volume-snap-old.img","Parent":"","Removed":false,"UserCreated":true,"Created":"2024-01-01T00:00:00Z","Labels":null}`+"\n")); err != nil {
		t.Fatal(err)
	}
	overwrite(t, dir, "revision.counter", []byte("not a number"))
	if err := salvagetest.WriteFile(dir, "volume-snap-bad.img.meta", []byte("{")); err != nil {
		t.Fatal(err)
	}
	in := inspect(t, dir, salvage.Options{})
	notes := strings.Join(in.Notes, "\n")
	if !in.Recoverable || !slices.Equal(in.OffChain, []string{"volume-snap-bad.img", "volume-snap-old.img"}) || in.HasRevision ||
		!strings.Contains(notes, "volume-snap-bad.img.meta (outside the chain)") || strings.Contains(notes, "volume-snap-old.img.meta (outside") {
		t.Fatalf("recoverable=%v offchain %v revision %v notes %v", in.Recoverable, in.OffChain, in.HasRevision, in.Notes)
	}
}

// A FIFO, a link or a device as revision.counter is not read: the copy
// stays recoverable, ranked without a counter.
func TestInspectCounterNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink", "device"} {
		t.Run(kind, func(t *testing.T) {
			disk := newDisk(t)
			dir := write(t, disk, "pvc-1-0a1b2c3d", threeLayers())
			putNonRegular(t, filepath.Join(dir, "revision.counter"), kind)
			in := inspect(t, dir, salvage.Options{})
			if !in.Recoverable || in.HasRevision || !slices.ContainsFunc(in.Notes, func(n string) bool { return strings.Contains(n, "not a regular file") }) {
				t.Fatalf("recoverable=%v counter=%v notes %v", in.Recoverable, in.HasRevision, in.Notes)
			}
		})
	}
}

func TestInspectStopsAtContext(t *testing.T) {
	disk := newDisk(t)
	dir := write(t, disk, "pvc-1-0a1b2c3d", threeLayers())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := salvage.Inspect(ctx, dir, salvage.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func rm(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func overwrite(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func setParent(t *testing.T, dir, layer, parent string) {
	t.Helper()
	overwrite(t, dir, layer+".meta", []byte(fmt.Sprintf(`{"Name":%q,"Parent":%q,"Removed":false,"UserCreated":false,"Created":"2024-01-02T03:04:05Z","Labels":null}`+"\n", layer, parent)))
}

func rewriteVolumeMeta(t *testing.T, dir string, r salvagetest.Replica) {
	t.Helper()
	names := r.LayerNames()
	overwrite(t, dir, "volume.meta", salvagetest.VolumeMeta(r, names[1]))
}

func TestReuseHint(t *testing.T) {
	disk := newDisk(t)
	r := threeLayers()
	in := inspect(t, write(t, disk, "pvc-1-0a1b2c3d", r), salvage.Options{})
	h, ok := in.ReuseHint()
	want := salvage.ReuseHint{DataDirectoryName: "pvc-1-0a1b2c3d", DiskPath: disk, Head: r.HeadName(), Size: r.Size, Revision: 42, HasRevision: true}
	if !ok || h != want {
		t.Fatalf("hint %+v %v, want %+v", h, ok, want)
	}
	r.Rebuilding = true
	in = inspect(t, write(t, disk, "pvc-1-4e5f6a7b", r), salvage.Options{})
	if _, ok := in.ReuseHint(); ok {
		t.Fatal("a hint for a copy that is not recoverable")
	}
}

// TestInspectQcow2BackingImage: a copy over a plain qcow2 backing image,
// as qemu-img writes one, is recoverable, and the inspection names the
// file, its format and its virtual size.
func TestInspectQcow2BackingImage(t *testing.T) {
	qi, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img not found: install Debian's qemu-utils (make test does)")
	}
	disk := newDisk(t)
	r := threeLayers()
	dir := write(t, disk, "pvc-1-0a1b2c3d", r)
	p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, []salvagetest.Write{{Off: 0, Data: []byte("base")}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(disk, "backing-images", "img-0a1b2c3d", "backing") // p is the instance manager's /host/... path
	if out, err := exec.Command(qi, "convert", "-c", "-f", "raw", "-O", "qcow2", file, file+".qcow2").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	if err := os.Rename(file+".qcow2", file); err != nil {
		t.Fatal(err)
	}
	r.BackingFilePath = p
	rewriteVolumeMeta(t, dir, r)
	in := inspect(t, dir, salvage.Options{})
	if !in.Recoverable || in.Backing == nil || in.Backing.Format != "qcow2" || in.Backing.VirtualSize != 4*mib || in.Backing.Path != file {
		t.Fatalf("recoverable=%v reasons %v backing %+v", in.Recoverable, in.ReasonStrings(), in.Backing)
	}
}

// TestInspectGivenBackingFile: the copy's disk lost its backing image
// (Longhorn's backing image manager removes unused copies from a disk);
// the same image from another disk, given as Options.BackingFile, makes
// the copy recoverable again once it checks out against the backing.cfg
// beside it, and the export reads it. A file that does not match is
// refused with the reason.
func TestInspectGivenBackingFile(t *testing.T) {
	disk := newDisk(t)
	r := threeLayers()
	dir := write(t, disk, "pvc-1-0a1b2c3d", r)
	r.BackingFilePath = "/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"
	rewriteVolumeMeta(t, dir, r)
	if in := inspect(t, dir, salvage.Options{}); in.Recoverable || !in.Has(salvage.ReasonMissingBackingImage) {
		t.Fatalf("without its backing image: recoverable=%v %v", in.Recoverable, in.ReasonStrings())
	}

	other := filepath.Join(t.TempDir(), "other-disk")
	if _, err := salvagetest.WriteBackingImage(other, "img-0a1b2c3d", 2*mib, []salvagetest.Write{{Off: 0, Data: bytes.Repeat([]byte{'K'}, 2*mib)}}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(other, "backing-images", "img-0a1b2c3d", "backing")
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(content)
	writeCfg := func(name, uuid string, size int64, checksum string) {
		t.Helper()
		b := fmt.Sprintf(`{"name":%q,"uuid":%q,"size":%d,"expectedChecksum":"","currentChecksum":%q}`, name, uuid, size, checksum)
		if err := os.WriteFile(filepath.Join(filepath.Dir(file), "backing.cfg"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// No backing.cfg: only the size can be checked, and the inspection says so.
	in := inspect(t, dir, salvage.Options{BackingFile: file})
	if !in.Recoverable || !in.Backing.Given || in.Backing.Path != file || !slices.ContainsFunc(in.Backing.Checked, func(s string) bool { return strings.Contains(s, "could not be checked") }) {
		t.Fatalf("given file without backing.cfg: recoverable=%v %v backing %+v", in.Recoverable, in.ReasonStrings(), in.Backing)
	}

	writeCfg("img", "0a1b2c3d", 2*mib, hex.EncodeToString(sum[:]))
	in = inspect(t, dir, salvage.Options{BackingFile: file})
	if !in.Recoverable || len(in.Backing.Checked) != 4 || !strings.Contains(strings.Join(in.Backing.Checked, "; "), "SHA-512 matches") {
		t.Fatalf("matching file: recoverable=%v %v checked %q", in.Recoverable, in.ReasonStrings(), in.Backing.Checked)
	}
	var img bytes.Buffer
	w := &sliceWriter{}
	if _, _, err := salvage.Recover(context.Background(), dir, w, salvage.RecoverOptions{Inspect: salvage.Options{BackingFile: file}}); err != nil {
		t.Fatalf("Recover with the given backing file: %v", err)
	}
	img.Write(w.b)
	// Block 4 (past the layers' writes, inside the backing image) shows the backing image.
	if got := img.Bytes()[4*4096]; got != 'K' {
		t.Fatalf("block 4 of the export is %q, want the backing image's 'K'", got)
	}

	for name, c := range map[string]func(){
		"checksum": func() { writeCfg("img", "0a1b2c3d", 2*mib, strings.Repeat("ab", 64)) },
		"name":     func() { writeCfg("other", "0a1b2c3d", 2*mib, hex.EncodeToString(sum[:])) },
		"size":     func() { writeCfg("img", "0a1b2c3d", 3*mib, "") },
	} {
		c()
		in := inspect(t, dir, salvage.Options{BackingFile: file})
		if in.Recoverable || !in.Has(salvage.ReasonBackingImageMismatch) {
			t.Errorf("%s mismatch: recoverable=%v %v", name, in.Recoverable, in.ReasonStrings())
		}
	}

	// Larger than the volume: never this copy's backing image.
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 8*mib); err != nil {
		t.Fatal(err)
	}
	if in := inspect(t, dir, salvage.Options{BackingFile: big}); in.Recoverable || !in.Has(salvage.ReasonBackingImageMismatch) {
		t.Errorf("a file larger than the volume: recoverable=%v %v", in.Recoverable, in.ReasonStrings())
	}
}

// sliceWriter is an io.WriterAt into memory.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(w.b)) {
		w.b = append(w.b, make([]byte, end-int64(len(w.b)))...)
	}
	copy(w.b[off:], p)
	return len(p), nil
}

// TestInspectGivenBackingNameTooLongIsAReason: an error opening the
// backing image that is neither "missing" nor "not a regular file" (here
// the given file's name is longer than a file name can be) is a reason
// that says what failed; describing it once recursed without end and
// crashed the process.
func TestInspectGivenBackingNameTooLongIsAReason(t *testing.T) {
	disk := newDisk(t)
	r := threeLayers()
	r.BackingFilePath = "/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"
	given := filepath.Join(t.TempDir(), strings.Repeat("b", 300))
	in := inspect(t, write(t, disk, "pvc-1-0a1b2c3d", r), salvage.Options{BackingFile: given})
	if in.Recoverable || !in.Has(salvage.ReasonMissingBackingImage) {
		t.Fatalf("recoverable=%v reasons %v; want missing-backing-image", in.Recoverable, in.ReasonStrings())
	}
	if s := strings.Join(in.ReasonStrings(), " "); !strings.Contains(s, "file name too long") {
		t.Errorf("the reason does not say what failed: %s", s)
	}
}

// TestEmptyVolumeMetaIsATypedRefusal: the engine's writable open rewrites
// an empty volume.meta from its command line's size and the first head in
// name order; a copy on its own has no size, so salvage refuses it, with
// an error a program can tell (ErrEmptyVolumeMeta, also a *MetaError and
// ErrCorrupt) and a reason that says what the engine does.
func TestEmptyVolumeMetaIsATypedRefusal(t *testing.T) {
	for _, data := range []string{"", "\n", " \t\n"} {
		_, err := salvage.ParseVolumeMeta([]byte(data))
		var me *salvage.MetaError
		if !errors.Is(err, salvage.ErrEmptyVolumeMeta) || !errors.Is(err, salvage.ErrCorrupt) || !errors.As(err, &me) || me.File != salvage.VolumeMetaFile {
			t.Errorf("ParseVolumeMeta(%q) = %v; want ErrEmptyVolumeMeta, ErrCorrupt and a *MetaError", data, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "salvage: volume.meta: empty") {
			t.Errorf("ParseVolumeMeta(%q): text %q", data, err)
		}
	}
	if _, err := salvage.ParseVolumeMeta([]byte("{")); errors.Is(err, salvage.ErrEmptyVolumeMeta) || !errors.Is(err, salvage.ErrCorrupt) {
		t.Errorf("a damaged volume.meta: %v", err)
	}
	disk := newDisk(t)
	dir := write(t, disk, "pvc-1-0a1b2c3d", threeLayers())
	overwrite(t, dir, salvage.VolumeMetaFile, nil)
	in := inspect(t, dir, salvage.Options{})
	if in.Recoverable || !in.Has(salvage.ReasonVolumeMeta) {
		t.Fatalf("recoverable %v, reasons %v", in.Recoverable, in.ReasonStrings())
	}
	if s := strings.Join(in.ReasonStrings(), " "); !strings.Contains(s, "empty") || !strings.Contains(s, "tryRecoverVolumeMetaFile") {
		t.Errorf("the reason does not say what the engine does: %s", s)
	}
}
