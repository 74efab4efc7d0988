//go:build unix

package fsstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	clocktesting "k8s.io/utils/clock/testing"
)

// mkfifo replaces whatever is at rel in the volume directory (file or
// directory tree) with a real FIFO. Opening it for reading without
// O_NONBLOCK blocks until a writer comes, which never happens here.
func (v *lhVolume) mkfifo(rel string) {
	v.t.Helper()
	p := filepath.Join(v.dir, rel)
	if err := os.RemoveAll(p); err != nil {
		v.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		v.t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		v.t.Skipf("mkfifo %s: %v", p, err)
	}
}

// settledGoroutines waits (yielding, not sleeping on a timer the test
// asserts on) until the goroutine count drops to at most want, and
// returns the last count seen.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 1000 && n > want; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// TestFIFOInEveryPositionNeverBlocks puts a real FIFO where the layout
// has a lock file, a backup cfg, volume.cfg, a blocks directory level, the
// backups or locks directory, or the volume directory itself. A deletion
// must return (an error wrapping ErrFileType, or success where the FIFO is
// only a stray among files it may skip), release its lock (our lock file
// removed, the refresher goroutine gone, nothing waiting on the clock) and
// leave the FIFO where it was: it is not a file of the backupstore.
func TestFIFOInEveryPositionNeverBlocks(t *testing.T) {
	for _, c := range []struct {
		name string
		rel  func(v *lhVolume) string
		// want: "ok" (deleted), "skip" (cfg removed, no block collected),
		// "type" (an error wrapping ErrFileType), "err" (any error).
		want string
		// second: run a first deletion (of backup-2) before placing the
		// FIFO, so that the one under test is a targeted collection.
		second bool
	}{
		{"foreign lock file", func(*lhVolume) string { return "locks/lock-00000000000000ff.lck" }, "ok", false},
		{"the deleted backup's cfg", func(*lhVolume) string { return "backups/backup_backup-1.cfg" }, "type", false},
		{"a remaining backup's cfg", func(*lhVolume) string { return "backups/backup_backup-3.cfg" }, "skip", false},
		{"volume.cfg", func(*lhVolume) string { return "volume.cfg" }, "type", false},
		{"blocks directory", func(*lhVolume) string { return "blocks" }, "type", false},
		{"first-level bucket (full listing)", func(*lhVolume) string { return "blocks/" + ckA[0:2] }, "ok", false},
		{"first-level bucket (targeted)", func(*lhVolume) string { return "blocks/" + ckA[0:2] }, "err", true},
		{"second-level bucket (full listing)", func(*lhVolume) string { return "blocks/" + ckA[0:2] + "/" + ckA[2:4] }, "ok", false},
		{"second-level bucket (targeted)", func(*lhVolume) string { return "blocks/" + ckA[0:2] + "/" + ckA[2:4] }, "err", true},
		{"backups directory", func(*lhVolume) string { return "backups" }, "err", false},
		{"locks directory", func(*lhVolume) string { return "locks" }, "err", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, v, clk := lockFixture(t, Options{})
			if c.second {
				ref2 := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"}
				if err := runStepping(t, clk, func() error { return s.DeleteBackup(context.Background(), ref2) }); err != nil {
					t.Fatal(err)
				}
			}
			rel := c.rel(v)
			v.mkfifo(rel)
			base := runtime.NumGoroutine()
			var col Collection
			err := runStepping(t, clk, func() (err error) {
				col, err = s.DeleteBackupReport(context.Background(), ref1)
				return err
			})
			switch c.want {
			case "ok":
				if err != nil || col.Skipped != "" {
					t.Fatalf("%+v %v, want a complete deletion", col, err)
				}
			case "skip":
				if err != nil || !strings.Contains(col.Skipped, "backup-3") || col.Removed != 0 {
					t.Fatalf("%+v %v, want no block collected because backup-3 is unreadable", col, err)
				}
				if !strings.Contains(col.Skipped, "FIFO") {
					t.Fatalf("skip reason %q does not say what was wrong", col.Skipped)
				}
			case "type":
				var fte *FileTypeError
				if !errors.Is(err, ErrFileType) || !errors.As(err, &fte) || !errors.Is(err, backupdelete.ErrCorrupt) {
					t.Fatalf("%v, want a *FileTypeError", err)
				}
			case "err":
				if err == nil {
					t.Fatalf("%+v, want an error", col)
				}
			}
			if c.want != "ok" && c.want != "skip" && !v.blockExists(ckA) && !strings.HasPrefix(rel, "blocks") {
				t.Fatal("a block was removed by a deletion that failed")
			}
			if info, err := os.Lstat(filepath.Join(v.dir, rel)); err != nil || info.Mode()&os.ModeNamedPipe == 0 {
				t.Fatalf("the FIFO at %s was removed or replaced: %v", rel, err)
			}
			if ours := ourLocks(v, "lock-00000000000000ff.lck"); len(ours) != 0 {
				t.Fatalf("our lock files are left behind: %v", ours)
			}
			if clk.HasWaiters() {
				t.Fatal("something still waits on the clock: the lock refresher was not stopped")
			}
			if n := settledGoroutines(base); n > base {
				t.Fatalf("%d goroutines after the deletion, %d before", n, base)
			}
		})
	}
}

