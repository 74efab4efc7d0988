package spdkrpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// TestReplyLimitIsExact: a reply of exactly the limit is read, one byte
// more fails the connection with ErrTooLarge, whatever the decoder
// buffered and whatever the next reply holds.
func TestReplyLimitIsExact(t *testing.T) {
	reply := func(size int) string {
		head, tail := `{"jsonrpc":"2.0","id":1,"result":"`, `"}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	const limit = 512
	for _, tc := range []struct {
		size int
		ok   bool
	}{{limit - 1, true}, {limit, true}, {limit + 1, false}, {4 * limit, false}} {
		client, server := net.Pipe()
		cn := newConn(client, limit)
		ch := waitFor(cn, 1)
		go func() {
			// A second, small reply follows at once, so the decoder may
			// buffer past the first one.
			_, _ = server.Write([]byte(reply(tc.size) + `{"jsonrpc":"2.0","id":2,"result":true}`))
			_ = server.Close()
		}()
		_, err := cn.wait(context.Background(), nil, 1, ch)
		cn.fail(ErrClosed)
		var tooLarge *bounded.TooLargeError
		switch {
		case tc.ok && err != nil:
			t.Errorf("reply of %d bytes under a %d-byte limit: %v", tc.size, limit, err)
		case !tc.ok && (!errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrConnection) || !errors.As(err, &tooLarge)):
			t.Errorf("reply of %d bytes over a %d-byte limit: err = %v, want ErrTooLarge", tc.size, limit, err)
		}
	}
}
