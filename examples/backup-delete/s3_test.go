package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/s3store"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// seedS3 writes seed's backupstore (pvc-1: backup-1 with blocks x, y;
// backup-2 with x, z, w) into a new bucket of srv under the path
// "longhorn", and returns the target URL.
func seedS3(t *testing.T, srv *s3test.Server) (target, bucket string) {
	t.Helper()
	bucket = srv.NewBucket(t)
	target = "s3://" + bucket + "@" + srv.Region + "/longhorn"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := s3store.New(s3store.Options{URL: target, Endpoint: srv.Endpoint, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteVolume(ctx, s3store.Volume{Name: "pvc-1", Size: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	for i, b := range []struct {
		name   string
		blocks []string
	}{{"backup-1", []string{"x", "y"}}, {"backup-2", []string{"x", "z", "w"}}} {
		var maps []s3store.BlockMapping
		for j, c := range b.blocks {
			if err := s.WriteBlock(ctx, "pvc-1", ck(c), []byte(c)); err != nil {
				t.Fatal(err)
			}
			maps = append(maps, s3store.BlockMapping{Offset: int64(j) << 21, BlockChecksum: ck(c)})
		}
		ts := time.Date(2026, 11, 1+i, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		if err := s.WriteBackup(ctx, s3store.Backup{Name: b.name, VolumeName: "pvc-1", SnapshotCreatedAt: ts, CreatedTime: ts, Blocks: maps}); err != nil {
			t.Fatal(err)
		}
	}
	return target, bucket
}

// The tool on an S3 target (versitygw), credentials from the variables of
// Longhorn's backup-target secret: a dry run, then the deletion, checked
// in the server's directory.
func TestS3TargetDryRunThenDelete(t *testing.T) {
	srv := s3test.Shared(t)
	target, bucket := seedS3(t, srv)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_ENDPOINTS", srv.Endpoint)
	ctx := context.Background()
	blocks := func() int {
		keys, err := srv.Keys(bucket, "longhorn/backupstore/")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if strings.HasSuffix(k, ".blk") {
				n++
			}
		}
		return n
	}

	var stdout, stderr bytes.Buffer
	code := runCommand(ctx, []string{"-target", target, "-volume", "pvc-1", "-backup", "backup-2", "-lock-wait", "1s"}, &stdout, &stderr)
	if code != 3 {
		t.Fatalf("dry run exit %d, want 3\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"1 volume\n", "pvc-1: 2 backups, 4 block files", "would free 2 block files", "pass -yes"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout.String())
		}
	}
	if n := blocks(); n != 4 {
		t.Fatalf("the dry run left %d block objects, want 4", n)
	}

	stdout.Reset()
	stderr.Reset()
	code = runCommand(ctx, []string{"-target", target, "-volume", "pvc-1", "-backup", "backup-2", "-yes"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("deletion exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"Completed -> Deleting", " deleted\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if n := blocks(); n != 2 {
		t.Fatalf("%d block objects left, want 2 (x and y of backup-1)", n)
	}
}

// Wrong credentials: a typed error before anything is listed, exit 1,
// and the secret in no output.
func TestS3TargetWrongCredentials(t *testing.T) {
	srv := s3test.Shared(t)
	target, _ := seedS3(t, srv)
	const secret = "not-the-secret-0123456789"
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINTS": srv.Endpoint}
	var out bytes.Buffer
	err := runS3(context.Background(), &out, target, func(k string) string { return env[k] }, "", "", false, time.Second)
	if !errors.Is(err, s3store.ErrAccessDenied) {
		t.Fatalf("err = %v, want ErrAccessDenied", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(out.String(), secret) {
		t.Fatalf("the secret appears in the error or output: %v\n%s", err, out.String())
	}

	var stdout, stderr bytes.Buffer
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_ENDPOINTS", srv.Endpoint)
	if code := runCommand(context.Background(), []string{"-target", target}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), secret) {
		t.Fatalf("the secret appears on stderr: %s", stderr.String())
	}
}

func TestS3TargetFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runCommand(context.Background(), []string{"-dir", "/x", "-target", "s3://b@r/p"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "give one") {
		t.Fatalf("-dir with -target: exit %d, stderr %s", code, stderr.String())
	}
	stderr.Reset()
	if code := runCommand(context.Background(), []string{"-target", "http://b/p"}, &stdout, &stderr); code != 2 {
		t.Fatalf("a target that is not s3://: exit %d, stderr %s", code, stderr.String())
	}
}

// TestS3Prepare: -prepare writes the walkthrough's volume onto an S3
// target, the tool then lists and deletes on it as on a directory, and a
// second -prepare on the same path is refused, changing nothing.
func TestS3Prepare(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	target := "s3://" + bucket + "@" + srv.Region + "/walkthrough"
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_ENDPOINTS", srv.Endpoint)
	var stdout, stderr bytes.Buffer
	if code := runCommand(context.Background(), []string{"-prepare", target}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "backup-delete -target "+target) {
		t.Fatalf("-prepare: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := runCommand(context.Background(), []string{"-target", target}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "pvc-web: 3 backups, 5 block files") {
		t.Fatalf("listing the prepared target: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := runCommand(context.Background(), []string{"-target", target, "-volume", "pvc-web", "-backup", "backup-a1b2c3d4e5f60002", "-yes"}, &stdout, &stderr); code != 0 {
		t.Fatalf("deleting on the prepared target: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := runCommand(context.Background(), []string{"-prepare", target}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "already has volume pvc-web") {
		t.Fatalf("second -prepare: exit %d\n%s", code, stderr.String())
	}
	if code := runCommand(context.Background(), []string{"-prepare", "s3://"}, &stdout, &stderr); code != 2 {
		t.Fatalf("-prepare of a malformed target: exit %d", code)
	}
}
