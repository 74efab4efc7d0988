package diskscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// swappingExpected is an ExpectedSource that, the first time it is asked
// (after the scan listed the disk, before it validates), runs swap.
type swappingExpected struct {
	*StaticExpected
	once sync.Once
	swap func()
}

func (s *swappingExpected) Expected(ctx context.Context, d Disk) (NameSet, error) {
	s.once.Do(s.swap)
	return s.StaticExpected.Expected(ctx, d)
}

// TestDirectoryReplacedBetweenListingAndValidation guards the validation
// of unexpected directories, now done by a pool of workers after the
// listing: a directory listed as one and replaced before its validation
// by a symlink (to an expected replica's directory, whose volume.meta is
// valid), a FIFO or a regular file, or removed, is never
// reported as an orphan, never followed, never blocks the scan, and its
// validation is not cached; the directories left alone still are orphans.
func TestDirectoryReplacedBetweenListingAndValidation(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	live := "pvc-live-r-00000000"
	replica(t, d, live, disktest.Replica{Size: 1 << 20})
	names := map[string]string{}
	for i, kind := range []string{"symlink", "fifo", "file", "gone", "kept"} {
		name := fmt.Sprintf("pvc-lost%d-r-%08d", i, i)
		names[name] = kind
		replica(t, d, name, disktest.Replica{Size: 1 << 20})
	}
	exp := &swappingExpected{StaticExpected: NewStaticExpected(ReplicaRef{Name: live, DiskID: d.UUID, DataDirectoryName: live})}
	exp.swap = func() {
		for name, kind := range names {
			p := filepath.Join(rd, name)
			if kind == "kept" {
				continue
			}
			must(t, os.RemoveAll(p))
			switch kind {
			case "symlink":
				must(t, os.Symlink(live, p))
			case "fifo":
				mkfifo(t, p)
			case "file":
				must(t, os.WriteFile(p, []byte("{}"), 0o644))
			}
		}
	}
	for _, workers := range []int{1, 4} {
		exp.once = sync.Once{}
		// Put the directories back for this round.
		for name := range names {
			p := filepath.Join(rd, name)
			must(t, os.RemoveAll(p))
			replica(t, d, name, disktest.Replica{Size: 1 << 20})
		}
		o := newOrphans(t, exp, Options{Clock: settled.Clock, ScanWorkers: workers}, d)
		r := within(t, "scan", func() Report {
			r, err := o.Report(context.Background())
			if err != nil {
				t.Error(err)
			}
			return r
		})
		if len(r.Disks) != 1 {
			t.Fatalf("%d workers: %d disks", workers, len(r.Disks))
		}
		dr := r.Disks[0]
		if len(dr.Orphans) != 1 || names[dr.Orphans[0].Name] != "kept" {
			t.Fatalf("%d workers: orphans %+v; want only the directory left alone", workers, dr.Orphans)
		}
		if dr.Orphans[0].AllocatedBytes == 0 {
			t.Errorf("%d workers: the kept orphan has no size", workers)
		}
		skipped := map[string]string{}
		for _, s := range dr.Skipped {
			skipped[s.Name] = s.Reason
		}
		for name, kind := range names {
			switch kind {
			case "symlink", "fifo", "file":
				if skipped[name] != "not a directory" {
					t.Errorf("%d workers: the %s that replaced %s: skipped %q, want \"not a directory\"", workers, kind, name, skipped[name])
				}
			case "gone":
				if _, ok := skipped[name]; ok {
					t.Errorf("%d workers: a vanished directory is skipped: %q", workers, skipped[name])
				}
			}
			if ce, ok := o.caches[d.Scope()].entries[name]; ok && kind != "kept" {
				t.Errorf("%d workers: a validation of the %s at %s is cached: %+v", workers, kind, name, ce)
			}
		}
		if _, err := os.Stat(filepath.Join(rd, live, MetaFile)); err != nil {
			t.Fatal(err)
		}
	}
}
