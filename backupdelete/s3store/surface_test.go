package s3store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// TestErrorClasses: ErrMalformed and ErrRedirect are sentinels of
// caretaker's shared classes, so errors.Is matches them with
// backupdelete.ErrCorrupt (and every other package's malformed sentinel)
// and with the redirect class; every sentinel's text starts with
// "s3store: ", and a RequestError says it once.
func TestErrorClasses(t *testing.T) {
	if !errors.Is(ErrMalformed, backupdelete.ErrCorrupt) || !errors.Is(fmt.Errorf("cfg: %w", backupdelete.ErrCorrupt), ErrMalformed) ||
		!errors.Is(ErrMalformed, errclass.ErrMalformed) {
		t.Error("ErrMalformed is not of the malformed-input class")
	}
	if !errors.Is(ErrRedirect, errclass.ErrRedirect) || errors.Is(ErrRedirect, errclass.ErrMalformed) {
		t.Error("ErrRedirect is not (only) of the redirect class")
	}
	for _, e := range []error{ErrAccessDenied, ErrNoSuchBucket, ErrRedirect, ErrUnreachable, ErrUnavailable,
		ErrNotImplemented, ErrMalformed, ErrRequest, ErrConfig} {
		if !strings.HasPrefix(e.Error(), "s3store: ") {
			t.Errorf("%q does not start with s3store: ", e)
		}
	}
	re := &RequestError{Op: "GetObject", Key: "k", Status: 302, Class: ErrRedirect}
	if got := re.Error(); got != "s3store: GetObject k: redirect refused (HTTP 302)" || !errors.Is(re, errclass.ErrRedirect) {
		t.Errorf("%q", got)
	}
}

// TestOneConstructorShape: New(Options) (*Store, error), Options holding
// the connection and the tuning alike; errors of exported methods start
// with "s3store: ", an invalid reference's included.
func TestOneConstructorShape(t *testing.T) {
	var _ func(Options) (*Store, error) = New
	s, err := New(Options{URL: "s3://b@us-east-1/p", LockWait: 1, ListPageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.ListPageSize != 10 || s.opts.LockWait != 1 || s.opts.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("options %+v", s.opts)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Lock":          func() error { _, err := s.Lock(ctx, "a/b", LockBackup); return err }(),
		"CollectBlocks": func() error { _, err := s.CollectBlocks(ctx, "../x"); return err }(),
		"DeleteBackup":  s.DeleteBackup(ctx, backupdelete.BackupRef{Volume: "vol-a", Name: "x"}),
		"WriteBlock":    s.WriteBlock(ctx, "vol-a", "XYZ", nil),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "s3store: ") || !errors.Is(err, backupdelete.ErrInvalidRef) {
			t.Errorf("%s: %v, want ErrInvalidRef, starting with s3store: ", name, err)
		}
	}
	// The Store keeps no credential in its options.
	s, err = New(Options{URL: "s3://b@us-east-1/p", AccessKeyID: "AKIDVISIBLE", SecretAccessKey: "the-secret-key"})
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.AccessKeyID != "" || s.opts.SecretAccessKey != "" || s.opts.SessionToken != "" {
		t.Fatal("the Store's options hold a credential")
	}
}
