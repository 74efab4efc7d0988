package spdkrpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests of write coalescing: while one call holds the writer's role,
// others queue and go out with its next write. They drive conn's writer
// directly over a net.Pipe, whose writes block until the other end reads,
// so a write nobody reads stays under way as long as a test needs.

// writeResult is what one write returned.
type writeResult struct {
	unsent bool
	err    error
}

// goWrite starts cn.write(ctx, in, 0, body), a request no call waits
// on, and returns where its result arrives.
func goWrite(cn *conn, ctx context.Context, in *interruption, body []byte) <-chan writeResult {
	res := make(chan writeResult, 1)
	go func() {
		unsent, err := cn.write(ctx, in, 0, body)
		res <- writeResult{unsent, err}
	}()
	return res
}

// waitUntil polls cond under cn.wmu until it holds.
func waitUntil(t *testing.T, cn *conn, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); ; runtime.Gosched() {
		cn.wmu.Lock()
		ok := cond()
		cn.wmu.Unlock()
		if ok {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// holdWriterRole makes the test the holder of cn's writer role, so that
// the writes it starts queue, in order.
func holdWriterRole(t *testing.T, cn *conn) {
	t.Helper()
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if cn.writing {
		t.Fatal("the writer's role is taken")
	}
	cn.writing = true
}

// queue starts a write of body, which must queue, and waits until it has.
func queue(t *testing.T, cn *conn, ctx context.Context, body []byte) <-chan writeResult {
	t.Helper()
	cn.wmu.Lock()
	n := len(cn.wq)
	cn.wmu.Unlock()
	res := goWrite(cn, ctx, nil, body)
	waitUntil(t, cn, "the write queued", func() bool { return len(cn.wq) == n+1 })
	return res
}

func result(t *testing.T, res <-chan writeResult) writeResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("a write did not return")
		return writeResult{}
	}
}

// readOne returns what one Read of the peer gets: with net.Pipe, the bytes
// of one write at most.
func readOne(t *testing.T, server net.Conn) []byte {
	t.Helper()
	b := make([]byte, 4096)
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := server.Read(b)
	if err != nil {
		t.Fatalf("peer read: %v", err)
	}
	return b[:n]
}

