// Package instancetest helps test code built on package instance: one
// conformance suite, RunConformanceTests, for a host's Lookup of its
// engine and replica records, and MemLookup, an in-memory Lookup that
// passes it.
package instancetest

import (
	"context"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
)

// Harness says what RunConformanceTests checks: one field per interface
// of package instance a host implements. Nil fields are skipped.
type Harness struct {
	// Lookup binds a Lookup to records the harness writes.
	Lookup LookupHarness
}

// LookupHarness makes engine and replica records for a Lookup under test.
// Implementations call t.Fatal on their own failures.
type LookupHarness interface {
	// Lookup returns the Lookup under test, over the harness's records.
	Lookup(t *testing.T) instance.Lookup
	// Put writes the record of kind (engine or replica instance) named
	// name with the view's fields (Exists is true), replacing one that
	// exists. It returns once the Lookup can see it.
	Put(t *testing.T, kind orphan.Kind, name string, v instance.View)
	// Remove deletes the record; it returns once the Lookup can see that.
	Remove(t *testing.T, kind orphan.Kind, name string)
}

// RunConformanceTests checks every implementation h names against the
// contracts of package instance ("Lookup"). A Harness with nothing set is
// a test failure.
func RunConformanceTests(t *testing.T, h Harness) {
	t.Helper()
	if h.Lookup == nil {
		t.Fatal("instancetest: the Harness sets nothing to test")
	}
	t.Run("Lookup", func(t *testing.T) { runLookupTests(t, h.Lookup) })
}

func runLookupTests(t *testing.T, h LookupHarness) {
	ctx := context.Background()
	running := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning,
		OwnerNodeID: "node-1", DesiredNodeID: "node-1", InstanceManager: "instance-manager-1"}

	t.Run("AbsentIsNoError", func(t *testing.T) {
		l := h.Lookup(t)
		v, err := l.LookupInstance(ctx, orphan.KindReplicaInstance, "vol-r-absent")
		if err != nil || v.Exists {
			t.Fatalf("LookupInstance of a record that does not exist = %+v, %v; want Exists false and no error", v, err)
		}
	})

	t.Run("PresentRoundTrips", func(t *testing.T) {
		l := h.Lookup(t)
		h.Put(t, orphan.KindEngineInstance, "vol-e-0", running)
		v, err := l.LookupInstance(ctx, orphan.KindEngineInstance, "vol-e-0")
		if err != nil || v != running {
			t.Fatalf("LookupInstance = %+v, %v; want %+v", v, err, running)
		}
	})

	t.Run("KindsAreSeparate", func(t *testing.T) {
		// An engine and a replica may share a name; one is not the other.
		l := h.Lookup(t)
		h.Put(t, orphan.KindEngineInstance, "vol-x", running)
		v, err := l.LookupInstance(ctx, orphan.KindReplicaInstance, "vol-x")
		if err != nil || v.Exists {
			t.Fatalf("a replica lookup found the engine record: %+v, %v", v, err)
		}
	})

	t.Run("RemovedIsAbsent", func(t *testing.T) {
		l := h.Lookup(t)
		h.Put(t, orphan.KindReplicaInstance, "vol-r-1", running)
		h.Remove(t, orphan.KindReplicaInstance, "vol-r-1")
		v, err := l.LookupInstance(ctx, orphan.KindReplicaInstance, "vol-r-1")
		if err != nil || v.Exists {
			t.Fatalf("a removed record is %+v, %v; want Exists false", v, err)
		}
	})

	t.Run("ConcurrentUse", func(t *testing.T) {
		l := h.Lookup(t)
		h.Put(t, orphan.KindReplicaInstance, "vol-r-2", running)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if v, err := l.LookupInstance(ctx, orphan.KindReplicaInstance, "vol-r-2"); err != nil || !v.Exists {
					t.Errorf("concurrent LookupInstance = %+v, %v", v, err)
				}
			}()
		}
		wg.Wait()
	})
}

// MemLookup is an in-memory instance.Lookup. Safe for concurrent use; the
// zero value is empty.
type MemLookup struct {
	mu      sync.Mutex
	records map[memKey]instance.View
}

type memKey struct {
	kind orphan.Kind
	name string
}

// Put stores the record (Exists is forced true).
func (m *MemLookup) Put(kind orphan.Kind, name string, v instance.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = map[memKey]instance.View{}
	}
	v.Exists = true
	m.records[memKey{kind, name}] = v
}

// Remove deletes the record.
func (m *MemLookup) Remove(kind orphan.Kind, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, memKey{kind, name})
}

// LookupInstance implements instance.Lookup.
func (m *MemLookup) LookupInstance(_ context.Context, kind orphan.Kind, name string) (instance.View, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records[memKey{kind, name}], nil
}

// CountInstances returns how many records of kind the lookup holds. So
// MemLookup is a spdk.RecordCounter: an empty view beside SPDK's runtime
// objects is reported as the guard's NoneExpected evidence. MemLookup
// holds no data engine, so every record counts (a host's view of the v2
// engine's records only). It fails only with ctx's error.
func (m *MemLookup) CountInstances(ctx context.Context, kind orphan.Kind) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.records {
		if k.kind == kind {
			n++
		}
	}
	return n, nil
}
