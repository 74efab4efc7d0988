package spdkrpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// The client copies each result into its request's buffer and recycles
// that buffer once the result is decoded. What a call returned must stay
// as it was whatever later calls, on this goroutine or others, receive:
// decoded lists, and json.RawMessage results, which json.Unmarshal copies.
func TestResultsOutliveLaterCalls(t *testing.T) {
	srv := fixture.Start(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	ctx := context.Background()
	fixture.Must(srv.AddLvstore("disk-1"))(t)

	first := fixture.Must(spdkrpc.BdevLvolGetLvstores(ctx, c))(t)
	var firstRaw json.RawMessage
	if err := c.Call(ctx, "bdev_lvol_get_lvstores", nil, &firstRaw); err != nil {
		t.Fatal(err)
	}
	wantList, wantRaw := fmt.Sprint(first), string(firstRaw)

	// Later calls, concurrent, with other results of other sizes.
	for i := range 8 {
		fixture.Must(srv.AddLvol("disk-1", fmt.Sprintf("r-%d", i)))(t)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := spdkrpc.BdevLvolGetLvols(ctx, c, ""); err != nil {
					t.Error(err)
					return
				}
				var raw json.RawMessage
				if err := c.Call(ctx, "bdev_get_bdevs", nil, &raw); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := fmt.Sprint(first); got != wantList {
		t.Errorf("a decoded result changed under later calls:\n got %s\nwant %s", got, wantList)
	}
	if string(firstRaw) != wantRaw {
		t.Errorf("a raw result changed under later calls:\n got %s\nwant %s", firstRaw, wantRaw)
	}
}
