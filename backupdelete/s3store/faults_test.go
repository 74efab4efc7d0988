package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

// manyBlocks writes vol-a with backup-1 referencing n blocks of its own
// and backup-2 referencing one block shared with it. The block objects
// are written straight into the posix backend's directory (the object k
// of bucket b is the file Dir/b/k), which is far quicker than n
// PutObjects and the same objects to the server.
func manyBlocks(t *testing.T, e *env, n int) []string {
	t.Helper()
	ctx := ctxT(t)
	must(t, e.store.WriteVolume(ctx, Volume{Name: "vol-a", LastBackupName: "backup-2", BlockCount: int64(n + 1)}))
	shared := checksum("shared")
	cks := make([]string, n)
	blocks := []BlockMapping{{Offset: 0, BlockChecksum: shared}}
	for i := range cks {
		cks[i] = checksum(fmt.Sprint("own", i))
		blocks = append(blocks, BlockMapping{Offset: int64(i+1) << 21, BlockChecksum: cks[i]})
	}
	at := "2026-11-01T00:00:00Z"
	must(t, e.store.WriteBackup(ctx, Backup{Name: "backup-1", VolumeName: "vol-a", SnapshotCreatedAt: at, CreatedTime: at, Blocks: blocks}))
	must(t, e.store.WriteBackup(ctx, Backup{Name: "backup-2", VolumeName: "vol-a", SnapshotCreatedAt: at, CreatedTime: at,
		Blocks: []BlockMapping{{Offset: 0, BlockChecksum: shared}}}))
	for _, ck := range append([]string{shared}, cks...) {
		p := e.srv.ObjectPath(e.bucket, "lh/target/"+volumePath("vol-a")+"/blocks/"+ck[0:2]+"/"+ck[2:4]+"/"+ck+".blk")
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(ck), 0o644))
	}
	return cks
}

// TestDeleteObjectsBatches: 2,500 unreferenced candidates go in three
// DeleteObjects requests (1000, 1000, 500), and the shared block stays.
func TestDeleteObjectsBatches(t *testing.T) {
	e := newEnv(t, true, Options{})
	manyBlocks(t, e, 2500)
	e.proxy.Reset()
	c, err := e.store.DeleteBackupReport(ctxT(t), ref("backup-1"))
	must(t, err)
	if c.Removed != 2500 {
		t.Fatalf("%+v", c)
	}
	if n := e.proxy.Count("DeleteObjects"); n != 3 {
		t.Fatalf("%d DeleteObjects requests, want 3 (%v)", n, e.proxy.Counts())
	}
	// 12 + n + ceil(k/1000) (see the package documentation).
	if total := e.proxy.Total(); total != 12+1+3 {
		t.Fatalf("%d requests, want 16 (%v)", total, e.proxy.Counts())
	}
	if got := e.blocks(t, "vol-a"); len(got) != 1 || !got[checksum("shared")] {
		t.Fatalf("%d blocks left, want the shared one", len(got))
	}
	t.Logf("2,500 blocks of 1 of 2 backups: %d requests %v", e.proxy.Total(), e.proxy.Counts())
}

// TestMultiDeleteNotImplementedFallback: a server that answers
// DeleteObjects with NotImplemented (Google Cloud Storage's S3 API) gets
// single DeleteObjects instead, and the Store remembers: its next deletion
// does not try DeleteObjects again.
func TestMultiDeleteNotImplementedFallback(t *testing.T) {
	e := newEnv(t, true, Options{})
	manyBlocks(t, e, 30)
	e.proxy.SetHook(func(op string, _ *http.Request) *s3test.Fault {
		if op == "DeleteObjects" {
			return s3test.NotImplemented()
		}
		return nil
	})
	e.proxy.Reset()
	ctx := ctxT(t)
	c, err := e.store.DeleteBackupReport(ctx, ref("backup-1"))
	must(t, err)
	if c.Removed != 30 || !e.store.Stats().MultiDeleteUnsupported {
		t.Fatalf("%+v %+v", c, e.store.Stats())
	}
	// 30 blocks, the cfg, and our lock object.
	if n, m := e.proxy.Count("DeleteObjects"), e.proxy.Count("DeleteObject"); n != 1 || m != 32 {
		t.Fatalf("DeleteObjects %d, DeleteObject %d; want 1 and 32", n, m)
	}
	if got := e.blocks(t, "vol-a"); len(got) != 1 {
		t.Fatalf("%d blocks left", len(got))
	}
	e.proxy.Reset()
	must(t, e.store.DeleteBackup(ctx, ref("backup-2")))
	if n := e.proxy.Count("DeleteObjects"); n != 0 {
		t.Fatalf("DeleteObjects tried again after NotImplemented")
	}
	if got := e.blocks(t, "vol-a"); len(got) != 0 {
		t.Fatalf("%d blocks left", len(got))
	}
}

