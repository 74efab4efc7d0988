package spdk_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// TestOrphansConformance runs orphan's Adapter suite against NewOrphans
// over the fake SPDK.
func TestOrphansConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Adapter: &adapterHarness{}})
}

// adapterHarness binds Orphans to a fake SPDK and a record map that each
// call of Adapter makes afresh. The suite runs its subtests one at a
// time, so the current world is the last one made.
type adapterHarness struct {
	mu      sync.Mutex
	srv     *spdktest.Server
	records *hostRecords
	n       int
}

var _ orphantest.AdapterHarness = (*adapterHarness)(nil)

func (h *adapterHarness) Adapter(t *testing.T) orphan.Adapter {
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	records := &hostRecords{m: map[string]instance.View{}}
	h.mu.Lock()
	h.srv, h.records = srv, records
	h.mu.Unlock()
	return newOrphans(t, fixture.Client(t, srv, spdkrpc.ClientOptions{}), records)
}

// make creates a RAID bdev (even calls) or a head lvol with a snapshot
// (odd calls), neither built on the other, and returns its item.
func (h *adapterHarness) make(t *testing.T) orphan.Item {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	if h.n%2 == 0 {
		name := fmt.Sprintf("vol%d-e-0", h.n)
		id := fixture.Must(h.srv.AddRaid(name, fmt.Sprintf("remote-%d", h.n)))(t)
		return instanceItem(orphan.KindEngineInstance, name, id)
	}
	name := fmt.Sprintf("vol%d-r-%08x", h.n, h.n)
	id := fixture.Must(h.srv.AddLvol("disk-1", name))(t)
	fixture.Must(h.srv.Snapshot("disk-1", name, name+"-snap-s1"))(t)
	return instanceItem(orphan.KindReplicaInstance, name, id)
}

// MakeOrphan makes an engine or replica without a record.
func (h *adapterHarness) MakeOrphan(t *testing.T) orphan.Item { return h.make(t) }

// MakeOwned makes one whose record runs on this instance manager.
func (h *adapterHarness) MakeOwned(t *testing.T) orphan.Item {
	it := h.make(t)
	h.Claim(t, it)
	return it
}

// Claim gives the item a record running on this node's instance manager.
func (h *adapterHarness) Claim(_ *testing.T, it orphan.Item) {
	h.mu.Lock()
	records := h.records
	h.mu.Unlock()
	records.set(it.Param(orphan.ParamInstanceName), instance.View{Exists: true, DesiredState: instance.StateRunning,
		CurrentState: instance.StateRunning, OwnerNodeID: nodeID, InstanceManager: imName})
}

// Exists reports whether the item's RAID bdev or head lvol is still there
// under its UUID.
func (h *adapterHarness) Exists(t *testing.T, it orphan.Item) bool {
	h.mu.Lock()
	srv := h.srv
	h.mu.Unlock()
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	name, uuid := it.Param(orphan.ParamInstanceName), it.Param(orphan.ParamInstanceUUID)
	if it.Kind == orphan.KindEngineInstance {
		raids := fixture.Must(spdkrpc.BdevRaidGetBdevs(context.Background(), c, ""))(t)
		for _, r := range raids {
			if r.Name == name && r.UUID == uuid {
				return true
			}
		}
		return false
	}
	for _, l := range srv.Lvols() {
		if l.Alias == "disk-1/"+name && l.UUID == uuid {
			return true
		}
	}
	return false
}
