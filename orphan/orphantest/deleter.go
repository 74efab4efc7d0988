package orphantest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
)

// runDeleterTests checks that an adapter's Delete honours the contract of
// orphan.Deleter on data the harness makes.
func runDeleterTests(t *testing.T, h AdapterHarness) {
	t.Helper()
	ctx := context.Background()

	t.Run("DeleteRemovesData", func(t *testing.T) {
		d := h.Adapter(t)
		r := record(t, h.MakeOrphan(t))
		if !h.Exists(t, r.Item()) {
			t.Fatalf("harness: MakeOrphan made no data")
		}
		if err := d.Delete(ctx, r); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if h.Exists(t, r.Item()) {
			t.Fatalf("the data is still there after Delete")
		}
	})

	t.Run("DeleteOfGoneDataIsSuccess", func(t *testing.T) {
		d := h.Adapter(t)
		r := record(t, h.MakeOrphan(t))
		if err := d.Delete(ctx, r); err != nil {
			t.Fatalf("first Delete: %v", err)
		}
		if err := d.Delete(ctx, r); err != nil {
			t.Fatalf("second Delete of data already gone: got %v, want nil", err)
		}
	})

	t.Run("ClaimedDataIsKept", func(t *testing.T) {
		d := h.Adapter(t)
		r := record(t, h.MakeOrphan(t))
		h.Claim(t, r.Item())
		err := d.Delete(ctx, r)
		if !errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Fatalf("Delete of claimed data: got %v, want an error wrapping ErrPreconditionFailed", err)
		}
		if !h.Exists(t, r.Item()) {
			t.Fatalf("Delete removed data that was claimed")
		}
	})

	t.Run("OthersUntouched", func(t *testing.T) {
		d := h.Adapter(t)
		victim, bystander := record(t, h.MakeOrphan(t)), h.MakeOrphan(t)
		if err := d.Delete(ctx, victim); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if !h.Exists(t, bystander) {
			t.Fatalf("deleting one orphan removed another")
		}
	})

	t.Run("ConcurrentDeletesOfDifferentRecords", func(t *testing.T) {
		d := h.Adapter(t)
		const n = 4
		recs := make([]orphan.Record, n)
		for i := range recs {
			recs[i] = record(t, h.MakeOrphan(t))
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, r := range recs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = d.Delete(ctx, r)
			}()
		}
		wg.Wait()
		for i, r := range recs {
			if errs[i] != nil {
				t.Errorf("Delete %s: %v", r.Name, errs[i])
			}
			if h.Exists(t, r.Item()) {
				t.Errorf("%s still exists", r.Name)
			}
		}
	})

	t.Run("CancelledContextDeletesNothing", func(t *testing.T) {
		d := h.Adapter(t)
		r := record(t, h.MakeOrphan(t))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := d.Delete(cctx, r)
		if err == nil {
			t.Skip("deleter finished before looking at its context; nothing to check")
		}
		if !h.Exists(t, r.Item()) {
			t.Fatalf("Delete failed (%v) yet removed the data", err)
		}
	})
}
