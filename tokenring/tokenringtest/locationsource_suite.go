package tokenringtest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// testLocationSource checks the contract of tokenring.LocationSource: each
// endpoint's datacenter and rack, an error (never an empty Location) for an
// endpoint the node does not know, ReadRing when the implementation is also
// a RingSource, concurrent use, and cancelled contexts.
func testLocationSource(t *testing.T, newSource func(t *testing.T, c Cluster) tokenring.LocationSource) {
	ctx := context.Background()

	t.Run("Locations", func(t *testing.T) {
		c := SampleCluster(endpointA)
		locs := newSource(t, c)
		for _, n := range c.Nodes {
			got, err := locs.Location(ctx, n.Endpoint)
			if want := (tokenring.Location{Datacenter: n.Datacenter, Rack: n.Rack}); err != nil || got != want {
				t.Errorf("Location(%s) = %+v, %v; want %+v", n.Endpoint, got, err, want)
			}
		}
	})

	t.Run("UnknownEndpointIsAnError", func(t *testing.T) {
		got, err := newSource(t, SampleCluster(endpointA)).Location(ctx, endpointUnknown)
		if err == nil {
			t.Errorf("Location of an endpoint the node does not know = %+v and no error; ScyllaDB answers \"Unknown host\"", got)
		}
	})

	t.Run("ReadRing", func(t *testing.T) {
		c := SampleCluster(endpointA)
		locs := newSource(t, c)
		src, ok := locs.(tokenring.RingSource)
		if !ok {
			t.Skip("the implementation is not a RingSource")
		}
		ring, err := tokenring.ReadRing(ctx, src, locs)
		if err != nil {
			t.Fatalf("ReadRing: %v", err)
		}
		if want := len(c.Tokens()); len(ring.Owners) != want || len(ring.Locations) != 2 {
			t.Errorf("ReadRing: %d owners and %d locations, want %d and 2 (the joining node owns nothing)", len(ring.Owners), len(ring.Locations), want)
		}
		for ep, loc := range ring.Locations {
			if n, _ := c.Node(ep); loc != (tokenring.Location{Datacenter: n.Datacenter, Rack: n.Rack}) {
				t.Errorf("ReadRing: %s is at %+v, want %s/%s", ep, loc, n.Datacenter, n.Rack)
			}
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		c := SampleCluster(endpointA)
		locs := newSource(t, c)
		var wg sync.WaitGroup
		for _, n := range c.Nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := locs.Location(ctx, n.Endpoint)
				if want := (tokenring.Location{Datacenter: n.Datacenter, Rack: n.Rack}); err != nil || got != want {
					t.Errorf("concurrent Location(%s) = %+v, %v; want %+v", n.Endpoint, got, err, want)
				}
			}()
		}
		wg.Wait()
	})

	t.Run("CancelledContext", func(t *testing.T) {
		locs := newSource(t, SampleCluster(endpointA))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := locs.Location(cctx, endpointA)
		checkCancelled(t, "Location", err)
		if errors.Is(err, tokenring.ErrNotFound) {
			t.Errorf("Location with a cancelled context claims the endpoint is unknown: %v", err)
		}
	})
}
