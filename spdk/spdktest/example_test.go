package spdktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"

	"github.com/caretaker-storage/caretaker/internal/testrun"
)

// ExampleRunConformanceTests runs the Caller suite against spdkrpc.Client,
// as a host would against a Caller of its own.
func ExampleRunConformanceTests() {
	harness := spdktest.Harness{
		Caller: func(t *testing.T, opts spdkrpc.ClientOptions) spdkrpc.Caller {
			c, err := spdkrpc.NewClient(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
	}
	ok := testrun.Passes("TestHost", func(t *testing.T) { spdktest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}

// ExampleServer_SetLvolXattr seeds the metadata Longhorn keeps on a
// snapshot, its xattrs and registered checksum, and reads it back the way
// go-spdk-helper's BdevLvolGet does; an xattr the lvol lacks is SPDK's
// error, which that client tolerates.
func ExampleServer_SetLvolXattr() {
	dir, err := os.MkdirTemp("", "spdkex")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	for _, err := range []error{
		first(srv.AddLvstore("disk-1")),
		first(srv.AddLvol("disk-1", "vol-r-1234abcd")),
		first(srv.Snapshot("disk-1", "vol-r-1234abcd", "vol-r-1234abcd-snap-s1")),
		srv.SetLvolXattr("disk-1", "vol-r-1234abcd-snap-s1", "snapshot_timestamp", "2026-07-16T04:13:30Z"),
		srv.SetSnapshotChecksum("disk-1", "vol-r-1234abcd-snap-s1", 42),
	} {
		if err != nil {
			panic(err)
		}
	}

	c, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	var stamp string
	err = c.Call(ctx, "bdev_lvol_get_xattr", map[string]string{"name": "disk-1/vol-r-1234abcd-snap-s1", "xattr_name": "snapshot_timestamp"}, &stamp)
	fmt.Println(stamp, err)
	var sum struct {
		Checksum uint64 `json:"checksum"`
	}
	err = c.Call(ctx, "bdev_lvol_get_snapshot_checksum", map[string]string{"name": "disk-1/vol-r-1234abcd-snap-s1"}, &sum)
	fmt.Println(sum.Checksum, err)
	err = c.Call(ctx, "bdev_lvol_get_xattr", map[string]string{"name": "disk-1/vol-r-1234abcd", "xattr_name": "user_created"}, &stamp)
	fmt.Println(err)
	// Output:
	// 2026-07-16T04:13:30Z <nil>
	// 42 <nil>
	// spdkrpc: bdev_lvol_get_xattr: No such file or directory (code -32603)
}

func first(_ string, err error) error { return err }
