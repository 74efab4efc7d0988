package fsstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	clocktesting "k8s.io/utils/clock/testing"
)

// runStepping runs op while stepping the fake clock one second at a time
// whenever something waits on it, until op returns. The real sleep only
// yields to op's goroutine; all timing logic runs on the fake clock.
func runStepping(t *testing.T, clk *clocktesting.FakeClock, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("operation did not finish")
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func lockFixture(t *testing.T, opts Options) (*Store, *lhVolume, *clocktesting.FakeClock) {
	mount, v := threeBackups(t)
	clk := clocktesting.NewFakeClock(time.Now())
	opts.Clock = clk
	opts.Dir = mount
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, v, clk
}

func TestLockProtocol(t *testing.T) {
	for _, c := range []struct {
		name     string
		typ      int
		acquired bool
		age      time.Duration // negative: newer than ours
		blocked  bool
	}{
		{"acquired backup lock blocks", 1, true, 10 * time.Second, true},
		{"acquired backup lock blocks even if newer", 1, true, -time.Minute, true},
		{"older waiting backup lock blocks", 1, false, 10 * time.Second, true},
		{"newer waiting backup lock does not block", 1, false, -time.Minute, false},
		{"expired backup lock does not block", 1, true, 151 * time.Second, false},
		{"deletion lock is compatible", 2, true, 10 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, v, clk := lockFixture(t, Options{})
			v.lock("lock-00000000000000aa", c.typ, c.acquired, clk.Now().Add(-c.age))
			err := runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref1) })
			if c.blocked {
				var conflict *LockConflictError
				if !errors.Is(err, backupdelete.ErrLocked) || !errors.As(err, &conflict) || conflict.Blocker.Name != "lock-00000000000000aa" {
					t.Fatalf("err %v, want a conflict with lock-00000000000000aa", err)
				}
				if !v.exists("backups/backup_backup-1.cfg") {
					t.Fatal("deleted despite the lock")
				}
			} else if err != nil {
				t.Fatalf("err %v, want success", err)
			}
			// Only the foreign lock remains: ours is removed either way.
			entries, _ := os.ReadDir(filepath.Join(v.dir, "locks"))
			if len(entries) != 1 || entries[0].Name() != "lock-00000000000000aa.lck" {
				t.Fatalf("locks dir %v", entries)
			}
		})
	}
}

func TestLockWaitOption(t *testing.T) {
	t.Run("never released", func(t *testing.T) {
		s, v, clk := lockFixture(t, Options{LockWait: time.Minute})
		v.lock("lock-00000000000000aa", 1, true, clk.Now())
		start := clk.Now()
		err := runStepping(t, clk, func() error {
			return s.DeleteBackup(context.Background(), ref1)
		})
		if !errors.Is(err, backupdelete.ErrLocked) || clk.Since(start) < 50*time.Second {
			t.Fatalf("err %v after %v, want ErrLocked after waiting about a minute", err, clk.Since(start))
		}
	})
	t.Run("blocker released", func(t *testing.T) {
		s, v, clk := lockFixture(t, Options{LockWait: time.Minute})
		v.lock("lock-00000000000000aa", 1, true, clk.Now())
		done := make(chan error, 1)
		go func() { done <- s.DeleteBackup(context.Background(), ref1) }()
		// Let the settle wait and the first check pass, then release.
		for !clk.HasWaiters() {
			time.Sleep(100 * time.Microsecond)
		}
		clk.Step(LockSettle)
		for !clk.HasWaiters() {
			time.Sleep(100 * time.Microsecond)
		}
		if err := os.Remove(filepath.Join(v.dir, "locks", "lock-00000000000000aa.lck")); err != nil {
			t.Fatal(err)
		}
		err := runStepping(t, clk, func() error { return <-done })
		if err != nil {
			t.Fatalf("err %v, want success once the backup lock was released", err)
		}
		if v.exists("backups/backup_backup-1.cfg") {
			t.Fatal("not deleted")
		}
	})
}