// TestRetryOnSlowDownAndInternalError: 503 SlowDown and 500s are retried
// with backoff and the deletion completes.
func TestRetryOnSlowDownAndInternalError(t *testing.T) {
	e := newEnv(t, true, Options{})
	threeBackups(t, e.store)
	var gets, dels atomic.Int32
	e.proxy.SetHook(func(op string, _ *http.Request) *s3test.Fault {
		switch {
		case op == "GetObject" && gets.Add(1) <= 2:
			return s3test.SlowDown()
		case op == "DeleteObjects" && dels.Add(1) <= 1:
			return s3test.InternalError()
		}
		return nil
	})
	must(t, e.store.DeleteBackup(ctxT(t), ref("backup-1")))
	if st := e.store.Stats(); st.Retries != 3 {
		t.Fatalf("%d retries, want 3 (%s)", st.Retries, st)
	}
	if got := e.blocks(t, "vol-a"); got[ckA] || len(got) != 3 {
		t.Fatalf("blocks %v", got)
	}
}

// TestSlowDownStormFailsCleanly: a server that answers every GetObject
// with 503 fails the deletion with ErrUnavailable after MaxAttempts,
// having deleted nothing.
func TestSlowDownStormFailsCleanly(t *testing.T) {
	e := newEnv(t, true, Options{MaxAttempts: 3})
	threeBackups(t, e.store)
	e.proxy.SetHook(func(op string, _ *http.Request) *s3test.Fault {
		if op == "GetObject" {
			return s3test.SlowDown()
		}
		return nil
	})
	err := e.store.DeleteBackup(ctxT(t), ref("backup-1"))
	var re *RequestError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &re) || re.Attempts != 3 || re.Code != "SlowDown" {
		t.Fatalf("%v, want ErrUnavailable after 3 attempts", err)
	}
	e.proxy.SetHook(nil)
	wantUntouched(t, e)
}

// wantUntouched: threeBackups' objects are all there.
func wantUntouched(t *testing.T, e *env) {
	t.Helper()
	ctx := ctxT(t)
	for _, n := range []string{"backup-1", "backup-2", "backup-3"} {
		if ok, err := e.store.BackupExists(ctx, ref(n)); err != nil || !ok {
			t.Fatalf("%s: exists %v, %v", n, ok, err)
		}
	}
	if got := e.blocks(t, "vol-a"); len(got) != 4 {
		t.Fatalf("blocks %v", got)
	}
}

