package lhstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// memVolume is a VolumeStorage in memory: cfgs by name, blocks, locks,
// and faults a test sets.
type memVolume struct {
	mu      sync.Mutex
	volCfg  []byte
	backups map[string]lhformat.Backup
	blocks  map[string]bool
	locks   map[string]LockEntry
	lockRaw map[string][]byte
	// hide leaves a backup out of ListBackups; failRead fails ReadLock
	// with an I/O error; failRemove fails RemoveCfg.
	hide       string
	failRead   bool
	failRemove bool
}

func newMemVolume(t *testing.T, last string, backups map[string][]string) *memVolume {
	m := &memVolume{backups: map[string]lhformat.Backup{}, blocks: map[string]bool{}, locks: map[string]LockEntry{}, lockRaw: map[string][]byte{}}
	for name, cks := range backups {
		b := lhformat.Backup{Name: name, VolumeName: "vol-a", SnapshotCreatedAt: "2026-11-01T00:00:00Z", CreatedTime: "2026-11-01T00:00:00Z"}
		for _, ck := range cks {
			b.Blocks = append(b.Blocks, lhformat.BlockMapping{BlockChecksum: ck})
			m.blocks[ck] = true
		}
		m.backups[name] = b
	}
	data, err := lhformat.EncodeVolume(lhformat.Volume{Name: "vol-a", LastBackupName: last, BlockCount: int64(len(m.blocks))})
	if err != nil {
		t.Fatal(err)
	}
	m.volCfg = data
	return m
}

