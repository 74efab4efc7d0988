package spdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// The golden tests hold the fake to SPDK's documented reply shapes
// (testdata/README.md says where each comes from) and to what Longhorn's
// go-spdk-helper client decodes (helpertypes_test.go).

// goldenState is what the golden tests seed: an lvstore on its AIO bdev, a
// replica head with one snapshot (so the head is a clone), the snapshot's
// Longhorn xattrs and checksum, an engine over the head and a remote
// replica's NVMe bdev, the NVMe controller attached to that remote
// replica, and the engine exposed as Longhorn exposes an engine's
// spdk-tcp-nvmf frontend: a subsystem named by go-spdk-helper's GetNQN
// with the RAID bdev as its namespace, listening on TCP. (The head cannot
// be exposed too: the engine claims it, and so would a namespace.)
type goldenState struct {
	srv       *spdktest.Server
	c         *spdkrpc.Client
	lvs       string // lvstore UUID
	head      string // head lvol UUID
	snap      string // snapshot UUID
	raid      string // RAID bdev UUID
	createdAt string // every lvol's creation_time
}

const (
	goldenHead     = "vol-r-0a1b2c3d"
	goldenSnap     = "vol-r-0a1b2c3d-snap-s1"
	goldenEngine   = "vol-e-0"
	goldenRemote   = "vol-r-99999999n1"
	goldenChecksum = uint64(13859014760662026744)
	goldenStamp    = "2026-07-16T04:13:30Z"
	// goldenRemoteCtrl is the controller whose namespace bdev is
	// goldenRemote (bdev_nvme names it "<controller>n1").
	goldenRemoteCtrl = "vol-r-99999999"
	// Longhorn's NQN of a replica: "nqn.2023-01.io.longhorn.spdk:<name>"
	// (go-spdk-helper pkg/types GetNQN).
	goldenNQN       = "nqn.2023-01.io.longhorn.spdk:" + goldenEngine
	goldenRemoteNQN = "nqn.2023-01.io.longhorn.spdk:" + goldenRemoteCtrl
)

