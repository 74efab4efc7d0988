package spdkrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// unreadable reports whether err is one of the two ways an unreadable
// reply may fail a call.
func unreadable(err error) bool {
	return errors.Is(err, spdkrpc.ErrUnexpectedResult) || errors.Is(err, spdkrpc.ErrConnection)
}

func TestListMethodsRejectWrongShapes(t *testing.T) {
	calls := map[string]func(context.Context, spdkrpc.Caller) (int, error){
		"bdev_get_bdevs": func(ctx context.Context, c spdkrpc.Caller) (int, error) {
			l, err := spdkrpc.BdevGetBdevs(ctx, c, "")
			return len(l), err
		},
		"bdev_lvol_get_lvstores": func(ctx context.Context, c spdkrpc.Caller) (int, error) {
			l, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
			return len(l), err
		},
		"bdev_lvol_get_lvols": func(ctx context.Context, c spdkrpc.Caller) (int, error) {
			l, err := spdkrpc.BdevLvolGetLvols(ctx, c, "")
			return len(l), err
		},
		"bdev_raid_get_bdevs": func(ctx context.Context, c spdkrpc.Caller) (int, error) {
			l, err := spdkrpc.BdevRaidGetBdevs(ctx, c, "")
			return len(l), err
		},
	}
	s := newTarget(t)
	c := fixture.Client(t, s.srv, spdkrpc.ClientOptions{})
	for method, call := range calls {
		for _, bad := range fixture.BadLists {
			f := bad.Fault
			f.Method = method
			s.srv.Inject(f)
			n, err := call(context.Background(), c)
			if !unreadable(err) || n != 0 {
				t.Errorf("%s, %s: %d elements, err = %v; want an unreadable-reply error", method, bad.Name, n, err)
			}
			if f.Action == spdktest.Replace {
				var rerr *spdkrpc.ResultError
				if !errors.As(err, &rerr) || rerr.Method != method {
					t.Errorf("%s, %s: err = %v, want a *ResultError naming the method", method, bad.Name, err)
				}
			}
		}
		// The connection stays usable after a wrong shape, and an empty
		// list is still an empty list.
		if _, err := call(context.Background(), c); err != nil {
			t.Errorf("%s after the faults: %v", method, err)
		}
	}
	srv := fixture.Start(t)
	for method, call := range calls {
		if n, err := call(context.Background(), fixture.Client(t, srv, spdkrpc.ClientOptions{})); err != nil || n != 0 {
			t.Errorf("%s on an empty target: %d, %v", method, n, err)
		}
	}
}

func TestDeleteMethodsRejectAnythingButTrue(t *testing.T) {
	for _, method := range []string{"bdev_lvol_delete", "bdev_raid_delete"} {
		for _, bad := range []spdktest.Fault{
			{Action: spdktest.Replace},
			{Action: spdktest.Replace, Result: json.RawMessage(`false`)},
			{Action: spdktest.Replace, Result: json.RawMessage(`"true"`)},
			{Action: spdktest.Replace, Result: json.RawMessage(`[true]`)},
			{Action: spdktest.Replace, Result: json.RawMessage(`{}`)},
			{Action: spdktest.Replace, Result: json.RawMessage(`1`)},
			{Action: spdktest.Truncate},
		} {
			s := newTarget(t)
			c := fixture.Client(t, s.srv, spdkrpc.ClientOptions{})
			bad.Method = method
			s.srv.Inject(bad)
			var err error
			if method == "bdev_lvol_delete" {
				err = spdkrpc.BdevLvolDelete(context.Background(), c, s.lvol)
			} else {
				err = spdkrpc.BdevRaidDelete(context.Background(), c, s.raid)
			}
			if !unreadable(err) {
				t.Errorf("%s, %s: err = %v", method, bad.Result, err)
			}
		}
	}
}

// target is a fake SPDK holding one of each object the list and delete
// methods reach: an lvstore, an lvol and a RAID bdev.
type target struct {
	srv        *spdktest.Server
	lvol, raid string // the lvol's UUID, the RAID bdev's name
}

func newTarget(t *testing.T) *target {
	t.Helper()
	s := &target{srv: fixture.Start(t), raid: "vol1-e-0"}
	fixture.Must(s.srv.AddLvstore("disk-1"))(t)
	s.lvol = fixture.Must(s.srv.AddLvol("disk-1", "vol1-r-aaaaaaaa"))(t)
	fixture.Must(s.srv.AddRaid(s.raid, "a", "b"))(t)
	return s
}
