package s3store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"k8s.io/utils/clock"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

// This file measures deleting one backup from the middle of a volume's
// chain on a real S3 server (versitygw), two ways on the same data in the
// same run: this package's targeted collection, and Longhorn's own
// algorithm, as longhorn/backupstore runs it on S3.

// fixture is a volume's backups in Longhorn's layout, written straight
// into the posix backend's directory (the server serves such files as
// objects: TestFixtureServedByServer checks it).
type fixture struct {
	srv    *s3test.Server
	bucket string
	prefix string // the target's path
	volume string
	// backups[i] is backup i's cfg; blocks is every block's checksum.
	backups []lhformat.Backup
	blocks  map[string]bool
}

// newFixture builds a volume of n backups of per blocks each, each backup
// keeping (1-change) of the previous one's blocks at their offsets and
// replacing the others with new blocks at random (a volume where a
// fraction of the blocks changes between backups), seeded for
// repeatability.
func newFixture(tb testing.TB, srv *s3test.Server, bucket string, n, per int, change float64) *fixture {
	tb.Helper()
	f := &fixture{srv: srv, bucket: bucket, prefix: "bench", volume: "bench-vol", blocks: map[string]bool{}}
	rng := rand.New(rand.NewSource(25))
	next := 0
	newBlock := func() string {
		next++
		return lhformat.BlockChecksum([]byte(fmt.Sprintf("block %d", next)))
	}
	cur := make([]string, per)
	for j := range cur {
		cur[j] = newBlock()
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		if i > 0 {
			for j := range cur {
				if rng.Float64() < change {
					cur[j] = newBlock()
				}
			}
		}
		b := lhformat.Backup{
			Name:              fmt.Sprintf("backup-%03d", i),
			VolumeName:        f.volume,
			SnapshotName:      fmt.Sprintf("snap-%03d", i),
			SnapshotCreatedAt: base.Add(time.Duration(i) * time.Hour).Format(time.RFC3339),
			CreatedTime:       base.Add(time.Duration(i)*time.Hour + time.Minute).Format(time.RFC3339),
			Size:              int64(per) * 2 << 20,
			IsIncremental:     i > 0,
			CompressionMethod: "lz4",
		}
		for j, ck := range cur {
			b.Blocks = append(b.Blocks, lhformat.BlockMapping{Offset: int64(j) * 2 << 20, BlockChecksum: ck})
			f.blocks[ck] = true
		}
		f.backups = append(f.backups, b)
	}
	f.writeVolume(tb)
	for ck := range f.blocks {
		f.writeBlock(tb, ck)
	}
	for _, b := range f.backups {
		f.writeBackup(tb, b)
	}
	return f
}

func (f *fixture) volDir() string { return path.Join(f.prefix, lhformat.VolumePath(f.volume)) }

