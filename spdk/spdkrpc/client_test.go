package spdkrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// noGoroutineLeak fails the test if, after cleanup, more goroutines run
// than before it started. Goroutines exit asynchronously after Close
// returns in the server, so it polls with a generous bound.
func noGoroutineLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestCallDecodesResultAndKeepsRPCErrors(t *testing.T) {
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	id := fixture.Must(srv.AddLvol("disk-1", "vol-r-00000001"))(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()

	lvols, err := spdkrpc.BdevLvolGetLvols(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(lvols) != 1 || lvols[0].UUID != id || lvols[0].Alias != "disk-1/vol-r-00000001" || lvols[0].Lvs.Name != "disk-1" {
		t.Fatalf("lvols = %+v", lvols)
	}

	err = spdkrpc.BdevLvolDelete(ctx, c, "disk-1/missing")
	var rerr *spdkrpc.RPCError
	if !errors.As(err, &rerr) || rerr.Code != -19 || rerr.Message != "No such device" || rerr.Method != "bdev_lvol_delete" {
		t.Fatalf("err = %v, want RPCError -19", err)
	}
	if !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Fatalf("errors.Is(%v, ErrNotFound) = false", err)
	}

	err = c.Call(ctx, "no_such_method", nil, nil)
	if !errors.As(err, &rerr) || rerr.Code != spdkrpc.CodeMethodNotFound || errors.Is(err, spdkrpc.ErrNotFound) {
		t.Fatalf("err = %v, want -32601 not matching ErrNotFound", err)
	}
	err = c.Call(ctx, "bdev_raid_get_bdevs", map[string]any{"category": 7}, nil)
	if !errors.As(err, &rerr) || rerr.Code != spdkrpc.CodeParseError {
		t.Fatalf("err = %v, want -32700", err)
	}

	// A result of the wrong type is a ResultError; the connection survives.
	var wrong map[string]string
	err = c.Call(ctx, "bdev_lvol_get_lvols", nil, &wrong)
	var resErr *spdkrpc.ResultError
	if !errors.As(err, &resErr) || errors.Is(err, spdkrpc.ErrConnection) {
		t.Fatalf("err = %v, want ResultError", err)
	}
	if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
		t.Fatalf("connection did not survive a ResultError: %v", err)
	}
}

func TestCallHonoursContext(t *testing.T) {
	noGoroutineLeak(t)
	srv := fixture.Start(t)
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Delay: 2 * time.Second})
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("call outlived its context by %v", d)
	}

	// A cancelled call returns promptly too, and its late reply does not
	// confuse the next call on the same connection.
	ctx2, cancel2 := context.WithCancel(context.Background())
	srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Delay: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() { _, err := spdkrpc.BdevRaidGetBdevs(ctx2, c, ""); done <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel2()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("cancelled call did not return")
	}
	time.Sleep(400 * time.Millisecond) // let the late reply arrive
	raids, err := spdkrpc.BdevRaidGetBdevs(context.Background(), c, "")
	if err != nil || len(raids) != 0 {
		t.Fatalf("after a late reply: %v, %v", raids, err)
	}

	// An already-cancelled context never reaches the server.
	before := srv.CallCount("bdev_lvol_get_lvols")
	_, err = spdkrpc.BdevLvolGetLvols(ctx2, c, "")
	if !errors.Is(err, context.Canceled) || srv.CallCount("bdev_lvol_get_lvols") != before {
		t.Fatalf("err = %v; calls %d -> %d", err, before, srv.CallCount("bdev_lvol_get_lvols"))
	}
	c.Close()
	srv.Close()
}

