package spdkrpc

import (
	"context"
	"encoding/json"
	"net"
	"testing"
)

// FuzzReplyStream feeds arbitrary bytes to a connection as if SPDK had
// sent them: the waiting call, reading them, must never panic and must
// return either a valid reply or an error.
func FuzzReplyStream(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":true}` + "\n",
		`{"jsonrpc":"2.0","id":1,"error":{"code":-19,"message":"No such device"}}`,
		`{"jsonrpc":"2.0","id":2,"result":[]}{"jsonrpc":"2.0","id":1,"result":[{"name":"x"}]}`,
		`{"jsonrpc":"2.0","id":1,"result":`,
		`}{`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`[` + "\x00",
		`{"jsonrpc":"2.0","id":1e3,"result":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		cn := newConn(client, 1024)
		ch := waitFor(cn, 1)
		go func() {
			_, _ = server.Write(data)
			_ = server.Close()
		}()
		rep, err := cn.wait(context.Background(), nil, 1, ch)
		cn.fail(ErrClosed)
		if err == nil && rep.errCode == nil && rep.result == nil {
			t.Fatalf("waiter got an empty reply from %q", data)
		}
		if err == nil && rep.errCode == nil && !json.Valid(rep.result) {
			t.Fatalf("result %q delivered from %q is not a JSON value", rep.result, data)
		}
	})
}

// waitFor registers a waiter for id, as a call does before it writes,
// and marks its request written, as the writer does after.
func waitFor(cn *conn, id uint64) chan reply {
	ch := make(chan reply, 1)
	cn.mu.Lock()
	cn.pending[id] = waiter{ch: ch, state: reqWritten}
	cn.mu.Unlock()
	return ch
}
