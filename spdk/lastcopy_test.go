package spdk_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// lastCopyScene is a node whose SPDK holds the leftovers of volume pvc-a:
// its engine's RAID bdev and a replica (a head lvol on a snapshot), with
// no record of either, and how many clusters each of the replica's lvols
// has allocated.
type lastCopyScene struct {
	srv     *spdktest.Server
	replica string
}

const lcVolume = "pvc-a"

func newLastCopyScene(t *testing.T, replica string, headClusters, snapClusters uint64) *lastCopyScene {
	t.Helper()
	srv := fixture.Start(t)
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	fixture.Must(srv.AddLvol("disk-1", replica))(t)
	if err := srv.SetAllocatedClusters("disk-1", replica, snapClusters); err != nil {
		t.Fatal(err)
	}
	// The snapshot takes the head's clusters; the head starts again.
	fixture.Must(srv.Snapshot("disk-1", replica, replica+"-snap-s1"))(t)
	if err := srv.SetAllocatedClusters("disk-1", replica, headClusters); err != nil {
		t.Fatal(err)
	}
	fixture.Must(srv.AddRaid(lcVolume+"-e-0", "remote-a", "remote-b"))(t)
	return &lastCopyScene{srv: srv, replica: replica}
}

// sweep runs cycles of the real Sweeper over the spdk adapter, with
// auto-deletion of both instance kinds on and at once, until nothing
// changes, and returns what every cycle refused, by record name. The
// mass-deletion guard's other rules are off: this node's whole view is
// the orphans, which is what they are for.
func (s *lastCopyScene) sweep(t *testing.T, vols map[string]orphan.VolumeState, complete bool) (orphan.Store, map[string]string) {
	t.Helper()
	ctx := context.Background()
	inv := newOrphans(t, fixture.Client(t, s.srv, spdkrpc.ClientOptions{}), noRecords)
	store := orphan.NewMemStore()
	sw := newSweeper(t, store, inv)
	refused := map[string]string{}
	for range 3 {
		snap, err := inv.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := sw.Reconcile(ctx, snap, orphan.Cycle{
			Selector: orphan.Selector{NodeID: nodeID},
			Scopes:   map[orphan.Scope]orphan.ScopeStatus{{NodeID: nodeID}: {Health: orphan.HealthReady}},
			Policy:   orphan.Policy{Kinds: []orphan.Kind{orphan.KindEngineInstance, orphan.KindReplicaInstance}},
			Guard: orphan.Guard{AllowNoneExpected: true, AllowWholeScope: true, AllowAnyShare: true,
				AllowOverBudget: true},
			Volumes:         vols,
			VolumesComplete: complete,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failed) > 0 {
			t.Fatalf("failed purges: %+v", res.Failed)
		}
		for _, r := range res.Refused {
			refused[r.Name] = r.Reason
		}
	}
	return store, refused
}

// lvols returns the aliases of the lvols left on disk-1.
func (s *lastCopyScene) lvols() []string { return s.srv.LvolAliases() }

// recordOf returns the record of the replica-instance item named name.
func recordOf(t *testing.T, store orphan.Store, name string) (orphan.Record, bool) {
	t.Helper()
	recs, err := store.List(context.Background(), orphan.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Kind == orphan.KindReplicaInstance && r.Param(orphan.ParamInstanceName) == name {
			return r, true
		}
	}
	return orphan.Record{}, false
}

// TestV2ReplicaLastCopyGuard: with instance auto-deletion on, a v2
// replica's lvols that hold data (allocated clusters) are the volume's
// data, and the last-copy guard keeps them by the volume's state as it
// keeps a v1 replica directory; the engine, which holds no data, goes
// whatever the volume's state.
func TestV2ReplicaLastCopyGuard(t *testing.T) {
	const replica = lcVolume + "-r-1a2b3c4d"
	for _, tc := range []struct {
		name       string
		head, snap uint64 // allocated clusters
		vols       map[string]orphan.VolumeState
		complete   bool
		rule       orphan.GuardRule // "" when the replica is purged
	}{
		{"faulted: kept as the last copy", 5, 3, map[string]orphan.VolumeState{lcVolume: orphan.VolumeFaulted}, true, orphan.GuardLastCopy},
		{"no volumes passed: automatic purge waits", 5, 3, nil, false, orphan.GuardVolumeUnknown},
		{"degraded: automatic purge waits", 5, 3, map[string]orphan.VolumeState{lcVolume: orphan.VolumeDegraded}, true, orphan.GuardVolumeDegraded},
		{"data in the snapshot only, faulted: kept", 0, 3, map[string]orphan.VolumeState{lcVolume: orphan.VolumeFaulted}, true, orphan.GuardLastCopy},
		{"healthy: purged", 5, 3, map[string]orphan.VolumeState{lcVolume: orphan.VolumeHealthy}, true, ""},
		{"deleted (complete list without it): purged", 5, 3, map[string]orphan.VolumeState{"other": orphan.VolumeFaulted}, true, ""},
		{"listed deleted: purged", 5, 3, map[string]orphan.VolumeState{lcVolume: orphan.VolumeDeleted}, false, ""},
		{"no allocated cluster, faulted: no data, purged", 0, 0, map[string]orphan.VolumeState{lcVolume: orphan.VolumeFaulted}, true, ""},
		{"no allocated cluster, no volumes passed: purged", 0, 0, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLastCopyScene(t, replica, tc.head, tc.snap)
			store, refused := s.sweep(t, tc.vols, tc.complete)

			// (e) The engine holds no data: purged in every case.
			if slices.Contains(s.srv.RaidNames(), lcVolume+"-e-0") {
				t.Errorf("the engine's RAID bdev was not purged (refused: %v)", refused)
			}
			rec, kept := recordOf(t, store, replica)
			left := s.lvols()
			if tc.rule == "" {
				if kept || len(left) != 0 {
					t.Fatalf("replica not purged: record %v, lvols %v, refused %v", kept, left, refused)
				}
				return
			}
			if !kept || len(left) != 2 {
				t.Fatalf("replica purged: record %v, lvols %v; want it kept by %s", kept, left, tc.rule)
			}
			reason := refused[rec.Name]
			if !strings.HasPrefix(reason, string(tc.rule)+":") || !strings.Contains(reason, "SPDK lvols") {
				t.Errorf("refusal %q; want rule %s, saying the copy is in SPDK lvols", reason, tc.rule)
			}
			// The record says why the copy is not one the export tool
			// can read, and that its lvols hold data.
			c := meta.FindStatusCondition(rec.Conditions, orphan.ConditionRecoverable)
			if c == nil || c.Reason != orphan.ReasonNotRecoverable || !strings.HasPrefix(c.Message, "volume "+lcVolume+": holds data the tool cannot export today: a v2 replica") ||
				!strings.Contains(c.Message, "allocated clusters") {
				t.Errorf("Recoverable condition %+v", c)
			}
		})
	}
}

