//go:build linux

package salvage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/lhreplica/lhreplicatest"
)

// This file builds replica directories by replaying longhorn-engine's own
// file operations (pkg/replica/replica.go createDisk, createNewHead,
// linkDisk, rmDisk, encodeToFile; pkg/sync and sparse-tools for a
// rebuild), step by step, and keeps beside each an in-memory model of the
// volume: the bytes the frontend wrote, nothing else. The model is the
// independent reference: it never reads the files.

// engineDisk is a layer .meta as the engine's disk type serialises it.
type engineDisk struct {
	Name        string
	Parent      string
	Removed     bool
	UserCreated bool
	Created     string
	Labels      map[string]string
}

// engineReplica is a replica directory and the model of its volume.
type engineReplica struct {
	t     testing.TB
	dir   string
	info  lhreplicatest.EngineInfo
	image []byte // the model: what the volume holds
	// snaps are the chain's snapshots, newest first.
	snaps []string
	// snapImages is the model's image when each snapshot was taken.
	snapImages map[string][]byte
}

// newEngineReplica creates dir as construct → createDisk("000") does:
// volume-head-000.img truncated to size, its .meta, volume.meta.
func newEngineReplica(t testing.TB, dir string, size int64) *engineReplica {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &engineReplica{t: t, dir: dir, info: lhreplicatest.EngineInfo{Size: size, Dirty: true, SectorSize: 512}, image: make([]byte, size)}
	head := "volume-head-000.img"
	r.create(head)
	r.truncate(head, size)
	r.encode(head+".meta", engineDisk{Name: head, Created: "2024-01-02T03:04:05Z"})
	r.info.Head = head
	r.encode("volume.meta", r.info)
	return r
}

func (r *engineReplica) path(name string) string { return filepath.Join(r.dir, name) }

