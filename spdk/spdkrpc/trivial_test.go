package spdkrpc_test

import (
	"bytes"
	"net"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
)

// trivialReply is the whole reply the trivial server sends, around the
// request's id: the result of bdev_lvol_get_lvstores on a node with one
// lvstore, as spdktest writes it.
const (
	trivialReplyHead = `{"jsonrpc":"2.0","id":`
	trivialReplyTail = `,"result":[{"uuid":"0b5dc4a3-f6c5-4b5e-8b4b-6e0d4b7a1c11","name":"disk-1","base_bdev":"disk-1","total_data_clusters":65536,"free_clusters":32768,"block_size":4096,"cluster_size":1048576}]}` + "\n"
)

// startTrivialServer listens on a Unix socket and serves SPDK's wire
// format at the least cost a server can: JSON-RPC 2.0 values back to back
// on the stream, no length prefix, each reply ending with "\n". Like
// spdk_tgt's poller (lib/jsonrpc/jsonrpc_server_tcp.c), each connection
// reads what the socket holds, answers every complete request in it and
// sends the answers in one write. It finds each request's end and its id
// and nothing more; every request gets the same one-lvstore result. It
// returns the socket path; the server stops at the end of the test.
func startTrivialServer(tb testing.TB) string {
	tb.Helper()
	path := fixture.SocketPath(tb)
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveTrivial(c)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	return path
}

func serveTrivial(c net.Conn) {
	defer c.Close()
	in := make([]byte, 64<<10)
	var out []byte
	have := 0
	for {
		n, err := c.Read(in[have:])
		have += n
		off := 0
		for {
			end, id, ok := scanRequest(in[off:have])
			if !ok {
				break
			}
			out = append(out, trivialReplyHead...)
			out = append(out, id...)
			out = append(out, trivialReplyTail...)
			off += end
		}
		have = copy(in, in[off:have])
		if len(out) > 0 {
			if _, werr := c.Write(out); werr != nil {
				return
			}
			out = out[:0]
		}
		if err != nil || have == len(in) {
			return // closed, or a request too large for this server
		}
	}
}

// scanRequest finds the end of the JSON object at the start of b (after
// whitespace) and the raw value of its top-level "id" member. ok is false
// while the object is incomplete.
func scanRequest(b []byte) (end int, id []byte, ok bool) {
	depth, idStart := 0, -1
	inStr, esc, expectKey, isID := false, false, false, false
	keyStart := -1
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if keyStart >= 0 {
					isID = string(b[keyStart:i]) == "id"
					keyStart = -1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			if depth == 1 && expectKey {
				keyStart, expectKey = i+1, false
			}
		case '{', '[':
			depth++
			expectKey = depth == 1 && c == '{'
		case '}', ']':
			if depth == 1 && idStart >= 0 && id == nil {
				id = b[idStart:i]
			}
			depth--
			if depth == 0 {
				return i + 1, bytes.TrimSpace(id), true
			}
		case ',':
			if depth == 1 {
				if idStart >= 0 && id == nil {
					id = b[idStart:i]
				}
				expectKey = true
			}
		case ':':
			if depth == 1 && isID {
				idStart, isID = i+1, false
			}
		}
	}
	return 0, nil, false
}

// rawCaller is the floor of a round trip: one connection, a fixed request
// written, the reply read until its "\n" into a reused buffer, no
// encoding, no decoding, no matching of ids.
type rawCaller struct {
	c   net.Conn
	req []byte
	buf []byte
}

func newRawCaller(tb testing.TB, path string) *rawCaller {
	tb.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &rawCaller{
		c:   c,
		req: []byte(`{"jsonrpc":"2.0","method":"bdev_lvol_get_lvstores","id":1}`),
		buf: make([]byte, 4096),
	}
}

func (r *rawCaller) roundTrip() error {
	if _, err := r.c.Write(r.req); err != nil {
		return err
	}
	n := 0
	for {
		m, err := r.c.Read(r.buf[n:])
		n += m
		if n > 0 && r.buf[n-1] == '\n' {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func TestTrivialServerSpeaksTheWireFormat(t *testing.T) {
	for _, tc := range []struct {
		in, id string
		end    int
	}{
		{`{"jsonrpc":"2.0","method":"m","id":7}`, "7", 37},
		{` {"id": 12 ,"params":{"id":3,"name":"a\"}"}}{"id":1}`, "12", 44},
		{`{"method":"m","params":[{"id":5}],"id":9}`, "9", 41},
	} {
		end, id, ok := scanRequest([]byte(tc.in))
		if !ok || string(id) != tc.id || end != tc.end {
			t.Errorf("scanRequest(%q) = %d, %q, %v; want %d, %q", tc.in, end, id, ok, tc.end, tc.id)
		}
	}
	if _, _, ok := scanRequest([]byte(`{"id":1,"params":{`)); ok {
		t.Error("an incomplete request was complete")
	}
}