func TestBrokenConnectionFailsInFlightCallsAndReconnects(t *testing.T) {
	noGoroutineLeak(t)
	for _, tc := range []struct {
		name   string
		action spdktest.FaultAction
		check  func(error) bool
	}{
		{"dropped", spdktest.Drop, func(err error) bool { return errors.Is(err, spdkrpc.ErrConnection) }},
		{"garbage", spdktest.Garbage, func(err error) bool {
			var pe *spdkrpc.ProtocolError
			return errors.As(err, &pe) && errors.Is(err, spdkrpc.ErrConnection)
		}},
		{"truncated", spdktest.Truncate, func(err error) bool {
			var pe *spdkrpc.ProtocolError
			return errors.As(err, &pe) && errors.Is(err, spdkrpc.ErrConnection)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fixture.Start(t)
			fixture.Must(srv.AddRaid("e-1", "a"))(t)
			c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
			ctx := context.Background()

			// A slow call is in flight when the fault breaks the connection.
			srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Delay: 5 * time.Second})
			slow := make(chan error, 1)
			go func() { _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); slow <- err }()
			for srv.CallCount("bdev_lvol_get_lvstores") == 0 {
				time.Sleep(time.Millisecond)
			}
			srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Action: tc.action})
			_, err := spdkrpc.BdevRaidGetBdevs(ctx, c, "")
			if !tc.check(err) {
				t.Fatalf("faulted call: err = %v", err)
			}
			select {
			case err := <-slow:
				if !errors.Is(err, spdkrpc.ErrConnection) {
					t.Fatalf("in-flight call: err = %v, want ErrConnection", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("in-flight call was not failed with the connection")
			}
			raids, err := spdkrpc.BdevRaidGetBdevs(ctx, c, "")
			if err != nil || len(raids) != 1 {
				t.Fatalf("after reconnect: %v, %v", raids, err)
			}
			c.Close()
			srv.Close()
		})
	}
}

func TestReplyOverLimitIsAnError(t *testing.T) {
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	for i := range 50 {
		fixture.Must(srv.AddLvol("disk-1", fmt.Sprintf("vol-%02d-r-00000000", i)))(t)
	}
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{MaxReplySize: 2048})
	ctx := context.Background()
	if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
		t.Fatalf("small reply: %v", err)
	}
	_, err := spdkrpc.BdevLvolGetLvols(ctx, c, "")
	var tooLarge *bounded.TooLargeError
	if !errors.Is(err, spdkrpc.ErrTooLarge) || !errors.Is(err, spdkrpc.ErrConnection) || !errors.As(err, &tooLarge) || tooLarge.Limit != 2048 {
		t.Fatalf("err = %v, want ErrTooLarge wrapping a *bounded.TooLargeError of limit 2048", err)
	}
	// Small replies still work, many times the limit in total.
	for range 20 {
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
			t.Fatalf("small reply after an oversized one: %v", err)
		}
	}
}

func TestCloseFailsCallsAndLeavesNoGoroutine(t *testing.T) {
	noGoroutineLeak(t)
	srv := fixture.Start(t)
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Delay: 5 * time.Second})
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	res := make(chan error, 1)
	go func() { _, err := spdkrpc.BdevLvolGetLvstores(context.Background(), c); res <- err }()
	for srv.CallCount("bdev_lvol_get_lvstores") == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, spdkrpc.ErrClosed) {
		t.Fatalf("in-flight call: %v, want ErrClosed", err)
	}
	if _, err := spdkrpc.BdevLvolGetLvstores(context.Background(), c); !errors.Is(err, spdkrpc.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	srv.Close()
}

func TestDialFailureIsConnectionError(t *testing.T) {
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: filepath.Join(t.TempDir(), "absent.sock")})
	defer c.Close()
	_, err := spdkrpc.BdevLvolGetLvstores(context.Background(), c)
	if !errors.Is(err, spdkrpc.ErrConnection) {
		t.Fatalf("err = %v", err)
	}
	if fixture.NewClient(t, spdkrpc.ClientOptions{}).SocketPath() != spdkrpc.DefaultSocketPath {
		t.Fatal("default socket path")
	}
}

// rawServer answers every request with fixed bytes, for replies spdktest
// never sends; reply gets the request's ID.
func rawServer(t *testing.T, reply func(id string) string) string {
	t.Helper()
	return startScriptedPeer(t, func(c net.Conn, req peerRequest) error {
		_, err := c.Write([]byte(reply(strconv.FormatUint(req.ID, 10))))
		return err
	}).path
}

func TestMalformedRepliesFailTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
	}{
		{"not an object", `[1,2,3]`},
		{"wrong version", `{"jsonrpc":"1.0","id":ID,"result":true}`},
		{"no result or error", `{"jsonrpc":"2.0","id":ID}`},
		{"null id error", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"string id", `{"jsonrpc":"2.0","id":"x","result":true}`},
		{"bad error object", `{"jsonrpc":"2.0","id":ID,"error":"boom"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := rawServer(t, func(id string) string { return strings.ReplaceAll(tc.reply, "ID", id) + "\n" })
			c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: path})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := c.Call(ctx, "x", nil, nil)
			var pe *spdkrpc.ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, spdkrpc.ErrConnection) {
				t.Fatalf("err = %v, want ProtocolError", err)
			}
		})
	}
}

// TestReplyWithUnknownIDFailsTheConnection: the server first sends a
// reply to an id the client never sent, then the real one. The stray
// reply shows the stream cannot be trusted: the call fails with a
// *ProtocolError instead of skipping it and taking the next reply.
func TestReplyWithUnknownIDFailsTheConnection(t *testing.T) {
	path := rawServer(t, func(id string) string {
		return `{"jsonrpc":"2.0","id":999999,"result":false}` + "\n" + `{"jsonrpc":"2.0","id":` + id + `,"result":true}` + "\n"
	})
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: path})
	defer c.Close()
	var ok bool
	err := c.Call(context.Background(), "x", nil, &ok)
	var pe *spdkrpc.ProtocolError
	if !errors.As(err, &pe) || ok {
		t.Fatalf("ok=%v err=%v, want a *ProtocolError", ok, err)
	}
}

// TestCallAfterAFailedReplyRedials: a call that starts after another
// learned of the connection's failure dials anew; it never inherits the
// failure of a connection already known broken.
func TestCallAfterAFailedReplyRedials(t *testing.T) {
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	for i := range 50 {
		srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Action: spdktest.Garbage})
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); !errors.Is(err, spdkrpc.ErrConnection) {
			t.Fatalf("round %d: garbage: %v", i, err)
		}
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
			t.Fatalf("round %d: the call after the garbage: %v", i, err)
		}
	}
}

// TestIdleConnectionDroppedBySPDKIsRedialed: SPDK restarting drops the
// client's idle connection; the next call finds out when its write fails
// before a byte left, and sends the request on a new connection.
func TestIdleConnectionDroppedBySPDKIsRedialed(t *testing.T) {
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	for i := range 3 {
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		srv.DropConnections()
		time.Sleep(10 * time.Millisecond) // the close reaches the client's socket
	}
	if n := srv.CallCount("bdev_lvol_get_lvstores"); n != 3 {
		t.Fatalf("SPDK saw %d calls, want 3: a request was sent twice", n)
	}
}

// TestCancelledReaderHandsOver: the call reading the connection for
// everyone is cancelled half-way through another call's reply; that call
// takes over the reading, resumes the reply where it stopped, and gets it.
func TestCancelledReaderHandsOver(t *testing.T) {
	noGoroutineLeak(t)
	path := fixture.SocketPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		dec := json.NewDecoder(conn)
		var ids []string
		for range 2 {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if err := dec.Decode(&req); err != nil {
				served <- err
				return
			}
			if req.Method == "second" {
				ids = append(ids, string(req.ID))
			}
		}
		if len(ids) != 1 {
			served <- fmt.Errorf("requests: %v", ids)
			return
		}
		full := `{"jsonrpc":"2.0","id":` + ids[0] + `,"result":[{"name":"lvs-1","uuid":"u"}]}` + "\n"
		if _, err := conn.Write([]byte(full[:20])); err != nil {
			served <- err
			return
		}
		time.Sleep(300 * time.Millisecond) // the first call gives up meanwhile
		_, err = conn.Write([]byte(full[20:]))
		served <- err
		time.Sleep(100 * time.Millisecond)
	}()
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: path})
	defer c.Close()

	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		first <- c.Call(ctx, "first", nil, nil) // reads the connection: no other call does
	}()
	time.Sleep(30 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []spdkrpc.Lvstore
	if err := c.Call(ctx, "second", nil, &got); err != nil || len(got) != 1 || got[0].Name != "lvs-1" {
		t.Fatalf("second call: %+v, %v", got, err)
	}
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first call: %v, want DeadlineExceeded", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
