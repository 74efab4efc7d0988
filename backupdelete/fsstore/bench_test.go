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
	for ck := range files {
		dir := filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ck+".blk"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	paths := make([]string, len(freed))
	for i, ck := range freed {
		paths[i] = filepath.Join(v.dir, "blocks", ck[0:2], ck[2:4], ck+".blk")
	}
	return v.dir, paths
}

// BenchmarkBlockCollection deletes backup-0 of a volume with 10 backups x
// 50k blocks and, in the same iteration on a copy, unlinks only the block
// files that deletion frees (the floor any collector pays). It reports
// both times and their ratio; the target is ratio <= 2.
//
//   - targeted: the steady state, after the Store has swept the volume
//     once: the deleted backup's blocks are the candidates.
//
//   - full-listing: a Store's first deletion in a volume (and Longhorn's
//     every deletion): every block file of the volume is listed.
//
//     go test -run='^$' -bench=BlockCollection -benchtime=1x -benchmem -timeout=30m ./backupdelete/fsstore/
func BenchmarkBlockCollection(b *testing.B) {
	for _, mode := range []string{"targeted", "full-listing"} {
		b.Run(mode, func(b *testing.B) {
			var collect, unlink time.Duration
			for range b.N {
				b.StopTimer()
				tmp := b.TempDir()
				_, freed := benchVolume(b, filepath.Join(tmp, "floor"), 10, 50000, true)
				mount := filepath.Join(tmp, "store")
				benchVolume(b, mount, 10, 50000, false)
				s, err := Open(mount, Options{Clock: fastClock{}})
				if err != nil {
					b.Fatal(err)
				}
				s.swept["vol-bench"] = mode == "targeted"

				t0 := time.Now()
				for _, p := range freed {
					if err := os.Remove(p); err != nil {
						b.Fatal(err)
					}
				}
				unlink += time.Since(t0)

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
		})
	}
}

func benchRef(volume, name string) backupdelete.BackupRef {
	return backupdelete.BackupRef{Volume: volume, Name: name}
}
