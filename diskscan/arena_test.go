package diskscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
	"github.com/caretaker-storage/caretaker/orphan"
)

// reportNames is every name a report holds, copied out of the report.
func reportNames(r Report) []string {
	var out []string
	for _, d := range r.Disks {
		for _, o := range d.Orphans {
			out = append(out, strings.Clone(o.Name), strings.Clone(o.Item.Parameters[orphan.ParamDataName]))
		}
		for _, s := range d.Skipped {
			out = append(out, strings.Clone(s.Name))
		}
		for _, n := range d.OwnedNames {
			out = append(out, strings.Clone(n))
		}
	}
	return out
}

// TestReportNamesOutliveLaterListings guards the names a listing cuts out
// of one shared byte arena (unsafe.String) and the listing buffers a scan
// reuses for the next: a report handed out, and the validations cached
// by name, must keep their names byte for byte while later scans list a
// changing directory again and again (reusing those buffers) and while
// another goroutine reads them (-race sees any write to shared bytes).
func TestReportNamesOutliveLaterListings(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	exp := NewStaticExpected()
	for i := range 300 {
		name := fmt.Sprintf("pvc-own%05d-r-%08d", i, i)
		must(t, os.Mkdir(filepath.Join(rd, name), 0o755))
		exp.Add(ReplicaRef{Name: name, DiskID: d.UUID, DataDirectoryName: name})
	}
	for i := range 20 {
		replica(t, d, fmt.Sprintf("pvc-lost%02d-r-%08d", i, i), disktest.Replica{Size: 1 << 20})
	}
	must(t, os.WriteFile(filepath.Join(rd, "a-file"), nil, 0o644))
	o := newOrphans(t, exp, Options{Clock: settled.Clock, ListOwned: true, ScanWorkers: 4}, d)
	first, err := o.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := reportNames(first)
	if len(first.Disks[0].Orphans) != 20 || len(first.Disks[0].OwnedNames) != 300 {
		t.Fatalf("first scan: %d orphans, %d owned", len(first.Disks[0].Orphans), len(first.Disks[0].OwnedNames))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			for _, s := range reportNames(o.LastReport()) {
				n += len(s)
			}
			_ = n
		}
	}()
	for round := range 12 {
		// Remove and re-create entries (names of other lengths, so the
		// bytes at each offset of a new arena differ), and drop an
		// orphan, so every scan lists afresh.
		for i := range 30 {
			p := filepath.Join(rd, fmt.Sprintf("x%d-%d-%s", round, i, strings.Repeat("z", round+i%7)))
			must(t, os.Mkdir(p, 0o755))
			if round > 0 {
				must(t, os.Remove(filepath.Join(rd, fmt.Sprintf("x%d-%d-%s", round-1, i, strings.Repeat("z", round-1+i%7)))))
			}
		}
		if round < 10 {
			must(t, os.RemoveAll(filepath.Join(rd, fmt.Sprintf("pvc-lost%02d-r-%08d", round, round))))
		}
		if _, err := o.Report(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	got := reportNames(first)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("a name of the first report changed under later scans: %q, was %q", got[i], want[i])
		}
	}
	// The cached validations are keyed by the names they were made for.
	for name, ce := range o.caches[d.Scope()].entries {
		if !strings.HasPrefix(name, "pvc-lost") || ce.reason != "" {
			t.Fatalf("cached validation under %q: %+v", name, ce)
		}
		if _, err := os.Lstat(filepath.Join(rd, name)); err != nil {
			t.Fatalf("a validation is cached under %q, which is no entry: %v", name, err)
		}
	}
	if n := len(o.caches[d.Scope()].entries); n != 10 {
		t.Fatalf("%d validations cached, want the 10 orphans left", n)
	}
}
