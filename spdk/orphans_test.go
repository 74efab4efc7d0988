package spdk_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

const (
	nodeID = "node-1"
	imName = "instance-manager-v2-node-1"

	repA = "vol1-r-aaaaaaaa" // head with snapshots s1 <- s2 <- head, and an expired clone of s1
	repB = "vol2-r-bbbbbbbb" // head with a rebuilding lvol
	repC = "vol3-r-cccccccc" // clone of a backing image
)

// scene is a Longhorn-like node: three replicas, a backing image, a
// headless snapshot left behind, two engines.
type scene struct {
	srv   *spdktest.Server
	uuids map[string]string // alias or RAID name -> UUID
}

func newScene(t *testing.T) *scene {
	t.Helper()
	s := &scene{srv: fixture.Start(t), uuids: map[string]string{}}
	add := func(key string, id string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		s.uuids[key] = id
	}
	srv := s.srv
	fixture.Must(srv.AddLvstore("disk-1"))(t)
	id, err := srv.AddLvol("disk-1", repA)
	add("disk-1/"+repA, id, err)
	id, err = srv.Snapshot("disk-1", repA, repA+"-snap-s1")
	add("disk-1/"+repA+"-snap-s1", id, err)
	id, err = srv.Snapshot("disk-1", repA, repA+"-snap-s2")
	add("disk-1/"+repA+"-snap-s2", id, err)
	id, err = srv.Clone("disk-1", repA+"-snap-s1", repA+"-expired-0000abcd")
	add("disk-1/"+repA+"-expired-0000abcd", id, err)

	id, err = srv.AddLvol("disk-1", repB)
	add("disk-1/"+repB, id, err)
	id, err = srv.AddLvol("disk-1", repB+"-rebuilding")
	add("disk-1/"+repB+"-rebuilding", id, err)

	id, err = srv.AddLvol("disk-1", "bi-img1-disk-1-temp-head")
	add("disk-1/bi-img1-disk-1-temp-head", id, err)
	id, err = srv.Snapshot("disk-1", "bi-img1-disk-1-temp-head", "bi-img1-disk-1")
	add("disk-1/bi-img1-disk-1", id, err)
	id, err = srv.Clone("disk-1", "bi-img1-disk-1", repC)
	add("disk-1/"+repC, id, err)

	fixture.Must(srv.AddLvol("disk-1", "gone-r-dddddddd"))(t)
	fixture.Must(srv.Snapshot("disk-1", "gone-r-dddddddd", "gone-r-dddddddd-snap-x"))(t)
	c := fixture.Client(t, srv, spdkrpc.ClientOptions{})
	if err := spdkrpc.BdevLvolDelete(context.Background(), c, "disk-1/gone-r-dddddddd"); err != nil {
		t.Fatal(err)
	}

	id, err = srv.AddRaid("vol1-e-0", "a", "b")
	add("vol1-e-0", id, err)
	id, err = srv.AddRaid("vol2-e-0", "c")
	add("vol2-e-0", id, err)
	srv.ResetCalls()
	return s
}

func (s *scene) client(t *testing.T) *spdkrpc.Client {
	return fixture.Client(t, s.srv, spdkrpc.ClientOptions{})
}

