package spdkrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// stormServer answers every request with its own params as the result,
// after a random delay, so replies go out of order; each reply is written
// in two pieces with a pause between them, so a reader's interruption
// often lands inside a reply. When drop is set, one request in dropEvery
// makes the server write half a reply and close the connection; when
// garbage is set, one in dropEvery gets bytes that are no JSON instead.
type stormServer struct {
	ln        net.Listener
	dropEvery int
	garbage   bool
	served    atomic.Int64
	accepted  atomic.Int64
	wg        sync.WaitGroup
}

func startStormServer(t *testing.T, dropEvery int, garbage bool) *stormServer {
	t.Helper()
	ln, err := net.Listen("unix", fixture.SocketPath(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &stormServer{ln: ln, dropEvery: dropEvery, garbage: garbage}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.serve(nc) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *stormServer) serve(nc net.Conn) {
	defer nc.Close()
	var (
		wmu    sync.Mutex // one reply on the wire at a time, as SPDK writes
		closed bool
		wg     sync.WaitGroup
	)
	defer wg.Wait()
	dec := json.NewDecoder(nc)
	for {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params json.RawMessage `json:"params"`
		}
		if err := dec.Decode(&req); err != nil {
			return
		}
		n := s.served.Add(1)
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
			full := []byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + string(req.Params) + "}\n")
			cut := 1 + rng.IntN(len(full)-1)
			fault := s.dropEvery > 0 && n%int64(s.dropEvery) == 0
			wmu.Lock()
			defer wmu.Unlock()
			if closed {
				return
			}
			switch {
			case fault && s.garbage:
				_, _ = nc.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":tru}`))
				closed = true
				nc.Close()
				return
			case fault:
				_, _ = nc.Write(full[:cut])
				closed = true
				nc.Close()
				return
			}
			if _, err := nc.Write(full[:cut]); err != nil {
				return
			}
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			_, _ = nc.Write(full[cut:])
		}()
	}
}

// TestCancellationStormDeliversEveryReplyToItsOwnCaller guards the
// client's sharing of one connection by many calls under cancellation:
// callers cancel at random points (before the write, during it, while
// reading for everyone, while waiting to be handed a reply), the server
// replies late, out of order, in pieces, and now and then drops the
// connection half-way through a reply or answers garbage. Whatever
// happens, a call that succeeds holds its own reply (the result echoes
// the call's own tag), a failed call fails with its context's error or
// the connection's, and no call outlives its context by more than a
// scheduling slack; calls without a deadline end because the server
// either answers or drops them.
func TestCancellationStormDeliversEveryReplyToItsOwnCaller(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dropEvery int
		garbage   bool
		closeMid  bool // Close the client while the calls run
	}{
		{"replies", 0, false, false},
		{"drops", 97, false, false},
		{"garbage", 89, true, false},
		{"closed", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noGoroutineLeak(t)
			srv := startStormServer(t, tc.dropEvery, tc.garbage)
			c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: srv.ln.Addr().String()})
			defer c.Close()

			const callers, calls = 24, 40
			// slack is how far past its deadline a call may return: the race
			// detector and a shared machine make scheduling slow, but a call
			// that hangs on a read nobody interrupts never returns at all.
			const slack = 3 * time.Second
			var (
				wg                        sync.WaitGroup
				ok, cancelled, connFailed atomic.Int64
				wrong                     = make(chan string, callers*calls)
			)
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 42))
					for i := range calls {
						tag := fmt.Sprintf("caller-%d-call-%d", g, i)
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						var deadline time.Time
						switch rng.IntN(4) {
						case 0: // no deadline: only the server's answer or drop ends it
						case 1:
							d := time.Duration(rng.IntN(3000)) * time.Microsecond
							ctx, cancel = context.WithTimeout(ctx, d)
							deadline = time.Now().Add(d)
						default:
							var cc context.CancelFunc
							ctx, cc = context.WithCancel(ctx)
							d := time.Duration(rng.IntN(3000)) * time.Microsecond
							timer := time.AfterFunc(d, cc)
							cancel = func() { timer.Stop(); cc() }
							deadline = time.Now().Add(d)
						}
						var got struct {
							Tag string `json:"tag"`
						}
						start := time.Now()
						err := c.Call(ctx, "echo", map[string]string{"tag": tag}, &got)
						took := time.Since(start)
						ctxErr := ctx.Err()
						cancel()
						var pe *spdkrpc.ProtocolError
						switch {
						case err == nil && got.Tag != tag:
							wrong <- fmt.Sprintf("%s got the reply of %q", tag, got.Tag)
						case err == nil:
							ok.Add(1)
						case ctxErr != nil && errors.Is(err, ctxErr):
							cancelled.Add(1)
						case errors.Is(err, spdkrpc.ErrConnection) || errors.As(err, &pe):
							connFailed.Add(1)
						case tc.closeMid && errors.Is(err, spdkrpc.ErrClosed):
							connFailed.Add(1)
						default:
							wrong <- fmt.Sprintf("%s: unexpected error %v (ctx: %v)", tag, err, ctxErr)
						}
						if !deadline.IsZero() && time.Now().After(deadline.Add(slack)) {
							wrong <- fmt.Sprintf("%s returned %v after its context ended (took %v)", tag, time.Since(deadline), took)
						}
					}
				}()
			}
			if tc.closeMid {
				go func() {
					for srv.served.Load() < callers*calls/4 {
						time.Sleep(time.Millisecond)
					}
					c.Close() // while calls write, read and wait
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("calls still running after 60s: a call hangs")
			}
			close(wrong)
			for w := range wrong {
				t.Error(w)
			}
			t.Logf("ok %d, cancelled %d, connection failures %d, server saw %d requests",
				ok.Load(), cancelled.Load(), connFailed.Load(), srv.served.Load())
			if ok.Load() == 0 {
				t.Error("no call succeeded: the storm tested nothing")
			}
			if n := srv.accepted.Load(); tc.dropEvery == 0 && n != 1 {
				// Without faults one connection serves every call: a second
				// means a cancelled call's deadline landed on another call's
				// write or read and failed the connection (the resend of an
				// unsent request would hide it from the callers).
				t.Errorf("the client dialled %d connections, want 1", n)
			}
			if (tc.dropEvery > 0 || tc.closeMid) && connFailed.Load() == 0 {
				t.Error("no call saw the connection fail: the faults never landed")
			}
			c.Close()
		})
	}
}

// TestRequestReadBySPDKIsNeverSentAgain: a connection that SPDK drops
// after reading a request (it may have done the work: a delete) fails the
// call; the call is never resent on a new connection, which could delete
// a second time something created meanwhile under the same name.
func TestRequestReadBySPDKIsNeverSentAgain(t *testing.T) {
	for _, action := range []spdktest.FaultAction{spdktest.Drop, spdktest.Truncate, spdktest.Garbage} {
		srv := fixture.Start(t)
		c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
		ctx := context.Background()
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil { // a live connection first
			t.Fatal(err)
		}
		srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Action: action})
		if _, err := spdkrpc.BdevRaidGetBdevs(ctx, c, ""); err == nil {
			t.Fatalf("fault %d: the call succeeded", action)
		}
		if n := srv.CallCount("bdev_raid_get_bdevs"); n != 1 {
			t.Fatalf("fault %d: SPDK saw the request %d times, want once", action, n)
		}
		c.Close()
		srv.Close()
	}
}
