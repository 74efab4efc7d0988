package spdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// unreadable reports whether err is one of the two ways an unreadable
// reply may fail a call.
func unreadable(err error) bool {
	return errors.Is(err, spdk.ErrUnexpectedResult) || errors.Is(err, spdkrpc.ErrConnection)
}

// v2World is a node with a v2 volume deleted while the node was away
// (engine vol1-e-0 and replica A without records) and the others live,
// driven through orphan.Sweeper with a MemStore.
type v2World struct {
	s     *scene
	inv   *spdk.Orphans
	store *orphan.MemStore
	sw    *orphan.Sweeper
}

func newV2World(t *testing.T) *v2World {
	t.Helper()
	s := newScene(t)
	running := instance.View{Exists: true, DesiredState: instance.StateRunning, CurrentState: instance.StateRunning, OwnerNodeID: nodeID, InstanceManager: imName}
	hosts := &hostRecords{m: map[string]instance.View{"vol2-e-0": running, repB: running, repC: running}}
	c := s.client(t)
	w := &v2World{s: s, store: orphan.NewMemStore()}
	w.inv = newOrphans(t, c, hosts)
	w.sw = newSweeper(t, w.store, w.inv)
	return w
}

// scan is the host loop's first half: a failed scan skips the cycle.
func (w *v2World) scan(t *testing.T) (orphan.Snapshot, error) {
	t.Helper()
	return w.inv.Scan(context.Background())
}

func (w *v2World) run(t *testing.T, snap orphan.Snapshot) (orphan.Result, error) {
	t.Helper()
	_, res, err := w.sw.Reconcile(context.Background(), snap, orphan.Cycle{Selector: orphan.Selector{NodeID: nodeID}})
	return res, err
}

// settle runs one healthy cycle, which records the orphans.
func (w *v2World) settle(t *testing.T) {
	t.Helper()
	snap, err := w.scan(t)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.run(t, snap); err != nil {
		t.Fatal(err)
	}
}

func (w *v2World) records(t *testing.T) []string {
	t.Helper()
	recs, err := w.store.List(context.Background(), orphan.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Param(orphan.ParamInstanceName))
	}
	slices.Sort(names)
	return names
}

// TestUnreadableScanForgetsNothing: the records of the deleted volume
// exist; a scan whose listing is null, wrong-shaped or cut off fails, so
// the cycle is skipped and no record is forgotten (an empty listing read
// as "nothing exists" would forget them all).
func TestUnreadableScanForgetsNothing(t *testing.T) {
	want := []string{"vol1-e-0", repA}
	for _, method := range []string{"bdev_lvol_get_lvols", "bdev_raid_get_bdevs"} {
		for _, bad := range fixture.BadLists {
			t.Run(method+"/"+bad.Name, func(t *testing.T) {
				w := newV2World(t)
				w.settle(t)
				if got := w.records(t); !slices.Equal(got, want) {
					t.Fatalf("records %v, want %v", got, want)
				}
				f := bad.Fault
				f.Method = method
				w.s.srv.Inject(f)
				snap, err := w.scan(t)
				if !unreadable(err) || len(snap.Items) != 0 || len(snap.Scopes) != 0 {
					t.Fatalf("scan = %d items, %v scopes, err %v; want an unreadable-reply error", len(snap.Items), snap.Scopes, err)
				}
				// Even a host that ran the cycle on what Scan returned
				// would change nothing: an empty snapshot has no scope.
				if _, err := w.run(t, snap); err != nil {
					t.Fatal(err)
				}
				if got := w.records(t); !slices.Equal(got, want) {
					t.Fatalf("records %v after an unreadable scan, want %v", got, want)
				}
			})
		}
	}
}

