package spdkrpc_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// TestClientConformance runs spdktest's Caller suite against the Client,
// the one Caller package spdkrpc ships (the suite's concurrent calls, faults
// and cancellations included), and checks that no goroutine outlives it.
func TestClientConformance(t *testing.T) {
	noGoroutineLeak(t)
	spdktest.RunConformanceTests(t, spdktest.Harness{
		Caller: func(t *testing.T, opts spdkrpc.ClientOptions) spdkrpc.Caller {
			c := fixture.NewClient(t, opts)
			t.Cleanup(func() { c.Close() })
			return c
		},
	})
}
