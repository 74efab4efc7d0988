package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/internal/s3test"
)

// The backup part on an S3 target (versitygw), credentials from the
// variables of Longhorn's backup-target secret: the middle backup's own
// blocks go, the others stay, and the clean-up leaves only volume.cfg,
// as the posix directory shows.
func TestBackupPartOnS3(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey, "AWS_ENDPOINTS": srv.Endpoint}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := runBackupS3(ctx, &out, "s3://"+bucket+"@"+srv.Region+"/qs", func(k string) string { return env[k] }); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"S3 backup target s3://" + bucket,
		": 6 block objects\n",
		"  backup-b: Completed -> Deleting\n",
		"  backup-b: Deleting -> finalized (gone from the target)\n",
		"block GC: 6 block objects before, 4 after",
		"requests for the deletion: ",
		"cleaned up: backups and blocks of quickstart-",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), srv.SecretKey) {
		t.Fatal("the secret key appears in the output")
	}
	keys, err := srv.Keys(bucket, "qs/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasSuffix(keys[0], "/volume.cfg") {
		t.Fatalf("left in the bucket: %q, want only the volume.cfg", keys)
	}
}

// The flag reaches the backup part; the default is still the embedded
// directory.
func TestBackupTargetFlag(t *testing.T) {
	defer func() { backupTarget = "" }()
	var stdout, stderr bytes.Buffer
	// A target that is not s3:// fails the backup part, and so the run.
	if code := runCommand(context.Background(), []string{"-backup-target", "http://bucket/path"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "Asynchronous backup deletion") {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}
