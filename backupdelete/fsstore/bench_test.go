package fsstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
)

// benchVolume writes, with plain os calls, a Longhorn-layout volume of
// `backups` incremental backups of `blocks` blocks each: backup i replaces
// a tenth of the blocks of backup i-1 with new ones. Deleting backup-0
// frees exactly the blocks backup-1 replaced. It returns the volume
// directory and the paths of the block files only backup-0 references.
// With onlyFreed, it writes only those block files (the unlink floor needs
// nothing else).
func benchVolume(b *testing.B, mount string, backups, blocks int, onlyFreed bool) (string, []string) {
	b.Helper()
	v := newLonghornVolume(b, mount, "vol-bench")
	current := make([]string, blocks)
	for i := range current {
		current[i] = checksum(fmt.Sprint("0-", i))
	}
	all := map[string]bool{}
	var freed []string
	step := blocks / 10
	for n := range backups {
		if n > 0 {
			for i := (n - 1) % 10 * step; i < ((n-1)%10+1)*step; i++ {
				if n == 1 {
					freed = append(freed, current[i])
				}
				current[i] = checksum(fmt.Sprint(n, "-", i))
			}
		}
		for _, ck := range current {
			all[ck] = true
		}
		at := time.Date(2026, 11, 1+n, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		v.write(fmt.Sprintf("backups/backup_backup-%d.cfg", n), longhornBackupCfg(fmt.Sprint("backup-", n), "vol-bench", at, at, current))
	}
	v.volumeCfg("backup-9", "", len(all))
	files := all
	if onlyFreed {
		files = map[string]bool{}
		for _, ck := range freed {
			files[ck] = true
		}
	}
	// 100k files in 65k directories: written by several workers, the
	// directories first, so the setup does not dwarf the benchmark.
	dirs := map[string]bool{}
	var blockFiles []string
	for ck := range files {
		dirs[filepath.Join(v.dir, "blocks", ck[0:2])] = true
		blockFiles = append(blockFiles, filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4], ck+".blk"))
	}
	var level1, level2 []string
	for d := range dirs {
		level1 = append(level1, d)
	}
	for ck := range files {
		dirs[filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4])] = true
	}
	for d := range dirs {
		if len(d) > len(level1[0]) {
			level2 = append(level2, d)
		}
	}
	parallel(b, level1, func(p string) error { return os.MkdirAll(p, 0o755) })
	parallel(b, level2, func(p string) error { return os.Mkdir(p, 0o755) })
	parallel(b, blockFiles, func(p string) error { return os.WriteFile(p, nil, 0o644) })
	paths := make([]string, len(freed))
	for i, ck := range freed {
		paths[i] = filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4], ck+".blk")
	}
	return v.dir, paths
}

