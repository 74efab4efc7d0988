package spdk_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// socketPath returns a short socket path: Unix socket paths are limited to
// about 100 bytes and t.TempDir can be long.
func socketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "spdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}

func startServer(t testing.TB) *spdktest.Server {
	t.Helper()
	srv, err := spdktest.Start(socketPath(t), spdktest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// newClient returns a client of srv, closed when the test ends.
func newClient(t testing.TB, srv *spdktest.Server, opts spdkrpc.ClientOptions) *spdkrpc.Client {
	t.Helper()
	opts.SocketPath = srv.SocketPath()
	c, err := spdkrpc.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
