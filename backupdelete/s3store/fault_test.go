package s3store

import (
	"context"
	"errors"
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
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

// The faults a real S3 deployment throws at a deletion, on versitygw
// behind the fault-injecting proxy: whatever happens, every block a
// remaining backup references is still in the bucket (checked by reading
// the posix backend's directory, not through S3), and no call outlives
// its context.

// faultVictim is the backup the fault tests delete: one from the middle.
const faultVictim = 3

// faultFixture is a small volume (6 backups of 50 blocks, half changing each time) in a bucket of
// its own on srv.
func faultFixture(t *testing.T, srv *s3test.Server) *fixture {
	t.Helper()
	f := newFixture(t, srv, srv.NewBucket(t), 6, 50, 0.5)
	if len(f.unique(faultVictim)) == 0 {
		t.Fatal("the fixture frees no block: the faults would test nothing")
	}
	return f
}

// faultStore is a Store on endpoint (a proxy) with quick retries, so that
// a storm of faults ends in seconds.
func faultStore(t *testing.T, f *fixture, endpoint string, o Options) *Store {
	t.Helper()
	o.Clock = noSettle{}
	if o.RetryInitial == 0 {
		o.RetryInitial = 5 * time.Millisecond
	}
	if o.RetryMax == 0 {
		o.RetryMax = 20 * time.Millisecond
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 5 * time.Second
	}
	o.URL = "s3://" + f.bucket + "@" + f.srv.Region + "/" + f.prefix
	o.Endpoint = endpoint
	o.AccessKeyID = f.srv.AccessKey
	o.SecretAccessKey = f.srv.SecretKey
	st, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// nothingReferencedLost reads every backup cfg left in the posix
// directory and checks that each block it names is there as a file.
func nothingReferencedLost(t *testing.T, f *fixture) {
	t.Helper()
	dir := f.srv.ObjectPath(f.bucket, f.volDir()+"/"+lhformat.BackupsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfgs := 0
	for _, e := range entries {
		if lhformat.BackupNameFromFile(e.Name()) == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := lhformat.ParseBackup(data)
		if err != nil {
			t.Fatalf("backup cfg %s: %v", e.Name(), err)
		}
		cfgs++
		for _, m := range b.Blocks {
			p := f.srv.ObjectPath(f.bucket, f.volDir()+"/"+lhformat.BlockPath(m.BlockChecksum))
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("block %s of remaining backup %s is lost: %v", m.BlockChecksum, b.Name, err)
			}
		}
	}
	if cfgs < len(f.backups)-1 {
		t.Fatalf("%d backup cfgs left of %d: a backup other than the deleted one is gone", cfgs, len(f.backups))
	}
}

// untouched checks that the deletion removed nothing at all.
func untouched(t *testing.T, f *fixture) {
	t.Helper()
	nothingReferencedLost(t, f)
	keys, err := f.srv.Keys(f.bucket, f.volDir()+"/")
	if err != nil {
		t.Fatal(err)
	}
	want := len(f.blocks) + len(f.backups) + 1 // blocks, cfgs, volume.cfg
	if len(keys) != want {
		t.Fatalf("%d objects in the volume, want the %d it had: the failed deletion removed some", len(keys), want)
	}
}

// deleteWithin runs DeleteBackupReport with a context of d and fails the
// test if it returns more than a second after the context ended.
func deleteWithin(t *testing.T, st *Store, f *fixture, d time.Duration) (Collection, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	c, err := st.DeleteBackupReport(ctx, f.ref(faultVictim))
	if el := time.Since(start); el > d+time.Second {
		t.Fatalf("DeleteBackup returned %v after it started, its context was %v", el, d)
	}
	return c, err
}

// onOp returns a hook giving fault to the first n requests of op (n < 0:
// all of them).
func onOp(op string, n int, fault func() *s3test.Fault) func(string, *http.Request) *s3test.Fault {
	var seen atomic.Int64
	return func(got string, _ *http.Request) *s3test.Fault {
		if got != op {
			return nil
		}
		if k := seen.Add(1); n >= 0 && k > int64(n) {
			return nil
		}
		return fault()
	}
}

// The server is killed in the middle of a deletion the Driver started
// (the backup's cfg already removed, its blocks not yet), so the command
// fails. Once the server is restarted, the Driver's next reconcile finds
// the backup gone and finalizes it, as Longhorn does; nothing referenced
// was lost. The blocks only the deleted backup referenced are left
// behind until the next deletion in the volume: with no cfg to name them,
// it lists every block object and removes the unreferenced ones.
func TestFaultServerRestartedMidDeletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := s3test.Start(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	var once sync.Once
	var killed atomic.Bool
	p.SetHook(func(op string, _ *http.Request) *s3test.Fault {
		if op == "DeleteObjects" {
			once.Do(func() { srv.Kill(); killed.Store(true) })
		}
		return nil
	})
	st := faultStore(t, f, p.URL, Options{})
	done := make(chan error, 1)
	drv, err := backupdelete.NewDriver(st, backupdelete.DriverOptions{OnDone: func(_ backupdelete.BackupRef, err error) { done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ref := f.ref(faultVictim)
	res, err := drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: backupdelete.StateCompleted})
	if err != nil || res.State != backupdelete.StateDeleting {
		t.Fatalf("Reconcile: %+v, %v; want Deleting", res, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a deletion whose server died mid-way succeeded")
		}
	case <-ctx.Done():
		t.Fatal("the deletion command did not end after its server died")
	}
	if !killed.Load() {
		t.Fatal("the deletion never reached its DeleteObjects: the server was not killed mid-deletion")
	}
	p.SetHook(nil)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	nothingReferencedLost(t, f)
	cfg := f.srv.ObjectPath(f.bucket, f.volDir()+"/"+lhformat.BackupCfgPath(f.backups[faultVictim].Name))
	if _, err := os.Stat(cfg); !os.IsNotExist(err) {
		t.Fatalf("the server was killed before the cfg was removed (stat: %v): not the case under test", err)
	}

	res, err = drv.Reconcile(ctx, backupdelete.Request{Ref: ref, State: res.State, Message: res.Message})
	if err != nil || !res.Finalize {
		t.Fatalf("Reconcile after the restart: %+v, %v; want the gone backup finalized", res, err)
	}
	nothingReferencedLost(t, f)

	// The Driver did not see the deletion succeed, so before finalizing it
	// collected what the killed one left: the blocks only the deleted
	// backup had are gone already.
	for ck := range f.unique(faultVictim) {
		blk := f.srv.ObjectPath(f.bucket, f.volDir()+"/"+lhformat.BlockPath(ck))
		if _, err := os.Stat(blk); !os.IsNotExist(err) {
			t.Fatalf("block %s only the deleted backup had is still there (stat: %v)", ck, err)
		}
	}
	// So the deletion run again finds nothing left to collect.
	c, err := deleteWithin(t, st, f, 20*time.Second)
	if err != nil {
		t.Fatalf("the deletion after the restart: %v", err)
	}
	if c.Removed != 0 {
		t.Fatalf("%+v, want nothing left to remove", c)
	}
	// The killed deletion could not remove its lock object; it stays
	// until it expires, as a crashed Longhorn deleter's does.
	f.checkLocks(t, faultVictim, 1)
}

// A storm of 503 SlowDown: every other request is throttled; the retries
// get the deletion done.
func TestFaultSlowDownStormRetried(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	var n atomic.Int64
	p.SetHook(func(string, *http.Request) *s3test.Fault {
		if n.Add(1)%2 == 1 {
			return s3test.SlowDown()
		}
		return nil
	})
	st := faultStore(t, f, p.URL, Options{})
	if _, err := deleteWithin(t, st, f, 30*time.Second); err != nil {
		t.Fatalf("DeleteBackup under a 503 storm: %v", err)
	}
	if r := st.Stats().Retries; r == 0 {
		t.Fatal("no retry counted under a 503 storm")
	}
	f.check(t, faultVictim)
}

// A storm that does not end: the deletion gives up with an error when its
// context ends (or its attempts run out), removes nothing, and does not
// hang.
func TestFaultSlowDownStormEndsWithContext(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	p.SetHook(func(string, *http.Request) *s3test.Fault { return s3test.SlowDown() })
	st := faultStore(t, f, p.URL, Options{MaxAttempts: 1000, RetryMax: 100 * time.Millisecond})
	_, err := deleteWithin(t, st, f, 2*time.Second)
	if err == nil {
		t.Fatal("DeleteBackup succeeded against a server that only throttles")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want the context's deadline or ErrUnavailable", err)
	}
	p.SetHook(nil)
	untouched(t, f)
}

// A listing slower than the per-request timeout: the attempt is cut off
// and retried, and the deletion completes.
func TestFaultSlowListingRetried(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	p.SetHook(onOp("ListObjectsV2", 2, func() *s3test.Fault { return &s3test.Fault{Delay: 5 * time.Second} }))
	st := faultStore(t, f, p.URL, Options{RequestTimeout: 300 * time.Millisecond})
	start := time.Now()
	if _, err := deleteWithin(t, st, f, 20*time.Second); err != nil {
		t.Fatalf("DeleteBackup with two slow listings: %v", err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("the deletion took %v: the 300ms request timeout did not cut the 5s listings", el)
	}
	f.check(t, faultVictim)
}

// Every listing is slower than the request timeout: the deletion fails
// within its attempts, removing nothing.
func TestFaultSlowListingGivesUp(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	p.SetHook(onOp("ListObjectsV2", -1, func() *s3test.Fault { return &s3test.Fault{Delay: 10 * time.Second} }))
	st := faultStore(t, f, p.URL, Options{RequestTimeout: 200 * time.Millisecond, MaxAttempts: 3})
	if _, err := deleteWithin(t, st, f, 5*time.Second); err == nil {
		t.Fatal("DeleteBackup succeeded though no listing ever answered")
	}
	p.SetHook(nil)
	nothingReferencedLost(t, f)
}

// Objects cut short (the server sends a Content-Length, then half the
// body, then closes): the first reads of the cfgs are truncated; they are
// read again and the deletion completes.
func TestFaultTruncatedObjectRetried(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	p.SetHook(onOp("GetObject", 3, func() *s3test.Fault { return &s3test.Fault{Truncate: true} }))
	st := faultStore(t, f, p.URL, Options{})
	if _, err := deleteWithin(t, st, f, 20*time.Second); err != nil {
		t.Fatalf("DeleteBackup with truncated reads: %v", err)
	}
	f.check(t, faultVictim)
}

// A remaining backup's cfg always arrives truncated: its blocks cannot be
// known, so none may be removed; the deletion fails or skips the
// collection, and every referenced block stays.
func TestFaultTruncatedCfgNeverLosesBlocks(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	other := lhformat.BackupCfgPath(f.backups[faultVictim+1].Name)
	p.SetHook(func(op string, r *http.Request) *s3test.Fault {
		if op == "GetObject" && strings.HasSuffix(r.URL.Path, other) {
			return &s3test.Fault{Truncate: true}
		}
		return nil
	})
	st := faultStore(t, f, p.URL, Options{})
	c, err := deleteWithin(t, st, f, 20*time.Second)
	if err == nil && c.Removed != 0 {
		t.Fatalf("blocks removed (%+v) though backup %s could not be read", c, f.backups[faultVictim+1].Name)
	}
	p.SetHook(nil)
	nothingReferencedLost(t, f)
}

// A redirect to another host is refused, not followed: the other host
// sees no request (no signed request leaves for it) and nothing is
// removed.
func TestFaultRedirectToAnotherHost(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	var hits atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	p := s3test.NewProxy(t, srv)
	p.SetHook(func(string, *http.Request) *s3test.Fault { return &s3test.Fault{Redirect: elsewhere.URL} })
	st := faultStore(t, f, p.URL, Options{})
	_, err := deleteWithin(t, st, f, 10*time.Second)
	if !errors.Is(err, ErrRedirect) {
		t.Fatalf("err = %v, want ErrRedirect", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the other host got %d requests", n)
	}
	p.SetHook(nil)
	untouched(t, f)
}

// 403 AccessDenied: on everything, the deletion fails at once with
// ErrAccessDenied, not retried, nothing removed; on the block deletes
// only, the cfg is gone but every referenced block stays.
func TestFaultAccessDenied(t *testing.T) {
	srv := s3test.Shared(t)
	t.Run("everything", func(t *testing.T) {
		f := faultFixture(t, srv)
		p := s3test.NewProxy(t, srv)
		p.SetHook(func(string, *http.Request) *s3test.Fault { return s3test.AccessDenied() })
		st := faultStore(t, f, p.URL, Options{})
		_, err := deleteWithin(t, st, f, 10*time.Second)
		if !errors.Is(err, ErrAccessDenied) {
			t.Fatalf("err = %v, want ErrAccessDenied", err)
		}
		if n := p.Total(); n != 1 {
			t.Fatalf("%d requests after a 403, want 1 (a 403 is not retried): %v", n, p.Counts())
		}
		p.SetHook(nil)
		untouched(t, f)
	})
	t.Run("block deletes", func(t *testing.T) {
		f := faultFixture(t, srv)
		p := s3test.NewProxy(t, srv)
		p.SetHook(onOp("DeleteObjects", -1, s3test.AccessDenied))
		st := faultStore(t, f, p.URL, Options{})
		if _, err := deleteWithin(t, st, f, 10*time.Second); !errors.Is(err, ErrAccessDenied) {
			t.Fatalf("err = %v, want ErrAccessDenied", err)
		}
		p.SetHook(nil)
		nothingReferencedLost(t, f)
	})
}

// A server without multi-object delete (Google Cloud Storage's S3
// interoperability API answers POST ?delete with 501 NotImplemented): the
// store falls back to one DeleteObject per block and completes.
func TestFaultNotImplementedDeleteObjects(t *testing.T) {
	srv := s3test.Shared(t)
	f := faultFixture(t, srv)
	p := s3test.NewProxy(t, srv)
	p.SetHook(onOp("DeleteObjects", -1, s3test.NotImplemented))
	st := faultStore(t, f, p.URL, Options{})
	if _, err := deleteWithin(t, st, f, 20*time.Second); err != nil {
		t.Fatalf("DeleteBackup without multi-object delete: %v", err)
	}
	f.check(t, faultVictim)
	if !st.Stats().MultiDeleteUnsupported {
		t.Fatal("Stats does not record that the server lacks multi-object delete")
	}
	unique := len(f.unique(faultVictim))
	// The blocks, the cfg and the lock object, one DeleteObject each.
	if n := p.Count("DeleteObject"); n < unique {
		t.Fatalf("%d DeleteObject requests for %d blocks", n, unique)
	}
	if n := p.Count("DeleteObjects"); n != 1 {
		t.Fatalf("%d DeleteObjects requests, want 1: the store should stop asking after NotImplemented", n)
	}
}
