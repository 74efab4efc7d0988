package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/s3store"
	"github.com/caretaker-storage/caretaker/examples/internal/cli"
)

// runS3 is run on an S3 backup target: target is Longhorn's backup-target
// URL (s3://bucket@region/path) and getenv reads the variables of
// Longhorn's backup-target secret (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_ENDPOINTS, AWS_CERT, VIRTUAL_HOSTED_STYLE,
// the proxy variables). The connection is tested first, as Longhorn's
// driver does when it loads: a wrong endpoint, wrong credentials or a
// missing bucket is an error before anything else is asked.
func runS3(ctx context.Context, w io.Writer, target string, getenv func(string) string, volume, backup string, yes bool, lockWait time.Duration) error {
	cfg := s3store.OptionsFromEnv(target, getenv)
	cfg.LockWait = lockWait
	store, err := s3store.New(cfg)
	if errors.Is(err, s3store.ErrConfig) {
		return cli.Usagef("-target %s: %v", target, err) // a malformed URL or setting is bad usage
	}
	if err != nil {
		return err
	}
	if err := store.Check(ctx); err != nil {
		return err
	}
	return runOn(ctx, w, store, volume, backup, yes)
}