// TestNoRequestAfterCancel: once the caller's context is cancelled (here
// while the remaining backups are being read), the deletion sends no
// further request but one: the DeleteObject of its own lock object (see
// Lock.Release), so that backups are not held back for 150 s.
func TestNoRequestAfterCancel(t *testing.T) {
	// One read at a time, so that no request is in flight when the
	// context ends (a request sent before is not the point).
	e := newEnv(t, true, Options{DeleteConcurrency: 1})
	threeBackups(t, e.store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var cancelled bool
	var after []string
	e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if cancelled {
			after = append(after, op+" "+r.URL.Path)
		}
		if op == "GetObject" && strings.HasSuffix(r.URL.Path, "backup_backup-2.cfg") && !cancelled {
			cancelled = true
			cancel()
		}
		return nil
	})
	err := e.store.DeleteBackup(ctx, ref("backup-1"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range after {
		if !strings.HasPrefix(a, "DeleteObject ") || !strings.Contains(a, "/locks/") {
			t.Errorf("request after cancellation: %s", a)
		}
	}
	if got := e.blocks(t, "vol-a"); len(got) != 4 {
		t.Fatalf("blocks deleted after cancellation: %v", got)
	}
}

// TestHostileServers: each misconfiguration or hostile answer is a
// typed error, deletes nothing, and no error text holds a credential.
func TestHostileServers(t *testing.T) {
	var errs []error
	check := func(t *testing.T, err error, class error) {
		t.Helper()
		errs = append(errs, err)
		if !errors.Is(err, class) {
			t.Fatalf("%v, want %v", err, class)
		}
	}
	t.Run("wrong endpoint", func(t *testing.T) {
		e := newEnv(t, false, Options{MaxAttempts: 2})
		cfg := e.cfg
		cfg.Endpoint = "http://127.0.0.1:1"
		s, err := New(cfg)
		must(t, err)
		check(t, s.Check(ctxT(t)), ErrUnreachable)
		check(t, s.DeleteBackup(ctxT(t), ref("backup-1")), ErrUnreachable)
	})
	t.Run("wrong credentials", func(t *testing.T) {
		e := newEnv(t, false, Options{})
		threeBackups(t, e.store)
		cfg := e.cfg
		cfg.SecretAccessKey = "wrong-secret-1234567890"
		s, err := New(cfg)
		must(t, err)
		check(t, s.Check(ctxT(t)), ErrAccessDenied)
		err = s.DeleteBackup(ctxT(t), ref("backup-1"))
		check(t, err, ErrAccessDenied)
		if strings.Contains(err.Error(), cfg.SecretAccessKey) {
			t.Fatalf("the secret is in %q", err)
		}
		wantUntouched(t, e)
	})
	t.Run("missing bucket", func(t *testing.T) {
		e := newEnv(t, false, Options{})
		cfg := e.cfg
		cfg.URL = "s3://no-such-bucket-ct@us-east-1/lh/target/"
		s, err := New(cfg)
		must(t, err)
		check(t, s.Check(ctxT(t)), ErrNoSuchBucket)
		_, err = s.BackupExists(ctxT(t), ref("backup-1"))
		check(t, err, ErrNoSuchBucket)
		check(t, s.DeleteBackup(ctxT(t), ref("backup-1")), ErrNoSuchBucket)
	})
	hostile := func(t *testing.T, opts Options, fault func(op string, r *http.Request) *s3test.Fault, class error) *env {
		e := newEnv(t, true, opts)
		threeBackups(t, e.store)
		e.proxy.SetHook(fault)
		check(t, e.store.DeleteBackup(ctxT(t), ref("backup-1")), class)
		e.proxy.SetHook(nil)
		wantUntouched(t, e)
		return e
	}
	t.Run("403", func(t *testing.T) {
		hostile(t, Options{}, func(string, *http.Request) *s3test.Fault { return s3test.AccessDenied() }, ErrAccessDenied)
	})
	t.Run("redirect to another host", func(t *testing.T) {
		var hits atomic.Int32
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer other.Close()
		hostile(t, Options{}, func(string, *http.Request) *s3test.Fault { return &s3test.Fault{Redirect: other.URL} }, ErrRedirect)
		if hits.Load() != 0 {
			t.Fatalf("the redirect was followed (%d requests to the other host)", hits.Load())
		}
	})
	t.Run("oversized listing", func(t *testing.T) {
		body := []byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>` + strings.Repeat("<Contents><Key>x</Key></Contents>", 4000) + `</ListBucketResult>`)
		hostile(t, Options{MaxResponseBytes: 64 << 10}, func(op string, _ *http.Request) *s3test.Fault {
			if op == "ListObjectsV2" {
				return &s3test.Fault{Body: body}
			}
			return nil
		}, ErrTooLarge)
	})
	t.Run("malformed listing", func(t *testing.T) {
		hostile(t, Options{}, func(op string, _ *http.Request) *s3test.Fault {
			if op == "ListObjectsV2" {
				return &s3test.Fault{Body: []byte(`<ListBucketResult><Contents><Key>../../elsewhere/x.lck</Key></Contents></ListBucketResult>`)}
			}
			return nil
		}, backupdelete.ErrCorrupt)
	})
	t.Run("garbage listing", func(t *testing.T) {
		hostile(t, Options{}, func(op string, _ *http.Request) *s3test.Fault {
			if op == "ListObjectsV2" {
				return &s3test.Fault{Body: []byte(`{"this": "is not S3"`)}
			}
			return nil
		}, ErrMalformed)
	})
	t.Run("pagination that does not advance", func(t *testing.T) {
		hostile(t, Options{}, func(op string, r *http.Request) *s3test.Fault {
			if op == "ListObjectsV2" {
				return &s3test.Fault{Body: []byte(`<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>same</NextContinuationToken></ListBucketResult>`)}
			}
			return nil
		}, ErrMalformed)
	})
	t.Run("truncated cfg of the deleted backup", func(t *testing.T) {
		hostile(t, Options{MaxAttempts: 2}, func(op string, r *http.Request) *s3test.Fault {
			if op == "GetObject" && strings.HasSuffix(r.URL.Path, "backup_backup-1.cfg") {
				return &s3test.Fault{Truncate: true}
			}
			return nil
		}, ErrUnavailable)
	})
	t.Run("truncated cfg of a remaining backup", func(t *testing.T) {
		e := newEnv(t, true, Options{MaxAttempts: 2})
		threeBackups(t, e.store)
		e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
			if op == "GetObject" && strings.HasSuffix(r.URL.Path, "backup_backup-2.cfg") {
				return &s3test.Fault{Truncate: true}
			}
			return nil
		})
		c, err := e.store.DeleteBackupReport(ctxT(t), ref("backup-1"))
		must(t, err)
		if c.Removed != 0 || !strings.Contains(c.Skipped, "backup-2 unreadable") {
			t.Fatalf("%+v", c)
		}
		if got := e.blocks(t, "vol-a"); len(got) != 4 {
			t.Fatalf("blocks deleted with a remaining cfg unreadable: %v", got)
		}
	})
	srv := s3test.Shared(t)
	for _, err := range errs {
		for _, sec := range []string{srv.SecretKey, srv.AccessKey, "wrong-secret-1234567890"} {
			if err != nil && strings.Contains(err.Error(), sec) {
				t.Errorf("a credential in the error %q", err)
			}
		}
	}
}

// TestSlowListingTimesOut: a listing slower than RequestTimeout is cut off
// and retried, then fails with ErrUnavailable; nothing is deleted.
func TestSlowListingTimesOut(t *testing.T) {
	e := newEnv(t, true, Options{RequestTimeout: 150 * time.Millisecond, MaxAttempts: 2})
	threeBackups(t, e.store)
	e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		if op == "ListObjectsV2" && strings.Contains(r.URL.RawQuery, "backups") {
			return &s3test.Fault{Delay: 5 * time.Second}
		}
		return nil
	})
	start := time.Now()
	err := e.store.DeleteBackup(ctxT(t), ref("backup-1"))
	var re *RequestError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &re) || re.Attempts != 2 || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("%v, want a timeout after 2 attempts", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	e.proxy.SetHook(nil)
	// The cfg was deleted before the listing; the blocks all stay.
	if got := e.blocks(t, "vol-a"); len(got) != 4 {
		t.Fatalf("blocks %v", got)
	}
}

// TestNoHangPastContext: with the server holding every request, a
// deletion returns at its context's deadline, plus at most the bounded
// deletion of its lock object (here RequestTimeout, 500 ms), and deletes
// nothing.
func TestNoHangPastContext(t *testing.T) {
	e := newEnv(t, true, Options{RequestTimeout: 500 * time.Millisecond})
	threeBackups(t, e.store)
	e.proxy.SetHook(func(op string, r *http.Request) *s3test.Fault {
		if strings.Contains(r.URL.Path, "/locks/") && op != "DeleteObject" || op == "ListObjectsV2" {
			return nil // the lock is taken; everything after it hangs
		}
		return &s3test.Fault{Delay: 3 * time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.store.DeleteBackup(ctx, ref("backup-1"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("returned after %v", d)
	}
	e.proxy.SetHook(nil)
	wantUntouched(t, e)
	if s := e.store.Stats().String(); strings.Contains(s, e.srv.SecretKey) || strings.Contains(s, e.srv.AccessKey) {
		t.Fatalf("a credential in Stats: %s", s)
	}
}