// BenchmarkBlockCollection deletes backup-0 of a volume with 10 backups x
// 50k blocks and, in the same iteration, unlinks only the block files that
// deletion frees in a second tree that holds nothing else (the floor any
// collector pays). It reports both times, their ratio ("ratio", the
// issue's yardstick: targeted <= 1.2, full-listing <= 3) and bytes/op.
//
// The floor unlinks one file after another (os.Remove), while the
// collector unlinks with removeWorkers goroutines; so that the reader
// sees both honestly, the same iteration also unlinks the floor's files
// with removeWorkers goroutines (os.Remove each), and reports that time
// ("par-unlink-ms/op") and the collection's ratio to it ("ratio-par").
// In full-listing mode it also times a bare listing of the store's every
// bucket with as many goroutines (Linux: openat, getdents64 to the end,
// close; no name checked, nothing unlinked; "list-floor-ms/op") and the
// collection's ratio to that listing plus the parallel unlinks
// ("ratio-list+par"): how far the sweep is from what listing and
// unlinking alone cost on this machine.
//
//   - targeted: the steady state, after the Store has swept the volume
//     once: the deleted backup's blocks are the candidates.
//
//   - full-listing: a Store's first deletion in a volume (and Longhorn's
//     every deletion): every block file of the volume is listed.
//
// The two trees are written once per run (100k files: most of the
// benchmark's wall time) and restored between iterations, outside the
// timer: the deleted cfg, volume.cfg and the freed block files are put
// back, and dirty data is written back (sync) before either measurement.
//
//	go test -run='^$' -bench=BlockCollection -benchmem -count=5 ./backupdelete/fsstore/
func BenchmarkBlockCollection(b *testing.B) {
	tmp := b.TempDir()
	floor := filepath.Join(tmp, "floor")
	_, freed := benchVolume(b, floor, 10, 50000, true)
	mount := filepath.Join(tmp, "store")
	dir, stored := benchVolume(b, mount, 10, 50000, false)
	cfg0 := filepath.Join(dir, "backups", "backup_backup-0.cfg")
	saved := map[string][]byte{}
	for _, p := range []string{cfg0, filepath.Join(dir, "volume.cfg")} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		saved[p] = data
	}
	restore := func() {
		for p, data := range saved {
			if err := os.WriteFile(p, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		for _, ps := range [][]string{freed, stored} {
			for _, p := range ps {
				// A deletion removes the bucket directories it empties.
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		// Both measurements start with nothing to write back.
		syncFS()
	}
	// restoreFloor puts the floor's files back between its two
	// measurements.
	restoreFloor := func() {
		for _, p := range freed {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		syncFS()
	}
	for _, mode := range []string{"targeted", "full-listing"} {
		b.Run(mode, func(b *testing.B) {
			var collect, unlink, parUnlink, list time.Duration
			listed := false
			for range b.N {
				b.StopTimer()
				restore()
				s, err := New(Options{Dir: mount, Clock: fastClock{}})
				if err != nil {
					b.Fatal(err)
				}
				s.leaks.Set("vol-bench", mode == "targeted")

				t0 := time.Now()
				for _, p := range freed {
					if err := os.Remove(p); err != nil {
						b.Fatal(err)
					}
				}
				unlink += time.Since(t0)

				restoreFloor()
				t0 = time.Now()
				parallelN(b, removeWorkers, freed, os.Remove)
				parUnlink += time.Since(t0)

				if mode != "targeted" {
					var d time.Duration
					d, listed = listingFloor(b, dir, removeWorkers)
					list += d
				}

				b.StartTimer()
				t0 = time.Now()
				c, err := s.DeleteBackupReport(context.Background(), benchRef("vol-bench", "backup-0"))
				collect += time.Since(t0)
				b.StopTimer()
				if err != nil || c.Removed != len(freed) || c.Skipped != "" || c.Full != (mode != "targeted") {
					b.Fatalf("%+v %v, want %d removed", c, err, len(freed))
				}
				s.Close()
			}
			b.ReportMetric(float64(collect.Milliseconds())/float64(b.N), "collect-ms/op")
			b.ReportMetric(float64(unlink.Milliseconds())/float64(b.N), "unlink-only-ms/op")
			b.ReportMetric(float64(collect)/float64(unlink), "ratio")
			b.ReportMetric(float64(parUnlink.Milliseconds())/float64(b.N), "par-unlink-ms/op")
			b.ReportMetric(float64(collect)/float64(parUnlink), "ratio-par")
			if listed {
				b.ReportMetric(float64(list.Milliseconds())/float64(b.N), "list-floor-ms/op")
				b.ReportMetric(float64(collect)/float64(list+parUnlink), "ratio-list+par")
			}
		})
	}
}

// parallel runs f on every item with a few workers.
func parallel(b *testing.B, items []string, f func(string) error) {
	b.Helper()
	parallelN(b, 8, items, f)
}

// parallelN runs f on every item with n workers.
func parallelN(b *testing.B, n int, items []string, f func(string) error) {
	b.Helper()
	work := make(chan string)
	errs := make(chan error, n)
	for range n {
		go func() {
			var first error
			for p := range work {
				if err := f(p); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, p := range items {
		work <- p
	}
	close(work)
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

func benchRef(volume, name string) backupdelete.BackupRef {
	return backupdelete.BackupRef{Volume: volume, Name: name}
}
