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

// CleanerHarness is what RunCleanerTests needs from a harness: the Cleaner
// under test and, where the host can tell, what it did. A nil observer
// turns off the checks that need it.
type CleanerHarness struct {
	// Cleaner is the implementation under test.
	Cleaner tokenring.Cleaner
	// Cleaned returns the keyspaces cleaned so far, in order.
	Cleaned func() []string
	// StopCalls returns how many times cleanups were stopped.
	StopCalls func() int
	// FailCleanup makes every later cleanup of keyspace fail the way the
	// node fails (a server error, not a missing keyspace).
	FailCleanup func(keyspace string)
}

// Endpoints of the suites' clusters.
const (
	endpointA       = "10.0.0.1"
	endpointB       = "10.0.0.2"
	endpointJoining = "10.0.0.3"
	endpointUnknown = "10.9.9.9"
)

// SampleCluster is the cluster the suites describe most often, seen from
// local: two nodes own tokens (their lexical and numeric orders differ, and
// one is the extreme of the int64 range), a third is joining. Keyspaces:
// two vnode keyspaces to clean, two local ones and a tablets one.
func SampleCluster(local string) Cluster {
	return Cluster{
		Local: local,
		Nodes: []Node{
			{Endpoint: endpointA, HostID: "host-a", Datacenter: "dc1", Rack: "r1", Tokens: []string{"9", "-100", "50", "9223372036854775807"}},
			{Endpoint: endpointB, HostID: "host-b", Datacenter: "dc1", Rack: "r2", Tokens: []string{"300", "-20", "-9000000000000000000"}},
			{Endpoint: endpointJoining, HostID: "host-c", Datacenter: "dc2", Rack: "r1"},
		},
		Keyspaces: []Keyspace{
			{Name: "app"},
			{Name: "system", Local: true},
			{Name: "metrics"},
			{Name: "system_schema", Local: true},
			{Name: "tabular", Tablets: true},
		},
	}
}

