package s3store

import (
	"context"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/storetest"
	"github.com/caretaker-storage/caretaker/internal/s3test"
	"k8s.io/utils/clock"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// fastClock is the real clock with every wait shorter than LockRefresh
// divided by 1000: the lock protocol's 2 s settle takes 2 ms, so tests
// that are not about the lock's timing run quickly against a real server,
// whose object times are real. The refresh keeps its real 60 s, so that
// request counts are those of a real deletion.
type fastClock struct{ clock.RealClock }

func (fastClock) NewTimer(d time.Duration) clock.Timer {
	if d >= LockRefresh {
		return clock.RealClock{}.NewTimer(d)
	}
	return clock.RealClock{}.NewTimer(d / 1000)
}
func (fastClock) After(d time.Duration) <-chan time.Time {
	return clock.RealClock{}.After(d / 1000)
}
func (fastClock) Sleep(d time.Duration) { clock.RealClock{}.Sleep(d / 1000) }

// env is one store on a fresh bucket of the shared server, optionally
// through a proxy.
type env struct {
	srv    *s3test.Server
	bucket string
	proxy  *s3test.Proxy
	store  *Store
	cfg    Options
}

// newEnv makes a bucket and a Store on it under the prefix "lh/target".
// With proxy, requests go through a counting, fault-injecting proxy.
func newEnv(t *testing.T, proxy bool, opts Options) *env {
	t.Helper()
	srv := s3test.Shared(t)
	e := &env{srv: srv, bucket: srv.NewBucket(t)}
	endpoint := srv.Endpoint
	if proxy {
		e.proxy = s3test.NewProxy(t, srv)
		endpoint = e.proxy.URL
	}
	if opts.Clock == nil {
		opts.Clock = fastClock{}
	}
	if opts.RetryInitial == 0 {
		opts.RetryInitial = time.Millisecond
	}
	e.cfg = opts
	e.cfg.URL = "s3://" + e.bucket + "@" + srv.Region + "/lh/target/"
	e.cfg.AccessKeyID, e.cfg.SecretAccessKey = srv.AccessKey, srv.SecretKey
	e.cfg.Endpoint = endpoint
	s, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.store = s
	return e
}

// checksum returns a valid block checksum derived from seed.
var checksum = storetest.Checksum

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var (
	ckA = checksum("a") // only in backup-1
	ckS = checksum("s") // shared by all
	ckB = checksum("b") // only in backup-2
	ckC = checksum("c") // only in backup-3
)

// threeBackups writes vol-a: backup-1 {a, s}, backup-2 {s, b}, backup-3
// {s, c}; backup-3 is the last.
func threeBackups(t *testing.T, s *Store) {
	t.Helper()
	ctx := ctxT(t)
	must(t, s.WriteVolume(ctx, Volume{Name: "vol-a", Size: 8 << 20, CreatedTime: "2026-11-01T00:00:00Z",
		LastBackupName: "backup-3", LastBackupAt: "2026-11-03T00:00:00Z", BlockCount: 4, DataEngine: "v1"}))
	for _, b := range []struct {
		name, at string
		cks      []string
	}{{"backup-1", "2026-11-01T00:00:00Z", []string{ckA, ckS}}, {"backup-2", "2026-11-02T00:00:00Z", []string{ckS, ckB}}, {"backup-3", "2026-11-03T00:00:00Z", []string{ckS, ckC}}} {
		var blocks []BlockMapping
		for i, ck := range b.cks {
			blocks = append(blocks, BlockMapping{Offset: int64(i) << 21, BlockChecksum: ck})
		}
		must(t, s.WriteBackup(ctx, Backup{Name: b.name, VolumeName: "vol-a", SnapshotName: "snap-" + b.name,
			SnapshotCreatedAt: b.at, CreatedTime: b.at, Size: 4 << 20, Blocks: blocks}))
	}
	for _, ck := range []string{ckA, ckS, ckB, ckC} {
		must(t, s.WriteBlock(ctx, "vol-a", ck, []byte("block "+ck)))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// blockSet lists a volume's block checksums straight from the server.
func (e *env) blocks(t *testing.T, volume string) map[string]bool {
	t.Helper()
	keys, err := e.srv.Keys(e.bucket, "lh/target/"+volumePath(volume)+"/blocks/")
	must(t, err)
	out := map[string]bool{}
	for _, k := range keys {
		ck, ok := blockFromKey(k)
		if ok {
			out[ck] = true
		}
	}
	return out
}
