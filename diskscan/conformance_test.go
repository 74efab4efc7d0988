package diskscan_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/orphan/orphantest"
)

// adapterHarness runs orphantest's Adapter suite on real disks: each
// Adapter call makes a new disk in a temporary directory, with one live
// replica the cluster expects (Delete refuses on a disk whose expected set
// is empty), and binds a new Orphans to it. The disk's path ends in a
// slash, as Longhorn's default does.
type adapterHarness struct {
	disk diskscan.Disk
	exp  *diskscan.StaticExpected
	n    int
}

func (h *adapterHarness) Adapter(t *testing.T) orphan.Adapter {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	if err := diskscantest.NewDisk(p, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	fsid, err := diskscan.FSID(p)
	if err != nil {
		t.Fatal(err)
	}
	h.disk = diskscan.Disk{NodeID: "node-1", Name: "disk-1", Path: p + "/", UUID: "uuid-1", FSID: fsid}
	h.exp = diskscan.NewStaticExpected()
	h.MakeOwned(t)
	o, err := diskscan.NewOrphans(h.exp, diskscan.Options{Disks: []diskscan.Disk{h.disk}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// make creates a valid replica directory and returns its item.
func (h *adapterHarness) make(t *testing.T) orphan.Item {
	t.Helper()
	h.n++
	name := fmt.Sprintf("pvc-%d-r-%08x", h.n, h.n)
	if err := diskscantest.MakeReplica(h.disk.Path, name, diskscantest.Replica{Written: 4096}); err != nil {
		t.Fatal(err)
	}
	return orphan.Item{
		Kind: orphan.KindReplicaData, NodeID: h.disk.NodeID, DataEngine: orphan.DataEngineV1,
		Parameters: map[string]string{
			orphan.ParamDataName: name, orphan.ParamDiskName: h.disk.Name, orphan.ParamDiskUUID: h.disk.UUID,
			orphan.ParamDiskPath: h.disk.Path, orphan.ParamDiskType: diskscan.DiskType,
		},
	}
}

func (h *adapterHarness) MakeOrphan(t *testing.T) orphan.Item { return h.make(t) }

func (h *adapterHarness) MakeOwned(t *testing.T) orphan.Item {
	it := h.make(t)
	h.Claim(t, it)
	return it
}

func (h *adapterHarness) Claim(_ *testing.T, it orphan.Item) {
	h.exp.Add(diskscan.ReplicaRef{NodeID: it.NodeID, DiskID: it.Param(orphan.ParamDiskUUID),
		DiskPath: it.Param(orphan.ParamDiskPath), DataDirectoryName: it.Param(orphan.ParamDataName)})
}

func (h *adapterHarness) Exists(t *testing.T, it orphan.Item) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(h.disk.Path, diskscan.ReplicasDir, it.Param(orphan.ParamDataName)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestOrphansConformance(t *testing.T) {
	orphantest.RunConformanceTests(t, orphantest.Harness{Adapter: &adapterHarness{}})
}

func TestStaticExpectedConformance(t *testing.T) {
	diskscantest.RunConformanceTests(t, diskscantest.Harness{
		ExpectedSource: func(*testing.T) (diskscan.ExpectedSource, diskscantest.ExpectFunc) {
			src := diskscan.NewStaticExpected()
			return src, func(_ *testing.T, d diskscan.Disk, name string) {
				src.Add(diskscan.ReplicaRef{Name: name, NodeID: d.NodeID, DiskID: d.UUID, DiskPath: d.Path, DataDirectoryName: name})
			}
		},
	})
}

// An ExpectedFunc over a host's own index: copy-on-write sets by disk
// UUID, as the ExpectedSource contract asks.
func TestExpectedFuncConformance(t *testing.T) {
	diskscantest.RunConformanceTests(t, diskscantest.Harness{
		ExpectedSource: func(*testing.T) (diskscan.ExpectedSource, diskscantest.ExpectFunc) {
			var (
				mu     sync.Mutex
				byUUID = map[string]diskscan.NameSet{}
			)
			src := diskscan.ExpectedFunc(func(ctx context.Context, d diskscan.Disk) (diskscan.NameSet, error) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				mu.Lock()
				defer mu.Unlock()
				return byUUID[d.UUID], nil
			})
			return src, func(_ *testing.T, d diskscan.Disk, name string) {
				mu.Lock()
				defer mu.Unlock()
				set := maps.Clone(byUUID[d.UUID])
				if set == nil {
					set = diskscan.NameSet{}
				}
				set[name] = struct{}{}
				byUUID[d.UUID] = set
			}
		},
	})
}
