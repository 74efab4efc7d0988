package main

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/backupdelete/s3store"
	"github.com/caretaker-storage/caretaker/examples/internal/cli"
)

// prepare creates a throw-away backupstore to try the tool on: volume
// pvc-web with three backups that share some blocks. where is a new or
// empty directory, or an S3 backup target (s3://bucket@region/path, with
// Longhorn's backup-target secret variables in the environment) that has
// no volume pvc-web yet.
func prepare(ctx context.Context, w io.Writer, where string, getenv func(string) string) error {
	if strings.HasPrefix(where, "s3://") {
		return prepareS3(ctx, w, where, getenv)
	}
	dir := where
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("-prepare %s: the directory is not empty; give a new one", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	s, err := fsstore.New(fsstore.Options{Dir: dir})
	if err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	defer s.Close()
	if err := writeDemo(ctx, s); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	fmt.Fprintf(w, "prepared a backupstore with volume %s and 3 backups in %s; try:\n", demoVolume, dir)
	fmt.Fprintf(w, "  backup-delete -dir %s\n", dir)
	return nil
}

// prepareS3 writes the demo volume into an S3 backup target.
func prepareS3(ctx context.Context, w io.Writer, target string, getenv func(string) string) error {
	store, err := s3store.New(s3store.OptionsFromEnv(target, getenv))
	if errors.Is(err, s3store.ErrConfig) {
		return cli.Usagef("-prepare %s: %w", target, err)
	}
	if err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	if err := store.Check(ctx); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	vols, err := store.Volumes(ctx)
	if err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	if slices.Contains(vols, demoVolume) {
		return fmt.Errorf("-prepare %s: the target already has volume %s; give another path", target, demoVolume)
	}
	if err := writeDemo(ctx, store); err != nil {
		return fmt.Errorf("-prepare: %w", err)
	}
	fmt.Fprintf(w, "prepared volume %s with 3 backups on %s; try:\n", demoVolume, target)
	fmt.Fprintf(w, "  backup-delete -target %s\n", target)
	return nil
}

// demoVolume is the volume -prepare writes.
const demoVolume = "pvc-web"

// demoWriter is what both backup stores write with.
type demoWriter interface {
	WriteVolume(ctx context.Context, v fsstore.Volume) error
	WriteBlock(ctx context.Context, volume, checksum string, data []byte) error
	WriteBackup(ctx context.Context, b fsstore.Backup) error
}

// writeDemo writes the demo volume: each backup is the blocks it maps; a
// block shared with another backup survives the deletion of one of them.
func writeDemo(ctx context.Context, s demoWriter) error {
	if err := s.WriteVolume(ctx, fsstore.Volume{Name: demoVolume, Size: 1 << 30}); err != nil {
		return err
	}
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
			if err := s.WriteBlock(ctx, demoVolume, checksum, []byte(c)); err != nil {
				return err
			}
			maps = append(maps, fsstore.BlockMapping{Offset: int64(j) << 21, BlockChecksum: checksum})
		}
		ts := time.Date(2026, 11, 1+i, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		if err := s.WriteBackup(ctx, fsstore.Backup{Name: b.name, VolumeName: demoVolume, SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}); err != nil {
			return err
		}
	}
	return nil
}
