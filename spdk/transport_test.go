package spdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// callerFunc is a Caller made of a function: what a host that reaches
// SPDK through another process (Longhorn's instance-manager, which owns
// spdk_tgt's socket) implements, with no socket of its own.
type callerFunc func(ctx context.Context, method string, params, result any) error

func (f callerFunc) Call(ctx context.Context, method string, params, result any) error {
	return f(ctx, method, params, result)
}

// inProcess is a Caller over the fake's state directly, as another
// transport would carry each call: params in, SPDK's result or error
// out, decoded as Caller promises.
func inProcess(srv *spdktest.Server) spdkrpc.Caller {
	return callerFunc(func(ctx context.Context, method string, params, result any) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var raw json.RawMessage
		if params != nil {
			b, err := json.Marshal(params)
			if err != nil {
				return err
			}
			raw = b
		}
		res, err := srv.Answer(method, raw)
		if err != nil {
			return err
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(res, result); err != nil {
			return &spdkrpc.ResultError{Method: method, Err: err}
		}
		return nil
	})
}

// TestAdapterNeedsOnlyACaller: the adapter's inventory, judgement and
// UUID-checked deletion run through a Caller that is not a *Client and
// has no socket, as a host implementing another transport would.
func TestAdapterNeedsOnlyACaller(t *testing.T) {
	s := newScene(t)
	o := newOrphans(t, inProcess(s.srv), noRecords)
	ctx := context.Background()

	snap, err := o.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var replica, engine orphan.Item
	for _, it := range snap.Items {
		switch name := it.Param(orphan.ParamInstanceName); {
		case it.Kind == orphan.KindReplicaInstance && name == repA:
			replica = it
		case it.Kind == orphan.KindEngineInstance && name == "vol1-e-0":
			engine = it
		}
	}
	if replica.Param(orphan.ParamInstanceUUID) != s.uuids["disk-1/"+repA] || engine.Param(orphan.ParamInstanceUUID) != s.uuids["vol1-e-0"] {
		t.Fatalf("scan through the in-process Caller: %+v", snap.Items)
	}
	v, err := o.Judge(ctx, replica)
	if err != nil || v.Outcome != orphan.OutcomeOrphan {
		t.Fatalf("judge: %+v, %v", v, err)
	}

	// A stale UUID is refused, and nothing is deleted.
	fixture.Must(s.srv.RecreateRaid("vol1-e-0"))(t)
	err = o.Delete(ctx, record(t, orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"]))
	if !errors.Is(err, spdk.ErrUUIDMismatch) {
		t.Fatalf("engine with a stale UUID: %v, want ErrUUIDMismatch", err)
	}
	if n := s.srv.CallCount("bdev_raid_delete"); n != 0 {
		t.Fatalf("%d bdev_raid_delete calls after a UUID mismatch", n)
	}

	// The replica's UUID still matches: its tree goes, by UUID, head last.
	if err := o.Delete(ctx, record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA])); err != nil {
		t.Fatal(err)
	}
	got := deletedParams(s.srv, "bdev_lvol_delete")
	if len(got) != 4 || got[3] != s.uuids["disk-1/"+repA] {
		t.Fatalf("deleted %v, want the replica's four lvols by UUID, head last", got)
	}
	if slices.ContainsFunc(s.srv.LvolAliases(), func(a string) bool { return strings.HasPrefix(a, "disk-1/"+repA) }) {
		t.Fatalf("the replica's lvols survived: %v", s.srv.LvolAliases())
	}
}
