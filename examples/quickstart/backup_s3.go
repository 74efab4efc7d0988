package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/backupdelete/s3store"
)

// backupTarget is -backup-target: an S3 backup target the backup part runs
// on instead of its embedded directory.
var backupTarget string

// runBackupPart is the backup part: on the embedded default (a directory
// under dir, runBackup) or, with -backup-target, on that S3 target.
func runBackupPart(ctx context.Context, w io.Writer, dir string) error {
	if backupTarget == "" {
		return runBackup(ctx, w, dir)
	}
	return runBackupS3(ctx, w, backupTarget, os.Getenv)
}

// runBackupS3 writes a throw-away volume with three backups into an S3
// backup target (Longhorn's URL, s3://bucket@region/path; credentials and
// endpoint from the variables of Longhorn's backup-target secret, read
// through getenv), deletes the middle one through the Driver as a
// controller would, shows which blocks went and how many requests it
// took, then deletes the other two. Only the volume's volume.cfg is left
// (the tool deletes backups, never volumes).
func runBackupS3(ctx context.Context, w io.Writer, target string, getenv func(string) string) error {
	store, err := s3store.New(s3store.OptionsFromEnv(target, getenv))
	if err != nil {
		return err
	}
	if err := store.Check(ctx); err != nil {
		return err
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	vol := "quickstart-" + hex.EncodeToString(suffix)
	fmt.Fprintf(w, "S3 backup target %s, throw-away volume %s (%s/)\n", store.Target(), vol, fsstore.VolumePath(vol))

	if err := store.WriteVolume(ctx, s3store.Volume{Name: vol, Size: 1 << 30, DataEngine: "v1"}); err != nil {
		return err
	}
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	backups := []struct {
		name   string
		blocks []string
	}{
		{"backup-a", []string{"shared", "a1", "a2"}},
		{"backup-b", []string{"shared", "b1", "b2"}},
		{"backup-c", []string{"shared", "a1", "c1"}},
	}
	for i, b := range backups {
		var maps []s3store.BlockMapping
		for j, content := range b.blocks {
			ck := s3store.BlockChecksum([]byte(content))
			if err := store.WriteBlock(ctx, vol, ck, []byte(content)); err != nil {
				return err
			}
			maps = append(maps, s3store.BlockMapping{Offset: int64(j) << 21, BlockChecksum: ck})
		}
		at := day.Add(time.Duration(i) * 24 * time.Hour).Format(time.RFC3339)
		if err := store.WriteBackup(ctx, s3store.Backup{Name: b.name, VolumeName: vol, SnapshotName: "snap-" + b.name,
			SnapshotCreatedAt: at, CreatedTime: at, Blocks: maps}); err != nil {
			return err
		}
	}
	before, err := store.BlockFiles(ctx, vol)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "backup-a (shared, a1, a2), backup-b (shared, b1, b2), backup-c (shared, a1, c1): %d block objects\n", before)

	// Delete backup-b asynchronously, as a controller would: Completed ->
	// Deleting (the deletion runs in the background under the volume's
	// deletion lock), then finalized once it is gone.
	store.ResetStats()
	done := make(chan error, 1)
	drv, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		return err
	}
	defer drv.Close()
	ref := backupdelete.BackupRef{Volume: vol, Name: "backup-b"}
	state := backupdelete.StateCompleted
	for {
		res, err := drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: state})
		if err != nil {
			return err
		}
		if res.Finalize {
			fmt.Fprintf(w, "  backup-b: %s -> finalized (gone from the target)\n", state)
			break
		}
		if res.State != state {
			fmt.Fprintf(w, "  backup-b: %s -> %s\n", state, res.State)
			state = res.State
		}
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("deleting backup-b: %w", err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	after, err := store.BlockFiles(ctx, vol)
	if err != nil {
		return err
	}
	st := store.Stats()
	fmt.Fprintf(w, "block GC: %d block objects before, %d after (b1 and b2 went; shared, a1, a2, c1 are still referenced)\n", before, after)
	fmt.Fprintf(w, "requests for the deletion: %d (%s)\n", st.Total(), st)

	for _, name := range []string{"backup-a", "backup-c"} {
		if err := store.DeleteBackup(ctx, backupdelete.BackupRef{Volume: vol, Name: name}); err != nil {
			return fmt.Errorf("cleaning up %s: %w", name, err)
		}
	}
	left, err := store.BlockFiles(ctx, vol)
	if err != nil {
		return err
	}
	if left != 0 {
		return errors.New("cleaning up: block objects are left")
	}
	fmt.Fprintf(w, "cleaned up: backups and blocks of %s deleted; its volume.cfg is left\n", vol)
	return nil
}
