package spdkrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// TestResultErrorIsOfTheMalformedClass: a result of the wrong shape
// matches ErrUnexpectedResult, the shared malformed-input class and any
// package's sentinel of that class; an unreadable reply (a connection
// failure) and an RPC error do not.
func TestResultErrorIsOfTheMalformedClass(t *testing.T) {
	other := errclass.New("elsewhere", "corrupt input", errclass.ErrMalformed)
	srv := fixture.Start(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Action: spdktest.Replace, Result: json.RawMessage(`{}`)})
	_, err := spdkrpc.BdevLvolGetLvstores(ctx, c)
	for _, target := range []error{spdkrpc.ErrUnexpectedResult, errclass.ErrMalformed, other} {
		if !errors.Is(err, target) {
			t.Errorf("%v does not match %v", err, target)
		}
	}
	if !errors.Is(spdkrpc.ErrUnexpectedResult, errclass.ErrMalformed) || spdkrpc.ErrUnexpectedResult.Error() != "spdkrpc: unexpected result" {
		t.Errorf("ErrUnexpectedResult = %q", spdkrpc.ErrUnexpectedResult)
	}
	srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvstores", Action: spdktest.Garbage})
	_, garbage := spdkrpc.BdevLvolGetLvstores(ctx, c)
	rpcErr := spdkrpc.BdevLvolDelete(ctx, c, "disk-1/missing")
	for name, err := range map[string]error{"garbage": garbage, "rpc error": rpcErr} {
		if err == nil || errors.Is(err, errclass.ErrMalformed) || errors.Is(err, spdkrpc.ErrUnexpectedResult) {
			t.Errorf("%s: %v matches the malformed class", name, err)
		}
	}
}

// TestErrorTextsStartWithSpdkrpc: the sentinels and what the calls
// return start with the package's prefix.
func TestErrorTextsStartWithSpdkrpc(t *testing.T) {
	got := map[string]error{
		"ErrConnection": spdkrpc.ErrConnection, "ErrClosed": spdkrpc.ErrClosed,
		"ErrInvalidOptions": spdkrpc.ErrInvalidOptions, "ErrUnexpectedResult": spdkrpc.ErrUnexpectedResult,
	}
	srv := fixture.Start(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	srv.Inject(spdktest.Fault{Method: "bdev_get_bdevs", Action: spdktest.Replace})
	_, got["null list"] = spdkrpc.BdevGetBdevs(ctx, c, "")
	srv.Inject(spdktest.Fault{Method: "bdev_get_bdevs", Action: spdktest.Garbage})
	_, got["garbage"] = spdkrpc.BdevGetBdevs(ctx, c, "")
	got["rpc error"] = spdkrpc.BdevRaidDelete(ctx, c, "missing")
	got["params"] = c.Call(ctx, "bdev_get_bdevs", func() {}, nil)
	_, got["options"] = spdkrpc.NewClient(spdkrpc.ClientOptions{MaxReplySize: -5})
	absent := fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: filepath.Join(t.TempDir(), "absent.sock")})
	_, got["dial"] = spdkrpc.BdevGetBdevs(ctx, absent, "")
	_ = c.Close()
	_, got["closed"] = spdkrpc.BdevGetBdevs(ctx, c, "")
	for name, err := range got {
		if err == nil || !strings.HasPrefix(err.Error(), "spdkrpc: ") {
			t.Errorf("%s: %v, want an error starting with spdkrpc: ", name, err)
		}
	}
}

// TestTransportKnowsNoLonghorn: the transport imports nothing of the
// adapter or of the orphan machinery, so it can be used, and read, alone.
func TestTransportKnowsNoLonghorn(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/caretaker-storage/caretaker/"
	allowed := map[string]bool{module + "internal/bounded": true, module + "internal/errclass": true}
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) && !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
	if files < 5 {
		t.Fatalf("read %d files of the package", files)
	}
}
