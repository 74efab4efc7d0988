package fsstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkZZScan(b *testing.B) {
	cks := make([]string, 50000)
	for i := range cks {
		cks[i] = checksum(fmt.Sprint(i))
	}
	data := []byte(longhornBackupCfg("backup-1", "vol-a", "2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", cks))
	var cand [][]byte
	for i := range 5000 {
		cand = append(cand, []byte(cks[i*10]))
	}
	idx := newCandidateIndex(cand)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var buf [][]byte
		for range b.N {
			r, _ := scanBackupInto(data, buf)
			buf = r.checksums
		}
	})
	r, _ := scanBackup(data)
	b.Run("mark", func(b *testing.B) {
		for range b.N {
			idx.mark(r.checksums)
		}
	})
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), data, 0o644)
	root, _ := os.OpenRoot(dir)
	b.Run("read-fresh", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			readBoundedInto(root, "x", 1<<30, nil)
		}
	})
	b.Run("read-reuse", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var buf []byte
		for range b.N {
			buf, _, _ = readBoundedInto(root, "x", 1<<30, buf)
		}
	})
}