// TestV2ReplicaOfUnknownVolume: a replica whose name is not of Longhorn's
// form has no volume the guard can look up, so even a complete volume
// list does not let its automatic purge go on.
func TestV2ReplicaOfUnknownVolume(t *testing.T) {
	s := newLastCopyScene(t, "not-longhorns-form", 5, 3)
	store, refused := s.sweep(t, map[string]orphan.VolumeState{}, true)
	rec, kept := recordOf(t, store, "not-longhorns-form")
	if !kept || len(s.lvols()) != 2 {
		t.Fatalf("replica purged: record %v, lvols %v", kept, s.lvols())
	}
	if reason := refused[rec.Name]; !strings.HasPrefix(reason, string(orphan.GuardVolumeUnknown)+":") || !strings.Contains(reason, "(not known)") {
		t.Errorf("refusal %q; want VolumeUnknown of a volume not known", reason)
	}
}

// TestV2ReplicaWrittenAfterTheScan: a replica scanned as holding no data
// is let go by the last-copy guard even though its volume is faulted; if
// its lvols gained data since that scan, Delete finds it at the moment of
// the purge and deletes nothing, and the next cycle keeps it as the last
// copy.
func TestV2ReplicaWrittenAfterTheScan(t *testing.T) {
	const replica = lcVolume + "-r-1a2b3c4d"
	s := newLastCopyScene(t, replica, 0, 0)
	ctx := context.Background()
	inv := newOrphans(t, fixture.Client(t, s.srv, spdkrpc.ClientOptions{}), noRecords)
	store := orphan.NewMemStore()
	sw := newSweeper(t, store, inv)
	cycle := orphan.Cycle{
		Selector: orphan.Selector{NodeID: nodeID},
		Scopes:   map[orphan.Scope]orphan.ScopeStatus{{NodeID: nodeID}: {Health: orphan.HealthReady}},
		Policy:   orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaInstance}},
		Guard:    orphan.Guard{AllowNoneExpected: true, AllowWholeScope: true, AllowAnyShare: true, AllowOverBudget: true},
		Volumes:  map[string]orphan.VolumeState{lcVolume: orphan.VolumeFaulted},
	}
	run := func(writeAfterScan uint64) orphan.Result {
		t.Helper()
		snap, err := inv.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if writeAfterScan > 0 {
			if err := s.srv.SetAllocatedClusters("disk-1", replica, writeAfterScan); err != nil {
				t.Fatal(err)
			}
		}
		_, res, err := sw.Reconcile(ctx, snap, cycle)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	run(0) // creates the record
	res := run(4)
	if len(res.Purged) != 0 || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, "scanned as holding no data") ||
		!strings.Contains(res.Refused[0].Reason, "hold 4 allocated clusters") {
		t.Fatalf("purge of a replica written since its scan: %+v", res)
	}
	if left := s.lvols(); len(left) != 2 {
		t.Fatalf("lvols left %v, want both", left)
	}
	res = run(0)
	if len(res.Purged) != 0 || len(res.Refused) != 1 || !strings.HasPrefix(res.Refused[0].Reason, string(orphan.GuardLastCopy)+":") {
		t.Fatalf("next cycle: %+v; want the last-copy guard to keep it", res)
	}
}

