package tokenringtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// testRingSource checks the contract of tokenring.RingSource: the local
// host ID, the host IDs of the token owners only, the ring's tokens exactly
// as ScyllaDB reports them (sorted numerically, unformatted) so that
// ReadTokenRingHash agrees with scylla-operator, each endpoint's tokens
// (none while joining), the token → endpoint map, copies, concurrent use,
// and cancelled contexts.
func testRingSource(t *testing.T, newSource func(t *testing.T, c Cluster) tokenring.RingSource) {
	ctx := context.Background()

	t.Run("LocalHostID", func(t *testing.T) {
		for _, local := range []string{endpointA, endpointB, endpointJoining} {
			c := SampleCluster(local)
			want, _ := c.Node(local)
			got, err := newSource(t, c).LocalHostID(ctx)
			if err != nil || got != want.HostID {
				t.Errorf("LocalHostID seen from %s = %q, %v; want %q", local, got, err, want.HostID)
			}
		}
	})

	t.Run("HostIDsOfTokenOwners", func(t *testing.T) {
		c := SampleCluster(endpointA)
		got, err := newSource(t, c).HostIDs(ctx)
		if err != nil {
			t.Fatalf("HostIDs: %v", err)
		}
		if want := c.HostIDs(); !maps.Equal(got, want) {
			t.Errorf("HostIDs = %v, want %v (the joining node owns no tokens and is left out)", got, want)
		}
	})

	t.Run("TokensAsTheNodeReportsThem", func(t *testing.T) {
		c := SampleCluster(endpointB)
		got, err := newSource(t, c).Tokens(ctx)
		if err != nil {
			t.Fatalf("Tokens: %v", err)
		}
		want := c.Tokens()
		if !slices.Equal(got, want) {
			t.Errorf("Tokens = %v, want %v: numeric order, canonical text, as ScyllaDB reports them", got, want)
		}
		if _, err := tokenring.ParseTokens(got); err != nil {
			t.Errorf("Tokens are not canonical Murmur3 tokens: %v", err)
		}
	})

	t.Run("LargeRing", func(t *testing.T) {
		c := Cluster{Local: endpointB}
		for i, ep := range []string{endpointA, endpointB, endpointJoining} {
			c.Nodes = append(c.Nodes, Node{Endpoint: ep, HostID: fmt.Sprintf("host-%d", i), Datacenter: "dc1", Rack: "r1"})
		}
		tokens := GenerateTokens(12, 3*256)
		for i, tok := range tokens {
			n := &c.Nodes[i%3]
			n.Tokens = append(n.Tokens, tok)
		}
		src := newSource(t, c)
		got, err := src.Tokens(ctx)
		if err != nil {
			t.Fatalf("Tokens: %v", err)
		}
		if want := c.Tokens(); !slices.Equal(got, want) {
			t.Errorf("Tokens of a %d-token ring differ from the numerically sorted ring (got %d tokens)", len(want), len(got))
		}
		hash, m, err := tokenring.ReadTokenRingHash(ctx, src)
		if err != nil {
			t.Fatalf("ReadTokenRingHash: %v", err)
		}
		if hash != tokenring.HashTokens(c.Tokens()) || m.OwnTokens != 256 {
			t.Errorf("ReadTokenRingHash = %s, %+v; want scylla-operator's hash and 256 own tokens", hash, m)
		}
	})

	t.Run("EndpointTokens", func(t *testing.T) {
		c := SampleCluster(endpointA)
		src := newSource(t, c)
		for _, n := range c.Nodes {
			got, err := src.EndpointTokens(ctx, n.Endpoint)
			if err != nil {
				t.Errorf("EndpointTokens(%s): %v", n.Endpoint, err)
				continue
			}
			if !sameStrings(got, n.Tokens) {
				t.Errorf("EndpointTokens(%s) = %v, want %v (empty while joining)", n.Endpoint, got, n.Tokens)
			}
		}
		got, err := src.EndpointTokens(ctx, endpointUnknown)
		if (err == nil && len(got) != 0) || (err != nil && !errors.Is(err, tokenring.ErrNotFound)) {
			t.Errorf("EndpointTokens of an unknown endpoint = %v, %v; want no tokens, or an error wrapping ErrNotFound", got, err)
		}
	})

	t.Run("TokenEndpoints", func(t *testing.T) {
		c := SampleCluster(endpointA)
		got, err := newSource(t, c).TokenEndpoints(ctx)
		if err != nil {
			t.Fatalf("TokenEndpoints: %v", err)
		}
		want := map[string]string{}
		for _, n := range c.Nodes {
			for _, tok := range n.Tokens {
				want[tok] = n.Endpoint
			}
		}
		gotMap := map[string]string{}
		for _, p := range got {
			if _, dup := gotMap[p.Token]; dup {
				t.Errorf("TokenEndpoints lists token %s twice", p.Token)
			}
			gotMap[p.Token] = p.Endpoint
		}
		if !maps.Equal(gotMap, want) {
			t.Errorf("TokenEndpoints = %v, want %v", gotMap, want)
		}
	})

	t.Run("MembershipAndHash", func(t *testing.T) {
		c := SampleCluster(endpointA)
		hash, m, err := tokenring.ReadTokenRingHash(ctx, newSource(t, c))
		if err != nil {
			t.Fatalf("ReadTokenRingHash of a member: %v", err)
		}
		if hash != tokenring.HashTokens(c.Tokens()) {
			t.Errorf("ReadTokenRingHash = %s, want %s (scylla-operator's hash of the node's tokens)", hash, tokenring.HashTokens(c.Tokens()))
		}
		if want := (tokenring.Membership{HostID: "host-a", Endpoint: endpointA, OwnTokens: 4}); m != want {
			t.Errorf("membership = %+v, want %+v", m, want)
		}
		_, _, err = tokenring.ReadTokenRingHash(ctx, newSource(t, SampleCluster(endpointJoining)))
		if !errors.Is(err, tokenring.ErrNotJoined) || !tokenring.IsRetryable(err) {
			t.Errorf("ReadTokenRingHash of a joining node: %v, want a retryable ErrNotJoined", err)
		}
	})

	t.Run("ReturnedValuesAreCopies", func(t *testing.T) {
		c := SampleCluster(endpointA)
		src := newSource(t, c)
		if ids, err := src.HostIDs(ctx); err == nil {
			ids[endpointA] = "scribbled"
			ids[endpointUnknown] = "added"
		}
		if ts, err := src.Tokens(ctx); err == nil && len(ts) > 0 {
			ts[0] = "scribbled"
		}
		if ts, err := src.EndpointTokens(ctx, endpointA); err == nil && len(ts) > 0 {
			ts[0] = "scribbled"
		}
		if ps, err := src.TokenEndpoints(ctx); err == nil && len(ps) > 0 {
			ps[0].Endpoint = "scribbled"
		}
		checkRingAgain(t, ctx, src, c)
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		c := SampleCluster(endpointA)
		src := newSource(t, c)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				checkRingAgain(t, ctx, src, c)
			}()
		}
		wg.Wait()
	})

	t.Run("CancelledContext", func(t *testing.T) {
		src := newSource(t, SampleCluster(endpointA))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		calls := map[string]func() error{
			"LocalHostID":    func() error { _, err := src.LocalHostID(cctx); return err },
			"HostIDs":        func() error { _, err := src.HostIDs(cctx); return err },
			"Tokens":         func() error { _, err := src.Tokens(cctx); return err },
			"EndpointTokens": func() error { _, err := src.EndpointTokens(cctx, endpointA); return err },
			"TokenEndpoints": func() error { _, err := src.TokenEndpoints(cctx); return err },
		}
		for _, name := range slices.Sorted(maps.Keys(calls)) {
			checkCancelled(t, name, calls[name]())
		}
	})
}