// TestUnreadablePurgeRepliesKeepRecords: the user asked to delete both
// records; every reply the purge reads (the re-reads and the deletes) is
// null, wrong-shaped or cut off in turn. The purge fails (retryable), the
// record stays, and after a re-read fault the data is untouched.
func TestUnreadablePurgeRepliesKeepRecords(t *testing.T) {
	// Results of the right shape that still cannot prove anything.
	headNoUUID := json.RawMessage(`[{"name":"x","aliases":["disk-1/` + repA + `"],"product_name":"Logical Volume","driver_specific":{"lvol":{"lvol_store_uuid":"L"}}}]`)
	headNoAlias := json.RawMessage(`[{"name":"u","uuid":"8a4f0e36-0000-4000-8000-000000000000","aliases":[],"product_name":"Logical Volume","driver_specific":{"lvol":{"lvol_store_uuid":"L"}}}]`)
	lvolNoInfo := json.RawMessage(`[{"name":"u","uuid":"8a4f0e36-0000-4000-8000-000000000000","aliases":["disk-1/` + repA + `"],"product_name":"Logical Volume","driver_specific":{}}]`)
	engineNoUUID := json.RawMessage(`[{"name":"vol1-e-0","state":"online"}]`)

	type tc struct {
		method   string
		fault    spdktest.Fault
		readOnly bool // the fault hits a re-read: nothing may be deleted
	}
	var cases []tc
	for _, m := range []string{"bdev_get_bdevs", "bdev_raid_get_bdevs"} {
		for _, bad := range fixture.BadLists {
			cases = append(cases, tc{m, bad.Fault, true})
		}
	}
	cases = append(cases,
		tc{"bdev_get_bdevs", spdktest.Fault{Action: spdktest.Replace, Result: headNoUUID}, true},
		tc{"bdev_get_bdevs", spdktest.Fault{Action: spdktest.Replace, Result: headNoAlias}, true},
		tc{"bdev_get_bdevs", spdktest.Fault{Action: spdktest.Replace, Result: lvolNoInfo}, true},
		tc{"bdev_raid_get_bdevs", spdktest.Fault{Action: spdktest.Replace, Result: engineNoUUID}, true},
	)
	for _, m := range []string{"bdev_lvol_delete", "bdev_raid_delete"} {
		for _, r := range []string{"", "false", `{}`, `[true]`} {
			cases = append(cases, tc{m, spdktest.Fault{Action: spdktest.Replace, Result: json.RawMessage(r)}, false})
		}
		cases = append(cases, tc{m, spdktest.Fault{Action: spdktest.Truncate}, false})
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d/%s/%s", i, c.method, c.fault.Result), func(t *testing.T) {
			w := newV2World(t)
			w.settle(t)
			recs, _ := w.store.List(context.Background(), orphan.Selector{})
			for _, r := range recs {
				if err := w.store.RequestDeletion(context.Background(), r.Name); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := w.scan(t) // before the fault: the purge's own reads get it
			if err != nil {
				t.Fatal(err)
			}
			lvolsBefore, raidsBefore := w.s.srv.LvolAliases(), w.s.srv.RaidNames()
			f := c.fault
			f.Method = c.method
			if c.method == "bdev_get_bdevs" {
				// The purge's re-read lists every bdev; the judge's
				// lookups of one bdev by name are not what this tests
				// (TestJudgeOnUnreadableReplyIsUndecided is).
				f.Params = json.RawMessage("null")
			}
			w.s.srv.Inject(f)
			res, err := w.run(t, snap)
			hit := "vol1-e-0"
			if c.method == "bdev_get_bdevs" || c.method == "bdev_lvol_delete" {
				hit = repA
			}
			got := w.records(t)
			if !slices.Contains(got, hit) {
				t.Fatalf("record of %s dropped after an unreadable reply; result %+v, err %v", hit, res, err)
			}
			if err == nil && len(res.Refused) == 0 {
				t.Fatalf("purge of %s neither failed nor was refused: %+v", hit, res)
			}
			if c.readOnly {
				if c.method == "bdev_get_bdevs" && !slices.Equal(w.s.srv.LvolAliases(), lvolsBefore) {
					t.Fatalf("lvols deleted after an unreadable re-read: %v", w.s.srv.LvolAliases())
				}
				if c.method == "bdev_raid_get_bdevs" && !slices.Equal(w.s.srv.RaidNames(), raidsBefore) {
					t.Fatalf("RAID bdevs deleted after an unreadable re-read: %v", w.s.srv.RaidNames())
				}
			}
		})
	}
}

// TestJudgeOnUnreadableReplyIsUndecided: Judge confirms an orphan verdict
// by looking the object up; an unreadable reply to that lookup makes the
// verdict undecided, never orphan, and never an error.
func TestJudgeOnUnreadableReplyIsUndecided(t *testing.T) {
	w := newV2World(t)
	snap, err := w.scan(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range snap.Items {
		for _, bad := range fixture.BadLists {
			f := bad.Fault
			f.Method = "bdev_get_bdevs"
			w.s.srv.Inject(f)
			v, err := w.inv.Judge(context.Background(), it)
			w.s.srv.ClearFaults()
			if err != nil || v.Outcome == orphan.OutcomeOrphan {
				t.Errorf("%s, %s: %v, %v; want anything but orphan, and no error", it.Param(orphan.ParamInstanceName), bad.Name, v, err)
			}
		}
	}
}
