package spdk

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

func TestVolumeOfReplica(t *testing.T) {
	for name, want := range map[string]string{
		"pvc-a-r-1a2b3c4d":            "pvc-a",
		"pvc-a-r-1a2b3c4d-r-0000ffff": "pvc-a-r-1a2b3c4d",
		"v-r-00000000":                "v",
		"-r-1a2b3c4d":                 "", // no volume
		"pvc-a-r-1A2B3C4D":            "", // Longhorn's IDs are lowercase
		"pvc-a-r-1a2b3c4g":            "", // not hex
		"pvc-a-r-1a2b3c4":             "", // 7 digits
		"pvc-a-r-1a2b3c4d5":           "", // 9 digits
		"pvc-a-1a2b3c4d":              "", // a v1 data directory's form
		"pvc-a-replica-1a2b3c4d":      "", // Longhorn before v1.1
		"":                            "",
	} {
		if got := volumeOfReplica(name); got != want {
			t.Errorf("volumeOfReplica(%q) = %q, want %q", name, got, want)
		}
	}
}

// copyBdev is an lvol bdev of lvstore disk-1 as bdev_get_bdevs lists it,
// with clusters allocated (nil: SPDK did not write the count).
func copyBdev(name, uuid string, clusters *uint64, snapshot bool, parent string, clones ...string) spdkrpc.Bdev {
	return spdkrpc.Bdev{Name: uuid, UUID: uuid, Aliases: []string{"disk-1/" + name}, ProductName: spdkrpc.ProductLogicalVolume, BlockSize: 4096, NumBlocks: 256,
		DriverSpecific: spdkrpc.BdevDriverSpecific{Lvol: &spdkrpc.BdevLvolInfo{LvolStoreUUID: "L", NumAllocatedClusters: clusters, Snapshot: snapshot,
			Clone: parent != "", BaseSnapshot: parent, Clones: clones}}}
}

func clusters(n uint64) *uint64 { return &n }

// TestReplicaCopyNoDataOnlyWhenProven: a v2 replica holds no data only
// when SPDK reports, for the head and every snapshot lvol related to it,
// that it has no allocated cluster; any doubt leaves it a copy that may
// hold data.
func TestReplicaCopyNoDataOnlyWhenProven(t *testing.T) {
	const name, head, snap = "pvc-a-r-1a2b3c4d", "11111111-0000-4000-8000-000000000001", "11111111-0000-4000-8000-000000000002"
	rep := Replica{Head: spdkrpc.Lvol{Name: name, UUID: head, Alias: "disk-1/" + name, Lvs: spdkrpc.LvolStoreRef{Name: "disk-1", UUID: "L"}}}
	listing := func(headN, snapN *uint64, extra ...spdkrpc.Bdev) []spdkrpc.Bdev {
		return append([]spdkrpc.Bdev{
			copyBdev(name, head, headN, false, name+"-snap-s1"),
			copyBdev(name+"-snap-s1", snap, snapN, true, "", name),
		}, extra...)
	}
	for _, tc := range []struct {
		name    string
		bdevs   []spdkrpc.Bdev
		listErr error
		noData  bool
		reason  string
	}{
		{"every lvol reports none", listing(clusters(0), clusters(0)), nil, true, "no allocated cluster"},
		{"the head holds data", listing(clusters(2), clusters(0)), nil, false, "hold 2 allocated clusters"},
		{"a snapshot holds data", listing(clusters(0), clusters(7)), nil, false, "hold 7 allocated clusters"},
		{"the head's count is missing", listing(nil, clusters(0)), nil, false, "did not report how many clusters lvol disk-1/" + name},
		{"a snapshot's count is missing", listing(clusters(0), nil), nil, false, "did not report how many clusters lvol disk-1/" + name + "-snap-s1"},
		{"the listing failed", nil, errors.New("connection reset"), false, "could not be read (connection reset)"},
		{"the head is not listed", listing(clusters(0), clusters(0))[1:], nil, false, "not in the bdev listing"},
		{"another volume's clone of its snapshot", []spdkrpc.Bdev{
			copyBdev(name, head, clusters(0), false, name+"-snap-s1"),
			copyBdev(name+"-snap-s1", snap, clusters(0), true, "", name, "pvc-b-r-00000000"),
			copyBdev("pvc-b-r-00000000", "11111111-0000-4000-8000-000000000003", clusters(0), false, name+"-snap-s1"),
		}, nil, false, "not one of its lvols"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := []orphan.Item{{}}
			fillCopies(items, []Replica{rep}, tc.bdevs, tc.listErr)
			cp := items[0].Copy
			if cp.NoData != tc.noData || cp.Recoverable || cp.Volume != "pvc-a" || cp.Head != name {
				t.Fatalf("copy %+v; want NoData %v, not recoverable, volume pvc-a, head %s", cp, tc.noData, name)
			}
			if len(cp.Reasons) != 2 || cp.Reasons[0] != reasonV2Copy || !strings.Contains(cp.Reasons[1], tc.reason) {
				t.Errorf("reasons %q; want the v2 reason, then one saying %q", cp.Reasons, tc.reason)
			}
			headListed := slices.ContainsFunc(tc.bdevs, func(b spdkrpc.Bdev) bool { return b.UUID == head })
			if wantSize := int64(256 * 4096); tc.listErr == nil && headListed && cp.Size != wantSize {
				t.Errorf("size %d, want %d", cp.Size, wantSize)
			}
		})
	}
}
