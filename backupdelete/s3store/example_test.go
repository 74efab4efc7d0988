package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/backupdelete/s3store"
)

// A Store from the variables of Longhorn's backup-target secret, checked
// once, then one backup deleted with the request counts.
func ExampleNew() {
	ctx := context.Background()
	cfg := s3store.OptionsFromEnv("s3://backups@us-east-1/longhorn", os.Getenv)
	store, err := s3store.New(cfg)
	if err != nil {
		fmt.Println(err) // a *ConfigError: nothing was sent
		return
	}
	if err := store.Check(ctx); err != nil {
		switch {
		case errors.Is(err, s3store.ErrAccessDenied):
			fmt.Println("check the credentials:", err)
		case errors.Is(err, s3store.ErrNoSuchBucket):
			fmt.Println("check the target URL:", err)
		default:
			fmt.Println(err)
		}
		return
	}
	c, err := store.DeleteBackupReport(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "backup-0123456789abcdef"})
	fmt.Println(c.Removed, "blocks removed", err)
	fmt.Println(store.Stats())
}

// The target URL as Longhorn parses it.
func ExampleParseURL() {
	t, err := s3store.ParseURL("s3://backups@us-east-1/longhorn/")
	fmt.Println(t.Bucket, t.Region, t.Prefix, err)
	_, err = s3store.ParseURL("s3://backups@us-east-1")
	fmt.Println(err)
	// Output:
	// backups us-east-1 longhorn <nil>
	// s3store: invalid URL: must be either s3://bucket@region/path/, or s3://bucket/path
}

// Both stores offer a tool the same methods (fsstore.LonghornStore), so a
// program handles a mount and a bucket with one code path.
var _ fsstore.LonghornStore = (*s3store.Store)(nil)
