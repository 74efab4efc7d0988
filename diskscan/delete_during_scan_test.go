package diskscan

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/internal/disktest"
)

// TestDeleteDuringScans guards the pool-validated scan against purges
// running at the same time (-race): orphans are deleted while scans with
// several workers list and validate the same disk. Every scan succeeds,
// no expected directory is touched, every orphan ends up purged, and the
// scan after the purges reports none and keeps no validation of them.
func TestDeleteDuringScans(t *testing.T) {
	d := makeDisk(t, t.TempDir(), "n", "d", "u")
	rd := filepath.Join(d.Path, ReplicasDir)
	var lost, kept []string
	for i := range 24 {
		name := fmt.Sprintf("pvc-lost%02d-r-%08d", i, i)
		replica(t, d, name, disktest.Replica{Size: 1 << 20, Written: 4096})
		lost = append(lost, name)
	}
	f := newFixtureWith(t, Options{Clock: settled.Clock, ScanWorkers: 4}, d)
	for i := range 50 {
		name := fmt.Sprintf("pvc-kept%02d-r-%08d", i, i)
		replica(t, d, name, disktest.Replica{Size: 1 << 20})
		kept = append(kept, name)
		f.expect(d, name)
	}
	if n := len(f.scan().Disks[0].Orphans); n != len(lost) {
		t.Fatalf("%d orphans, want %d", n, len(lost))
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := f.o.Report(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var dw sync.WaitGroup
	for _, name := range lost {
		dw.Add(1)
		go func() {
			defer dw.Done()
			if err := f.o.Delete(context.Background(), record(t, d, name)); err != nil {
				t.Errorf("Delete %s: %v", name, err)
			}
		}()
	}
	dw.Wait()
	close(done)
	wg.Wait()
	for _, name := range lost {
		if exists(t, filepath.Join(rd, name)) {
			t.Errorf("%s not purged", name)
		}
	}
	for _, name := range kept {
		if !exists(t, filepath.Join(rd, name, MetaFile)) {
			t.Fatalf("expected %s touched", name)
		}
	}
	r := f.scan().Disks[0]
	if len(r.Orphans) != 0 || len(r.Skipped) != 0 || r.Owned != len(kept) {
		t.Fatalf("after the purges: %d orphans, %d skipped %+v, %d owned", len(r.Orphans), len(r.Skipped), r.Skipped, r.Owned)
	}
	if n := len(f.o.caches[d.Scope()].entries); n != 0 {
		t.Fatalf("%d validations of purged directories still cached", n)
	}
}