// TestFIFOVolumeDirectory: the volume directory itself is a FIFO.
func TestFIFOVolumeDirectory(t *testing.T) {
	mount := t.TempDir()
	v := newLonghornVolume(t, mount, "vol-a")
	if err := os.MkdirAll(filepath.Dir(v.dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(v.dir, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s, err := New(Options{Dir: mount, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"DeleteBackup": func() error { return s.DeleteBackup(ctx, ref1) },
		"Backups":      func() error { _, err := s.Backups(ctx, "vol-a"); return err },
		"BlockFiles":   func() error { _, err := s.BlockFiles(ctx, "vol-a"); return err },
		"ReadVolume":   func() error { _, err := s.ReadVolume(ctx, "vol-a"); return err },
		"ReadBackup":   func() error { _, err := s.ReadBackup(ctx, ref1); return err },
		"Lock":         func() error { l, err := s.Lock(ctx, "vol-a", LockBackup); releaseIfHeld(l); return err },
		"WriteBlock":   func() error { return s.WriteBlock(ctx, "vol-a", ckA, []byte("x")) },
	} {
		err := runStepping(t, clk, op)
		if err == nil {
			t.Errorf("%s through a FIFO volume directory succeeded", name)
		}
	}
	if info, err := os.Lstat(v.dir); err != nil || info.Mode()&os.ModeNamedPipe == 0 {
		t.Fatal("the FIFO was replaced")
	}
}

func releaseIfHeld(l *Lock) {
	if l != nil {
		l.Release()
	}
}

// TestFIFOsInListings: a FIFO among the lock files is skipped (as an
// unreadable lock), one at a level of the volumes tree or as the backups
// directory is an error, and none of it blocks.
func TestFIFOsInListings(t *testing.T) {
	mount, v := threeBackups(t)
	v.mkfifo("locks/lock-00000000000000ee.lck")
	clk := clocktesting.NewFakeClock(time.Now())
	s, err := New(Options{Dir: mount, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var l *Lock
	if err := runStepping(t, clk, func() (err error) { l, err = s.Lock(ctx, "vol-a", LockBackup); return err }); err != nil {
		t.Fatalf("a FIFO among the lock files must be skipped: %v", err)
	}
	l.Release()

	// A FIFO at the second level of the volumes tree.
	if err := syscall.Mkfifo(filepath.Join(mount, "backupstore/volumes/ff"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mount, "backupstore/volumes/fe"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(mount, "backupstore/volumes/fe/fe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runStepping(t, clk, func() error { _, err := s.Volumes(ctx); return err }); !errors.Is(err, ErrFileType) {
		t.Fatalf("Volumes with FIFOs in the tree: %v, want ErrFileType", err)
	}
	v.mkfifo("backups")
	if err := runStepping(t, clk, func() error { _, err := s.Backups(ctx, "vol-a"); return err }); !errors.Is(err, ErrFileType) {
		t.Fatalf("Backups with a FIFO backups directory: %v, want ErrFileType", err)
	}
}

// TestDeleteReturnsBeforeTheContextEnds: with a FIFO as volume.cfg and a
// context with a deadline, DeleteBackup returns the typed error or the
// context's, never later than the deadline (the real clock runs the lock
// protocol, a thousand times faster).
func TestDeleteReturnsBeforeTheContextEnds(t *testing.T) {
	for _, rel := range []string{"volume.cfg", "backups/backup_backup-2.cfg", "locks/lock-00000000000000ff.lck", "blocks"} {
		t.Run(rel, func(t *testing.T) {
			mount, v := threeBackups(t)
			v.mkfifo(rel)
			s := openFast(t, mount, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.DeleteBackup(ctx, ref1) }()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, ErrFileType) && !errors.Is(err, ctx.Err()) {
					t.Fatalf("%v, want nil, ErrFileType or the context's error", err)
				}
			case <-ctx.Done():
				select {
				case err := <-done:
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrFileType) {
						t.Fatalf("%v after the deadline", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("DeleteBackup still blocked 5 s after its context ended")
				}
			}
			if ours := ourLocks(v, "lock-00000000000000ff.lck"); len(ours) != 0 {
				t.Fatalf("lock files left: %v", ours)
			}
		})
	}
}

func TestOpenRefusesAFIFOMountPoint(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mnt")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := New(Options{Dir: p})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrFileType) {
			t.Fatalf("%v, want ErrFileType", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO")
	}
}

// TestCancelledDeletionStopsUnlinkingAndRefreshing: a deletion whose
// context ends while it holds the lock stops refreshing the lock at once
// (so a deletion stuck past its context cannot hold the volume for longer
// than LockExpiry), unlinks no block after that and leaves volume.cfg as
// it was.
func TestCancelledDeletionStopsUnlinkingAndRefreshing(t *testing.T) {
	s, v, clk := lockFixture(t, Options{})
	cfgBefore := v.read("volume.cfg")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	refresherStopped := false
	beforeStep(t, "list the backups again", func() {
		cancel()
		for range 1000 {
			if !clk.HasWaiters() {
				refresherStopped = true
				return
			}
			runtime.Gosched()
			time.Sleep(time.Millisecond)
		}
	})
	err := runStepping(t, clk, func() error { return s.DeleteBackup(ctx, ref1) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	if !refresherStopped {
		t.Fatal("the lock refresher kept running after the deletion's context ended")
	}
	if !v.blockExists(ckA) {
		t.Fatal("a block was unlinked after the context ended")
	}
	if v.read("volume.cfg") != cfgBefore {
		t.Fatal("volume.cfg was rewritten after the context ended")
	}
	if ours := ourLocks(v); len(ours) != 0 {
		t.Fatalf("lock files left: %v", ours)
	}
}

func TestDeleteCompletedBackupWithAFIFOCfg(t *testing.T) {
	s, v, clk := lockFixture(t, Options{})
	v.mkfifo("backups/backup_backup-1.cfg")
	err := runStepping(t, clk, func() error { return s.DeleteCompletedBackup(context.Background(), ref1) })
	if !errors.Is(err, ErrFileType) {
		t.Fatalf("%v, want ErrFileType", err)
	}
	if ours := ourLocks(v); len(ours) != 0 {
		t.Fatalf("lock files left: %v", ours)
	}
}
