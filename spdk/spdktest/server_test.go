package spdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

func start(t *testing.T) (*spdktest.Server, string) {
	t.Helper()
	path := fixture.SocketPath(t)
	// A stale socket from a crashed run is replaced.
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	srv, err := spdktest.Start(path, spdktest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, path
}

func TestFaultTimesAndClear(t *testing.T) {
	srv, path := start(t)
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: path})
	defer c.Close()
	ctx := context.Background()

	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Action: spdktest.Garbage, Times: 2})
	for i := range 3 {
		_, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
		if (i < 2) != errors.Is(err, spdkrpc.ErrConnection) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	srv.Inject(spdktest.Fault{Action: spdktest.Drop, Times: -1})
	for range 2 {
		if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); !errors.Is(err, spdkrpc.ErrConnection) {
			t.Fatalf("unlimited fault: %v", err)
		}
	}
	srv.ClearFaults()
	if _, err := spdkrpc.BdevLvolGetLvstores(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n := srv.CallCount("bdev_lvol_get_lvstores"); n != 6 {
		t.Fatalf("%d calls recorded", n)
	}
}

func TestDropConnectionsAndClose(t *testing.T) {
	srv, path := start(t)
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: path})
	defer c.Close()
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Delay: time.Minute})
	res := make(chan error, 1)
	go func() { _, err := spdkrpc.BdevLvolGetLvstores(context.Background(), c); res <- err }()
	for srv.CallCount("bdev_lvol_get_lvstores") == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.DropConnections()
	if err := <-res; !errors.Is(err, spdkrpc.ErrConnection) {
		t.Fatalf("err = %v", err)
	}
	// Close does not wait for the minute-long delay, and is idempotent.
	done := make(chan struct{})
	go func() { srv.Close(); srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a delayed reply")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left: %v", err)
	}
}

func TestStateErrors(t *testing.T) {
	srv, _ := start(t)
	if _, err := srv.AddLvol("nope", "x"); !errors.Is(err, spdktest.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := srv.AddLvstore("d"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddLvstore("d"); !errors.Is(err, spdktest.ErrExists) {
		t.Fatal(err)
	}
	if _, err := srv.AddLvol("d", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Clone("d", "x", "y"); !errors.Is(err, spdktest.ErrNotFound) {
		t.Fatalf("clone of a non-snapshot: %v", err)
	}
	if _, err := srv.AddRaid("e", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddRaid("e", "x"); !errors.Is(err, spdktest.ErrExists) {
		t.Fatal(err)
	}
	a, _ := srv.SetLvolUUID("d", "x", "")
	b, _ := srv.RecreateLvol("d", "x")
	if a == "" || a == b {
		t.Fatalf("recreate kept the UUID: %q %q", a, b)
	}
}

func TestStartRefusesToReplaceAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-a-socket")
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := spdktest.Start(path, spdktest.Options{}); err == nil {
		t.Fatal("Start replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Fatal("file changed")
	}
}

// TestReplaceSendsTheRawResult: a Replace fault answers with a well-formed
// reply carrying the raw result (null when none, or when not valid JSON),
// after carrying out the method.
func TestReplaceSendsTheRawResult(t *testing.T) {
	srv, path := start(t)
	if _, err := srv.AddLvstore("disk-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddLvol("disk-1", "r"); err != nil {
		t.Fatal(err)
	}
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: path})
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		raw  string
		want string
	}{
		{"", "null"},
		{"not json", "null"},
		{`{"a": 1}`, `{"a":1}`},
		{`[1, null]`, `[1,null]`},
	} {
		srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvols", Action: spdktest.Replace, Result: json.RawMessage(tc.raw)})
		var got json.RawMessage
		if err := c.Call(ctx, "bdev_lvol_get_lvols", nil, &got); err != nil || string(got) != tc.want {
			t.Errorf("Result %q: got %s, %v; want %s", tc.raw, got, err, tc.want)
		}
	}
	// The method itself was carried out: a delete under Replace deletes.
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_delete", Action: spdktest.Replace, Result: json.RawMessage(`false`)})
	if err := spdkrpc.BdevLvolDelete(ctx, c, "disk-1/r"); !errors.Is(err, spdkrpc.ErrUnexpectedResult) {
		t.Fatalf("err = %v", err)
	}
	if got := srv.LvolAliases(); len(got) != 0 {
		t.Fatalf("lvols %v", got)
	}
}

// TestDelayFollowsTheClock: with a fake clock a delayed reply waits until
// the clock is stepped past the delay, and no longer.
func TestDelayFollowsTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	srv, err := spdktest.Start(fixture.SocketPath(t), spdktest.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	defer c.Close()
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Delay: time.Hour})
	res := make(chan error, 1)
	go func() { _, err := spdkrpc.BdevLvolGetLvstores(context.Background(), c); res <- err }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-res:
		t.Fatalf("the reply came before the clock moved: %v", err)
	default:
	}
	clk.Step(time.Hour)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}
