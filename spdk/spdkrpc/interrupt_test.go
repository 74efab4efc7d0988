package spdkrpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// pipeConn returns a conn over one end of a net.Pipe and the other end.
// A net.Pipe write blocks until the other end reads it, so a write nobody
// reads is a write blocked before any byte left.
func pipeConn(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	client, server := net.Pipe()
	cn := newConn(client, 1<<20)
	t.Cleanup(func() { cn.fail(ErrClosed); server.Close() })
	return cn, server
}

// waitFired waits until in's AfterFunc has run.
func waitFired(t *testing.T, in *interruption) {
	t.Helper()
	start := time.Now()
	for {
		in.cn.dlMu.Lock()
		fired := in.fired
		in.cn.dlMu.Unlock()
		if fired {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the AfterFunc did not run after cancel")
		}
		runtime.Gosched()
	}
}

// readN reads n bytes from the other end of the pipe, in the background.
func readN(server net.Conn, n int) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		_, _ = io.ReadFull(server, b)
		got <- b
	}()
	return got
}

// A write blocked before any byte left returns promptly when its call's
// context ends, leaves the connection working, and the deadline that
// stopped it does not stop the next call's write.
func TestBlockedWriteCancelledLeavesConnectionUsable(t *testing.T) {
	cn, server := pipeConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	in := cn.arm(ctx)
	defer in.disarm()
	done := make(chan error, 1)
	var unsent bool
	go func() {
		var err error
		unsent, err = cn.write(ctx, in, 0, []byte(`{"first":1}`)) // nobody reads: it blocks
		done <- err
	}()
	// Cancel once the write holds the role (its generation taken).
	for start := time.Now(); ; runtime.Gosched() {
		cn.dlMu.Lock()
		entered := in.w != 0
		cn.dlMu.Unlock()
		if entered {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the write never took the role")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !unsent {
			t.Fatalf("write = %v, %v; want unsent, Canceled", unsent, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled write stayed blocked")
	}
	if err := cn.failure(); err != nil {
		t.Fatalf("a write stopped before any byte left failed the connection: %v", err)
	}
	second := []byte(`{"second":2}`)
	got := readN(server, len(second))
	if unsent, err := cn.write(context.Background(), nil, 0, second); err != nil {
		t.Fatalf("the next write: %v (unsent %v): the cancelled call's deadline lingered", err, unsent)
	}
	if b := <-got; !bytes.Equal(b, second) {
		t.Fatalf("the peer read %q, want %q: the cancelled request was sent", b, second)
	}
}

// The AfterFunc of a call that left the writer's role sets no deadline:
// its generation is retired, so a later call's write goes through.
func TestDeadlineOfRetiredGenerationNeverLands(t *testing.T) {
	for _, read := range []bool{false, true} {
		cn, server := pipeConn(t)
		ctx, cancel := context.WithCancel(context.Background())
		in := cn.arm(ctx)
		if !in.enter(read) {
			t.Fatal("enter before the context ended refused")
		}
		if in.exit(read) {
			t.Fatal("exit reported a deadline nobody set")
		}
		cancel() // after the call left its role, before it disarmed
		waitFired(t, in)
		in.disarm()
		if in.wset || in.rset {
			t.Fatalf("read=%v: the AfterFunc set a deadline for a retired generation", read)
		}
		body := []byte(`{"later":1}`)
		got := readN(server, len(body))
		if _, err := cn.write(context.Background(), nil, 0, body); err != nil {
			t.Fatalf("read=%v: a later write failed: %v", read, err)
		}
		<-got
		go func() { _, _ = server.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":true}`)) }()
		ch := waitFor(cn, 1)
		rep, err := cn.wait(context.Background(), nil, 1, ch)
		if err != nil || string(rep.result) != "true" {
			t.Fatalf("read=%v: a later read: %q, %v", read, rep.result, err)
		}
	}
}

// A deadline the AfterFunc set while its call held the role is reported
// by exit, so that the next holder clears it before it writes.
func TestDeadlineSetInRoleIsClearedForTheNext(t *testing.T) {
	cn, server := pipeConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	in := cn.arm(ctx)
	defer in.disarm()
	if !in.enter(false) {
		t.Fatal("enter before the context ended refused")
	}
	cancel()
	waitFired(t, in)
	if _, err := cn.nc.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write in the role after cancel: %v, want a deadline error", err)
	}
	if !in.exit(false) {
		t.Fatal("exit did not report the deadline its AfterFunc set")
	}
	cn.wdl = true // as write does with exit's report
	body := []byte(`{"next":1}`)
	got := readN(server, len(body))
	if _, err := cn.write(context.Background(), nil, 0, body); err != nil {
		t.Fatalf("the next holder's write: %v", err)
	}
	<-got
}

// A call whose context ended before it took the role does not start the
// write (its AfterFunc, having run, could not interrupt it).
func TestEndedContextDoesNotEnter(t *testing.T) {
	cn, _ := pipeConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	in := cn.arm(ctx)
	defer in.disarm()
	waitFired(t, in)
	if in.enter(false) || in.enter(true) {
		t.Fatal("entered a role after the context ended")
	}
	if unsent, err := cn.write(ctx, in, 0, []byte(`{}`)); !unsent || !errors.Is(err, context.Canceled) {
		t.Fatalf("write = %v, %v; want unsent, Canceled", unsent, err)
	}
	if err := cn.failure(); err != nil {
		t.Fatalf("connection failed: %v", err)
	}
}