func (m *memVolume) WriteLock(_ context.Context, l lhformat.LockFile) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lockRaw[l.Name], _ = lhformat.EncodeLockFile(l)
	m.locks[l.Name] = LockEntry{Name: l.Name, Time: time.Unix(1000, 0)}
	return nil
}
func (m *memVolume) RemoveLock(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.locks, name)
	return nil
}
func (m *memVolume) LockEntries(context.Context) ([]LockEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []LockEntry
	for _, e := range m.locks {
		out = append(out, e)
	}
	return out, nil
}
func (m *memVolume) ReadLock(_ context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failRead {
		return nil, errors.New("EIO")
	}
	data, ok := m.lockRaw[name]
	if !ok {
		return nil, backupdelete.ErrNotFound
	}
	return data, nil
}
func (m *memVolume) ReadVolumeCfg(context.Context) ([]byte, error) { return m.volCfg, nil }
func (m *memVolume) BackupExists(ctx context.Context, name string) (bool, error) {
	return m.CfgExists(ctx, name)
}
func (m *memVolume) CfgExists(_ context.Context, name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.backups[name]
	return ok, nil
}
func (m *memVolume) ReadDeleted(_ context.Context, name string) (Deleted, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.backups[name]
	if !ok {
		return Deleted{}, backupdelete.ErrNotFound
	}
	var cks [][]byte
	for _, bm := range b.Blocks {
		cks = append(cks, []byte(bm.BlockChecksum))
	}
	return Deleted{Checksums: cks, CreatedTime: b.CreatedTime}, nil
}
func (m *memVolume) ListBackups(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.backups {
		if n != m.hide {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
func (m *memVolume) RemoveCfg(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failRemove {
		return errors.New("EIO")
	}
	delete(m.backups, name)
	return nil
}
func (m *memVolume) ScanBackups(_ context.Context, names []string, add func([][]byte)) []Scan {
	out := make([]Scan, len(names))
	for i, n := range names {
		d, err := m.ReadDeleted(context.Background(), n)
		if err == nil {
			add(d.Checksums)
		}
		m.mu.Lock()
		out[i] = Scan{CreatedTime: d.CreatedTime, SnapshotCreatedAt: m.backups[n].SnapshotCreatedAt, Err: err}
		m.mu.Unlock()
	}
	return out
}
func (m *memVolume) RemoveBlocks(_ context.Context, cks []string) (int, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ck := range cks {
		delete(m.blocks, ck)
	}
	return len(cks), nil, nil
}
func (m *memVolume) SweepBlocks(_ context.Context, unref func([]byte) bool) (int, []string, error) {
	m.mu.Lock()
	var cks []string
	for ck := range m.blocks {
		if unref([]byte(ck)) {
			cks = append(cks, ck)
		}
	}
	m.mu.Unlock()
	return m.RemoveBlocks(context.Background(), cks)
}
func (m *memVolume) WriteVolumeCfg(_ context.Context, data []byte) error { m.volCfg = data; return nil }
func (m *memVolume) Tidy(context.Context)                                {}

func ck(s string) string { return lhformat.BlockChecksum([]byte(s)) }

// TestCollectRules: the algorithm's rules on one storage: a targeted
// collection removes only the deleted backup's unreferenced blocks; a
// listing that leaves out volume.cfg's last backup, which is there, stops
// the deletion before anything is removed; an error before the cfg's
// removal leaves the volume's leak state as it was, one after it makes
// the next collection list every block, and a full one that finishes
// makes it clean again.
func TestCollectRules(t *testing.T) {
	a, s, b := ck("a"), ck("s"), ck("b")
	opts := func(name string) CollectOptions {
		return CollectOptions{Clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), Ref: backupdelete.BackupRef{Volume: "vol-a", Name: name}}
	}
	ctx := context.Background()

	m := newMemVolume(t, "backup-2", map[string][]string{"backup-1": {a, s}, "backup-2": {s, b}})
	leaks := NewLeaks(true)
	c, err := Collect(ctx, m, opts("backup-1"), leaks)
	if err != nil || c.Full || c.Removed != 1 || m.blocks[a] || !m.blocks[s] || c.Referenced != 2 {
		t.Fatalf("targeted: %+v %v, blocks %v", c, err, m.blocks)
	}

	m = newMemVolume(t, "backup-2", map[string][]string{"backup-1": {a, s}, "backup-2": {s, b}})
	m.hide = "backup-2"
	_, err = Collect(ctx, m, opts("backup-1"), leaks)
	if !errors.Is(err, backupdelete.ErrListingInconsistent) || len(m.backups) != 2 || len(m.blocks) != 3 {
		t.Fatalf("lying listing: %v, %d backups, %d blocks left", err, len(m.backups), len(m.blocks))
	}
	if !leaks.Clean("vol-a") {
		t.Fatal("an error before the cfg's removal marked the volume")
	}

	m = newMemVolume(t, "backup-2", map[string][]string{"backup-1": {a, s}, "backup-2": {s, b}})
	m.failRemove = true
	if _, err := Collect(ctx, m, opts("backup-1"), leaks); err == nil || leaks.Clean("vol-a") {
		t.Fatalf("a failed removal: %v, clean %v; want an error and the volume marked", err, leaks.Clean("vol-a"))
	}
	m.failRemove = false
	m.blocks[ck("leaked")] = true
	c, err = Collect(ctx, m, opts("backup-1"), leaks)
	if err != nil || !c.Full || c.Removed != 2 || m.blocks[ck("leaked")] || !leaks.Clean("vol-a") {
		t.Fatalf("after the failure: %+v %v, want a full collection removing a and the leaked block", c, err)
	}

	m = newMemVolume(t, "backup-2", map[string][]string{"backup-1": {a, s}, "backup-2": {s, b}})
	m.backups["backup-3"] = lhformat.Backup{Name: "backup-3", VolumeName: "vol-a"} // in progress
	c, err = Collect(ctx, m, opts("backup-1"), NewLeaks(false))
	if err != nil || c.Skipped == "" || c.Referenced != 0 || !m.blocks[a] {
		t.Fatalf("in progress: %+v %v", c, err)
	}
}

// TestListLocksFailsOnUnreadableLock: a lock that cannot be read for a
// reason other than being gone or not a lock file fails the listing (and
// so the taker): a live lock skipped because of an I/O error would let
// two exclusive takers proceed. Longhorn's lock.go skips it.
func TestListLocksFailsOnUnreadableLock(t *testing.T) {
	m := newMemVolume(t, "", nil)
	_ = m.WriteLock(context.Background(), lhformat.LockFile{Name: "lock-0000000000000001", Type: lhformat.LockBackup})
	if locks, err := ListLocks(context.Background(), m); err != nil || len(locks) != 1 {
		t.Fatalf("%v %v", locks, err)
	}
	m.failRead = true
	if _, err := ListLocks(context.Background(), m); err == nil {
		t.Fatal("an unreadable lock was skipped")
	}
	_, err := Acquire(context.Background(), m, LockOptions{Clock: fastClock{}}, "vol-a", lhformat.LockDeletion)
	if err == nil {
		t.Fatal("a taker proceeded past an unreadable lock")
	}
	if len(m.locks) != 1 {
		t.Fatalf("the failed taker left its lock: %v", m.locks)
	}
}

// fastClock is the real clock with every timer 1000 times shorter.
type fastClock struct{ clock.RealClock }

func (fastClock) NewTimer(d time.Duration) clock.Timer { return clock.RealClock{}.NewTimer(d / 1000) }
