package rebuildtest

import (
	"context"
	"testing"

	"github.com/caretaker-storage/caretaker/rebuild"
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
		return rebuild.Status{}, rebuild.ErrNotFound
	}
	return s.Status, nil
}

func TestClusterIsAVolumeSource(t *testing.T) {
	RunVolumeSourceTests(t, func(*testing.T) VolumeSourceHarness { return clusterHarness{NewCluster(nil)} })
}

func TestClusterIsATicketStore(t *testing.T) {
	RunTicketStoreTests(t, func(*testing.T) TicketStoreHarness { return clusterHarness{NewCluster(nil)} })
}
