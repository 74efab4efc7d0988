package spdkrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// A call whose context ends while the client dials does not throw the
// new connection away: SPDK has accepted it already, and the next call
// uses it instead of dialling another. The contexts end at every moment
// from before the dial to after it, so some end in the middle.
func TestDialAsContextEndsKeepsTheConnection(t *testing.T) {
	srv := startStormServer(t, 0, false)
	const clients = 400
	for i := range clients {
		c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: srv.ln.Addr().String()})
		d := time.Duration(i%100) * time.Microsecond / 2
		ctx, cancel := context.WithTimeout(context.Background(), d)
		_ = c.Call(ctx, "echo", map[string]int{"i": i}, nil)
		cancel()
		if err := c.Call(context.Background(), "echo", map[string]int{"i": i}, nil); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		c.Close()
		if n := srv.accepted.Load(); n != int64(i+1) {
			t.Fatalf("client %d: SPDK accepted %d connections from %d clients, want one each", i, n, i+1)
		}
	}
}
