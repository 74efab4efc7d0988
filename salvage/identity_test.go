//go:build linux

package salvage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/salvage/salvagetest"
)

// TestExportRefusesFilesSwappedAfterInspection: Inspect checks the files
// (the backing image's format and size, a given one's backing.cfg
// checksum), then the export opens them again by name. A file replaced
// or changed between the two steps is refused with ErrExportChanged,
// nothing read from it; an unchanged copy still exports.
func TestExportRefusesFilesSwappedAfterInspection(t *testing.T) {
	swaps := map[string]func(t *testing.T, dir, backing string){
		"backing replaced by a file of the same size": func(t *testing.T, dir, backing string) {
			other := filepath.Join(filepath.Dir(backing), "other")
			if err := os.WriteFile(other, make([]byte, 4*mib), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, backing); err != nil {
				t.Fatal(err)
			}
		},
		"backing written in place": func(t *testing.T, dir, backing string) {
			f, err := os.OpenFile(backing, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("x"), 6*4096); err != nil {
				t.Fatal(err)
			}
			future := time.Now().Add(time.Hour)
			if err := os.Chtimes(backing, future, future); err != nil {
				t.Fatal(err)
			}
		},
		"head replaced by an identical copy": func(t *testing.T, dir, backing string) {
			head := filepath.Join(dir, threeLayers().HeadName())
			data, err := os.ReadFile(head)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(head+".new", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(head+".new", head); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, swap := range swaps {
		for _, given := range []bool{false, true} {
			label := name
			if given {
				label += ", given with -backing"
			}
			t.Run(label, func(t *testing.T) {
				disk := newDisk(t)
				p, err := salvagetest.WriteBackingImage(disk, "img-0a1b2c3d", 4*mib, []salvagetest.Write{salvagetest.Block(5, 'z')})
				if err != nil {
					t.Fatal(err)
				}
				r := threeLayers()
				r.BackingFilePath = p
				dir := write(t, disk, "pvc-1-0a1b2c3d", r)
				backing := filepath.Join(disk, "backing-images", "img-0a1b2c3d", "backing")
				var opts salvage.Options
				if given {
					elsewhere := filepath.Join(t.TempDir(), "backing")
					if err := os.Rename(backing, elsewhere); err != nil {
						t.Fatal(err)
					}
					backing, opts.BackingFile = elsewhere, elsewhere
				}
				in := inspect(t, dir, opts)
				if !in.Recoverable {
					t.Fatalf("not recoverable: %v", in.ReasonStrings())
				}
				out, err := os.Create(filepath.Join(t.TempDir(), "image"))
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				if _, err := salvage.ExportChain(context.Background(), dir, in.Chain(), out, salvage.ExportOptions{}); err != nil {
					t.Fatalf("unchanged files: %v", err)
				}
				swap(t, dir, backing)
				_, err = salvage.ExportChain(context.Background(), dir, in.Chain(), out, salvage.ExportOptions{})
				if !errors.Is(err, salvage.ErrExportChanged) {
					t.Fatalf("export after the swap: %v; want ErrExportChanged", err)
				}
				t.Log(err)
				// Inspected again, the files are what they are now.
				if _, err := salvage.ExportChain(context.Background(), dir, inspect(t, dir, opts).Chain(), out, salvage.ExportOptions{}); err != nil {
					t.Fatalf("inspected again: %v", err)
				}
			})
		}
	}
}