func seedGolden(t *testing.T) goldenState {
	t.Helper()
	now := time.Date(2026, 7, 16, 4, 13, 29, 123456789, time.FixedZone("CEST", 2*3600))
	srv, err := spdktest.Start(fixture.SocketPath(t), spdktest.Options{Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	g := goldenState{srv: srv, createdAt: "2026-07-16T02:13:29Z"}
	must := func(id string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	g.lvs = must(srv.AddLvstore("disk-1"))
	g.head = must(srv.AddLvol("disk-1", goldenHead))
	g.snap = must(srv.Snapshot("disk-1", goldenHead, goldenSnap))
	must("", srv.SetLvolXattr("disk-1", goldenSnap, "user_created", "true"))
	must("", srv.SetLvolXattr("disk-1", goldenSnap, "snapshot_timestamp", goldenStamp))
	must("", srv.SetSnapshotChecksum("disk-1", goldenSnap, goldenChecksum))
	g.raid = must(srv.AddRaid(goldenEngine, "disk-1/"+goldenHead, goldenRemote))
	if b := must(srv.AttachController(goldenRemoteCtrl, spdkrpc.NvmeTransportID{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.6",
		Trsvcid: "20002", Subnqn: goldenRemoteNQN})); b != goldenRemote {
		t.Fatalf("attaching %s made bdev %s, want %s", goldenRemoteCtrl, b, goldenRemote)
	}
	must("", srv.AddSubsystem(goldenNQN, spdktest.SubsystemOptions{SerialNumber: "SPDK0001", AllowAnyHost: true}))
	if _, err := srv.AddNamespace(goldenNQN, goldenEngine); err != nil {
		t.Fatal(err)
	}
	must("", srv.AddListener(goldenNQN, spdkrpc.NvmfListenAddress{Trtype: "tcp", Adrfam: "ipv4", Traddr: "10.0.0.5", Trsvcid: "20001"}))
	must("", srv.AddHost(goldenNQN, "nqn.2014-08.org.nvmexpress:uuid:host-1"))
	g.c = fixture.NewClient(t, spdkrpc.ClientOptions{SocketPath: srv.SocketPath()})
	t.Cleanup(func() { g.c.Close() })
	return g
}

// raw calls method and returns its result as sent.
func (g goldenState) raw(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	var out json.RawMessage
	if err := g.c.Call(context.Background(), method, params, &out); err != nil {
		t.Fatalf("%s %v: %v", method, params, err)
	}
	return out
}

// goldenCase is one reply to compare with a golden file.
type goldenCase struct {
	file   string
	method string
	params any
	one    bool // the golden file is one element of the listed reply
	fresh  bool // the call changes the state: run it on a state of its own
	// into is what go-spdk-helper decodes the reply into.
	into func() any
	// zero are the fields go-spdk-helper decodes that stay zero for
	// this object, each because SPDK leaves it so (or the client fills
	// it); every other non-bool field must be set.
	zero []string
}

// Fields no bdev of the fake fills, for the reasons given.
var bdevZero = []string{
	// No metadata, no zones, no memory domains: SPDK writes none of
	// these for AIO, lvol and RAID bdevs on a plain disk.
	"MdSize", "DifType", "EnabledDifCheckTypes", "ZoneSize", "MaxOpenZones", "OptimalOpenZones", "MemoryDomains",
	// No QoS limits are set: SPDK writes 0s.
	"AssignedRateLimits.RwIosPerSec", "AssignedRateLimits.RwMbytesPerSec", "AssignedRateLimits.RMbytesPerSec", "AssignedRateLimits.WMbytesPerSec",
	// Only NVMe bdevs have these.
	"DriverSpecific.Nvme", "DriverSpecific.MpPolicy",
}

func goldenCases(g goldenState) []goldenCase {
	bdev := func() any { return new(ghBdevInfo) }
	with := func(extra ...string) []string { return append(slices.Clone(bdevZero), extra...) }
	return []goldenCase{
		{file: "bdev_lvol_get_lvstores.json", method: "bdev_lvol_get_lvstores", params: map[string]string{"lvs_name": "disk-1"},
			into: func() any { return new([]ghLvstoreInfo) }},
		{file: "bdev_lvol_get_lvols.json", method: "bdev_lvol_get_lvols", params: map[string]string{"lvs_uuid": g.lvs},
			into: func() any { return new([]ghLvolInfo) }},
		{file: "bdev_raid_get_bdevs.json", method: "bdev_raid_get_bdevs", params: map[string]string{"category": "all"},
			into: func() any { return new([]ghBdevRaidInfo) },
			// raid1 has no strip; without a superblock data starts at 0.
			zero: []string{"[].StripSizeKb", "[].BaseBdevsList[].DataOffset"}},
		{file: "bdev_get_bdevs_aio.json", method: "bdev_get_bdevs", params: map[string]string{"name": "disk-1-base"}, one: true, into: bdev,
			// Only lvol bdevs have a creation time; an AIO bdev has no
			// alias.
			zero: with("CreationTime", "Aliases", "DriverSpecific.Lvol", "DriverSpecific.Raid")},
		{file: "bdev_get_bdevs_lvol.json", method: "bdev_get_bdevs", params: map[string]string{"name": "disk-1/" + goldenHead}, one: true, into: bdev,
			// A thin lvol nothing was written to; a head has no clones;
			// the client fills Xattrs itself.
			zero: with("DriverSpecific.Aio", "DriverSpecific.Raid", "DriverSpecific.Lvol.NumAllocatedClusters",
				"DriverSpecific.Lvol.Clones", "DriverSpecific.Lvol.Xattrs")},
		{file: "bdev_get_bdevs_snapshot.json", method: "bdev_get_bdevs", params: map[string]string{"name": g.snap}, one: true, into: bdev,
			// The first snapshot has no parent and no claim.
			zero: with("ClaimType", "DriverSpecific.Aio", "DriverSpecific.Raid", "DriverSpecific.Lvol.NumAllocatedClusters",
				"DriverSpecific.Lvol.BaseSnapshot", "DriverSpecific.Lvol.Xattrs")},
		{file: "bdev_get_bdevs_raid.json", method: "bdev_get_bdevs", params: map[string]string{"name": goldenEngine}, one: true, into: bdev,
			// BdevRaidGet fills Raid.Name itself: SPDK leaves it out. The
			// engine's namespace claims it.
			zero: with("CreationTime", "Aliases", "DriverSpecific.Aio", "DriverSpecific.Lvol",
				"DriverSpecific.Raid.Name", "DriverSpecific.Raid.StripSizeKb", "DriverSpecific.Raid.BaseBdevsList[].DataOffset")},
		{file: "bdev_lvol_get_xattr.json", method: "bdev_lvol_get_xattr", params: map[string]string{"name": g.snap, "xattr_name": "snapshot_timestamp"},
			into: func() any { return new(string) }},
		{file: "bdev_lvol_get_snapshot_checksum.json", method: "bdev_lvol_get_snapshot_checksum", params: map[string]string{"name": "disk-1/" + goldenSnap},
			into: func() any { return new(ghBdevLvolSnapshotChecksum) }},
		{file: "bdev_lvol_set_xattr.json", method: "bdev_lvol_set_xattr", params: map[string]string{"name": g.head, "xattr_name": "user_created", "xattr_value": "false"},
			into: func() any { return new(bool) }},
		{file: "bdev_get_bdevs_nvme.json", method: "bdev_get_bdevs", params: map[string]string{"name": goldenRemote}, one: true, into: bdev,
			// A remote replica's namespace bdev: no alias, no creation
			// time; the remote subsystem has no serial number or firmware
			// revision and offers no optional admin command (oacs 0s).
			zero: slices.DeleteFunc(with("CreationTime", "Aliases", "DriverSpecific.Aio", "DriverSpecific.Lvol", "DriverSpecific.Raid",
				"DriverSpecific.Nvme[].CtrlrData.SerialNumber", "DriverSpecific.Nvme[].CtrlrData.FirmwareRevision",
				"DriverSpecific.Nvme[].CtrlrData.Oacs.Firmware", "DriverSpecific.Nvme[].CtrlrData.Oacs.Format",
				"DriverSpecific.Nvme[].CtrlrData.Oacs.NsManage", "DriverSpecific.Nvme[].CtrlrData.Oacs.Security"),
				func(f string) bool { return f == "DriverSpecific.Nvme" || f == "DriverSpecific.MpPolicy" })},
		{file: "nvmf_get_subsystems.json", method: "nvmf_get_subsystems", params: map[string]string{"nqn": goldenNQN},
			into: func() any { return new([]ghNvmfSubsystem) },
			// Created without a namespace limit (SPDK leaves
			// max_namespaces out); no EUI-64, no ANA, no PTPL file.
			zero: []string{"[].MaxNamespaces", "[].Namespaces[].Eui64", "[].Namespaces[].Anagrpid", "[].Namespaces[].PtplFile"}},
		{file: "nvmf_get_subsystems_discovery.json", method: "nvmf_get_subsystems", params: map[string]string{"nqn": spdktest.DiscoveryNQN},
			into: func() any { return new([]ghNvmfSubsystem) },
			// SPDK writes none of the NVMe members for the discovery
			// subsystem, which listens nowhere until told and lists no host.
			zero: []string{"[].ListenAddresses", "[].Hosts", "[].SerialNumber", "[].ModelNumber", "[].MaxNamespaces", "[].MinCntlid",
				"[].MaxCntlid", "[].Namespaces"}},
		{file: "bdev_nvme_get_controllers.json", method: "bdev_nvme_get_controllers", params: map[string]string{"name": goldenRemoteCtrl},
			into: func() any { return new([]ghBdevNvmeControllerInfo) },
			// Attached without hostaddr and hostsvcid.
			zero: []string{"[].Ctrlrs[].Host.Addr", "[].Ctrlrs[].Host.Svcid"}},
		{file: "nvmf_subsystem_get_listeners.json", method: "nvmf_subsystem_get_listeners", params: map[string]string{"nqn": goldenNQN},
			into: func() any { return new([]ghNvmfSubsystemListener) }},
		{file: "nvmf_create_subsystem.json", method: "nvmf_create_subsystem", params: map[string]any{"nqn": "nqn.2023-01.io.longhorn.spdk:vol-e-1", "allow_any_host": true},
			into: func() any { return new(bool) }, fresh: true},
		{file: "nvmf_subsystem_add_ns.json", method: "nvmf_subsystem_add_ns", params: map[string]any{"nqn": goldenNQN, "namespace": map[string]string{"bdev_name": "disk-1/" + goldenSnap}},
			into: func() any { return new(uint32) }, fresh: true},
		{file: "nvmf_subsystem_add_listener.json", method: "nvmf_subsystem_add_listener",
			params: map[string]any{"nqn": goldenNQN, "listen_address": map[string]string{"trtype": "tcp", "adrfam": "ipv4", "traddr": "10.0.0.5", "trsvcid": "20003"}},
			into:   func() any { return new(bool) }, fresh: true},
		{file: "bdev_nvme_attach_controller.json", method: "bdev_nvme_attach_controller",
			params: map[string]any{"name": "vol-r-77777777", "trtype": "tcp", "adrfam": "ipv4", "traddr": "10.0.0.7", "trsvcid": "20004",
				"subnqn": "nqn.2023-01.io.longhorn.spdk:vol-r-77777777", "multipath": "disable", "ctrlr_loss_timeout_sec": 30,
				"reconnect_delay_sec": 5, "fast_io_fail_timeout_sec": 15},
			into: func() any { return new([]string) }, fresh: true},
	}
}

func readGolden(t *testing.T, file string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// TestRepliesHaveGoldenShapes checks that each reply has every key of
// its golden file, with the same JSON types.
func TestRepliesHaveGoldenShapes(t *testing.T) {
	g := seedGolden(t)
	for _, tc := range append(goldenCases(g), deleteCases(t)...) {
		t.Run(tc.file, func(t *testing.T) {
			srv := g
			if tc.fresh || tc.method == "bdev_lvol_delete" || tc.method == "bdev_raid_delete" {
				srv = seedGolden(t)
			}
			var got any
			if err := json.Unmarshal(srv.raw(t, tc.method, tc.params), &got); err != nil {
				t.Fatal(err)
			}
			if tc.one {
				list, ok := got.([]any)
				if !ok || len(list) != 1 {
					t.Fatalf("a named bdev_get_bdevs gave %v, want a list of one", got)
				}
				got = list[0]
			}
			for _, d := range shapeDiff("result", readGolden(t, tc.file), got) {
				t.Error(d)
			}
		})
	}
}

func deleteCases(t *testing.T) []goldenCase {
	return []goldenCase{
		{file: "bdev_lvol_delete.json", method: "bdev_lvol_delete", params: map[string]string{"name": "disk-1/" + goldenHead}},
		{file: "bdev_raid_delete.json", method: "bdev_raid_delete", params: map[string]string{"name": goldenEngine}},
		{file: "nvmf_delete_subsystem.json", method: "nvmf_delete_subsystem", params: map[string]string{"nqn": goldenNQN}, fresh: true},
		{file: "nvmf_subsystem_remove_ns.json", method: "nvmf_subsystem_remove_ns", params: map[string]any{"nqn": goldenNQN, "nsid": 1}, fresh: true},
		{file: "nvmf_subsystem_remove_listener.json", method: "nvmf_subsystem_remove_listener",
			params: map[string]any{"nqn": goldenNQN, "listen_address": map[string]string{"trtype": "TCP", "adrfam": "IPv4", "traddr": "10.0.0.5", "trsvcid": "20001"}}, fresh: true},
		{file: "bdev_nvme_detach_controller.json", method: "bdev_nvme_detach_controller", params: map[string]string{"name": goldenRemoteCtrl}, fresh: true},
	}
}

// shapeDiff lists where got lacks a key of golden or holds a value of
// another JSON type. An array's elements are each compared with golden's
// first element.
func shapeDiff(path string, golden, got any) []string {
	if gt, ht := jsonType(golden), jsonType(got); gt != ht {
		return []string{fmt.Sprintf("%s: %s, golden has %s", path, ht, gt)}
	}
	var out []string
	switch golden := golden.(type) {
	case map[string]any:
		got := got.(map[string]any)
		for k, v := range golden {
			h, ok := got[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			out = append(out, shapeDiff(path+"."+k, v, h)...)
		}
	case []any:
		got := got.([]any)
		if len(golden) > 0 && len(got) == 0 {
			out = append(out, fmt.Sprintf("%s: empty, golden has elements", path))
		}
		for i, h := range got {
			if len(golden) > 0 {
				out = append(out, shapeDiff(fmt.Sprintf("%s[%d]", path, i), golden[0], h)...)
			}
		}
	}
	slices.Sort(out)
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// TestRepliesDecodeAsGoSPDKHelperDoes decodes each reply into the mirror
// of go-spdk-helper's type and checks that every field SPDK fills is set.
func TestRepliesDecodeAsGoSPDKHelperDoes(t *testing.T) {
	g := seedGolden(t)
	for _, tc := range goldenCases(g) {
		t.Run(tc.file, func(t *testing.T) {
			g := g
			if tc.fresh {
				g = seedGolden(t)
			}
			raw := g.raw(t, tc.method, tc.params)
			v := tc.into()
			if tc.one {
				var list []json.RawMessage
				if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
					t.Fatalf("%s: %v, %d elements", raw, err, len(list))
				}
				raw = list[0]
			}
			if err := json.Unmarshal(raw, v); err != nil {
				t.Fatalf("go-spdk-helper's type does not take %s: %v", raw, err)
			}
			got := zeroFields("", reflect.ValueOf(v).Elem())
			want := slices.Clone(tc.zero)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("zero after decoding:\n got  %q\n want %q\nfrom %s", got, want, raw)
			}
		})
	}
}

// zeroFields lists the zero non-bool fields of v, a nil pointer, empty
// slice or map counting as zero. Embedded structs add no name; slice
// elements are "[]".
func zeroFields(path string, v reflect.Value) []string {
	var out []string
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroFields(path, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			p := path
			if !f.Anonymous {
				p = strings.TrimPrefix(path+"."+f.Name, ".")
			}
			out = append(out, zeroFields(p, v.Field(i))...)
		}
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				out = append(out, zeroFields(path+"[]", v.Index(i))...)
			}
		}
	case reflect.Bool:
		// false is a value SPDK writes, not a gap.
	default:
		if v.IsZero() {
			return []string{path}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestGoSPDKHelperBdevLvolGet replays what go-spdk-helper's
// BdevLvolGetWithFilter does (client/basic.go): list the bdevs, keep the
// lvols, then read each lvol's "user_created" and "snapshot_timestamp"
// xattrs and, for a snapshot, its checksum. It tolerates only SPDK's
// replies for a missing xattr (-32603 "No such file or directory") and an
// unregistered checksum (-19); anything else fails the whole listing.
func TestGoSPDKHelperBdevLvolGet(t *testing.T) {
	g := seedGolden(t)
	ctx := context.Background()
	tolerated := func(err error, code int, msg string) bool {
		var rerr *spdkrpc.RPCError
		return errors.As(err, &rerr) && rerr.Code == code && (msg == "" || rerr.Message == msg)
	}
	var bdevs []ghBdevInfo
	// go-spdk-helper sends its request struct, all omitempty: {}.
	if err := g.c.Call(ctx, "bdev_get_bdevs", struct{}{}, &bdevs); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, b := range bdevs {
		if b.ProductName != "Logical Volume" || b.DriverSpecific == nil || b.DriverSpecific.Lvol == nil {
			continue
		}
		xattrs := map[string]string{}
		for _, key := range []string{"user_created", "snapshot_timestamp"} {
			var v string
			err := g.c.Call(ctx, "bdev_lvol_get_xattr", map[string]string{"name": b.Name, "xattr_name": key}, &v)
			switch {
			case err == nil:
				xattrs[key] = v
			case tolerated(err, spdkrpc.CodeInternalError, "No such file or directory"):
			default:
				t.Fatalf("%s xattr %s: %v: go-spdk-helper fails the listing", b.Name, key, err)
			}
		}
		if b.DriverSpecific.Lvol.Snapshot {
			var sum ghBdevLvolSnapshotChecksum
			err := g.c.Call(ctx, "bdev_lvol_get_snapshot_checksum", map[string]string{"name": b.Name}, &sum)
			switch {
			case err == nil:
				xattrs["snapshot_checksum"] = fmt.Sprint(sum.Checksum)
			case tolerated(err, spdkrpc.CodeNoSuchDevice, ""):
			default:
				t.Fatalf("%s checksum: %v: go-spdk-helper fails the listing", b.Name, err)
			}
		}
		got[b.Aliases[0]] = xattrs
	}
	want := map[string]map[string]string{
		"disk-1/" + goldenHead: {},
		"disk-1/" + goldenSnap: {"user_created": "true", "snapshot_timestamp": goldenStamp, "snapshot_checksum": fmt.Sprint(goldenChecksum)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lvols and xattrs %v, want %v", got, want)
	}

	// BdevAioGet and BdevRaidGet keep bdevs by product name and driver.
	var aio, raid []string
	for _, b := range bdevs {
		switch {
		case b.ProductName == "AIO disk" && b.DriverSpecific != nil && b.DriverSpecific.Aio != nil:
			aio = append(aio, b.Name+" "+b.DriverSpecific.Aio.FileName)
		case b.ProductName == "Raid Volume" && b.DriverSpecific != nil && b.DriverSpecific.Raid != nil:
			for _, m := range b.DriverSpecific.Raid.BaseBdevsList {
				raid = append(raid, m.Name+" "+m.UUID)
			}
		}
	}
	if want := []string{"disk-1-base /dev/disk-1-base"}; !slices.Equal(aio, want) {
		t.Errorf("AIO bdevs %v, want %v", aio, want)
	}
	// A member the fake lists carries its bdev's UUID.
	if len(raid) != 2 || raid[0] != "disk-1/"+goldenHead+" "+g.head || strings.HasSuffix(raid[1], " ") {
		t.Errorf("RAID members %v, want the head's UUID %s first", raid, g.head)
	}
}

// TestCreationTime checks that lvols carry their creation time as
// Longhorn's SPDK writes it: the clock's time in UTC, to the second, in
// both bdev_get_bdevs and bdev_lvol_get_lvols, and a new one when an lvol
// is recreated.
func TestCreationTime(t *testing.T) {
	g := seedGolden(t)
	var lvols []struct {
		Name         string `json:"name"`
		CreationTime string `json:"creation_time"`
	}
	if err := json.Unmarshal(g.raw(t, "bdev_lvol_get_lvols", nil), &lvols); err != nil {
		t.Fatal(err)
	}
	var bdevs []ghBdevInfo
	if err := json.Unmarshal(g.raw(t, "bdev_get_bdevs", nil), &bdevs); err != nil {
		t.Fatal(err)
	}
	times := map[string]string{}
	for _, b := range bdevs {
		if b.CreationTime != "" {
			times[b.Aliases[0]] = b.CreationTime
		}
	}
	if len(lvols) != 2 || len(times) != 2 {
		t.Fatalf("lvols %+v, bdev creation times %v", lvols, times)
	}
	for _, l := range lvols {
		if l.CreationTime != g.createdAt || times["disk-1/"+l.Name] != g.createdAt {
			t.Errorf("%s: creation_time %q in the lvol list, %q in the bdev, want %q", l.Name, l.CreationTime, times["disk-1/"+l.Name], g.createdAt)
		}
	}
}

// TestXattrsAndChecksums checks the Longhorn metadata methods: set then
// get, a recreated lvol losing its xattrs and checksum, and a deleted one
// answering -19.
func TestXattrsAndChecksums(t *testing.T) {
	g := seedGolden(t)
	ctx := context.Background()
	var ok bool
	if err := g.c.Call(ctx, "bdev_lvol_set_xattr", map[string]string{"name": "disk-1/" + goldenHead, "xattr_name": "user_created", "xattr_value": "false"}, &ok); err != nil || !ok {
		t.Fatalf("set_xattr: %v, %v", ok, err)
	}
	var v string
	if err := g.c.Call(ctx, "bdev_lvol_get_xattr", map[string]string{"name": g.head, "xattr_name": "user_created"}, &v); err != nil || v != "false" {
		t.Fatalf("get_xattr after set: %q, %v", v, err)
	}
	if _, err := g.srv.RecreateLvol("disk-1", goldenSnap); err != nil {
		t.Fatal(err)
	}
	err := g.c.Call(ctx, "bdev_lvol_get_xattr", map[string]string{"name": "disk-1/" + goldenSnap, "xattr_name": "user_created"}, &v)
	var rerr *spdkrpc.RPCError
	if !errors.As(err, &rerr) || rerr.Code != spdkrpc.CodeInternalError || rerr.Message != "No such file or directory" {
		t.Errorf("xattr of a recreated lvol: %v", err)
	}
	var sum ghBdevLvolSnapshotChecksum
	if err := g.c.Call(ctx, "bdev_lvol_get_snapshot_checksum", map[string]string{"name": "disk-1/" + goldenSnap}, &sum); !errors.Is(err, spdkrpc.ErrNotFound) {
		t.Errorf("checksum of a recreated snapshot: %v, %v", sum, err)
	}
	if err := g.srv.SetSnapshotChecksum("disk-1", goldenHead, 1); !errors.Is(err, spdktest.ErrNotFound) {
		t.Errorf("a checksum on a head that is no snapshot: %v", err)
	}
	if err := g.srv.SetLvolXattr("disk-1", "nope", "k", "v"); !errors.Is(err, spdktest.ErrNotFound) {
		t.Errorf("an xattr on a missing lvol: %v", err)
	}
}

// TestErrorRepliesAreSPDKs checks the code and message of every error
// reply the fake gives, each against the SPDK handler it copies.
func TestErrorRepliesAreSPDKs(t *testing.T) {
	g := seedGolden(t)
	const decodeFailed = "spdk_json_decode_object failed"
	for _, tc := range []struct {
		why    string // the handler and branch in SPDK's source
		method string
		params any
		code   int
		msg    string
	}{
		// lib/jsonrpc/jsonrpc_server.c parse_single_request: params must
		// be an object or an array.
		{"params neither object nor array", "bdev_get_bdevs", json.RawMessage(`5`), spdkrpc.CodeInvalidRequest, "Invalid request"},
		{"params neither object nor array", "bdev_lvol_delete", json.RawMessage(`"x"`), spdkrpc.CodeInvalidRequest, "Invalid request"},

		// lib/bdev/bdev_rpc.c rpc_bdev_get_bdevs.
		{"decoder: wrong type", "bdev_get_bdevs", map[string]any{"name": 1}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: unknown member", "bdev_get_bdevs", map[string]any{"bogus": 1}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: negative uint64", "bdev_get_bdevs", map[string]any{"name": "x", "timeout": -1}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: array", "bdev_get_bdevs", json.RawMessage(`[]`), spdkrpc.CodeInternalError, decodeFailed},
		{"spdk_bdev_open_async: -ENODEV", "bdev_get_bdevs", map[string]any{"name": "nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"spdk_bdev_open_async: -ENODEV", "bdev_get_bdevs", map[string]any{"name": ""}, spdkrpc.CodeNoSuchDevice, "No such device"},

		// vbdev_lvol_rpc.c rpc_bdev_lvol_get_lvstores.
		{"decoder: array", "bdev_lvol_get_lvstores", json.RawMessage(`[]`), spdkrpc.CodeInternalError, decodeFailed},
		{"xor: both", "bdev_lvol_get_lvstores", map[string]any{"uuid": g.lvs, "lvs_name": "disk-1"}, -22, "Invalid argument"},
		{"xor: neither", "bdev_lvol_get_lvstores", map[string]any{}, -22, "Invalid argument"},
		{"xor: -ENODEV", "bdev_lvol_get_lvstores", map[string]any{"lvs_name": "nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"xor: -ENODEV", "bdev_lvol_get_lvstores", map[string]any{"uuid": ""}, spdkrpc.CodeNoSuchDevice, "No such device"},

		// vbdev_lvol_rpc.c rpc_bdev_lvol_get_lvols. go-spdk-helper's
		// BdevLvolGetLvols sends "uuid", which this decoder does not know.
		{"decoder: unknown member", "bdev_lvol_get_lvols", map[string]any{"uuid": g.lvs}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: wrong type", "bdev_lvol_get_lvols", map[string]any{"lvs_uuid": 7}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: null member", "bdev_lvol_get_lvols", map[string]any{"lvs_name": nil}, spdkrpc.CodeInternalError, decodeFailed},
		{"xor: both", "bdev_lvol_get_lvols", map[string]any{"lvs_uuid": g.lvs, "lvs_name": "disk-1"}, -22, "Invalid argument"},
		{"xor: neither", "bdev_lvol_get_lvols", map[string]any{}, -22, "Invalid argument"},
		{"xor: -ENODEV", "bdev_lvol_get_lvols", map[string]any{"lvs_name": "nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},

		// vbdev_lvol_rpc.c rpc_bdev_lvol_delete.
		{"decoder: no params", "bdev_lvol_delete", nil, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: name missing", "bdev_lvol_delete", map[string]any{}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: names are case-sensitive", "bdev_lvol_delete", map[string]any{"Name": "disk-1/" + goldenHead}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: null name", "bdev_lvol_delete", map[string]any{"name": nil}, spdkrpc.CodeInternalError, decodeFailed},
		{"decoder: unknown member", "bdev_lvol_delete", map[string]any{"name": "disk-1/" + goldenHead, "sync": true}, spdkrpc.CodeInternalError, decodeFailed},
		{"no such lvol: -ENODEV", "bdev_lvol_delete", map[string]any{"name": "disk-1/nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"no such lvol: -ENODEV", "bdev_lvol_delete", map[string]any{"name": ""}, spdkrpc.CodeNoSuchDevice, "No such device"},

		// bdev_raid_rpc.c rpc_bdev_raid_get_bdevs and rpc_bdev_raid_delete:
		// a decoder failure is a parse error there.
		{"decoder: no params", "bdev_raid_get_bdevs", nil, spdkrpc.CodeParseError, decodeFailed},
		{"decoder: wrong type", "bdev_raid_get_bdevs", map[string]any{"category": 7}, spdkrpc.CodeParseError, decodeFailed},
		{"raid_bdev_str_to_state: -EINVAL", "bdev_raid_get_bdevs", map[string]any{"category": "weird"}, -22, "Invalid argument"},
		{"decoder: no params", "bdev_raid_delete", nil, spdkrpc.CodeParseError, decodeFailed},
		{"decoder: wrong type", "bdev_raid_delete", map[string]any{"name": 7}, spdkrpc.CodeParseError, decodeFailed},
		{"decoder: unknown member", "bdev_raid_delete", map[string]any{"name": goldenEngine, "force": true}, spdkrpc.CodeParseError, decodeFailed},
		{"raid_bdev_find_by_name: -ENODEV", "bdev_raid_delete", map[string]any{"name": "vol-e-9"}, spdkrpc.CodeNoSuchDevice, "raid bdev vol-e-9 not found"},

		// vbdev_lvol_rpc.c rpc_bdev_lvol_get_xattr and _set_xattr.
		{"decoder: xattr_name missing", "bdev_lvol_get_xattr", map[string]any{"name": g.snap}, spdkrpc.CodeInternalError, decodeFailed},
		{"no such bdev: -ENODEV", "bdev_lvol_get_xattr", map[string]any{"name": "disk-1/nope", "xattr_name": "user_created"}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"not an lvol: -ENODEV", "bdev_lvol_get_xattr", map[string]any{"name": goldenEngine, "xattr_name": "user_created"}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"blob has no such xattr: -ENOENT", "bdev_lvol_get_xattr", map[string]any{"name": g.head, "xattr_name": "user_created"}, spdkrpc.CodeInternalError, "No such file or directory"},
		{"decoder: xattr_value missing", "bdev_lvol_set_xattr", map[string]any{"name": g.head, "xattr_name": "k"}, spdkrpc.CodeInternalError, decodeFailed},
		{"no such bdev: -ENODEV", "bdev_lvol_set_xattr", map[string]any{"name": "disk-1/nope", "xattr_name": "k", "xattr_value": "v"}, spdkrpc.CodeNoSuchDevice, "No such device"},

		// Longhorn's vbdev_lvol_rpc.c rpc_bdev_lvol_get_snapshot_checksum:
		// every failure is -ENODEV.
		{"decoder: no params", "bdev_lvol_get_snapshot_checksum", nil, spdkrpc.CodeInternalError, decodeFailed},
		{"not a snapshot: -ENODEV", "bdev_lvol_get_snapshot_checksum", map[string]any{"name": g.head}, spdkrpc.CodeNoSuchDevice, "No such device"},
		{"no such bdev: -ENODEV", "bdev_lvol_get_snapshot_checksum", map[string]any{"name": "disk-1/nope"}, spdkrpc.CodeNoSuchDevice, "No such device"},
	} {
		err := g.c.Call(context.Background(), tc.method, tc.params, nil)
		var rerr *spdkrpc.RPCError
		if !errors.As(err, &rerr) || rerr.Code != tc.code || rerr.Message != tc.msg {
			t.Errorf("%s %s: %v, want %d %q (%s)", tc.method, paramsString(tc.params), err, tc.code, tc.msg, tc.why)
		}
	}
	// The snapshot without a registered checksum is -ENODEV too.
	if _, err := g.srv.Snapshot("disk-1", goldenHead, "vol-r-0a1b2c3d-snap-s2"); err != nil {
		t.Fatal(err)
	}
	err := g.c.Call(context.Background(), "bdev_lvol_get_snapshot_checksum", map[string]string{"name": "disk-1/vol-r-0a1b2c3d-snap-s2"}, nil)
	var rerr *spdkrpc.RPCError
	if !errors.As(err, &rerr) || rerr.Code != spdkrpc.CodeNoSuchDevice || rerr.Message != "No such device" {
		t.Errorf("checksum never registered: %v", err)
	}
	// None of the refused deletes took anything.
	if got := g.srv.LvolAliases(); len(got) != 3 || len(g.srv.RaidNames()) != 1 {
		t.Errorf("after refused calls: lvols %v, RAID bdevs %v", got, g.srv.RaidNames())
	}
}

func paramsString(p any) string {
	b, _ := json.Marshal(p)
	return string(b)
}