// checkRingAgain reads the whole ring and compares it with c; the copies
// and concurrency subtests use it.
func checkRingAgain(t *testing.T, ctx context.Context, src tokenring.RingSource, c Cluster) {
	t.Helper()
	if ids, err := src.HostIDs(ctx); err != nil || !maps.Equal(ids, c.HostIDs()) {
		t.Errorf("HostIDs = %v, %v; want %v", ids, err, c.HostIDs())
	}
	if ts, err := src.Tokens(ctx); err != nil || !slices.Equal(ts, c.Tokens()) {
		t.Errorf("Tokens = %v, %v; want %v", ts, err, c.Tokens())
	}
	a, _ := c.Node(endpointA)
	if ts, err := src.EndpointTokens(ctx, endpointA); err != nil || !sameStrings(ts, a.Tokens) {
		t.Errorf("EndpointTokens(%s) = %v, %v; want %v", endpointA, ts, err, a.Tokens)
	}
	ps, err := src.TokenEndpoints(ctx)
	if err != nil || len(ps) != len(c.Tokens()) {
		t.Errorf("TokenEndpoints = %v, %v; want %d entries", ps, err, len(c.Tokens()))
	}
	for _, p := range ps {
		if n, ok := c.Node(p.Endpoint); !ok || !slices.Contains(n.Tokens, p.Token) {
			t.Errorf("TokenEndpoints maps %s to %s, which does not own it", p.Token, p.Endpoint)
		}
	}
}