func (f *fixture) write(tb testing.TB, key string, data []byte) {
	tb.Helper()
	p := f.srv.ObjectPath(f.bucket, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func (f *fixture) writeVolume(tb testing.TB) {
	last := f.backups[len(f.backups)-1]
	data, err := lhformat.EncodeVolume(lhformat.Volume{Name: f.volume, Size: 2 << 30,
		CreatedTime: f.backups[0].CreatedTime, LastBackupName: last.Name, LastBackupAt: last.SnapshotCreatedAt,
		BlockCount: int64(len(f.blocks)), CompressionMethod: "lz4", DataEngine: "v1"})
	if err != nil {
		tb.Fatal(err)
	}
	f.write(tb, f.volDir()+"/"+lhformat.VolumeCfg, data)
}

func (f *fixture) writeBackup(tb testing.TB, b lhformat.Backup) {
	data, err := lhformat.EncodeBackup(b)
	if err != nil {
		tb.Fatal(err)
	}
	f.write(tb, f.volDir()+"/"+lhformat.BackupCfgPath(b.Name), data)
}

func (f *fixture) writeBlock(tb testing.TB, ck string) {
	f.write(tb, f.volDir()+"/"+lhformat.BlockPath(ck), []byte(ck[:16]))
}

// unique is the blocks only backup i references: what deleting it frees.
func (f *fixture) unique(i int) map[string]bool {
	out := map[string]bool{}
	for _, m := range f.backups[i].Blocks {
		out[m.BlockChecksum] = true
	}
	for j, b := range f.backups {
		if j == i {
			continue
		}
		for _, m := range b.Blocks {
			delete(out, m.BlockChecksum)
		}
	}
	return out
}

// check asserts that the volume holds exactly the fixture minus backup
// i's cfg and its unique blocks, reading the posix directory, and that no
// lock object is left.
func (f *fixture) check(tb testing.TB, i int) {
	tb.Helper()
	f.checkLocks(tb, i, 0)
}

// checkLocks is check allowing up to locks lock objects (left by a
// deleter that crashed: they expire after LockExpiry).
func (f *fixture) checkLocks(tb testing.TB, i, locks int) {
	tb.Helper()
	keys, err := f.srv.Keys(f.bucket, f.volDir()+"/")
	if err != nil {
		tb.Fatal(err)
	}
	unique := f.unique(i)
	var blocks, cfgs int
	for _, k := range keys {
		rel := strings.TrimPrefix(k, f.volDir()+"/")
		switch {
		case strings.HasPrefix(rel, lhformat.BlocksDir+"/"):
			ck, ok := lhformat.BlockFromPath(strings.TrimPrefix(rel, lhformat.BlocksDir+"/"))
			if !ok || !f.blocks[ck] {
				tb.Fatalf("unexpected object %s", k)
			}
			if unique[ck] {
				tb.Fatalf("block %s, referenced only by the deleted backup, is still there", ck)
			}
			blocks++
		case strings.HasPrefix(rel, lhformat.BackupsDir+"/"):
			if rel == lhformat.BackupCfgPath(f.backups[i].Name) {
				tb.Fatalf("the deleted backup's cfg %s is still there", k)
			}
			cfgs++
		case rel == lhformat.VolumeCfg:
		case strings.HasPrefix(rel, lhformat.LocksDir+"/") && locks > 0:
			locks--
		default:
			tb.Fatalf("unexpected object %s (a lock left behind?)", k)
		}
	}
	if want := len(f.blocks) - len(unique); blocks != want {
		tb.Fatalf("%d blocks left, want %d: a referenced block was deleted", blocks, want)
	}
	if cfgs != len(f.backups)-1 {
		tb.Fatalf("%d backup cfgs left, want %d", cfgs, len(f.backups)-1)
	}
}

// restore puts back what deleting backup i removed.
func (f *fixture) restore(tb testing.TB, i int) {
	f.writeBackup(tb, f.backups[i])
	for ck := range f.unique(i) {
		f.writeBlock(tb, ck)
	}
	f.writeVolume(tb)
}

// noSettle is the real clock without the lock protocol's settle wait:
// both algorithms below take Longhorn's lock, and both would wait the
// same LockSettle (2 s), which is not what is compared.
type noSettle struct{ clock.RealClock }

func (noSettle) NewTimer(d time.Duration) clock.Timer {
	if d == LockSettle {
		d = 0
	}
	return clock.RealClock{}.NewTimer(d)
}

func (f *fixture) store(tb testing.TB, endpoint string) *Store {
	tb.Helper()
	st, err := New(Options{
		URL:             fmt.Sprintf("s3://%s@%s/%s", f.bucket, f.srv.Region, f.prefix),
		Endpoint:        endpoint,
		AccessKeyID:     f.srv.AccessKey,
		SecretAccessKey: f.srv.SecretKey,
		Clock:           noSettle{},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

func (f *fixture) ref(i int) backupdelete.BackupRef {
	return backupdelete.BackupRef{Volume: f.volume, Name: f.backups[i].Name}
}

// lhDriver is longhorn/backupstore's S3 driver (s3/s3.go BackupStoreDriver
// on s3/s3_service.go service), request for request, on aws-sdk-go-v2:
//   - List: ListObjectsV2 with the delimiter "/", every page
//     (service.ListObjects with NewListObjectsV2Paginator);
//   - FileExists and FileTime: one HeadObject each (FileSize);
//   - Read: GetObject; Write: one PutObject (PutObjectAsSinglePart);
//   - Remove: service.DeleteObjects, which lists the key as a prefix
//     (no delimiter) and sends one DeleteObject per object listed.
//
// Options loads are LoadConfigInBackupStore (config.go): FileExists, then
// Read; saves are SaveConfigInBackupStore: Write.
type lhDriver struct {
	c      *s3.Client
	bucket string
	root   string // the target's path
}

func (d *lhDriver) key(p string) string { return path.Join(d.root, p) }

func (d *lhDriver) list(ctx context.Context, prefix, delimiter string) (keys, dirs []string, err error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket), Prefix: aws.String(prefix)}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	pg := s3.NewListObjectsV2Paginator(d.c, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		for _, p := range page.CommonPrefixes {
			dirs = append(dirs, aws.ToString(p.Prefix))
		}
	}
	return keys, dirs, nil
}

// List is s3.go List: the names directly under dir.
func (d *lhDriver) List(ctx context.Context, dir string) ([]string, error) {
	prefix := d.key(dir) + "/"
	keys, dirs, err := d.list(ctx, prefix, "/")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if r := strings.TrimPrefix(k, prefix); r != "" {
			out = append(out, r)
		}
	}
	for _, p := range dirs {
		if r := strings.TrimSuffix(strings.TrimPrefix(p, prefix), "/"); r != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

func (d *lhDriver) head(ctx context.Context, p string) (*s3.HeadObjectOutput, error) {
	return d.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(d.key(p))})
}

func (d *lhDriver) Read(ctx context.Context, p string) ([]byte, error) {
	out, err := d.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(d.key(p))})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

func (d *lhDriver) Write(ctx context.Context, p string, data []byte) error {
	_, err := d.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(d.key(p)),
		Body: bytes.NewReader(data)})
	return err
}

