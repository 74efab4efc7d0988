package salvage

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestFileHasNoData: the SEEK_DATA probe says "no data" for a sparse file
// only, and never for a file with a written byte, on real files.
func TestFileHasNoData(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SEEK_DATA is Linux's")
	}
	dir := t.TempDir()
	sparse, written := filepath.Join(dir, "sparse"), filepath.Join(dir, "written")
	for _, p := range []string{sparse, written} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(written, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, 1<<19); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for p, want := range map[string]bool{sparse: true, written: false} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fileHasNoData(f)
		f.Close()
		if err != nil || got != want {
			t.Errorf("%s: no data %v, %v; want %v", filepath.Base(p), got, err, want)
		}
	}
}

// TestMetadataFile: only the engine's metadata names are taken as holding
// no volume data; layer images and restore leftovers are not.
func TestMetadataFile(t *testing.T) {
	for name, want := range map[string]bool{
		"volume.meta": true, "volume.meta.tmp": true, "revision.counter": true,
		"volume-head-001.img.meta": true, "volume-snap-a.img.meta.tmp": true, "volume-snap-a.img.checksum": true,
		"volume-head-001.img": false, "volume-snap-a.img": false, "volume-snap-a.img.snap_tmp": false,
		"volume-delta-a.img": false, "volume-head-001.img.tmp": false, "x.meta": false, "notes": false,
	} {
		if got := metadataFile(name); got != want {
			t.Errorf("metadataFile(%q) = %v, want %v", name, got, want)
		}
	}
}
