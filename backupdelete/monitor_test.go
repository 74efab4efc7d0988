package backupdelete_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	clocktesting "k8s.io/utils/clock/testing"
)

var errUnreadable = errors.New("engine unreachable")

func TestProgressTrackerBackoffThenSteady(t *testing.T) {
	tr := backupdelete.NewProgressTracker("backup-c", backupdelete.MonitorOptions{}, epoch)
	now := epoch
	var delays []time.Duration
	for range 12 {
		d := tr.Observe(now, backupdelete.Progress{}, errUnreadable)
		if d.Done {
			t.Fatal("gave up early")
		}
		delays = append(delays, d.RequeueAt.Sub(now))
		now = d.RequeueAt
	}
	want := []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600, 600}
	for i, w := range want {
		if delays[i] != w*time.Second {
			t.Fatalf("delays %v, want 2 s doubling to 10 min", delays)
		}
	}
	d := tr.Observe(now, backupdelete.Progress{State: backupdelete.StateInProgress, Percent: 10}, nil)
	if !d.RequeueAt.Equal(now.Add(2*time.Second)) || d.Done || d.Progress.Percent != 10 {
		t.Fatalf("%+v, want a steady 2 s poll once readable", d)
	}
	// An unreadable status after a readable one starts the backoff over.
	if d := tr.Observe(now.Add(2*time.Second), backupdelete.Progress{}, errUnreadable); !d.RequeueAt.Equal(now.Add(4*time.Second)) || d.Progress.Percent != 10 {
		t.Fatalf("%+v", d)
	}
	if d := tr.Observe(now.Add(4*time.Second), backupdelete.Progress{State: backupdelete.StateCompleted, Percent: 100}, nil); !d.Done || d.GaveUp {
		t.Fatalf("%+v, want done on Completed", d)
	}
}

func TestProgressTrackerGivesUpAfterMaxRetryPeriod(t *testing.T) {
	cfg := backupdelete.MonitorOptions{MaxRetryPeriod: time.Hour}
	tr := backupdelete.NewProgressTracker("backup-c", cfg, epoch)
	now := epoch
	for {
		d := tr.Observe(now, backupdelete.Progress{}, errUnreadable)
		if d.Done {
			if !d.GaveUp || d.Progress.State != backupdelete.StateError {
				t.Fatalf("%+v", d)
			}
			if want := "Failed to get the status of backup backup-c for 1h0m0s, err engine unreachable"; d.Progress.Error != want {
				t.Fatalf("message %q, want %q", d.Progress.Error, want)
			}
			if !now.Equal(epoch.Add(time.Hour)) {
				t.Fatalf("gave up at %v, want exactly at the max retry period", now.Sub(epoch))
			}
			return
		}
		now = d.RequeueAt
		if now.Sub(epoch) > 2*time.Hour {
			t.Fatal("never gave up")
		}
	}
}

// statusScript answers BackupStatus from a list, one reply per call.
type statusScript struct {
	mu      sync.Mutex
	replies []func() (backupdelete.Progress, error)
	calls   int
}

func (s *statusScript) BackupStatus(context.Context, backupdelete.BackupRef) (backupdelete.Progress, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.replies[min(s.calls, len(s.replies)-1)]
	s.calls++
	return r()
}