func (d *lhDriver) Remove(ctx context.Context, p string) error {
	keys, _, err := d.list(ctx, d.key(p), "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(k)}); err != nil {
			return err
		}
	}
	return nil
}

func (d *lhDriver) loadConfig(ctx context.Context, p string, v any) error {
	if _, err := d.head(ctx, p); err != nil {
		return fmt.Errorf("cannot find %v in backupstore: %w", p, err)
	}
	data, err := d.Read(ctx, p)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func (d *lhDriver) saveConfig(ctx context.Context, p string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return d.Write(ctx, p, data)
}

// lhLock is the lock file of longhorn/backupstore lock.go FileLock.
type lhLock struct {
	Name     string
	Type     int
	Acquired bool
}

// longhornDelete deletes backup name of volume as longhorn/backupstore's
// DeleteDeltaBlockBackup (deltablock.go) does on its S3 driver, one
// request after the other as it sends them:
//
//  1. lock.Lock (lock.go FileLock.Lock) with DELETION_LOCK: saveLock (a
//     Write, then FileTime), the settle wait LOCK_CHECK_WAIT_TIME (left
//     out here, as for the store: the same 2 s for both), canAcquire
//     (List the locks, loadLock each: FileExists, Read, FileTime), then
//     saveLock again as acquired;
//  2. loadBackup of the deleted backup and removeBackup (Remove its cfg);
//  3. loadVolume; getBackupNamesForVolume (List backups/);
//  4. getBlockNamesForVolume: List blocks/, then List every blocks/<a>/
//     and every blocks/<a>/<b>/: every block object of the volume;
//  5. loadBackup of every remaining backup, counting references
//     (checkBlockReferenceCount);
//  6. getBackupNamesForVolume again (new backups skip the collection);
//  7. cleanupBlocks: Remove each unreferenced block, one at a time, then
//     loadVolume and saveVolume with the new BlockCount;
//  8. lock.Unlock: removeLock (Remove the lock file).
//
// The deleted backup is not the last here, so volume.cfg's LastBackup is
// not rewritten in step 3.
func longhornDelete(ctx context.Context, d *lhDriver, volume, name string) (removed int, err error) {
	vol := lhformat.VolumePath(volume)
	lock := lhLock{Name: "lock-" + fmt.Sprint(time.Now().UnixNano()), Type: int(lhformat.LockDeletion)}
	lockPath := vol + "/" + lhformat.LockPath(lock.Name)
	saveLock := func() error {
		if err := d.saveConfig(ctx, lockPath, lock); err != nil {
			return err
		}
		_, err := d.head(ctx, lockPath) // FileTime
		return err
	}
	if err := saveLock(); err != nil {
		return 0, err
	}
	names, err := d.List(ctx, vol+"/"+lhformat.LocksDir)
	if err != nil {
		return 0, err
	}
	for _, n := range names {
		var other lhLock
		if err := d.loadConfig(ctx, vol+"/"+lhformat.LocksDir+"/"+n, &other); err != nil {
			continue
		}
		if _, err := d.head(ctx, vol+"/"+lhformat.LocksDir+"/"+n); err != nil { // FileTime
			continue
		}
		if other.Name != lock.Name && other.Type != lock.Type {
			return 0, fmt.Errorf("lock %s of another type is there", other.Name)
		}
	}
	lock.Acquired = true
	if err := saveLock(); err != nil {
		return 0, err
	}
	defer func() {
		if rerr := d.Remove(ctx, lockPath); err == nil {
			err = rerr
		}
	}()

	var deleted json.RawMessage
	cfgPath := vol + "/" + lhformat.BackupCfgPath(name)
	_ = d.loadConfig(ctx, cfgPath, &deleted)
	if err := d.Remove(ctx, cfgPath); err != nil {
		return 0, err
	}
	var v json.RawMessage
	if err := d.loadConfig(ctx, vol+"/"+lhformat.VolumeCfg, &v); err != nil {
		return 0, err
	}
	backupNames := func() ([]string, error) {
		files, err := d.List(ctx, vol+"/"+lhformat.BackupsDir)
		var out []string
		for _, f := range files {
			if n := lhformat.BackupNameFromFile(f); n != "" {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out, err
	}
	before, err := backupNames()
	if err != nil {
		return 0, err
	}

	refs := map[string]int{}
	blocksDir := vol + "/" + lhformat.BlocksDir
	lv1, err := d.List(ctx, blocksDir)
	if err != nil {
		return 0, err
	}
	for _, a := range lv1 {
		lv2, err := d.List(ctx, blocksDir+"/"+a)
		if err != nil {
			return 0, err
		}
		for _, b := range lv2 {
			files, err := d.List(ctx, blocksDir+"/"+a+"/"+b)
			if err != nil {
				return 0, err
			}
			for _, f := range files {
				refs[strings.TrimSuffix(f, lhformat.BlockSuffix)] = 0
			}
		}
	}
	for _, n := range before {
		var raw json.RawMessage
		if err := d.loadConfig(ctx, vol+"/"+lhformat.BackupCfgPath(n), &raw); err != nil {
			return 0, nil // Longhorn skips the block deletion
		}
		b, err := lhformat.ParseBackup(raw)
		if err != nil {
			return 0, nil
		}
		if b.InProgress() {
			return 0, nil
		}
		for _, m := range b.Blocks {
			refs[m.BlockChecksum]++
		}
	}
	after, err := backupNames()
	if err != nil || !slices.Equal(before, after) {
		return 0, err
	}
	for ck, n := range refs {
		if n == 0 {
			if err := d.Remove(ctx, vol+"/"+lhformat.BlockPath(ck)); err != nil {
				return removed, err
			}
			removed++
		}
	}
	if err := d.loadConfig(ctx, vol+"/"+lhformat.VolumeCfg, &v); err != nil {
		return removed, err
	}
	return removed, d.Write(ctx, vol+"/"+lhformat.VolumeCfg, v) // BlockCount updated
}

// measured is one deletion's requests (as the proxy saw them) and time.
type measured struct {
	requests int
	byOp     map[string]int
	elapsed  time.Duration
}

func measure(tb testing.TB, p *s3test.Proxy, f func() error) measured {
	tb.Helper()
	p.Reset()
	start := time.Now()
	if err := f(); err != nil {
		tb.Fatal(err)
	}
	return measured{requests: p.Total(), byOp: p.Counts(), elapsed: time.Since(start)}
}

func deleteBoth(tb testing.TB, f *fixture, p *s3test.Proxy, i int) (ours, theirs measured) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st := f.store(tb, p.URL)
	ours = measure(tb, p, func() error {
		c, err := st.DeleteBackupReport(ctx, f.ref(i))
		if err == nil && c.Removed != len(f.unique(i)) {
			err = fmt.Errorf("the store removed %d blocks, want %d (%+v)", c.Removed, len(f.unique(i)), c)
		}
		return err
	})
	f.check(tb, i)
	f.restore(tb, i)
	d := &lhDriver{c: f.srv.ClientFor(p.URL), bucket: f.bucket, root: f.prefix}
	theirs = measure(tb, p, func() error {
		n, err := longhornDelete(ctx, d, f.volume, f.backups[i].Name)
		if err == nil && n != len(f.unique(i)) {
			err = fmt.Errorf("Longhorn's algorithm removed %d blocks, want %d", n, len(f.unique(i)))
		}
		return err
	})
	f.check(tb, i)
	f.restore(tb, i)
	return ours, theirs
}

// TestFixtureServedByServer checks what the benchmark relies on: files
// written straight into the posix directory are served as objects
// (listed, read back whole), and both algorithms delete exactly the
// blocks only the deleted backup referenced, on a small volume.
func TestFixtureServedByServer(t *testing.T) {
	srv := s3test.Shared(t)
	f := newFixture(t, srv, srv.NewBucket(t), 6, 50, 0.3)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &lhDriver{c: c, bucket: f.bucket, root: f.prefix}
	keys, _, err := d.list(ctx, f.volDir()+"/"+lhformat.BlocksDir+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(f.blocks) {
		t.Fatalf("the server lists %d block objects, %d files were written", len(keys), len(f.blocks))
	}
	cfg, err := d.Read(ctx, lhformat.VolumePath(f.volume)+"/"+lhformat.BackupCfgPath(f.backups[2].Name))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := lhformat.ParseBackup(cfg); err != nil || len(b.Blocks) != 50 {
		t.Fatalf("backup cfg read back: %d blocks, %v", len(b.Blocks), err)
	}
	if len(f.unique(3)) == 0 {
		t.Fatal("the fixture frees no block when a middle backup is deleted: nothing would be measured")
	}
	p := s3test.NewProxy(t, srv)
	ours, theirs := deleteBoth(t, f, p, 3)
	t.Logf("caretaker %d requests %v; Longhorn %d requests %v", ours.requests, ours.byOp, theirs.requests, theirs.byOp)
	if ours.requests >= theirs.requests {
		t.Fatalf("targeted collection sent %d requests, Longhorn's algorithm %d", ours.requests, theirs.requests)
	}
}

// BenchmarkDeleteMiddleBackup deletes backup 50 of a volume of 100
// backups of 1,000 blocks each (each backup replaces ~30% of the previous
// one's blocks: ~30,700 block objects), on versitygw behind a counting
// proxy: caretaker's targeted collection, then Longhorn's algorithm on the
// same data, restoring between runs. Metrics: each one's requests and
// time per deletion and the ratios (caretaker/Longhorn).
//
// On a shared 2-core machine (make bench PKGS=./backupdelete/s3store
// BENCHTIME=1x), 85 blocks freed: caretaker 111 requests (one
// DeleteObjects, the 99 remaining cfgs read) in 1.3-2.3 s; Longhorn's
// algorithm 25,037 requests (24,738 of them listings of the block
// directories, then a listing and a DeleteObject per freed block) in
// 45-70 s. req-ratio 0.0044, time-ratio 0.019-0.053. Neither includes the
// lock's 2 s settle wait, the same for both.
func BenchmarkDeleteMiddleBackup(b *testing.B) {
	f := benchFixture(b)
	p := s3test.NewProxy(b, f.srv)
	var ours, theirs measured
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o, t := deleteBoth(b, f, p, 50)
		ours.requests += o.requests
		ours.elapsed += o.elapsed
		theirs.requests += t.requests
		theirs.elapsed += t.elapsed
		if i == 0 {
			b.Logf("caretaker: %v; Longhorn: %v", o.byOp, t.byOp)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.requests)/n, "caretaker-req/op")
	b.ReportMetric(float64(theirs.requests)/n, "longhorn-req/op")
	b.ReportMetric(float64(ours.elapsed.Nanoseconds())/n, "caretaker-ns/op")
	b.ReportMetric(float64(theirs.elapsed.Nanoseconds())/n, "longhorn-ns/op")
	b.ReportMetric(float64(ours.requests)/float64(theirs.requests), "req-ratio")
	b.ReportMetric(ours.elapsed.Seconds()/theirs.elapsed.Seconds(), "time-ratio")
}

// benchFixture is built once per process and bucket: the testing
// package calls a benchmark function several times, and each run
// restores what it deleted. The bucket stays in the shared server's
// directory, which goes when the server does.
var benchFixtures = map[string]*fixture{}

func benchFixture(b *testing.B) *fixture {
	srv := s3test.Shared(b)
	if f, ok := benchFixtures[srv.Endpoint]; ok {
		return f
	}
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.Client(b).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	f := newFixture(b, srv, name, 100, 1000, 0.3)
	b.Logf("fixture: %d backups, %d block objects, %d freed by deleting backup 50, written in %v",
		len(f.backups), len(f.blocks), len(f.unique(50)), time.Since(start).Round(time.Millisecond))
	benchFixtures[srv.Endpoint] = f
	return f
}