// TestV2ReplicaVolumeFaultedSinceThePlan: the host's LookupVolume is asked
// for a v2 replica's volume right before its purge, as for a v1
// directory's; a volume faulted since the cycle started keeps the copy.
func TestV2ReplicaVolumeFaultedSinceThePlan(t *testing.T) {
	const replica = lcVolume + "-r-1a2b3c4d"
	s := newLastCopyScene(t, replica, 5, 0)
	ctx := context.Background()
	inv := newOrphans(t, fixture.Client(t, s.srv, spdkrpc.ClientOptions{}), noRecords)
	sw := newSweeper(t, orphan.NewMemStore(), inv)
	var asked []string
	cycle := orphan.Cycle{
		Selector: orphan.Selector{NodeID: nodeID},
		Scopes:   map[orphan.Scope]orphan.ScopeStatus{{NodeID: nodeID}: {Health: orphan.HealthReady}},
		Policy:   orphan.Policy{Kinds: []orphan.Kind{orphan.KindReplicaInstance}},
		Guard:    orphan.Guard{AllowNoneExpected: true, AllowWholeScope: true, AllowAnyShare: true, AllowOverBudget: true},
		Volumes:  map[string]orphan.VolumeState{lcVolume: orphan.VolumeHealthy},
		LookupVolume: func(_ context.Context, v string) (orphan.VolumeState, bool, error) {
			asked = append(asked, v)
			return orphan.VolumeFaulted, true, nil
		},
	}
	var res orphan.Result
	for range 2 {
		snap, err := inv.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, res, err = sw.Reconcile(ctx, snap, cycle); err != nil {
			t.Fatal(err)
		}
	}
	if len(res.Purged) != 0 || len(res.Refused) != 1 || !strings.HasPrefix(res.Refused[0].Reason, string(orphan.GuardLastCopy)+":") ||
		!strings.Contains(res.Refused[0].Reason, "at the moment of deletion") || !slices.Contains(asked, lcVolume) || len(s.lvols()) != 2 {
		t.Fatalf("result %+v, looked up %v, lvols %v; want the purge refused by the state looked up", res, asked, s.lvols())
	}
}
