package tokenringtest

import (
	"context"
	"reflect"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// testCleanupStateStore checks the CleanupStateStore contract: an empty
// store loads the zero state; Save replaces the whole state and Load
// returns it; neither shares slices with the caller; a cancelled context
// fails both with an error wrapping context.Canceled.
func testCleanupStateStore(t *testing.T, mk func(t *testing.T) tokenring.CleanupStateStore) {
	ctx := context.Background()
	t.Run("EmptyLoadsZero", func(t *testing.T) {
		st, err := mk(t).Load(ctx)
		if err != nil || len(st.Done) != 0 || len(st.Running) != 0 {
			t.Fatalf("Load of an empty store = %+v, %v; want the zero state", st, err)
		}
	})
	t.Run("SaveReplaces", func(t *testing.T) {
		s := mk(t)
		first := tokenring.CleanupState{Done: []string{"10.0.0.1", "10.0.0.4"}, Running: []string{"10.0.0.7"}}
		if err := s.Save(ctx, first); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(ctx)
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("Load = %+v, %v; want %+v", got, err, first)
		}
		second := tokenring.CleanupState{Done: []string{"10.0.0.1", "10.0.0.4", "10.0.0.7"}}
		if err := s.Save(ctx, second); err != nil {
			t.Fatal(err)
		}
		got, err = s.Load(ctx)
		if err != nil || !reflect.DeepEqual(got.Done, second.Done) || len(got.Running) != 0 {
			t.Fatalf("after a second Save, Load = %+v, %v; want %+v (a running node left over would block its replicas forever)", got, err, second)
		}
	})
	t.Run("NoSharedSlices", func(t *testing.T) {
		s := mk(t)
		st := tokenring.CleanupState{Done: []string{"10.0.0.1"}, Running: []string{"10.0.0.2"}}
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		st.Done[0], st.Running[0] = "changed", "changed"
		got, err := s.Load(ctx)
		if err != nil || got.Done[0] != "10.0.0.1" || got.Running[0] != "10.0.0.2" {
			t.Fatalf("the store kept the caller's slices: %+v, %v", got, err)
		}
		got.Done[0] = "changed again"
		if again, _ := s.Load(ctx); again.Done[0] != "10.0.0.1" {
			t.Fatalf("Load returned the store's own slices: %+v", again)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		s := mk(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Load(cctx)
		checkCancelled(t, "Load", err)
		checkCancelled(t, "Save", s.Save(cctx, tokenring.CleanupState{Done: []string{"10.0.0.1"}}))
	})
}
