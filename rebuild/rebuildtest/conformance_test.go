package rebuildtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/rebuild"

	"github.com/caretaker-storage/caretaker/internal/testrun"
)

// clusterHarness presents a Cluster to the conformance suites.
type clusterHarness struct{ c *Cluster }

func (h clusterHarness) Source() rebuild.VolumeSource { return h.c }
func (h clusterHarness) Store() rebuild.TicketStore   { return h.c }

func (h clusterHarness) CreateVolume(_ context.Context, spec VolumeSpec) error {
	return h.c.CreateVolume(spec)
}

// DeleteVolume requests deletion and steps the controllers once: the
// suites' volumes are detached, so they disappear at once.
func (h clusterHarness) DeleteVolume(_ context.Context, name string) error {
	if err := h.c.DeleteVolume(name); err != nil {
		return err
	}
	h.c.Step()
	return nil
}

func (h clusterHarness) SetGlobalSetting(_ context.Context, value string) error {
	h.c.SetGlobalSetting(value)
	return nil
}

func (h clusterHarness) Status(_ context.Context, name string) (rebuild.Status, error) {
	s := h.c.Inspect(name)
	if !s.Exists {
		return rebuild.Status{}, fmt.Errorf("volume %s: %w", name, rebuild.ErrNotFound)
	}
	return s.Status, nil
}

// clusterConformance is the Harness over fresh clusters from newCluster.
func clusterConformance(newCluster func(t *testing.T) *Cluster) Harness {
	return Harness{
		VolumeSource: func(t *testing.T) VolumeSourceHarness { return clusterHarness{newCluster(t)} },
		TicketStore:  func(t *testing.T) TicketStoreHarness { return clusterHarness{newCluster(t)} },
	}
}

// TestClusterConformance: the in-memory cluster, on the real clock.
func TestClusterConformance(t *testing.T) {
	RunConformanceTests(t, clusterConformance(func(*testing.T) *Cluster { return NewCluster(ClusterOptions{}) }))
}

// TestSimConformance: the cluster a Sim drives, on the Sim's fake clock.
func TestSimConformance(t *testing.T) {
	RunConformanceTests(t, clusterConformance(func(t *testing.T) *Cluster {
		sim, err := NewSim(rebuild.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sim.Cluster
	}))
}

// TestEmptyHarnessFails: a Harness without makers would check nothing,
// and must say so rather than pass.
func TestEmptyHarnessFails(t *testing.T) {
	if testrun.Passes("TestHost", func(t *testing.T) { RunConformanceTests(t, Harness{}) }) {
		t.Fatal("RunConformanceTests with an empty Harness passed")
	}
}

// A host's adapters (here the in-memory Cluster stands in for them) run the
// whole suite in one line of their test:
//
//	func TestMyHost(t *testing.T) { rebuildtest.RunConformanceTests(t, harness) }
//
// The example runs that test function itself, quietly, so that it can
// print the outcome.
func ExampleRunConformanceTests() {
	harness := Harness{
		VolumeSource: func(*testing.T) VolumeSourceHarness { return clusterHarness{NewCluster(ClusterOptions{})} },
		TicketStore:  func(*testing.T) TicketStoreHarness { return clusterHarness{NewCluster(ClusterOptions{})} },
	}
	ok := testrun.Passes("TestHost", func(t *testing.T) { RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}
