package spdktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// Harness says what RunConformanceTests checks: one field per interface
// of package spdkrpc that a host may implement. Nil fields are skipped.
type Harness struct {
	// Caller makes the spdkrpc.Caller under test, reaching the fake SPDK at
	// opts.SocketPath and failing any reply over opts.MaxReplySize bytes
	// with an error matching spdkrpc.ErrTooLarge. The suite calls it once
	// per subtest, with a server of its own; the maker registers its own
	// cleanup (Close) with t.
	Caller func(t *testing.T, opts spdkrpc.ClientOptions) spdkrpc.Caller
}

// RunConformanceTests checks every implementation h names against the
// contracts of package spdkrpc, each in a subtest named after its interface
// ("Caller": SPDK's JSON-RPC contract as spdkrpc.Caller documents it:
// results decoded, error replies as *spdkrpc.RPCError with SPDK's code, a
// result of the wrong shape as spdkrpc.ErrUnexpectedResult, the context
// honoured before and during a call, concurrent calls each getting their
// own reply, and garbage, truncated, dropped and oversized replies as
// typed connection errors after which the next call works). A Harness
// with nothing set is a test failure. spdkrpc.Client runs it; so can a
// host's Caller:
//
//	func TestCaller(t *testing.T) {
//		spdktest.RunConformanceTests(t, spdktest.Harness{
//			Caller: func(t *testing.T, opts spdkrpc.ClientOptions) spdkrpc.Caller { return newMyCaller(t, opts) },
//		})
//	}
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.Caller == nil {
		t.Fatal("spdktest: the Harness sets nothing to test")
	}
	t.Run("Caller", func(t *testing.T) { runCallerTests(t, h.Caller) })
}

// waitLimit bounds every wait of the suite: a Caller that blocks past it
// fails rather than hangs.
const waitLimit = 10 * time.Second

