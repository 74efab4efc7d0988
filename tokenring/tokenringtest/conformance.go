package tokenringtest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// Harness says how to make each implementation under test. Each field is
// a maker for one interface of package tokenring that hosts implement; a
// nil field skips that interface's section. A maker is called once or more
// per subtest and must return an implementation presenting c as the node
// c.Local sees it, with no cleanup run yet.
type Harness struct {
	// RingSource makes the tokenring.RingSource under test.
	RingSource func(t *testing.T, c Cluster) tokenring.RingSource
	// LocationSource makes the tokenring.LocationSource under test.
	LocationSource func(t *testing.T, c Cluster) tokenring.LocationSource
	// Cleaner makes the tokenring.Cleaner under test, with what the
	// harness can observe of it.
	Cleaner func(t *testing.T, c Cluster) CleanerHarness
	// CleanupStateStore makes an empty tokenring.CleanupStateStore.
	CleanupStateStore func(t *testing.T) tokenring.CleanupStateStore
}

// RunConformanceTests checks that the implementations h makes honour the
// contracts of package tokenring's host interfaces, one subtest per
// interface: "RingSource", "LocationSource", "Cleaner" and
// "CleanupStateStore". A Harness with
// no maker set is a test failure: it would check nothing.
//
// A host with its own path to the node runs it in one line:
//
//	func TestMySource(t *testing.T) {
//		tokenringtest.RunConformanceTests(t, tokenringtest.Harness{
//			RingSource: func(t *testing.T, c tokenringtest.Cluster) tokenring.RingSource { return newMySource(t, c) },
//		})
//	}
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.RingSource == nil && h.LocationSource == nil && h.Cleaner == nil && h.CleanupStateStore == nil {
		t.Fatal("tokenringtest: RunConformanceTests needs at least one maker in the Harness")
	}
	if h.RingSource != nil {
		t.Run("RingSource", func(t *testing.T) { testRingSource(t, h.RingSource) })
	}
	if h.LocationSource != nil {
		t.Run("LocationSource", func(t *testing.T) { testLocationSource(t, h.LocationSource) })
	}
	if h.Cleaner != nil {
		t.Run("Cleaner", func(t *testing.T) { testCleaner(t, h.Cleaner) })
	}
	if h.CleanupStateStore != nil {
		t.Run("CleanupStateStore", func(t *testing.T) { testCleanupStateStore(t, h.CleanupStateStore) })
	}
}

// CleanerHarness is a Cleaner under test and, where the host can tell,
// what it did. A nil observer turns off the checks that need it.
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

func sameStrings(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
