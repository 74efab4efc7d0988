package instancetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/instance/instancetest"
	"github.com/caretaker-storage/caretaker/internal/testrun"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

type memHarness struct{ m *instancetest.MemLookup }

func (h memHarness) Lookup(*testing.T) instance.Lookup { return h.m }
func (h memHarness) Put(_ *testing.T, k orphan.Kind, n string, v instance.View) {
	h.m.Put(k, n, v)
}
func (h memHarness) Remove(_ *testing.T, k orphan.Kind, n string) { h.m.Remove(k, n) }

func TestMemLookupConformance(t *testing.T) {
	instancetest.RunConformanceTests(t, instancetest.Harness{Lookup: memHarness{&instancetest.MemLookup{}}})
}

// TestEmptyHarnessFails: a Harness with nothing set must fail.
func TestEmptyHarnessFails(t *testing.T) {
	if testrun.Passes("TestHost", func(t *testing.T) { instancetest.RunConformanceTests(t, instancetest.Harness{}) }) {
		t.Fatal("RunConformanceTests with an empty Harness passed")
	}
}

// A host's Lookup over its informer cache (here MemLookup stands in for
// it) runs the suite in one line of its test; the example runs that test
// itself, so that it can print the outcome.
func ExampleRunConformanceTests() {
	harness := instancetest.Harness{Lookup: memHarness{&instancetest.MemLookup{}}}
	ok := testrun.Passes("TestMyLookup", func(t *testing.T) { instancetest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}

// MemLookup counts its records, so spdk.Orphans reports an empty view of
// one kind beside SPDK's runtime objects as the guard's NoneExpected.
var _ spdk.RecordCounter = (*instancetest.MemLookup)(nil)

// TestMemLookupCountsInstances: CountInstances counts each kind apart and
// follows Put and Remove; a cancelled context is its only error.
func TestMemLookupCountsInstances(t *testing.T) {
	ctx := context.Background()
	m := &instancetest.MemLookup{}
	count := func(k orphan.Kind) int {
		t.Helper()
		n, err := m.CountInstances(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if e, r := count(orphan.KindEngineInstance), count(orphan.KindReplicaInstance); e != 0 || r != 0 {
		t.Fatalf("empty lookup counts %d engines, %d replicas", e, r)
	}
	m.Put(orphan.KindEngineInstance, "vol-e-0", instance.View{})
	m.Put(orphan.KindReplicaInstance, "vol-r-1", instance.View{})
	m.Put(orphan.KindReplicaInstance, "vol-r-2", instance.View{})
	m.Put(orphan.KindReplicaInstance, "vol-r-2", instance.View{}) // replaced, not added
	if e, r := count(orphan.KindEngineInstance), count(orphan.KindReplicaInstance); e != 1 || r != 2 {
		t.Fatalf("counts %d engines, %d replicas; want 1, 2", e, r)
	}
	m.Remove(orphan.KindReplicaInstance, "vol-r-1")
	if r := count(orphan.KindReplicaInstance); r != 1 {
		t.Fatalf("after Remove: %d replicas, want 1", r)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.CountInstances(cancelled, orphan.KindEngineInstance); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestMemLookupEmptyViewIsNoneExpected: spdk.Orphans over a MemLookup
// that holds an engine record but no replica record, beside an SPDK that
// runs both, reports NoneExpected for v2 replicas only.
func TestMemLookupEmptyViewIsNoneExpected(t *testing.T) {
	dir, err := os.MkdirTemp("", "it") // a short path: a unix socket's is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := spdktest.Start(filepath.Join(dir, "spdk.sock"), spdktest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, step := range []func() (string, error){
		func() (string, error) { return srv.AddLvstore("disk-1") },
		func() (string, error) { return srv.AddLvol("disk-1", "vol-r-11111111") },
		func() (string, error) { return srv.AddRaid("vol-e-0", "vol-r-11111111") },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	client, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	records := &instancetest.MemLookup{}
	records.Put(orphan.KindEngineInstance, "vol-e-0", instance.View{DesiredState: instance.StateRunning, CurrentState: instance.StateRunning})
	o, err := spdk.NewOrphans(client, records, spdk.Options{NodeID: "node-1", InstanceManager: "im-1"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := o.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := snap.Scopes[orphan.Scope{NodeID: "node-1"}]
	replicas := orphan.Group{Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV2}
	if st.Health != orphan.HealthReady || len(st.Groups) != 1 || !st.Groups[replicas].NoneExpected {
		t.Fatalf("scope = %+v; want Ready and NoneExpected for v2 replicas only", st)
	}
}
