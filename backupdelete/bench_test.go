package backupdelete_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/backupdelete"
	clocktesting "k8s.io/utils/clock/testing"
)

// instantStore answers at once; hold, when not nil, blocks every delete
// until closed, so commands stay in flight.
type instantStore struct {
	hold   chan struct{}
	exists bool
}

func (s *instantStore) DeleteBackup(ctx context.Context, _ backupdelete.BackupRef) error {
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *instantStore) BackupExists(context.Context, backupdelete.BackupRef) (bool, error) {
	return s.exists, nil
}

func benchRefs(n int) []backupdelete.BackupRef {
	refs := make([]backupdelete.BackupRef, n)
	for i := range refs {
		refs[i] = backupdelete.BackupRef{Target: "default", Volume: fmt.Sprintf("vol-%d", i%100), Name: fmt.Sprintf("backup-%016x", i)}
	}
	return refs
}

// BenchmarkDriver10kDeletions measures the Driver's own overhead with 10k
// backups deleted at once (MaxConcurrent 16, a store that answers at once):
//
//   - cycle: one op is the whole life of 10k deletions: 10k reconciles
//     that start commands, the commands, 10k reconciles that finalize.
//
//   - poll: one op is one reconcile of a Deleting backup while all 10k
//     commands are in flight (the steady state a controller polls in).
//
//     go test -run='^$' -bench=Driver10k -benchmem ./backupdelete/
func BenchmarkDriver10kDeletions(b *testing.B) {
	const n = 10000
	refs := benchRefs(n)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))

	b.Run("cycle", func(b *testing.B) {
		var wg sync.WaitGroup
		d, err := backupdelete.NewDriver(&instantStore{}, backupdelete.DriverOptions{MaxConcurrent: 16, Clock: clk,
			OnDone: func(backupdelete.BackupRef, error) { wg.Done() }})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for range b.N {
			wg.Add(n)
			for _, r := range refs {
				if res, err := d.Reconcile(ctx, backupdelete.Request{Ref: r, State: backupdelete.StateCompleted}); err != nil || !res.StartCommand {
					b.Fatal(res, err)
				}
			}
			wg.Wait()
			for _, r := range refs {
				if res, err := d.Reconcile(ctx, backupdelete.Request{Ref: r, State: backupdelete.StateDeleting}); err != nil || !res.Finalize {
					b.Fatal(res, err)
				}
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&after)
		steps := float64(b.N) * 2 * n
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/steps, "allocs/step")
	})

	b.Run("poll", func(b *testing.B) {
		store := &instantStore{hold: make(chan struct{}), exists: true}
		d, err := backupdelete.NewDriver(store, backupdelete.DriverOptions{MaxConcurrent: 16, Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { close(store.hold); d.Close() }()
		for _, r := range refs {
			if _, err := d.Reconcile(ctx, backupdelete.Request{Ref: r, State: backupdelete.StateCompleted}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			res, err := d.Reconcile(ctx, backupdelete.Request{Ref: refs[i%n], State: backupdelete.StateDeleting})
			if err != nil || res.State != backupdelete.StateDeleting || res.StartCommand {
				b.Fatal(res, err)
			}
		}
	})
}

// BenchmarkStep is the pure state machine alone.
func BenchmarkStep(b *testing.B) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	rec := &backupdelete.Record{State: backupdelete.RecordFailed, Err: "EIO"}
	b.ReportAllocs()
	for i := range b.N {
		_ = backupdelete.Step(backupdelete.StepInput{Backup: "backup-b", State: backupdelete.StateDeleting, Record: rec,
			Presence: backupdelete.Presence(i % 3), Now: now})
	}
}