// Requests queued while a write is under way go out in the holder's next
// write, in the order they queued, and each call learns it was sent.
func TestQueuedRequestsGoOutInOneWrite(t *testing.T) {
	cn, server := pipeConn(t)
	holdWriterRole(t, cn)
	b1 := queue(t, cn, context.Background(), []byte(`{"id":2}`))
	b2 := queue(t, cn, context.Background(), []byte(`{"id":3}`))
	own := make(chan writeResult, 1)
	go func() {
		unsent, err := cn.writeBatch(context.Background(), nil, 0, []byte(`{"id":1}`))
		own <- writeResult{unsent, err}
	}()
	if got, want := readOne(t, server), `{"id":1}{"id":2}{"id":3}`; string(got) != want {
		t.Fatalf("one write carried %q, want %q", got, want)
	}
	for i, res := range []<-chan writeResult{own, b1, b2} {
		if r := result(t, res); r.err != nil || r.unsent {
			t.Errorf("write %d = %+v, want sent", i+1, r)
		}
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if cn.writing || len(cn.wq) != 0 {
		t.Fatalf("after the batch: writing %v, %d queued; want the role free", cn.writing, len(cn.wq))
	}
}

// A call whose context ends while its request waits in the queue returns
// at once, its request unsent; it never goes out, not even with a later
// write.
func TestQueuedRequestCancelledIsNeverSent(t *testing.T) {
	cn, server := pipeConn(t)
	first := []byte(`{"id":1}`)
	a := goWrite(cn, context.Background(), nil, first)
	// One byte read proves the first write under way (its batch taken);
	// the rest stays blocked.
	if _, err := io.ReadFull(server, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := queue(t, cn, ctx, []byte(`{"id":2,"cancelled":true}`))
	cancel()
	if r := result(t, b); !r.unsent || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled queued write = %+v, want unsent, Canceled", r)
	}
	if got := readOne(t, server); !bytes.Equal(got, first[1:]) {
		t.Fatalf("the peer read %q, want the rest of the first request", got)
	}
	if r := result(t, a); r.err != nil {
		t.Fatal(r.err)
	}
	third := []byte(`{"id":3}`)
	c := goWrite(cn, context.Background(), nil, third)
	if got := readOne(t, server); !bytes.Equal(got, third) {
		t.Fatalf("the peer read %q, want %q: the cancelled request went out", got, third)
	}
	if r := result(t, c); r.err != nil {
		t.Fatal(r.err)
	}
}

// When the holder's own context stops its write before any byte left,
// the stream is intact: the holder fails alone, and the requests it had
// taken go back to the queue and out with the next holder, exactly once;
// one whose call stopped waiting meanwhile never goes out.
func TestWriterCancelledBeforeAnyByteRequeuesTheOthers(t *testing.T) {
	cn, server := pipeConn(t)
	holdWriterRole(t, cn)
	b := queue(t, cn, context.Background(), []byte(`{"id":2}`))
	abandonCtx, abandon := context.WithCancel(context.Background())
	c := queue(t, cn, abandonCtx, []byte(`{"id":3,"abandoned":true}`))
	d := queue(t, cn, context.Background(), []byte(`{"id":4}`))

	ctx, cancel := context.WithCancel(context.Background())
	in := cn.arm(ctx)
	defer in.disarm()
	own := make(chan writeResult, 1)
	go func() {
		unsent, err := cn.writeBatch(ctx, in, 0, []byte(`{"id":1,"cancelled":true}`))
		own <- writeResult{unsent, err}
	}()
	waitUntil(t, cn, "the holder took the queue", func() bool { return len(cn.taken) == 3 })
	abandon() // call 3 stops waiting while its request is in the write
	if r := result(t, c); r.unsent || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("call stopped during the write = %+v, want Canceled, not unsent (it may be sent)", r)
	}
	cancel() // the holder's write is blocked before its first byte
	if r := result(t, own); !r.unsent || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("holder = %+v, want unsent, Canceled", r)
	}
	if err := cn.failure(); err != nil {
		t.Fatalf("a write stopped before any byte left failed the connection: %v", err)
	}
	if got, want := readOne(t, server), `{"id":2}{"id":4}`; string(got) != want {
		t.Fatalf("the next write carried %q, want %q", got, want)
	}
	for i, res := range []<-chan writeResult{b, d} {
		if r := result(t, res); r.err != nil || r.unsent {
			t.Errorf("requeued write %d = %+v, want sent", i, r)
		}
	}
	// Nothing else was written: the next write is the peer's next read.
	next := []byte(`{"id":5}`)
	e := goWrite(cn, context.Background(), nil, next)
	if got := readOne(t, server); !bytes.Equal(got, next) {
		t.Fatalf("the peer read %q, want %q", got, next)
	}
	if r := result(t, e); r.err != nil {
		t.Fatal(r.err)
	}
}

// A write that breaks off part-way fails the connection. Of the requests
// it carried, those of which not one byte left are unsent (the call may
// send them again on a new connection); the others are not, even the one
// cut in the middle; and every request still queued is unsent.
func TestBrokenBatchReportsWhichRequestsNeverLeft(t *testing.T) {
	cn, server := pipeConn(t)
	holdWriterRole(t, cn)
	first, second, third := []byte(`{"id":1}`), []byte(`{"id":2}`), []byte(`{"id":3}`)
	b := queue(t, cn, context.Background(), second)
	c := queue(t, cn, context.Background(), third)
	own := make(chan writeResult, 1)
	go func() {
		unsent, err := cn.writeBatch(context.Background(), nil, 0, first)
		own <- writeResult{unsent, err}
	}()
	waitUntil(t, cn, "the holder took the queue", func() bool { return len(cn.taken) == 2 })
	d := queue(t, cn, context.Background(), []byte(`{"id":4}`))
	// The peer reads the first request and two bytes of the second, then
	// hangs up.
	if _, err := io.ReadFull(server, make([]byte, len(first)+2)); err != nil {
		t.Fatal(err)
	}
	server.Close()
	for _, tc := range []struct {
		name   string
		res    <-chan writeResult
		unsent bool
	}{{"whole", own, false}, {"cut", b, false}, {"never left", c, true}, {"queued", d, true}} {
		r := result(t, tc.res)
		if r.unsent != tc.unsent || !errors.Is(r.err, ErrConnection) {
			t.Errorf("%s request: %+v, want unsent=%v and a connection error", tc.name, r, tc.unsent)
		}
	}
	if r := result(t, goWrite(cn, context.Background(), nil, []byte(`{}`))); !r.unsent || !errors.Is(r.err, ErrConnection) {
		t.Errorf("write after the failure = %+v, want unsent and the connection's error", r)
	}
}