func TestProgressMonitorRunOnFakeClock(t *testing.T) {
	fail := func() (backupdelete.Progress, error) { return backupdelete.Progress{}, errUnreadable }
	at := func(p int) func() (backupdelete.Progress, error) {
		return func() (backupdelete.Progress, error) {
			return backupdelete.Progress{State: backupdelete.StateInProgress, Percent: p}, nil
		}
	}
	done := func() (backupdelete.Progress, error) {
		return backupdelete.Progress{State: backupdelete.StateCompleted, Percent: 100}, nil
	}
	src := &statusScript{replies: []func() (backupdelete.Progress, error){fail, fail, at(30), at(60), done}}
	clk := clocktesting.NewFakeClock(epoch)
	var mu sync.Mutex
	var nexts []time.Duration
	m := &backupdelete.ProgressMonitor{Source: src, Clock: clk, OnUpdate: func(_ backupdelete.BackupRef, d backupdelete.PollDecision) {
		mu.Lock()
		var wait time.Duration
		if !d.Done {
			wait = d.RequeueAt.Sub(clk.Now())
		}
		nexts = append(nexts, wait)
		mu.Unlock()
	}}
	type result struct {
		p   backupdelete.Progress
		err error
	}
	out := make(chan result, 1)
	go func() {
		p, err := m.Run(context.Background(), refB)
		out <- result{p, err}
	}()
	for {
		select {
		case r := <-out:
			if r.err != nil || r.p.State != backupdelete.StateCompleted {
				t.Fatalf("%+v", r)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []time.Duration{2 * time.Second, 4 * time.Second, 2 * time.Second, 2 * time.Second, 0}
			if len(nexts) != len(want) {
				t.Fatalf("waits %v, want %v", nexts, want)
			}
			for i := range want {
				if nexts[i] != want[i] {
					t.Fatalf("waits %v, want %v", nexts, want)
				}
			}
			if !clk.Now().Equal(epoch.Add(10 * time.Second)) {
				t.Fatalf("fake time %v", clk.Now().Sub(epoch))
			}
			return
		default:
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestProgressMonitorStopsOnCancel(t *testing.T) {
	src := &statusScript{replies: []func() (backupdelete.Progress, error){func() (backupdelete.Progress, error) { return backupdelete.Progress{}, errUnreadable }}}
	clk := clocktesting.NewFakeClock(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() {
		_, err := (&backupdelete.ProgressMonitor{Source: src, Clock: clk}).Run(ctx, refB)
		out <- err
	}()
	waitFor(t, clk.HasWaiters)
	cancel()
	if err := <-out; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

func TestCreationGate(t *testing.T) {
	ref := func(target, vol, name string) backupdelete.BackupRef {
		return backupdelete.BackupRef{Target: target, Volume: vol, Name: name}
	}
	newC := ref("default", "vol-a", "backup-c")
	for _, c := range []struct {
		name   string
		others []backupdelete.Backup
		wait   string // blocker, "" for go
	}{
		{"nothing else", nil, ""},
		{"deleting same volume blocks", []backupdelete.Backup{{Ref: ref("default", "vol-a", "backup-b"), State: backupdelete.StateDeleting}}, "backup-b"},
		{"error does not block", []backupdelete.Backup{{Ref: ref("default", "vol-a", "backup-b"), State: backupdelete.StateError}}, ""},
		{"other volume does not block", []backupdelete.Backup{{Ref: ref("default", "vol-b", "backup-b"), State: backupdelete.StateDeleting}}, ""},
		{"other target does not block", []backupdelete.Backup{{Ref: ref("azure", "vol-a", "backup-b"), State: backupdelete.StateDeleting}}, ""},
		{"completed does not block", []backupdelete.Backup{{Ref: ref("default", "vol-a", "backup-b"), State: backupdelete.StateCompleted}}, ""},
		{"itself does not block", []backupdelete.Backup{{Ref: newC, State: backupdelete.StateDeleting}}, ""},
		{"smallest name reported", []backupdelete.Backup{
			{Ref: ref("default", "vol-a", "backup-z"), State: backupdelete.StateDeleting},
			{Ref: ref("default", "vol-a", "backup-b"), State: backupdelete.StateDeleting},
		}, "backup-b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := backupdelete.CreationGate(newC, c.others)
			if g.Wait != (c.wait != "") || g.Blocker.Name != c.wait {
				t.Fatalf("%+v, want blocker %q", g, c.wait)
			}
			if g.Wait && g.Message != "Wait for backup "+c.wait+" to be deleted" || !g.Wait && g.Message != "" {
				t.Fatalf("message %q", g.Message)
			}
			if g.Wait && !strings.Contains(g.Message, c.wait) {
				t.Fatal(g.Message)
			}
		})
	}
}