func (r *engineReplica) create(name string) {
	f, err := os.OpenFile(r.path(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	f.Close()
}

func (r *engineReplica) truncate(name string, size int64) {
	if err := os.Truncate(r.path(name), size); err != nil {
		r.t.Fatal(err)
	}
}

// encode is encodeToFile: JSON plus a newline to <name>.tmp, renamed.
func (r *engineReplica) encode(name string, v any) {
	r.encodeTmp(name, v)
	r.rename(name)
}

func (r *engineReplica) encodeTmp(name string, v any) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(r.path(name+".tmp"), b.Bytes(), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

func (r *engineReplica) rename(name string) {
	if err := os.Rename(r.path(name+".tmp"), r.path(name)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *engineReplica) readDisk(name string) engineDisk {
	data, err := os.ReadFile(r.path(name + ".meta"))
	if err != nil {
		r.t.Fatal(err)
	}
	var d engineDisk
	if err := json.Unmarshal(data, &d); err != nil {
		r.t.Fatal(err)
	}
	return d
}

// write is a frontend write of whole 4096-byte blocks into the head.
func (r *engineReplica) write(off int64, p []byte) {
	f, err := os.OpenFile(r.path(r.info.Head), os.O_RDWR, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		r.t.Fatal(err)
	}
	copy(r.image[off:], p)
}

// trim is UnmapAt on the head alone: a hole punched, older data shows.
func (r *engineReplica) trim(off, n int64, older []byte) {
	f, err := os.OpenFile(r.path(r.info.Head), os.O_RDWR, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 3, off, n); err != nil { // PUNCH_HOLE|KEEP_SIZE
		r.t.Skipf("punch hole: %v", err)
	}
	copy(r.image[off:off+n], older[off:off+n])
}

// nextHead is nextFile: the head's number plus one.
func (r *engineReplica) nextHead() string {
	var n int
	if _, err := fmt.Sscanf(r.info.Head, "volume-head-%d.img", &n); err != nil {
		r.t.Fatal(err)
	}
	return fmt.Sprintf("volume-head-%03d.img", n+1)
}

// The steps of createDisk, in the engine's order. snapshotSteps is how
// many there are; createDisk(…, stop) performs the first stop of them.
var snapshotSteps = []string{
	"new head image created (O_TRUNC, 0 bytes)",
	"new head truncated to the size",
	"new head .meta written to .tmp",
	"new head .meta renamed",
	"old head hard-linked as the snapshot image",
	"old head .meta hard-linked as the snapshot's .meta",
	"volume.meta written to .tmp",
	"volume.meta renamed: the new chain",
	"snapshot .meta rewritten to .tmp",
	"snapshot .meta renamed",
	"old head image removed",
	"old head .meta removed",
}

// stepNewChain is the first step count after which volume.meta names the
// new chain.
const stepNewChain = 8

// createDisk replays Replica.createDisk (a snapshot, or an expansion when
// size differs) for its first stop steps, and returns the chain volume.meta
// names afterwards, head first, and the model's size.
func (r *engineReplica) createDisk(snap string, size int64, stop int) []string {
	oldHead, newHead := r.info.Head, r.nextHead()
	newSnap := "volume-snap-" + snap + ".img"
	oldDisk := r.readDisk(oldHead)
	steps := []func(){
		func() { r.create(newHead) },
		func() { r.truncate(newHead, size) },
		func() {
			r.encodeTmp(newHead+".meta", engineDisk{Name: newHead, Parent: newSnap, Created: "2024-01-02T03:04:06Z"})
		},
		func() { r.rename(newHead + ".meta") },
		func() {
			if err := os.Link(r.path(oldHead), r.path(newSnap)); err != nil {
				r.t.Fatal(err)
			}
		},
		func() {
			if err := os.Link(r.path(oldHead+".meta"), r.path(newSnap+".meta")); err != nil {
				r.t.Fatal(err)
			}
		},
		func() {
			info := r.info
			info.Head, info.Parent, info.Size = newHead, newSnap, size
			r.encodeTmp("volume.meta", info)
		},
		func() {
			r.rename("volume.meta")
			if r.snapImages == nil {
				r.snapImages = map[string][]byte{}
			}
			r.snapImages[newSnap] = slices.Clone(r.image)
			r.info.Head, r.info.Parent, r.info.Size = newHead, newSnap, size
			r.snaps = append([]string{newSnap}, r.snaps...)
			r.image = append(r.image, make([]byte, size-int64(len(r.image)))...)
		},
		func() {
			d := oldDisk
			d.UserCreated, d.Created = true, "2024-01-02T03:04:06Z"
			r.encodeTmp(newSnap+".meta", d)
		},
		func() { r.rename(newSnap + ".meta") },
		func() { os.Remove(r.path(oldHead)) },
		func() { os.Remove(r.path(oldHead + ".meta")) },
	}
	if len(steps) != len(snapshotSteps) {
		r.t.Fatal("steps and their names differ")
	}
	for _, step := range steps[:stop] {
		step()
	}
	return r.chain()
}

// revertSteps are Replica.revertDisk's steps, in its order.
var revertSteps = []string{
	"new head image created (O_TRUNC, 0 bytes)",
	"new head truncated to the size",
	"new head .meta written to .tmp",
	"new head .meta renamed",
	"volume.meta written to .tmp",
	"volume.meta renamed: the chain of the snapshot",
	"old head image removed",
	"old head .meta removed",
}

// revert replays revertDisk to snapshot snap for its first stop steps and
// returns the chain volume.meta names afterwards.
func (r *engineReplica) revert(snap string, stop int) []string {
	oldHead, newHead := r.info.Head, r.nextHead()
	target := "volume-snap-" + snap + ".img"
	steps := []func(){
		func() { r.create(newHead) },
		func() { r.truncate(newHead, r.info.Size) },
		func() {
			r.encodeTmp(newHead+".meta", engineDisk{Name: newHead, Parent: target, Created: "2024-01-02T03:04:07Z"})
		},
		func() { r.rename(newHead + ".meta") },
		func() {
			info := r.info
			info.Head, info.Parent = newHead, target
			r.encodeTmp("volume.meta", info)
		},
		func() {
			r.rename("volume.meta")
			r.info.Head, r.info.Parent = newHead, target
			r.snaps = r.snaps[slices.Index(r.snaps, target):]
			r.image = slices.Clone(r.snapImages[target])
		},
		func() { os.Remove(r.path(oldHead)) },
		func() { os.Remove(r.path(oldHead + ".meta")) },
	}
	if len(steps) != len(revertSteps) {
		r.t.Fatal("steps and their names differ")
	}
	for _, step := range steps[:stop] {
		step()
	}
	return r.chain()
}

func (r *engineReplica) chain() []string { return append([]string{r.info.Head}, r.snaps...) }

// inspectAndRecover inspects dir, checks the chain, and exports it with
// Recover, returning the inspection and the image.
func inspectAndRecover(t *testing.T, dir string, wantChain []string) (*Inspection, []byte) {
	t.Helper()
	in, err := Inspect(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !in.Recoverable {
		t.Fatalf("not recoverable: %v", in.ReasonStrings())
	}
	if got := in.Chain().Layers; !slices.Equal(got, wantChain) {
		t.Fatalf("chain %v, want %v", got, wantChain)
	}
	out := filepath.Join(t.TempDir(), "image.raw")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := Recover(context.Background(), dir, f, RecoverOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return in, got
}

// sameImage fails at the first differing 4096-byte block.
func sameImage(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for off := 0; off < len(want); off += blk {
		end := min(off+blk, len(want))
		if !bytes.Equal(got[off:end], want[off:end]) {
			t.Fatalf("%s: block %d is %q..., want %q...", what, off/blk, got[off:off+8], want[off:off+8])
		}
	}
}

func hasNote(in *Inspection, parts ...string) bool {
	for _, n := range in.Notes {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(n, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestSnapshotCutAtEveryStep stops the engine's snapshot creation (and an
// expansion, the same sequence with a new size) after each of its steps:
// every state exports what the engine reads on restart, the model's
// image, and the files the cut left behind are named in the notes.
func TestSnapshotCutAtEveryStep(t *testing.T) {
	requireFiemap(t, t.TempDir())
	const size = 64 * blk
	for _, expand := range []bool{false, true} {
		for stop := 0; stop <= len(snapshotSteps); stop++ {
			what := "snapshot"
			if expand {
				what = "expansion"
			}
			label := "nothing done"
			if stop > 0 {
				label = snapshotSteps[stop-1]
			}
			t.Run(fmt.Sprintf("%s/%02d %s", what, stop, label), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "pvc-1-0a1b2c3d")
				r := newEngineReplica(t, dir, size)
				r.write(0, fill('A', 8*blk))
				r.write(20*blk, fill(0, 2*blk)) // written zeros are data
				r.createDisk("s1", size, len(snapshotSteps))
				r.write(4*blk, fill('B', 4*blk))
				oldHead, newHead := r.info.Head, r.nextHead()
				newSize := int64(size)
				if expand {
					newSize = 2 * size
				}
				want := r.createDisk("s2", newSize, stop)
				in, got := inspectAndRecover(t, dir, want)
				sameImage(t, "export", got, r.image)
				ref, _ := refImage(t, dir, in.Chain(), false)
				sameImage(t, "reference reader", ref, r.image)

				switch {
				case stop >= 1 && stop <= 3:
					if !hasNote(in, newHead+" has no .meta") {
						t.Errorf("no note on the new head without .meta: %q", in.Notes)
					}
				case stop == 4:
					if !hasNote(in, newHead+" is a head outside the chain") {
						t.Errorf("no note on the new head outside the chain: %q", in.Notes)
					}
				case stop == 5:
					if !hasNote(in, "volume-snap-s2.img has no .meta") {
						t.Errorf("no note on the snapshot image without .meta: %q", in.Notes)
					}
				case stop >= stepNewChain && stop <= 10:
					if !hasNote(in, oldHead+" is a head outside the chain") {
						t.Errorf("no note on the old head outside the chain: %q", in.Notes)
					}
				case stop == 11:
					if !hasNote(in, oldHead+" has a .meta but no image") {
						t.Errorf("no note on the old head's .meta left: %q", in.Notes)
					}
				}
			})
		}
	}
}

// TestRevertCutAtEveryStep stops the engine's revert to a snapshot after
// each of its steps: before volume.meta is rewritten the copy reads as it
// was, after it reads as the snapshot, like the engine restarted.
func TestRevertCutAtEveryStep(t *testing.T) {
	requireFiemap(t, t.TempDir())
	const size = 32 * blk
	for stop := 0; stop <= len(revertSteps); stop++ {
		label := "nothing done"
		if stop > 0 {
			label = revertSteps[stop-1]
		}
		t.Run(fmt.Sprintf("%02d %s", stop, label), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pvc-1-0a1b2c3d")
			r := newEngineReplica(t, dir, size)
			r.write(0, fill('A', 8*blk))
			r.createDisk("s1", size, len(snapshotSteps))
			r.write(2*blk, fill('B', 8*blk))
			r.createDisk("s2", size, len(snapshotSteps))
			r.write(4*blk, fill('C', 8*blk))
			oldHead, newHead := r.info.Head, r.nextHead()
			want := r.revert("s1", stop)
			in, got := inspectAndRecover(t, dir, want)
			sameImage(t, "export", got, r.image)
			if stop >= 6 && !bytes.Equal(r.image[8*blk:9*blk], fill(0, blk)) {
				t.Fatal("the model did not revert")
			}
			switch {
			case stop >= 1 && stop <= 3:
				if !hasNote(in, newHead+" has no .meta") {
					t.Errorf("no note on the new head without .meta: %q", in.Notes)
				}
			case stop == 4 || stop == 5:
				if !hasNote(in, newHead+" is a head outside the chain") {
					t.Errorf("no note on the new head outside the chain: %q", in.Notes)
				}
			case stop == 6:
				if !hasNote(in, oldHead+" is a head outside the chain") {
					t.Errorf("no note on the old head outside the chain: %q", in.Notes)
				}
			case stop == 7:
				if !hasNote(in, oldHead+" has a .meta but no image") {
					t.Errorf("no note on the old head's .meta left: %q", in.Notes)
				}
			}
		})
	}
}

// TestSnapshotCutVolumeMetaLost: a release that did not sync volume.meta
// before renaming it can leave it empty after a power loss in the middle
// of a snapshot. The two heads then present cannot be told apart from
// volume.meta, so the copy is refused, naming both heads, and nothing is
// exported without -force.
func TestSnapshotCutVolumeMetaLost(t *testing.T) {
	requireFiemap(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "pvc-1-0a1b2c3d")
	r := newEngineReplica(t, dir, 16*blk)
	r.write(0, fill('A', blk))
	r.createDisk("s1", 16*blk, stepNewChain)
	if err := os.WriteFile(r.path("volume.meta"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Recoverable || !in.Has(ReasonVolumeMeta) {
		t.Fatalf("recoverable %v, reasons %v", in.Recoverable, in.ReasonStrings())
	}
	if !hasNote(in, "2 heads present (volume-head-000.img, volume-head-001.img)") {
		t.Errorf("the heads present are not named: %q", in.Notes)
	}
	var buf sliceWriterAt
	_, _, err = Recover(context.Background(), dir, &buf, RecoverOptions{})
	var nr *NotRecoverableError
	if !errors.As(err, &nr) || len(buf.b) != 0 {
		t.Fatalf("Recover: %v, wrote %d bytes", err, len(buf.b))
	}
}

type sliceWriterAt struct{ b []byte }

func (w *sliceWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if need := off + int64(len(p)); need > int64(len(w.b)) {
		w.b = append(w.b, make([]byte, need-int64(len(w.b)))...)
	}
	return copy(w.b[off:], p), nil
}

// TestSizeNotAMultipleOf512IsRefused: the engine refuses to open a
// replica whose size is not a multiple of its 512-byte sector
// (replica.go construct), and Longhorn never makes one: such a Size is
// damage, and the copy is refused rather than exported at a length the
// engine never served.
func TestSizeNotAMultipleOf512IsRefused(t *testing.T) {
	requireFiemap(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "pvc-1-0a1b2c3d")
	r := newEngineReplica(t, dir, 8*blk+100)
	r.write(0, fill('A', blk))
	in, err := Inspect(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Recoverable || !in.Has(ReasonVolumeMeta) || !strings.Contains(strings.Join(in.ReasonStrings(), ";"), "not a multiple of 512") {
		t.Fatalf("recoverable %v, reasons %v", in.Recoverable, in.ReasonStrings())
	}
	var buf sliceWriterAt
	if _, _, err := Recover(context.Background(), dir, &buf, RecoverOptions{}); !errors.Is(err, ErrNotRecoverable) || len(buf.b) != 0 {
		t.Fatalf("Recover: %v, wrote %d bytes", err, len(buf.b))
	}
}

// TestSizeNotAMultipleOf4096: a size of whole 512-byte sectors but not of
// whole blocks, as the engine run by hand accepts. The export is exactly
// Size bytes; the blocks the engine writes come from their layers; the
// last, partial block, which the engine can neither read nor write, comes
// from the head as in the engine's read-only open, even over a backing
// file that has data there; and a note says so. Then the volume is
// expanded to whole blocks (Expand accepts only those): the old layers
// keep their odd length and read as zeros past it.
func TestSizeNotAMultipleOf4096(t *testing.T) {
	requireFiemap(t, t.TempDir())
	disk := t.TempDir()
	const size = 6*blk + 1536
	backing := filepath.Join(disk, "backing-images", "img-1234", "backing")
	if err := os.MkdirAll(filepath.Dir(backing), 0o700); err != nil {
		t.Fatal(err)
	}
	makeLayer(t, backing, size, writeAt(0, fill('K', size)))
	if err := os.Mkdir(filepath.Join(disk, "replicas"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(disk, "replicas", "pvc-1-0a1b2c3d")
	r := newEngineReplica(t, dir, size)
	r.info.BackingFilePath = "/host" + backing
	r.encode("volume.meta", r.info)
	copy(r.image, fill('K', 6*blk)) // the base image, where no layer has data
	r.write(blk, fill('A', 2*blk))
	r.createDisk("s1", size, len(snapshotSteps))
	r.write(2*blk, fill('B', blk))

	in, got := inspectAndRecover(t, dir, r.chain())
	sameImage(t, "export", got, r.image) // the tail: zeros from the head
	ref, _ := refImage(t, dir, in.Chain(), false)
	sameImage(t, "reference reader", ref, r.image)
	if !hasNote(in, "not a multiple of 4096", "last 1536 bytes") {
		t.Errorf("no note on the partial block: %q", in.Notes)
	}

	r.createDisk("expand-"+fmt.Sprint(8*blk), 8*blk, len(snapshotSteps))
	// The old partial block is now a whole block of the location map; no
	// layer has an extent there, so it comes from the backing file, whose
	// bytes become readable (zeros past its end).
	copy(r.image[6*blk:], fill('K', 1536))
	r.write(7*blk, fill('C', blk))
	in, got = inspectAndRecover(t, dir, r.chain())
	sameImage(t, "export after the expansion", got, r.image)
	ref, _ = refImage(t, dir, in.Chain(), false)
	sameImage(t, "reference reader after the expansion", ref, r.image)
	if hasNote(in, "not a multiple of 4096") {
		t.Errorf("a note on a partial block after the expansion to whole blocks: %q", in.Notes)
	}
}

// syncFile is what a rebuild does to one snapshot file
// (longhorn/sparse-tools: the source's extents are walked; the receiver
// opens the file, creating it if missing, truncates it to the source's
// size, punches a hole for each of the source's holes, and writes each
// data extent in batches of 32 blocks, here in random order from two
// goroutines, as concurrent batches arrive). junk first fills the
// receiver's file with other data, as a file left by an earlier attempt.
func syncFile(t *testing.T, rng *rand.Rand, src, dst string, junk bool) {
	t.Helper()
	s, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if junk {
		makeLayer(t, dst, info.Size()+3*blk, writeAt(0, fill('J', int(info.Size())+3*blk)))
	}
	d, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Truncate(info.Size()); err != nil {
		t.Fatal(err)
	}
	type batch struct{ off, n int64 }
	var batches []batch
	for off := int64(0); off < info.Size(); off += blk {
		n := min(int64(blk), info.Size()-off)
		if !refHasExtent(t, s, off) {
			if err := syscall.Fallocate(int(d.Fd()), 3, off, n); err != nil {
				t.Skipf("punch hole: %v", err)
			}
			continue
		}
		if k := len(batches); k > 0 && batches[k-1].off+batches[k-1].n == off && batches[k-1].n < 32*blk {
			batches[k-1].n += n
		} else {
			batches = append(batches, batch{off, n})
		}
	}
	rng.Shuffle(len(batches), func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
	errs := make(chan error, 2)
	for w := range 2 {
		go func() {
			var err error
			for i := w; i < len(batches) && err == nil; i += 2 {
				b := batches[i]
				p := make([]byte, b.n)
				if _, err = s.ReadAt(p, b.off); err == nil {
					_, err = d.WriteAt(p, b.off)
				}
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// syncMeta is how a rebuild sends a .meta: decoded into a map and encoded
// again by the receiver (sparse-tools rest encodeToFile), so its keys come
// in alphabetical order, to a .tmp renamed.
func syncMeta(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".tmp", b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		t.Fatal(err)
	}
}

// TestRebuiltOverTheNetwork rebuilds a replica the way the engine's sync
// agent does and exports it: its head has its own number, its snapshots
// arrived as sparse files written out of order (one over a file left by
// an earlier attempt), their .meta re-encoded, and its counter is the
// source's. The rebuilt copy exports the model's image, as the source
// does. A rebuild cut before it finished is refused.
func TestRebuiltOverTheNetwork(t *testing.T) {
	requireFiemap(t, t.TempDir())
	rng := rand.New(rand.NewPCG(36, 5))
	const size = 1024 * blk
	disk := t.TempDir()
	src := newEngineReplica(t, filepath.Join(disk, "pvc-1-0a1b2c3d"), size)
	randomWrites := func(r *engineReplica, n int) {
		for range n {
			off := rng.Int64N(size/blk-40) * blk
			k := 1 + rng.IntN(40)
			b := byte('a' + rng.IntN(26))
			if rng.IntN(5) == 0 {
				b = 0 // written zeros hide older data
			}
			r.write(off, fill(b, k*blk))
		}
	}
	randomWrites(src, 60)
	src.createDisk("s1", size, len(snapshotSteps))
	before := slices.Clone(src.image)
	randomWrites(src, 40)
	src.trim(100*blk, 50*blk, before)
	src.createDisk("s2", size, len(snapshotSteps))
	randomWrites(src, 40)
	// The rebuild starts with a snapshot of the volume; the source's head
	// is then fresh, and new writes reach both heads.
	src.createDisk("rebuild", size, len(snapshotSteps))
	counter := int64(4242)
	if err := os.WriteFile(src.path(RevisionCounterFile), append([]byte(fmt.Sprint(counter)), make([]byte, blk-4)...), 0o600); err != nil {
		t.Fatal(err)
	}

	dst := newEngineReplica(t, filepath.Join(disk, "pvc-1-9f8e7d6c"), size)
	dst.createDisk("rebuild", size, len(snapshotSteps)) // the target's own head is now volume-head-001.img
	dst.info.Rebuilding = true
	dst.encode("volume.meta", dst.info)
	for i, snap := range slices.Backward(src.snaps) {
		syncFile(t, rng, src.path(snap), dst.path(snap), i == 1)
		syncMeta(t, src.path(snap+".meta"), dst.path(snap+".meta"))
	}
	syncMeta(t, src.path(src.info.Head+".meta"), dst.path(dst.info.Head+".meta"))
	dst.snaps = slices.Clone(src.snaps)
	dst.image = src.image
	for range 10 {
		off := rng.Int64N(size/blk-8) * blk
		p := fill(byte('A'+rng.IntN(26)), (1+rng.IntN(8))*blk)
		src.write(off, p)
		dst.write(off, p) // the same model
	}

	// Cut before the flag is cleared: refused, whatever the files hold.
	in, err := Inspect(context.Background(), dst.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Recoverable || !in.Has(ReasonRebuilding) {
		t.Fatalf("an unfinished rebuild: recoverable %v, reasons %v", in.Recoverable, in.ReasonStrings())
	}

	// Finished: the counter set to the source's, the flag cleared.
	if err := os.WriteFile(dst.path(RevisionCounterFile), append([]byte(fmt.Sprint(counter)), make([]byte, blk-4)...), 0o600); err != nil {
		t.Fatal(err)
	}
	dst.info.Rebuilding = false
	dst.encode("volume.meta", dst.info)
	if dst.info.Head == src.info.Head {
		t.Fatalf("the rebuilt head should have its own number, both are %s", dst.info.Head)
	}
	in, got := inspectAndRecover(t, dst.dir, dst.chain())
	sameImage(t, "rebuilt copy", got, dst.image)
	ref, _ := refImage(t, dst.dir, in.Chain(), false)
	sameImage(t, "reference reader on the rebuilt copy", ref, dst.image)
	if !in.HasRevision || in.Revision != counter {
		t.Errorf("revision %d (%v), want %d", in.Revision, in.HasRevision, counter)
	}
	_, got = inspectAndRecover(t, src.dir, src.chain())
	sameImage(t, "source copy", got, src.image)
}
