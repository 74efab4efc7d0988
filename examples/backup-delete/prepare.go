package main

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
)

// prepare creates, in dir, a throw-away backupstore in Longhorn's layout
// to try the tool on: volume pvc-web with three backups that share some
// blocks. It refuses a dir that exists and is not empty.
func prepare(ctx context.Context, w io.Writer, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("-prepare %s: the directory is not empty; give a new one", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	defer s.Close()
	if err := s.WriteVolume(ctx, fsstore.Volume{Name: "pvc-web", Size: 1 << 30}); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	// Each backup is the blocks it maps; a block shared with another
	// backup survives the deletion of one of them.
	for i, b := range []struct {
		name   string
		blocks []string
	}{
		{"backup-a1b2c3d4e5f60001", []string{"boot", "data-1"}},
		{"backup-a1b2c3d4e5f60002", []string{"boot", "data-2", "data-3"}},
		{"backup-a1b2c3d4e5f60003", []string{"boot", "data-3", "data-4"}},
	} {
		var maps []fsstore.BlockMapping
		for j, c := range b.blocks {
			sum := sha512.Sum512([]byte(c))
			checksum := hex.EncodeToString(sum[:])[:64]
			if err := s.WriteBlock(ctx, "pvc-web", checksum, []byte(c)); err != nil {
				return fmt.Errorf("-prepare: %w", err)
			}
			maps = append(maps, fsstore.BlockMapping{Offset: int64(j) << 21, BlockChecksum: checksum})
		}
		ts := time.Date(2026, 11, 1+i, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		if err := s.WriteBackup(ctx, fsstore.Backup{Name: b.name, VolumeName: "pvc-web", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}); err != nil {
			return fmt.Errorf("-prepare: %w", err)
		}
	}
	fmt.Fprintf(w, "prepared a backupstore with volume pvc-web and 3 backups in %s; try:\n", dir)
	fmt.Fprintf(w, "  backup-delete -dir %s\n", dir)
	return nil
}
