package salvage_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// emptyReplica is a replica as Longhorn creates it before anything is
// written: a snapshot and a head, both sparse with no block allocated.
func emptyReplica() salvagetest.Replica {
	return salvagetest.Replica{Size: 4 * mib, Snapshots: []salvagetest.Layer{{}}, Counter: true, Revision: 0}
}

// writeQCOW2Backing puts a file starting with the qcow2 magic as the
// backing image of the disk and returns the path volume.meta records.
func writeQCOW2Backing(t *testing.T, disk, dirName string) string {
	t.Helper()
	p, err := salvagetest.WriteBackingImage(disk, dirName, 4*mib, []salvagetest.Write{{Off: 0, Data: []byte("QFI\xfb\x00\x00\x00\x03")}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInspectNoData: NoData is set only when the directory is proven to
// hold none of the volume's data, on real files; every case a copy still
// holds data, or cannot be examined, leaves it false, whether the export
// can read the copy today or not.
func TestInspectNoData(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SEEK_DATA is Linux's")
	}
	withData := threeLayers()
	cases := []struct {
		name        string
		r           salvagetest.Replica
		setup       func(t *testing.T, disk, dir string)
		opts        salvage.Options
		noData      bool
		recoverable bool
		anyVerdict  bool               // Recoverable is not checked: the export may learn to read it
		reason      salvage.ReasonKind // a reason the inspection must have
	}{
		{name: "a replica nothing was written to", r: emptyReplica(), noData: true, recoverable: true},
		{name: "metadata files and their .tmp hold no volume data", r: emptyReplica(), noData: true, recoverable: true,
			setup: func(t *testing.T, _, dir string) {
				overwrite(t, dir, "volume.meta.tmp", []byte(strings.Repeat("x", 8192)))
				overwrite(t, dir, "volume-snap-0.img.checksum", []byte(`{"method":"crc64","checksum":"0"}`))
				overwrite(t, dir, "volume-head-001.img.meta.tmp", []byte("{"))
			}},
		{name: "an empty layer file of size 0", r: emptyReplica(), noData: true, recoverable: true,
			setup: func(t *testing.T, _, dir string) { overwrite(t, dir, "volume-snap-gone.img", nil) }},
		{name: "a head with one block written", r: salvagetest.Replica{Size: 4 * mib, Head: salvagetest.Layer{Writes: []salvagetest.Write{salvagetest.Block(7, 'x')}}}, recoverable: true},
		{name: "a snapshot with data under an empty head", r: salvagetest.Replica{Size: 4 * mib, Snapshots: []salvagetest.Layer{{Writes: []salvagetest.Write{salvagetest.Block(0, 'a')}}}}, recoverable: true},
		{name: "a snapshot off the chain with data", r: emptyReplica(), recoverable: true,
			setup: func(t *testing.T, _, dir string) {
				writeImage(t, dir, "volume-snap-old.img", 4*mib, 5)
				overwrite(t, dir, "volume-snap-old.img.meta", []byte(`{"Name":"volume-snap-old.img","Parent":"","Removed":false,"UserCreated":true,"Created":"2024-01-01T00:00:00Z","Labels":null}`+"\n"))
			}},
		{name: "a backup restore's leftover delta with data", r: emptyReplica(), recoverable: true,
			setup: func(t *testing.T, _, dir string) { writeImage(t, dir, "volume-delta-s1.img", 4*mib, 0) }},
		{name: "an unknown file with data", r: emptyReplica(), recoverable: true,
			setup: func(t *testing.T, _, dir string) { overwrite(t, dir, "notes.txt", []byte("hello")) }},
		{name: "a subdirectory", r: emptyReplica(), recoverable: true,
			setup: func(t *testing.T, _, dir string) {
				if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a symbolic link, never followed", r: emptyReplica(), reason: salvage.ReasonNotRegular,
			setup: func(t *testing.T, disk, dir string) {
				writeImage(t, disk, "elsewhere.img", 4*mib, -1)
				rm(t, dir, "volume-head-001.img")
				if err := os.Symlink(filepath.Join(disk, "elsewhere.img"), filepath.Join(dir, "volume-head-001.img")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a FIFO as a layer", r: emptyReplica(), reason: salvage.ReasonNotRegular,
			setup: func(t *testing.T, _, dir string) {
				rm(t, dir, "volume-head-001.img")
				putNonRegular(t, filepath.Join(dir, "volume-head-001.img"), "fifo")
			}},
		{name: "volume.meta missing: a backing image cannot be ruled out", r: emptyReplica(), reason: salvage.ReasonVolumeMeta,
			setup: func(t *testing.T, _, dir string) { rm(t, dir, "volume.meta") }},
		{name: "volume.meta damaged", r: emptyReplica(), reason: salvage.ReasonVolumeMeta,
			setup: func(t *testing.T, _, dir string) { overwrite(t, dir, "volume.meta", []byte(`{"Size":`)) }},
		{name: "empty layers over a raw backing image", r: emptyReplica(), recoverable: true,
			setup: func(t *testing.T, disk, dir string) {
				p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, []salvagetest.Write{salvagetest.Block(5, 'z')})
				if err != nil {
					t.Fatal(err)
				}
				r := emptyReplica()
				r.BackingFilePath = p
				rewriteVolumeMeta(t, dir, r)
			}},
		{name: "empty layers over a backing image removed from the disk", r: emptyReplica(), reason: salvage.ReasonMissingBackingImage,
			setup: func(t *testing.T, disk, dir string) {
				r := emptyReplica()
				r.BackingFilePath = "/host" + filepath.ToSlash(disk) + "/backing-images/img-0a1b2c3d/backing"
				rewriteVolumeMeta(t, dir, r)
			}},
		{name: "the listing cut at MaxEntries", r: emptyReplica(), opts: salvage.Options{MaxEntries: 2}, recoverable: true},
		// The copies the last-copy guard must keep although the export
		// refuses them today.
		{name: "data over a backing image removed from the disk", r: withData, reason: salvage.ReasonMissingBackingImage,
			setup: func(t *testing.T, disk, dir string) {
				r := withData
				r.BackingFilePath = "/host" + filepath.ToSlash(disk) + "/backing-images/img-0a1b2c3d/backing"
				rewriteVolumeMeta(t, dir, r)
			}},
		{name: "data over a qcow2 backing image", r: withData, anyVerdict: true,
			setup: func(t *testing.T, disk, dir string) {
				r := withData
				r.BackingFilePath = writeQCOW2Backing(t, disk, "img-0a1b2c3d")
				rewriteVolumeMeta(t, dir, r)
			}},
		{name: "data, volume.meta lost", r: withData, reason: salvage.ReasonVolumeMeta,
			setup: func(t *testing.T, _, dir string) { rm(t, dir, "volume.meta") }},
		{name: "data, volume.meta naming a head that is not there", r: withData, reason: salvage.ReasonBrokenChain,
			setup: func(t *testing.T, _, dir string) {
				r := withData
				r.Head.Name = "volume-head-009.img"
				rewriteVolumeMeta(t, dir, r)
			}},
		{name: "data, rebuilding", r: func() salvagetest.Replica { r := withData; r.Rebuilding = true; return r }(), reason: salvage.ReasonRebuilding},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			disk := newDisk(t)
			dir := write(t, disk, "pvc-1-0a1b2c3d", tc.r)
			if tc.setup != nil {
				tc.setup(t, disk, dir)
			}
			before := snapshot(t, disk)
			in := inspect(t, dir, tc.opts)
			if in.NoData != tc.noData || !tc.anyVerdict && in.Recoverable != tc.recoverable || tc.reason != "" && !in.Has(tc.reason) {
				t.Fatalf("NoData %v recoverable %v reasons %v; want NoData %v recoverable %v with %q", in.NoData, in.Recoverable, in.ReasonStrings(), tc.noData, tc.recoverable, tc.reason)
			}
			if !equalSnapshots(before, snapshot(t, disk)) {
				t.Error("the inspection changed the disk")
			}
		})
	}
}

// writeImage writes a sparse image of size bytes under dir with block
// blockNo written (none when negative).
func writeImage(t *testing.T, dir, name string, size, blockNo int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	if err == nil && blockNo >= 0 {
		_, err = f.WriteAt([]byte(strings.Repeat("d", salvagetest.BlockSize)), blockNo*salvagetest.BlockSize)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestReasonsSayWhatToDo: the reasons a copy cannot be exported today
// each say what a person can do, in the text the orphan record shows.
func TestReasonsSayWhatToDo(t *testing.T) {
	for kind, want := range map[salvage.ReasonKind]string{
		salvage.ReasonMissingBackingImage:  "back onto this disk from another node that has it, or give that node's file to the export (longhorn-salvage -backing FILE)",
		salvage.ReasonBackingImageFormat:   "qemu-img convert -O raw",
		salvage.ReasonBackingImageMismatch: "find the backing image the copy expects",
		salvage.ReasonShortHead:            "a forced export (longhorn-salvage -force)",
		salvage.ReasonVolumeMeta:           "the layers are untouched: copy volume.meta from another replica directory of the volume",
		salvage.ReasonMissingLayer:         "from another replica directory of the volume",
		salvage.ReasonRebuilding:           "export it as it is",
		salvage.ReasonInterruptedRevert:    "start the engine on a copy of the directory, which finishes the revert",
	} {
		s := salvage.Reason{Kind: kind, File: "f", Detail: "d"}.String()
		if !strings.HasPrefix(s, string(kind)+": f: d (") || !strings.Contains(s, want) {
			t.Errorf("%s: %q lacks %q", kind, s, want)
		}
	}
	if s := (salvage.Reason{Kind: salvage.ReasonCyclicChain, File: "f"}).String(); s != "cyclic-chain: f" {
		t.Errorf("a reason without a remedy: %q", s)
	}
}

// BenchmarkInspectNoData is what the NoData proof costs an inspection: a
// copy of 10 snapshots and a head, never written (each layer is opened
// for the SEEK_DATA probe) and written (the proof stops at the first
// allocated block).
func BenchmarkInspectNoData(b *testing.B) {
	for _, written := range []bool{false, true} {
		b.Run(map[bool]string{false: "empty", true: "written"}[written], func(b *testing.B) {
			disk := filepath.Join(b.TempDir(), "disk")
			if err := os.MkdirAll(filepath.Join(disk, "replicas"), 0o700); err != nil {
				b.Fatal(err)
			}
			r := salvagetest.Replica{Size: 4 * mib, Snapshots: make([]salvagetest.Layer, 10)}
			if written {
				r.Head.Writes = []salvagetest.Write{salvagetest.Block(1, 'x')}
			}
			dir := filepath.Join(disk, "replicas", "pvc-1-0a1b2c3d")
			if err := salvagetest.WriteReplica(dir, r); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				in, err := salvage.Inspect(context.Background(), dir, salvage.Options{})
				if err != nil || in.NoData == written {
					b.Fatalf("NoData %v, %v", in.NoData, err)
				}
			}
		})
	}
}
