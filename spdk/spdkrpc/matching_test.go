package spdkrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// The tests of matching each reply to the one request it answers, against
// a scripted peer on a real Unix socket.

// scriptedPeer serves every connection with answer, which writes what it
// likes for each request it reads (in as many writes as it likes). It
// counts the connections it accepted.
type scriptedPeer struct {
	path  string
	conns atomic.Int32
}

// peerRequest is one request the peer read.
type peerRequest struct {
	ID     uint64
	Method string
	Conn   int32 // which connection, from 1
}

func startScriptedPeer(t *testing.T, answer func(c net.Conn, req peerRequest) error) *scriptedPeer {
	t.Helper()
	p := &scriptedPeer{path: fixture.SocketPath(t)}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := p.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				dec := json.NewDecoder(conn)
				for {
					var req struct {
						ID     uint64 `json:"id"`
						Method string `json:"method"`
					}
					if dec.Decode(&req) != nil {
						return
					}
					if answer(conn, peerRequest{ID: req.ID, Method: req.Method, Conn: n}) != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func reply(id uint64, result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatUint(id, 10) + `,"result":` + result + "}\n")
}

func errorReply(id uint64, code int, msg string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatUint(id, 10) +
		`,"error":{"code":` + strconv.Itoa(code) + `,"message":"` + msg + `"}}` + "\n")
}

// TestEarlyReplyIsNotTakenForTheNextRequest: the peer answers a call, then,
// in a write of its own, pushes {"id":N+1,"result":true} before request
// N+1 exists. The next call is bdev_lvol_delete, sent as N+1: SPDK's real
// answer to it is an error, and the delete must report that error, never
// the early "true" it found waiting on the socket.
func TestEarlyReplyIsNotTakenForTheNextRequest(t *testing.T) {
	pushed := make(chan struct{})
	var deletes atomic.Int32
	p := startScriptedPeer(t, func(c net.Conn, req peerRequest) error {
		switch req.Method {
		case "bdev_lvol_get_lvstores":
			if _, err := c.Write(reply(req.ID, `[{"name":"lvs-1","uuid":"u-1"}]`)); err != nil {
				return err
			}
			// A write of its own, after the answer: the client's reader
			// may well have left by then.
			time.Sleep(20 * time.Millisecond)
			_, err := c.Write(reply(req.ID+1, "true"))
			close(pushed)
			return err
		case "bdev_lvol_delete":
			deletes.Add(1)
			_, err := c.Write(errorReply(req.ID, -16, "Device or resource busy"))
			return err
		}
		_, err := c.Write(errorReply(req.ID, spdkrpc.CodeMethodNotFound, "Method not found"))
		return err
	})
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: p.path})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
		t.Fatal(err)
	}
	<-pushed // the early reply is on the client's socket before the delete is written
	err := spdkrpc.BdevLvolDelete(ctx, c, "lvs-1/replica-a")
	var re *spdkrpc.RPCError
	if !errors.As(err, &re) || re.Code != -16 {
		t.Fatalf("bdev_lvol_delete = %v, want SPDK's real answer (code -16), not the reply pushed before the request", err)
	}
	if n := p.conns.Load(); n != 2 {
		t.Fatalf("the client used %d connections, want 2: the connection that carried the early reply must fail", n)
	}
	if n := deletes.Load(); n != 1 {
		t.Fatalf("SPDK saw %d deletes, want 1: the request was not written on the failed connection", n)
	}
}

// TestEarlyReplyInTheSameReadFailsTheConnection: the early reply comes in
// the same write as the answer before it, so the reader finds it in its
// buffer: the connection fails then, not when a later request is written.
func TestEarlyReplyInTheSameReadFailsTheConnection(t *testing.T) {
	p := startScriptedPeer(t, func(c net.Conn, req peerRequest) error {
		b := reply(req.ID, "[]")
		if req.Conn == 1 {
			b = append(b, reply(req.ID+1, "true")...)
		}
		_, err := c.Write(b)
		return err
	})
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: p.path})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := p.conns.Load(); n != 2 {
		t.Fatalf("the client used %d connections, want 2", n)
	}
}

// TestSecondReplyToOneRequestFailsTheConnection: a second reply to a
// request already answered is a *ProtocolError that fails the connection
// and the calls waiting on it; it is never dropped in silence.
func TestSecondReplyToOneRequestFailsTheConnection(t *testing.T) {
	var first atomic.Uint64
	p := startScriptedPeer(t, func(c net.Conn, req peerRequest) error {
		if req.Conn == 1 && first.CompareAndSwap(0, req.ID) {
			_, err := c.Write(reply(req.ID, "[]"))
			return err
		}
		b := reply(req.ID, "[]")
		if req.Conn == 1 {
			// The first call's reply again, ahead of this call's own.
			b = append(reply(first.Load(), "[]"), b...)
		}
		_, err := c.Write(b)
		return err
	})
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: p.path})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
		t.Fatal(err)
	}
	_, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
	var pe *spdkrpc.ProtocolError
	if !errors.As(err, &pe) || !errors.Is(err, spdkrpc.ErrConnection) {
		t.Fatalf("the call that read a second reply to another: %v, want a *ProtocolError", err)
	}
	if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
		t.Fatalf("the call after: %v", err)
	}
	if n := p.conns.Load(); n != 2 {
		t.Fatalf("the client used %d connections, want 2", n)
	}
}

// TestLateReplyToCancelledCallKeepsTheConnection: the one reply SPDK owes
// a call that stopped waiting is expected and dropped; the connection
// goes on.
func TestLateReplyToCancelledCallKeepsTheConnection(t *testing.T) {
	release := make(chan struct{})
	p := startScriptedPeer(t, func(c net.Conn, req peerRequest) error {
		if req.Method == "slow" {
			<-release
		}
		_, err := c.Write(reply(req.ID, "[]"))
		return err
	})
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: p.path})
	defer c.Close()
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Call(short, "slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call: %v", err)
	}
	close(release)
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	for i := range 3 {
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
			t.Fatalf("call %d after the cancelled one: %v", i, err)
		}
	}
	if n := p.conns.Load(); n != 1 {
		t.Fatalf("the client used %d connections, want 1: a late reply to a cancelled call is no fault", n)
	}
}