func runCallerTests(t *testing.T, mk func(*testing.T, spdkrpc.ClientOptions) spdkrpc.Caller) {
	ctx := context.Background()
	setup := func(t *testing.T, maxReply int64) (*Server, spdkrpc.Caller) {
		t.Helper()
		srv := startForSuite(t)
		return srv, mk(t, spdkrpc.ClientOptions{SocketPath: srv.SocketPath(), MaxReplySize: maxReply})
	}

	t.Run("DecodesResult", func(t *testing.T) {
		srv, c := setup(t, 0)
		id, err := srv.AddLvstore("disk-1")
		if err != nil {
			t.Fatal(err)
		}
		var got []spdkrpc.Lvstore
		if err := c.Call(ctx, "bdev_lvol_get_lvstores", nil, &got); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if len(got) != 1 || got[0].UUID != id || got[0].Name != "disk-1" {
			t.Fatalf("result %+v", got)
		}
		if err := c.Call(ctx, "bdev_lvol_get_lvstores", nil, nil); err != nil {
			t.Fatalf("Call with a nil result: %v", err)
		}
	})

	t.Run("ErrorRepliesAreRPCErrors", func(t *testing.T) {
		srv, c := setup(t, 0)
		for _, tc := range []struct {
			method string
			params any
			code   int
		}{
			{"no_such_method", nil, spdkrpc.CodeMethodNotFound},
			{"bdev_lvol_delete", map[string]string{"name": "disk-1/missing"}, spdkrpc.CodeNoSuchDevice},
			// A category of the wrong type fails SPDK's decoder, which
			// bdev_raid_rpc.c answers with a parse error.
			{"bdev_raid_get_bdevs", map[string]any{"category": 7}, spdkrpc.CodeParseError},
			// The NVMe-oF methods: an unknown controller is -ENODEV to
			// detach; nvmf_rpc.c answers an unknown NQN -32602; listing an
			// unknown controller is EINVAL, positive.
			{"bdev_nvme_detach_controller", map[string]string{"name": "missing"}, spdkrpc.CodeNoSuchDevice},
			{"nvmf_delete_subsystem", map[string]string{"nqn": "nqn.2023-01.io.longhorn.spdk:missing"}, spdkrpc.CodeInvalidParams},
			{"bdev_nvme_get_controllers", map[string]string{"name": "missing"}, 22},
		} {
			err := c.Call(ctx, tc.method, tc.params, nil)
			var rerr *spdkrpc.RPCError
			if !errors.As(err, &rerr) || rerr.Code != tc.code || rerr.Method != tc.method || rerr.Message == "" {
				t.Errorf("%s: err = %v, want an *RPCError of code %d naming the method", tc.method, err, tc.code)
			}
			if errors.Is(err, spdkrpc.ErrNotFound) != (tc.code == spdkrpc.CodeNoSuchDevice) || errors.Is(err, spdkrpc.ErrConnection) {
				t.Errorf("%s: err = %v matches ErrNotFound %v, ErrConnection %v", tc.method, err,
					errors.Is(err, spdkrpc.ErrNotFound), errors.Is(err, spdkrpc.ErrConnection))
			}
		}
		stillWorks(t, srv, c)
	})

	t.Run("ResultOfTheWrongShape", func(t *testing.T) {
		srv, c := setup(t, 0)
		var wrong map[string]string
		err := c.Call(ctx, "bdev_lvol_get_lvols", nil, &wrong)
		if !errors.Is(err, spdkrpc.ErrUnexpectedResult) || errors.Is(err, spdkrpc.ErrConnection) {
			t.Fatalf("a list decoded into a map: err = %v, want ErrUnexpectedResult and not ErrConnection", err)
		}
		stillWorks(t, srv, c)
	})

	t.Run("ContextDoneBeforeTheCall", func(t *testing.T) {
		srv, c := setup(t, 0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := c.Call(cctx, "bdev_lvol_get_lvstores", nil, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if n := srv.CallCount("bdev_lvol_get_lvstores"); n != 0 {
			t.Fatalf("a call with a cancelled context reached SPDK (%d requests)", n)
		}
	})

	t.Run("ContextEndsDuringTheCall", func(t *testing.T) {
		srv, c := setup(t, 0)
		late := make(chan struct{})
		srv.Inject(Fault{Method: "bdev_raid_get_bdevs", Delay: 100 * time.Millisecond, Then: func() { close(late) }})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Call(cctx, "bdev_raid_get_bdevs", map[string]string{"category": "all"}, nil) }()
		waitFor(t, func() bool { return srv.CallCount("bdev_raid_get_bdevs") > 0 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		case <-time.After(waitLimit):
			t.Fatal("a cancelled call did not return")
		}
		// The late reply, when it comes, must not confuse the next call.
		select {
		case <-late:
		case <-time.After(waitLimit):
			t.Fatal("the server never answered the cancelled call")
		}
		stillWorks(t, srv, c)
	})

	t.Run("ConcurrentCallsGetTheirOwnReplies", func(t *testing.T) {
		srv, c := setup(t, 0)
		const n = 8
		for i := range n {
			if _, err := srv.AddRaid(fmt.Sprintf("e-%d", i), "a"); err != nil {
				t.Fatal(err)
			}
		}
		// Every other call is slow, so replies come back out of order.
		srv.Inject(Fault{Method: "bdev_get_bdevs", Delay: 10 * time.Millisecond, Times: -1})
		var wg sync.WaitGroup
		errs := make(chan error, 4*n)
		for i := range 4 * n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("e-%d", i%n)
				if i%2 == 0 {
					var got []spdkrpc.Bdev
					err := c.Call(ctx, "bdev_get_bdevs", map[string]string{"name": name}, &got)
					if err == nil && (len(got) != 1 || got[0].Name != name) {
						err = fmt.Errorf("asked for %s, got %+v", name, got)
					}
					errs <- err
					return
				}
				var got []spdkrpc.RaidBdev
				err := c.Call(ctx, "bdev_raid_get_bdevs", map[string]string{"category": "all"}, &got)
				if err == nil && len(got) != n {
					err = fmt.Errorf("listed %d RAID bdevs, want %d", len(got), n)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("UnreadableRepliesAreConnectionErrors", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			action   FaultAction
			protocol bool // the error must be a *spdkrpc.ProtocolError
		}{
			{"garbage", Garbage, true},
			{"truncated", Truncate, true},
			{"dropped", Drop, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv, c := setup(t, 0)
				srv.Inject(Fault{Method: "bdev_lvol_get_lvstores", Action: tc.action})
				var got []spdkrpc.Lvstore
				err := c.Call(ctx, "bdev_lvol_get_lvstores", nil, &got)
				var pe *spdkrpc.ProtocolError
				if !errors.Is(err, spdkrpc.ErrConnection) || (tc.protocol && !errors.As(err, &pe)) {
					t.Fatalf("err = %v, want ErrConnection (and a *ProtocolError: %v)", err, tc.protocol)
				}
				stillWorks(t, srv, c)
			})
		}
	})

	t.Run("OversizedReplyIsTooLarge", func(t *testing.T) {
		const limit = 4096
		srv, c := setup(t, limit)
		if _, err := srv.AddLvstore("disk-1"); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if _, err := srv.AddLvol("disk-1", fmt.Sprintf("vol-%02d-r-00000000", i)); err != nil {
				t.Fatal(err)
			}
		}
		var got []spdkrpc.Lvol
		err := c.Call(ctx, "bdev_lvol_get_lvols", nil, &got)
		if !errors.Is(err, spdkrpc.ErrTooLarge) || !errors.Is(err, spdkrpc.ErrConnection) {
			t.Fatalf("a reply of 50 lvols over a %d-byte limit: err = %v, want ErrTooLarge and ErrConnection", limit, err)
		}
		// Small replies still work, many times the limit in total.
		for range 10 {
			stillWorks(t, srv, c)
		}
	})
}

// stillWorks checks that c answers a small call correctly.
func stillWorks(t *testing.T, srv *Server, c spdkrpc.Caller) {
	t.Helper()
	var got []spdkrpc.RaidBdev
	if err := c.Call(context.Background(), "bdev_raid_get_bdevs", map[string]string{"category": "all"}, &got); err != nil {
		t.Fatalf("the next call failed: %v", err)
	}
	if want := len(srv.RaidNames()); len(got) != want {
		t.Fatalf("the next call listed %d RAID bdevs, want %d", len(got), want)
	}
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the server")
		}
		time.Sleep(time.Millisecond)
	}
}

// startForSuite starts a server on a short socket path (Unix socket paths
// are limited to about 100 bytes; t.TempDir can be longer).
func startForSuite(t *testing.T) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "spdktest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := Start(filepath.Join(dir, "s.sock"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}