// newOrphans is the adapter of node nodeID and instance manager imName.
func newOrphans(t testing.TB, rpc spdkrpc.Caller, records instance.Lookup) *spdk.Orphans {
	t.Helper()
	o, err := spdk.NewOrphans(rpc, records, spdk.Options{NodeID: nodeID, InstanceManager: imName})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// newSweeper is a Sweeper over store and a, on a fake clock.
func newSweeper(t testing.TB, store orphan.Store, a orphan.Adapter) *orphan.Sweeper {
	t.Helper()
	sw, err := orphan.NewSweeper(store, a, orphan.SweeperOptions{Clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

func instanceItem(kind orphan.Kind, name, uuid string) orphan.Item {
	return orphan.Item{Kind: kind, NodeID: nodeID, DataEngine: orphan.DataEngineV2, Parameters: map[string]string{
		orphan.ParamInstanceName: name, orphan.ParamInstanceUUID: uuid, orphan.ParamInstanceManager: imName,
	}}
}

func TestScanListsEnginesAndHeadReplicas(t *testing.T) {
	s := newScene(t)
	inv := newOrphans(t, s.client(t), noRecords)
	snap, err := inv.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []orphan.Item{
		instanceItem(orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"]),
		instanceItem(orphan.KindEngineInstance, "vol2-e-0", s.uuids["vol2-e-0"]),
		instanceItem(orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA]),
		instanceItem(orphan.KindReplicaInstance, repB, s.uuids["disk-1/"+repB]),
		instanceItem(orphan.KindReplicaInstance, repC, s.uuids["disk-1/"+repC]),
	}
	// Each replica carries its Copy (replicacopy_test.go holds it to its
	// rules); here: the volume, the head and that nothing was written.
	copies := make([]*orphan.Copy, len(snap.Items))
	for i := range snap.Items {
		copies[i], snap.Items[i].Copy = snap.Items[i].Copy, nil
	}
	if !reflect.DeepEqual(snap.Items, want) {
		t.Fatalf("items:\n got %+v\nwant %+v", snap.Items, want)
	}
	for i, vol := range []string{"", "", "vol1", "vol2", "vol3"} {
		cp := copies[i]
		switch {
		case vol == "" && cp != nil:
			t.Errorf("engine %s has a Copy: %+v", want[i].Param(orphan.ParamInstanceName), cp)
		case vol != "" && (cp == nil || cp.Volume != vol || cp.Head != want[i].Param(orphan.ParamInstanceName) || cp.Recoverable || !cp.NoData || cp.Size != 262144*4096):
			t.Errorf("replica %s: Copy %+v; want volume %s, the head's name, not recoverable, no data, 1 GiB", want[i].Param(orphan.ParamInstanceName), cp, vol)
		}
	}
	if st := snap.Scopes[orphan.Scope{NodeID: nodeID}]; st.Health != orphan.HealthReady {
		t.Fatalf("scope = %+v", snap.Scopes)
	}
	if len(snap.Skipped) != 1 || snap.Skipped[0].Name != "disk-1/gone-r-dddddddd-snap-x" {
		t.Fatalf("skipped = %+v", snap.Skipped)
	}
	// The replica's UUID is the head lvol's, never the lvstore's.
	lvs := fixture.Must(spdkrpc.BdevLvolGetLvstores(context.Background(), s.client(t)))(t)
	for _, it := range snap.Items {
		if it.Param(orphan.ParamInstanceUUID) == lvs[0].UUID {
			t.Fatalf("%s carries the lvstore UUID", it.Param(orphan.ParamInstanceName))
		}
	}
}

func TestScanSkipsEmptyUUIDs(t *testing.T) {
	s := newScene(t)
	if err := s.srv.ClearLvolUUID("disk-1", repB); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.ClearRaidUUID("vol2-e-0"); err != nil {
		t.Fatal(err)
	}
	inv := newOrphans(t, s.client(t), noRecords)
	snap, err := inv.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names, skipped []string
	for _, it := range snap.Items {
		names = append(names, it.Param(orphan.ParamInstanceName))
	}
	for _, sk := range snap.Skipped {
		skipped = append(skipped, sk.Name)
		if sk.Reason == "" || sk.Scope.NodeID != nodeID {
			t.Errorf("skipped entry without reason or scope: %+v", sk)
		}
	}
	if want := []string{"vol1-e-0", repA, repC}; !slices.Equal(names, want) {
		t.Fatalf("items %v, want %v", names, want)
	}
	// B's rebuilding lvol is skipped with it: its head cannot be listed.
	for _, w := range []string{"vol2-e-0", "disk-1/" + repB} {
		if !slices.Contains(skipped, w) {
			t.Errorf("%s not skipped: %v", w, skipped)
		}
	}
	// A record of B or of vol2-e-0 cannot be matched, so the node's view
	// is incomplete: the cycle keeps every record (never "gone").
	if st := snap.Scopes[orphan.Scope{NodeID: nodeID}]; st.Health != orphan.HealthUnknown || !strings.Contains(st.Message, "UUID") {
		t.Fatalf("scope = %+v, want Unknown", st)
	}
}

// TestScanWithoutUUIDKeepsRecords runs a cycle end to end: records made
// while the UUIDs were there survive a scan where SPDK reports one object
// without a UUID (or the all-zero one), and nothing new is recorded.
func TestScanWithoutUUIDKeepsRecords(t *testing.T) {
	for _, clear := range []func(*spdktest.Server) error{
		func(s *spdktest.Server) error { return s.ClearLvolUUID("disk-1", repA) },
		func(s *spdktest.Server) error {
			_, err := s.SetLvolUUID("disk-1", repA, "00000000-0000-0000-0000-000000000000")
			return err
		},
		func(s *spdktest.Server) error { return s.ClearRaidUUID("vol2-e-0") },
	} {
		s := newScene(t)
		inv := newOrphans(t, s.client(t), noRecords)
		store := orphan.NewMemStore()
		// The real Scan and Judge; a Deleter that must never be reached.
		a, err := orphan.NewAdapter(inv.Kinds(), inv, inv, orphan.DeleterFunc(func(context.Context, orphan.Record) error {
			t.Error("purged")
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		sw := newSweeper(t, store, a)
		cycle := func() {
			snap, err := inv.Scan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := sw.Reconcile(context.Background(), snap, orphan.Cycle{Selector: orphan.Selector{NodeID: nodeID}}); err != nil {
				t.Fatal(err)
			}
		}
		cycle()
		before, _ := store.List(context.Background(), orphan.Selector{})
		if len(before) != 5 {
			t.Fatalf("%d records, want 5", len(before))
		}
		if err := clear(s.srv); err != nil {
			t.Fatal(err)
		}
		cycle()
		after, _ := store.List(context.Background(), orphan.Selector{})
		if len(after) != len(before) {
			t.Fatalf("%d records after a scan with a UUID-less object, want %d", len(after), len(before))
		}
	}
}

func TestScanFailsOnUnreadableReply(t *testing.T) {
	s := newScene(t)
	s.srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Action: spdktest.Garbage})
	inv := newOrphans(t, s.client(t), noRecords)
	if _, err := inv.Scan(context.Background()); !errors.Is(err, spdkrpc.ErrConnection) {
		t.Fatalf("err = %v", err)
	}
}

func TestClassifyAttribution(t *testing.T) {
	lv := func(name string, snap bool) spdkrpc.Lvol {
		return spdkrpc.Lvol{Alias: "d/" + name, Name: name, UUID: "u-" + name, IsSnapshot: snap, Lvs: spdkrpc.LvolStoreRef{Name: "d", UUID: "L"}}
	}
	other := spdkrpc.Lvol{Alias: "e/r-snap-s", Name: "r-snap-s", UUID: "u-e", IsSnapshot: true, Lvs: spdkrpc.LvolStoreRef{Name: "e", UUID: "E"}}
	rt := spdk.Classify([]spdkrpc.Lvol{
		lv("r", false),
		lv("r-snap-s", true),
		lv("r-snap-a-snap-b", true),  // a snapshot whose name contains -snap- twice
		lv("my-snap-vol-r-1", false), // a head whose replica name contains -snap-
		lv("my-snap-vol-r-1-snap-x", true),
		lv("r-expired-1234abcd", false),
		lv("r-expired-12", false), // not Longhorn's form: a head
		lv("r-cloning", false),
		lv("r-cloning-tmp", true),
		lv("r-rebuilding", false),
		lv("bi-image", true),
		lv("stray", true), // a snapshot named after nothing
		other,             // r's snapshot name in another lvstore without r
	}, nil)
	got := map[string][]string{}
	for _, r := range rt.Replicas {
		for _, d := range r.Derived {
			got[r.Name()] = append(got[r.Name()], d.Name)
		}
		if _, ok := got[r.Name()]; !ok {
			got[r.Name()] = nil
		}
	}
	want := map[string][]string{
		"r":               {"r-cloning", "r-cloning-tmp", "r-expired-1234abcd", "r-rebuilding", "r-snap-a-snap-b", "r-snap-s"},
		"my-snap-vol-r-1": {"my-snap-vol-r-1-snap-x"},
		"r-expired-12":    nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replicas:\n got %v\nwant %v", got, want)
	}
	if len(rt.BackingImages) != 1 || rt.BackingImages[0].Name != "bi-image" {
		t.Fatalf("backing images = %+v", rt.BackingImages)
	}
	var skipped []string
	for _, s := range rt.Skipped {
		skipped = append(skipped, s.Name)
	}
	if want := []string{"d/stray", "e/r-snap-s"}; !slices.Equal(skipped, want) {
		t.Fatalf("skipped = %v, want %v", skipped, want)
	}
}

// TestJudgeConfirmsTheObject: an orphan verdict stands only while SPDK
// holds the object under the item's name and UUID; items this adapter
// cannot see (another node or instance manager, v1) are undecided.
func TestJudgeConfirmsTheObject(t *testing.T) {
	s := newScene(t)
	o := newOrphans(t, s.client(t), noRecords)
	ctx := context.Background()
	engine := instanceItem(orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"])
	replica := instanceItem(orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA])
	snapshot := instanceItem(orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA+"-snap-s1"])
	for _, it := range []orphan.Item{engine, replica} {
		if v, err := o.Judge(ctx, it); err != nil || v.Outcome != orphan.OutcomeOrphan {
			t.Fatalf("%s: %v, %v; want orphan", it.Param(orphan.ParamInstanceName), v, err)
		}
	}
	otherNode, otherIM, v1 := replica, replica, replica
	otherNode.NodeID = "node-2"
	otherIM.Parameters = map[string]string{orphan.ParamInstanceName: repA, orphan.ParamInstanceUUID: s.uuids["disk-1/"+repA], orphan.ParamInstanceManager: "im-other"}
	v1.DataEngine = orphan.DataEngineV1
	// A snapshot's UUID under the head's name is no head of that name.
	for name, it := range map[string]orphan.Item{"other node": otherNode, "other im": otherIM, "v1": v1, "snapshot uuid": snapshot} {
		if v, err := o.Judge(ctx, it); err != nil || v.Outcome != orphan.OutcomeUndecided {
			t.Errorf("%s: %v, %v; want undecided", name, v, err)
		}
	}
	fixture.Must(s.srv.RecreateRaid("vol1-e-0"))(t)
	fixture.Must(s.srv.RecreateLvol("disk-1", repA))(t)
	for _, it := range []orphan.Item{engine, replica} {
		v, err := o.Judge(ctx, it)
		if err != nil || v.Outcome != orphan.OutcomeUndecided || !strings.Contains(v.Reason, "UUID") {
			t.Errorf("%s recreated: %v, %v; want undecided for the UUID", it.Param(orphan.ParamInstanceName), v, err)
		}
	}
	if n := s.srv.CallCount("bdev_lvol_delete") + s.srv.CallCount("bdev_raid_delete"); n != 0 {
		t.Fatalf("Judge deleted (%d calls)", n)
	}
}

// countingLookup is a records view that can say how many records it
// holds of each kind.
type countingLookup struct {
	instance.Lookup
	counts map[orphan.Kind]int
	err    error
}

func (c countingLookup) CountInstances(_ context.Context, k orphan.Kind) (int, error) {
	return c.counts[k], c.err
}

// TestScanReportsAnEmptyRecordsView: a view holding no replica record
// while SPDK runs replicas is reported as NoneExpected for v2 replica
// instances only, and the guard then refuses the purge of even one lvol;
// a view that cannot be counted makes the node Unknown.
func TestScanReportsAnEmptyRecordsView(t *testing.T) {
	s := newScene(t)
	ctx := context.Background()
	node := orphan.Scope{NodeID: nodeID}
	records := countingLookup{Lookup: noRecords, counts: map[orphan.Kind]int{orphan.KindEngineInstance: 2}}
	inv := newOrphans(t, s.client(t), records)
	snap, err := inv.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := snap.Scopes[node]
	replicas := orphan.Group{Kind: orphan.KindReplicaInstance, DataEngine: orphan.DataEngineV2}
	if st.Health != orphan.HealthReady || len(st.Groups) != 1 || !st.Groups[replicas].NoneExpected {
		t.Fatalf("scope = %+v; want Ready and NoneExpected for v2 replicas only", st)
	}
	// One orphaned lvol, its deletion requested: refused, where the
	// WholeScope rule alone would let fewer than MinItems go.
	item := instanceItem(orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA])
	rec, err := orphan.NewRecord(item, time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	rec.DeletionRequested = true
	rec.Conditions = []metav1.Condition{{Type: orphan.ConditionDataCleanable, Status: metav1.ConditionTrue, Reason: orphan.ReasonCleanable}}
	p := orphan.Decide(orphan.Input{Now: time.Unix(1_800_000_100, 0), Scopes: snap.Scopes, Records: []orphan.Record{rec},
		Candidates: []orphan.Candidate{{Item: item, Verdict: orphan.Orphan("no replica record")}}})
	if len(p.Purge) != 0 || len(p.Refused) != 1 || !strings.HasPrefix(p.Refused[0].Reason, string(orphan.GuardNoneExpected)) {
		t.Fatalf("plan: purges %d, refused %+v; want the lvol refused by NoneExpected", len(p.Purge), p.Refused)
	}

	records.err = errors.New("cache not synced")
	snap, err = newOrphans(t, s.client(t), records).Scan(ctx)
	if err != nil || snap.Scopes[node].Health != orphan.HealthUnknown {
		t.Fatalf("an uncountable view: %+v, %v; want the node Unknown", snap.Scopes, err)
	}
}