func TestLockRefreshAndRelease(t *testing.T) {
	s, v, clk := lockFixture(t, Options{})
	var l *Lock
	if err := runStepping(t, clk, func() (err error) {
		l, err = s.Lock(context.Background(), "vol-a", LockBackup)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(v.dir, "locks", l.Name()+".lck")
	got, err := ParseLockFile([]byte(v.read(filepath.Join("locks", l.Name()+".lck"))))
	if err != nil || !got.Acquired || got.Type != LockBackup {
		t.Fatalf("lock file %+v %v", got, err)
	}
	old := time.Now().Add(-100 * time.Second)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	for !clk.HasWaiters() {
		time.Sleep(100 * time.Microsecond)
	}
	clk.Step(LockRefresh)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The refresher rewrites the file (a new inode), so stat by path.
		if info, err := os.Stat(p); err == nil && info.ModTime().After(old.Add(50*time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lock file not refreshed")
		}
		time.Sleep(time.Millisecond)
	}
	// While held, a deletion is blocked.
	err = runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref1) })
	if !errors.Is(err, backupdelete.ErrLocked) {
		t.Fatalf("deletion under a held backup lock: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal("Release is idempotent:", err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("lock file left after Release")
	}
	if err := runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref1) }); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptLockFilesAreIgnored(t *testing.T) {
	s, v, clk := lockFixture(t, Options{})
	v.write("locks/lock-00000000000000bb.lck", `{"Name":"lock-00000000000000bb","Type":1,"Acq`)
	v.write("locks/lock-00000000000000cc.lck", `{"Name":"lock-other","Type":1,"Acquired":true}`) // name does not match file
	v.write("locks/lock-00000000000000dd.lck", `{"Name":"lock-00000000000000dd","Type":7,"Acquired":true}`)
	if err := runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref1) }); err != nil {
		t.Fatal(err)
	}
}

func TestRanksBefore(t *testing.T) {
	now := time.Now()
	a := lhformat.SeenLock{LockFile: LockFile{Name: "lock-b", Acquired: true}, Time: now}
	b := lhformat.SeenLock{LockFile: LockFile{Name: "lock-a", Acquired: false}, Time: now.Add(-time.Hour)}
	if !lhformat.RanksBefore(a, b) || lhformat.RanksBefore(b, a) {
		t.Fatal("acquired first")
	}
	c := lhformat.SeenLock{LockFile: LockFile{Name: "lock-c"}, Time: now.Add(-time.Second)}
	d := lhformat.SeenLock{LockFile: LockFile{Name: "lock-a"}, Time: now}
	if !lhformat.RanksBefore(c, d) {
		t.Fatal("older first")
	}
	e := lhformat.SeenLock{LockFile: LockFile{Name: "lock-a"}, Time: now}
	f := lhformat.SeenLock{LockFile: LockFile{Name: "lock-b"}, Time: now}
	if !lhformat.RanksBefore(e, f) || lhformat.RanksBefore(f, e) {
		t.Fatal("then smaller name")
	}
}

// TestLongWaitKeepsOurLockFresh: with a wait longer than LockRefresh, the
// waiting lock file is rewritten, so it never looks expired to others
// while we still rank by it.
func TestLongWaitKeepsOurLockFresh(t *testing.T) {
	s, v, clk := lockFixture(t, Options{LockWait: 150 * time.Second})
	blocker := filepath.Join(v.dir, "locks", "lock-00000000000000aa.lck")
	v.lock("lock-00000000000000aa", 1, true, clk.Now())
	done := make(chan error, 1)
	go func() { done <- s.DeleteBackup(context.Background(), ref1) }()
	type version struct {
		ino   uint64
		mtime time.Time
	}
	inodes := map[version]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-done:
			if !errors.Is(err, backupdelete.ErrLocked) {
				t.Fatalf("%v, want ErrLocked: the blocker held on", err)
			}
			if len(inodes) < 3 {
				t.Fatalf("our waiting lock file was written %d times in 150 s, want it rewritten every 60 s", len(inodes))
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("did not finish")
		}
		entries, _ := os.ReadDir(filepath.Join(v.dir, "locks"))
		for _, e := range entries {
			if e.Name() != "lock-00000000000000aa.lck" && filepath.Ext(e.Name()) == ".lck" {
				if info, err := e.Info(); err == nil {
					inodes[version{inode(info), info.ModTime()}] = true
				}
			}
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
			// The blocker's holder refreshes it, as Longhorn's does.
			_ = os.Chtimes(blocker, clk.Now(), clk.Now())
		}
		time.Sleep(200 * time.Microsecond)
	}
}
