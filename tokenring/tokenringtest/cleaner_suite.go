package tokenringtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// testCleaner checks the contract of tokenring.Cleaner: the keyspaces to
// clean (no local, no tablet keyspaces), cleaning each,
// ErrKeyspaceNotFound (and not ErrNotFound) for a dropped keyspace,
// StopCleanups, RunCleanup end to end (a dropped keyspace is Dropped, never
// Cleaned), node failures that are retryable and claim no missing
// keyspace, copies, concurrent use, and cancelled contexts.
func testCleaner(t *testing.T, newCleaner func(t *testing.T, c Cluster) CleanerHarness) {
	ctx := context.Background()

	t.Run("CleanupKeyspacesSkipsLocalAndTablets", func(t *testing.T) {
		c := SampleCluster(endpointA)
		got, err := newCleaner(t, c).Cleaner.CleanupKeyspaces(ctx)
		if err != nil {
			t.Fatalf("CleanupKeyspaces: %v", err)
		}
		if want := c.CleanupKeyspaces(); !sameStrings(got, want) {
			t.Errorf("CleanupKeyspaces = %v, want %v", got, want)
		}
	})

	t.Run("NothingToClean", func(t *testing.T) {
		c := SampleCluster(endpointA)
		c.Keyspaces = []Keyspace{{Name: "system", Local: true}, {Name: "tabular", Tablets: true}}
		got, err := newCleaner(t, c).Cleaner.CleanupKeyspaces(ctx)
		if err != nil || len(got) != 0 {
			t.Errorf("CleanupKeyspaces with only local and tablet keyspaces = %v, %v; want none and no error", got, err)
		}
	})

	t.Run("CleanupKeyspace", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		want := c.CleanupKeyspaces()
		for _, ks := range want {
			if err := h.Cleaner.CleanupKeyspace(ctx, ks); err != nil {
				t.Errorf("CleanupKeyspace(%s): %v", ks, err)
			}
		}
		if h.Cleaned != nil && !slices.Equal(h.Cleaned(), want) {
			t.Errorf("cleaned %v, want %v", h.Cleaned(), want)
		}
	})

	t.Run("DroppedKeyspaceIsKeyspaceNotFound", func(t *testing.T) {
		h := newCleaner(t, SampleCluster(endpointA))
		err := h.Cleaner.CleanupKeyspace(ctx, "dropped")
		if !errors.Is(err, tokenring.ErrKeyspaceNotFound) || tokenring.IsRetryable(err) {
			t.Errorf("CleanupKeyspace of a keyspace that does not exist: %v, want a final error wrapping ErrKeyspaceNotFound", err)
		}
		if h.Cleaned != nil && len(h.Cleaned()) != 0 {
			t.Errorf("cleaned %v after cleaning only a missing keyspace", h.Cleaned())
		}
	})

	t.Run("StopCleanups", func(t *testing.T) {
		h := newCleaner(t, SampleCluster(endpointA))
		for i := range 2 {
			if err := h.Cleaner.StopCleanups(ctx); err != nil {
				t.Errorf("StopCleanups #%d with nothing running: %v", i+1, err)
			}
		}
		if h.StopCalls != nil && h.StopCalls() != 2 {
			t.Errorf("%d stops recorded, want 2", h.StopCalls())
		}
		if h.Cleaned != nil && len(h.Cleaned()) != 0 {
			t.Errorf("StopCleanups cleaned %v", h.Cleaned())
		}
	})

	t.Run("RunCleanup", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		report, err := tokenring.RunCleanup(ctx, h.Cleaner)
		want := c.CleanupKeyspaces()
		if err != nil || !sameStrings(report.Keyspaces, want) || !sameStrings(report.Cleaned, want) || len(report.Failed) != 0 {
			t.Errorf("RunCleanup = %+v, %v; want %v listed and cleaned, nothing failed", report, err, want)
		}
		if h.StopCalls != nil && h.StopCalls() != 1 {
			t.Errorf("RunCleanup stopped cleanups %d times, want 1", h.StopCalls())
		}
		if h.Cleaned != nil && !sameStrings(h.Cleaned(), want) {
			t.Errorf("RunCleanup cleaned %v, want %v", h.Cleaned(), want)
		}
	})

	t.Run("FailedCleanupIsRetryable", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		if h.FailCleanup == nil {
			t.Skip("the harness cannot make a cleanup fail")
		}
		h.FailCleanup("metrics")
		err := h.Cleaner.CleanupKeyspace(ctx, "metrics")
		if err == nil || errors.Is(err, tokenring.ErrKeyspaceNotFound) || !tokenring.IsRetryable(err) {
			t.Errorf("failing CleanupKeyspace: %v; want a retryable error that is not ErrKeyspaceNotFound (RunCleanup would count it dropped)", err)
		}
		report, err := tokenring.RunCleanup(ctx, h.Cleaner)
		if err == nil || report.Failed["metrics"] == nil || !slices.Equal(report.Cleaned, []string{"app"}) {
			t.Errorf("RunCleanup with a failing keyspace = %+v, %v; want metrics failed and app cleaned", report, err)
		}
	})

	t.Run("ReturnedKeyspacesAreCopies", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		if got, err := h.Cleaner.CleanupKeyspaces(ctx); err == nil && len(got) > 0 {
			got[0] = "scribbled"
		}
		got, err := h.Cleaner.CleanupKeyspaces(ctx)
		if want := c.CleanupKeyspaces(); err != nil || !sameStrings(got, want) {
			t.Errorf("CleanupKeyspaces after a caller wrote to a returned slice = %v, %v; want %v", got, err, want)
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		c := SampleCluster(endpointA)
		c.Keyspaces = nil
		for i := range 8 {
			c.Keyspaces = append(c.Keyspaces, Keyspace{Name: fmt.Sprintf("ks%d", i)})
		}
		h := newCleaner(t, c)
		var wg sync.WaitGroup
		for _, ks := range c.CleanupKeyspaces() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.Cleaner.StopCleanups(ctx); err != nil {
					t.Errorf("concurrent StopCleanups: %v", err)
				}
				if got, err := h.Cleaner.CleanupKeyspaces(ctx); err != nil || !sameStrings(got, c.CleanupKeyspaces()) {
					t.Errorf("concurrent CleanupKeyspaces = %v, %v", got, err)
				}
				if err := h.Cleaner.CleanupKeyspace(ctx, ks); err != nil {
					t.Errorf("concurrent CleanupKeyspace(%s): %v", ks, err)
				}
			}()
		}
		wg.Wait()
		if h.Cleaned != nil && !sameStrings(h.Cleaned(), c.CleanupKeyspaces()) {
			t.Errorf("after concurrent cleanups: cleaned %v, want each of %v once", h.Cleaned(), c.CleanupKeyspaces())
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		h := newCleaner(t, SampleCluster(endpointA))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		checkCancelled(t, "StopCleanups", h.Cleaner.StopCleanups(cctx))
		_, err := h.Cleaner.CleanupKeyspaces(cctx)
		checkCancelled(t, "CleanupKeyspaces", err)
		checkCancelled(t, "CleanupKeyspace", h.Cleaner.CleanupKeyspace(cctx, "app"))
		if h.Cleaned != nil && len(h.Cleaned()) != 0 {
			t.Errorf("cleaned %v with a cancelled context", h.Cleaned())
		}
	})
}