// RunRingSourceTests checks that the RingSources newSource makes honour the
// contract of tokenring.RingSource: the local host ID, the host IDs of the
// token owners only, the ring's tokens exactly as ScyllaDB reports them
// (sorted numerically, unformatted) so that ReadTokenRingHash agrees with
// scylla-operator, each endpoint's tokens (none while joining), the
// token → endpoint map, copies, concurrent use, and cancelled contexts.
// If the implementation is also a tokenring.LocationSource, locations and
// ReadRing are checked too. newSource is called once or more per subtest
// and must present c as the node c.Local sees it.
func RunRingSourceTests(t *testing.T, newSource func(t *testing.T, c Cluster) tokenring.RingSource) {
	t.Helper()
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
		tokens := spreadTokens(3 * 256)
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

	t.Run("LocationsAndRing", func(t *testing.T) {
		c := SampleCluster(endpointA)
		src := newSource(t, c)
		locs, ok := src.(tokenring.LocationSource)
		if !ok {
			t.Skip("the implementation is not a LocationSource")
		}
		for _, n := range c.Nodes {
			got, err := locs.Location(ctx, n.Endpoint)
			if want := (tokenring.Location{Datacenter: n.Datacenter, Rack: n.Rack}); err != nil || got != want {
				t.Errorf("Location(%s) = %+v, %v; want %+v", n.Endpoint, got, err, want)
			}
		}
		ring, err := tokenring.ReadRing(ctx, src, locs)
		if err != nil {
			t.Fatalf("ReadRing: %v", err)
		}
		if want := len(c.Tokens()); len(ring.Owners) != want || len(ring.Locations) != 2 {
			t.Errorf("ReadRing: %d owners and %d locations, want %d and 2", len(ring.Owners), len(ring.Locations), want)
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

// RunCleanerTests checks that the Cleaners newCleaner makes honour the
// contract of tokenring.Cleaner: the keyspaces to clean (no local, no
// tablet keyspaces), cleaning each, ErrKeyspaceNotFound (and not
// ErrNotFound) for a dropped keyspace, StopCleanups, RunCleanup end to end
// (a dropped keyspace is Dropped, never Cleaned), server failures that are
// retryable and claim no missing keyspace, copies, concurrent use, and
// cancelled contexts.
// newCleaner is called once per subtest and must present c as the node
// c.Local sees it, with no cleanup run yet.
func RunCleanerTests(t *testing.T, newCleaner func(t *testing.T, c Cluster) CleanerHarness) {
	t.Helper()
	ctx := context.Background()

	t.Run("CleanupKeyspacesSkipsLocalAndTablets", func(t *testing.T) {
		c := SampleCluster(endpointA)
		got, err := newCleaner(t, c).Cleaner.CleanupKeyspaces(ctx)
		if err != nil {
			t.Fatalf("CleanupKeyspaces: %v", err)
		}
		if want := c.CleanupKeyspaces(); !sameStrings(got, want) {
			t.Errorf("CleanupKeyspaces = %v, want %v", got, want)
		}
	})

	t.Run("NothingToClean", func(t *testing.T) {
		c := SampleCluster(endpointA)
		c.Keyspaces = []Keyspace{{Name: "system", Local: true}, {Name: "tabular", Tablets: true}}
		got, err := newCleaner(t, c).Cleaner.CleanupKeyspaces(ctx)
		if err != nil || len(got) != 0 {
			t.Errorf("CleanupKeyspaces with only local and tablet keyspaces = %v, %v; want none and no error", got, err)
		}
	})

	t.Run("CleanupKeyspace", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		want := c.CleanupKeyspaces()
		for _, ks := range want {
			if err := h.Cleaner.CleanupKeyspace(ctx, ks); err != nil {
				t.Errorf("CleanupKeyspace(%s): %v", ks, err)
			}
		}
		if h.Cleaned != nil && !slices.Equal(h.Cleaned(), want) {
			t.Errorf("cleaned %v, want %v", h.Cleaned(), want)
		}
	})

	t.Run("DroppedKeyspaceIsKeyspaceNotFound", func(t *testing.T) {
		h := newCleaner(t, SampleCluster(endpointA))
		err := h.Cleaner.CleanupKeyspace(ctx, "dropped")
		if !errors.Is(err, tokenring.ErrKeyspaceNotFound) || tokenring.IsRetryable(err) {
			t.Errorf("CleanupKeyspace of a keyspace that does not exist: %v, want a final error wrapping ErrKeyspaceNotFound", err)
		}
		if h.Cleaned != nil && len(h.Cleaned()) != 0 {
			t.Errorf("cleaned %v after cleaning only a missing keyspace", h.Cleaned())
		}
	})

	t.Run("StopCleanups", func(t *testing.T) {
		h := newCleaner(t, SampleCluster(endpointA))
		for i := range 2 {
			if err := h.Cleaner.StopCleanups(ctx); err != nil {
				t.Errorf("StopCleanups #%d with nothing running: %v", i+1, err)
			}
		}
		if h.StopCalls != nil && h.StopCalls() != 2 {
			t.Errorf("%d stops recorded, want 2", h.StopCalls())
		}
		if h.Cleaned != nil && len(h.Cleaned()) != 0 {
			t.Errorf("StopCleanups cleaned %v", h.Cleaned())
		}
	})

	t.Run("RunCleanup", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		report, err := tokenring.RunCleanup(ctx, h.Cleaner)
		want := c.CleanupKeyspaces()
		if err != nil || !sameStrings(report.Keyspaces, want) || !sameStrings(report.Cleaned, want) || len(report.Failed) != 0 {
			t.Errorf("RunCleanup = %+v, %v; want %v listed and cleaned, nothing failed", report, err, want)
		}
		if h.StopCalls != nil && h.StopCalls() != 1 {
			t.Errorf("RunCleanup stopped cleanups %d times, want 1", h.StopCalls())
		}
		if h.Cleaned != nil && !sameStrings(h.Cleaned(), want) {
			t.Errorf("RunCleanup cleaned %v, want %v", h.Cleaned(), want)
		}
	})

	t.Run("FailedCleanupIsRetryable", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		if h.FailCleanup == nil {
			t.Skip("the harness cannot make a cleanup fail")
		}
		h.FailCleanup("metrics")
		err := h.Cleaner.CleanupKeyspace(ctx, "metrics")
		if err == nil || errors.Is(err, tokenring.ErrKeyspaceNotFound) || !tokenring.IsRetryable(err) {
			t.Errorf("failing CleanupKeyspace: %v; want a retryable error that is not ErrKeyspaceNotFound (RunCleanup would count it dropped)", err)
		}
		report, err := tokenring.RunCleanup(ctx, h.Cleaner)
		if err == nil || report.Failed["metrics"] == nil || !slices.Equal(report.Cleaned, []string{"app"}) {
			t.Errorf("RunCleanup with a failing keyspace = %+v, %v; want metrics failed and app cleaned", report, err)
		}
	})

	t.Run("ReturnedKeyspacesAreCopies", func(t *testing.T) {
		c := SampleCluster(endpointA)
		h := newCleaner(t, c)
		if got, err := h.Cleaner.CleanupKeyspaces(ctx); err == nil && len(got) > 0 {
			got[0] = "scribbled"
		}
		got, err := h.Cleaner.CleanupKeyspaces(ctx)
		if want := c.CleanupKeyspaces(); err != nil || !sameStrings(got, want) {
			t.Errorf("CleanupKeyspaces after a caller wrote to a returned slice = %v, %v; want %v", got, err, want)
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		c := SampleCluster(endpointA)
		c.Keyspaces = nil
		for i := range 8 {
			c.Keyspaces = append(c.Keyspaces, Keyspace{Name: fmt.Sprintf("ks%d", i)})
		}
		h := newCleaner(t, c)
		var wg sync.WaitGroup
		for _, ks := range c.CleanupKeyspaces() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.Cleaner.StopCleanups(ctx); err != nil {
					t.Errorf("concurrent StopCleanups: %v", err)
				}
				if got, err := h.Cleaner.CleanupKeyspaces(ctx); err != nil || !sameStrings(got, c.CleanupKeyspaces()) {
					t.Errorf("concurrent CleanupKeyspaces = %v, %v", got, err)
				}
				if err := h.Cleaner.CleanupKeyspace(ctx, ks); err != nil {
					t.Errorf("concurrent CleanupKeyspace(%s): %v", ks, err)
				}
			}()
		}
		wg.Wait()
		if h.Cleaned != nil && !sameStrings(h.Cleaned(), c.CleanupKeyspaces()) {
			t.Errorf("after concurrent cleanups: cleaned %v, want each of %v once", h.Cleaned(), c.CleanupKeyspaces())
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		h := newCleaner(t, SampleCluster(endpointA))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		checkCancelled(t, "StopCleanups", h.Cleaner.StopCleanups(cctx))
		_, err := h.Cleaner.CleanupKeyspaces(cctx)
		checkCancelled(t, "CleanupKeyspaces", err)
		checkCancelled(t, "CleanupKeyspace", h.Cleaner.CleanupKeyspace(cctx, "app"))
		if h.Cleaned != nil && len(h.Cleaned()) != 0 {
			t.Errorf("cleaned %v with a cancelled context", h.Cleaned())
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

// checkCancelled: a call made with a cancelled context must fail with an
// error wrapping context.Canceled, so IsRetryable says not to retry, and
// never with ErrNotFound or ErrKeyspaceNotFound, which callers would take
// for "gone".
func checkCancelled(t *testing.T, call string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s with a cancelled context succeeded; ctx bounds every call", call)
	case errors.Is(err, tokenring.ErrNotFound), errors.Is(err, tokenring.ErrKeyspaceNotFound):
		t.Errorf("%s with a cancelled context reported a missing thing: %v", call, err)
	case !errors.Is(err, context.Canceled):
		t.Errorf("%s with a cancelled context: %v does not wrap context.Canceled", call, err)
	case tokenring.IsRetryable(err):
		t.Errorf("%s with a cancelled context: IsRetryable(%v) = true", call, err)
	}
}

// spreadTokens returns n distinct canonical tokens spread over the whole
// int64 range, deterministically and in no sorted order.
func spreadTokens(n int) []string {
	out := make([]string, 0, n)
	seen := map[int64]bool{}
	x := uint64(0x9e3779b97f4a7c15)
	for len(out) < n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v := int64(x)
		if v == -1<<63 || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func sameStrings(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