// The tests of matching replies only to requests written whole.

// readerFor starts call 1 reading the connection (its request written)
// and returns where its outcome arrives.
func readerFor(cn *conn) <-chan error {
	ch := waitFor(cn, 1)
	done := make(chan error, 1)
	go func() {
		_, err := cn.wait(context.Background(), nil, 1, ch)
		done <- err
	}()
	return done
}

// outcome waits for what a reader started by readerFor returned.
func outcome(t *testing.T, reader <-chan error) error {
	t.Helper()
	select {
	case err := <-reader:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the reader did not return")
		return nil
	}
}

// A reply to a request registered but in no write yet cannot come from
// SPDK: the stream is out of step, and the connection fails with a
// *ProtocolError instead of handing the call a reply to nothing it sent.
func TestReplyBeforeRequestSentFailsConnection(t *testing.T) {
	cn, server := pipeConn(t)
	ch7, err := cn.register(7, nil)
	if err != nil {
		t.Fatal(err)
	}
	reader := readerFor(cn)
	go func() { _, _ = server.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":true}`)) }()
	var pe *ProtocolError
	if err := outcome(t, reader); !errors.As(err, &pe) || !errors.Is(err, ErrConnection) {
		t.Fatalf("reader: %v, want a *ProtocolError", err)
	}
	select {
	case m := <-ch7:
		if m.err == nil || m.result != nil {
			t.Fatalf("call 7 got %+v, want the connection's failure", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call 7 heard nothing")
	}
}

// A reply that arrives while the write carrying its request is under way
// waits until that write went out whole, and only then reaches its call.
func TestReplyDuringItsWriteWaitsForTheWrite(t *testing.T) {
	cn, server := pipeConn(t)
	ch7, err := cn.register(7, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":7}`)
	w := make(chan writeResult, 1)
	go func() {
		unsent, err := cn.write(context.Background(), nil, 7, body)
		w <- writeResult{unsent, err}
	}()
	if _, err := io.ReadFull(server, make([]byte, 1)); err != nil { // the write is under way
		t.Fatal(err)
	}
	reader := readerFor(cn)
	go func() {
		_, _ = server.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":"seven"}{"jsonrpc":"2.0","id":1,"result":true}`))
	}()
	if err := outcome(t, reader); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-ch7:
		t.Fatalf("call 7 got %+v while its request was still being written", m)
	default:
	}
	if _, err := io.ReadFull(server, make([]byte, len(body)-1)); err != nil { // the rest of it
		t.Fatal(err)
	}
	if r := result(t, w); r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case m := <-ch7:
		if m.err != nil || string(m.result) != `"seven"` {
			t.Fatalf("call 7 got %+v, want its reply", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reply that came during the write never reached its call")
	}
}

// A reply that came during a write which then stopped before any byte
// left answered a request SPDK never saw: the connection fails with a
// *ProtocolError.
func TestReplyToWriteThatNeverLeftFailsConnection(t *testing.T) {
	cn, server := pipeConn(t)
	if _, err := cn.register(7, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := cn.arm(ctx)
	defer in.disarm()
	w := make(chan writeResult, 1)
	go func() {
		unsent, err := cn.write(ctx, in, 7, []byte(`{"id":7}`)) // nobody reads it
		w <- writeResult{unsent, err}
	}()
	waitUntil(t, cn, "the write is under way", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return cn.pending[7].state == reqWriting
	})
	reader := readerFor(cn)
	go func() {
		_, _ = server.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":true}{"jsonrpc":"2.0","id":1,"result":true}`))
	}()
	if err := outcome(t, reader); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := result(t, w); !r.unsent || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("write = %+v, want unsent, Canceled", r)
	}
	var pe *ProtocolError
	if err := cn.failure(); !errors.As(err, &pe) {
		t.Fatalf("connection: %v, want failed with a *ProtocolError", err)
	}
}

// FuzzCoalescedWrites runs concurrent writes, some cancelled at points
// the input picks, over one connection, and holds the stream the peer
// read to what one write per request would have sent: whole requests
// back to back, each at most once, none that its call was told is unsent,
// every one its call was told is sent, and a cut request only at the very
// end of a stream that broke.
func FuzzCoalescedWrites(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0})
	f.Add([]byte{8, 1, 0, 2, 0, 3, 0, 4, 0})
	f.Add([]byte{16, 5, 0, 0, 7, 0, 1, 1, 1, 0, 9, 9, 2, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, plan []byte) {
		if len(plan) == 0 {
			return
		}
		// The first byte picks the callers and how slowly the peer reads:
		// a slow peer keeps writes under way while calls are cancelled.
		callers := 1 + int(plan[0])%16
		chunk := 4 + 8*int(plan[0]/16)
		plan = plan[1:]
		client, server := net.Pipe()
		cn := newConn(client, 1<<20)
		defer cn.fail(ErrClosed)
		read := make(chan []byte, 1)
		go func() {
			var all []byte
			b := make([]byte, chunk)
			for {
				n, err := server.Read(b)
				all = append(all, b[:n]...)
				if err != nil {
					read <- all
					return
				}
				runtime.Gosched()
			}
		}()
		bodies := make([][]byte, callers)
		results := make([]writeResult, callers)
		var wg sync.WaitGroup
		for i := range callers {
			// Each caller's byte: 0 never cancels; else it cancels after
			// that many yields. Its length varies with i.
			var yields int
			if i < len(plan) {
				yields = int(plan[i])
			}
			bodies[i] = []byte(fmt.Sprintf(`{"id":%d,"p":"%s"}`, i, strings.Repeat("x", i*7%23)))
			ctx, cancel := context.WithCancel(context.Background())
			in := cn.arm(ctx)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for range yields {
					runtime.Gosched()
				}
				if yields > 0 {
					cancel()
				}
			}()
			go func() {
				defer wg.Done()
				defer cancel()
				if in != nil {
					defer in.disarm()
				}
				unsent, err := cn.write(ctx, in, 0, bodies[i])
				results[i] = writeResult{unsent, err}
			}()
		}
		wg.Wait()
		_ = client.Close()
		stream := <-read
		seen := make([]int, callers)
		broken := cn.failure() != nil
		for len(stream) > 0 {
			end := bytes.IndexByte(stream, '}')
			if end < 0 && broken {
				break // the write that broke the stream cut its last request
			}
			var i int
			if end < 0 || !bytes.HasPrefix(stream, []byte(`{"id":`)) {
				t.Fatalf("the stream holds %q, not whole requests", stream)
			}
			if _, err := fmt.Sscanf(string(stream[len(`{"id":`):end]), "%d", &i); err != nil || i < 0 || i >= callers {
				t.Fatalf("the stream holds %q", stream[:end+1])
			}
			if !bytes.HasPrefix(bodies[i], stream[:end+1]) {
				t.Fatalf("request %d went out as %q", i, stream[:end+1])
			}
			if end+1 < len(bodies[i]) {
				t.Fatalf("request %d cut: %q", i, stream)
			}
			seen[i]++
			stream = stream[end+1:]
		}
		for i, r := range results {
			switch {
			case seen[i] > 1:
				t.Errorf("request %d went out %d times", i, seen[i])
			case r.unsent && seen[i] > 0:
				t.Errorf("request %d went out, but its call was told it was unsent: %v", i, r.err)
			case r.err == nil && seen[i] == 0:
				t.Errorf("request %d never went out, but its call was told it was sent", i)
			case r.err != nil && !errors.Is(r.err, context.Canceled) && !broken:
				t.Errorf("request %d: %v on a connection that works", i, r.err)
			}
		}
	})
}
