package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// node is a fake SPDK with, in lvstore disk-1: keep (a live replica), gone
// (a replica of a deleted volume, with a snapshot), stop (a detached
// volume's replica, stopped record) and, as RAID bdevs, keep-e-0 (live) and
// gone-e-0 (deleted volume).
func node(t *testing.T) (*spdktest.Server, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "spdkinv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := spdktest.Start(filepath.Join(dir, "s.sock"), spdktest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, step := range []func() (string, error){
		func() (string, error) { return srv.AddLvstore("disk-1") },
		func() (string, error) { return srv.AddLvol("disk-1", "keep-r-11111111") },
		func() (string, error) { return srv.AddLvol("disk-1", "gone-r-22222222") },
		func() (string, error) { return srv.Snapshot("disk-1", "gone-r-22222222", "gone-r-22222222-snap-a") },
		func() (string, error) { return srv.AddLvol("disk-1", "stop-r-33333333") },
		func() (string, error) { return srv.AddRaid("keep-e-0", "x") },
		func() (string, error) { return srv.AddRaid("gone-e-0", "y") },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return srv, dir
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func exec(srv *spdktest.Server, args ...string) (string, error) {
	var buf bytes.Buffer
	base := []string{"-socket", srv.SocketPath(), "-node", "n1", "-instance-manager", "im1"}
	err := run(context.Background(), append(base, args...), &buf, &buf)
	return buf.String(), err
}

func deletions(srv *spdktest.Server) int {
	return srv.CallCount("bdev_lvol_delete") + srv.CallCount("bdev_raid_delete")
}

const handWritten = `{
  "engines": [{"name": "keep-e-0"}],
  "replicas": [{"name": "keep-r-11111111"}, {"name": "stop-r-33333333", "desiredState": "stopped", "currentState": "stopped"}]
}`

// kubectlList is what kubectl -n longhorn-system get
// engines.longhorn.io,replicas.longhorn.io -o json prints for the same
// records (trimmed to the fields that matter, plus some that do not).
const kubectlList = `{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [
  {"apiVersion": "longhorn.io/v1beta2", "kind": "Engine", "metadata": {"name": "keep-e-0", "namespace": "longhorn-system"},
   "spec": {"desireState": "running", "nodeID": "n1", "dataEngine": "v2"},
   "status": {"currentState": "running", "ownerID": "n1", "instanceManagerName": "im1"}},
  {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "keep-r-11111111", "namespace": "longhorn-system"},
   "spec": {"desireState": "running", "nodeID": "n1", "dataEngine": "v2"},
   "status": {"currentState": "running", "ownerID": "n1", "instanceManagerName": "im1"}},
  {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "stop-r-33333333", "namespace": "longhorn-system"},
   "spec": {"desireState": "stopped", "nodeID": "n1", "dataEngine": "v2"},
   "status": {"currentState": "stopped", "ownerID": "n1", "instanceManagerName": ""}}
]}`

func TestInventoryJudgesAndDeletesOnlyWhenAsked(t *testing.T) {
	for _, form := range []string{handWritten, kubectlList} {
		srv, dir := node(t)
		expected := write(t, dir, "expected.json", form)
		out, err := exec(srv)
		if err != nil || strings.Count(out, "\n") != 5 || strings.Contains(out, "orphan") {
			t.Fatalf("plain listing: %v\n%s", err, out)
		}
		out, err = exec(srv, "-expected", expected)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"2 orphans", "gone-e-0", "no engine record exists", "no replica record exists",
			`owned: replica-instance stop-r-33333333: a replica record exists (state "stopped")`, "owned: replica-instance keep-r-11111111"} {
			if !strings.Contains(out, want) {
				t.Errorf("judged listing lacks %q:\n%s", want, out)
			}
		}
		if n := deletions(srv); n != 0 {
			t.Fatalf("%d deletions without -delete", n)
		}
		out, err = exec(srv, "-expected", expected, "-delete", "-yes")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// The detached volume's replica keeps its lvol.
		if got := strings.Join(srv.LvolAliases(), " "); got != "disk-1/keep-r-11111111 disk-1/stop-r-33333333" {
			t.Fatalf("lvols left: %s\n%s", got, out)
		}
		if got := strings.Join(srv.RaidNames(), " "); got != "keep-e-0" {
			t.Fatalf("RAID bdevs left: %s", got)
		}
	}
}

// TestInventoryFlags table-tests the flag combinations and the guard
// against a broken expected list.
func TestInventoryFlags(t *testing.T) {
	const (
		empty     = `{"engines": [], "replicas": []}`
		kubeNone  = `{"apiVersion": "v1", "items": [], "kind": "List"}` // kubectl without -n longhorn-system
		unrelated = `{"engines": [{"name": "other-e-0"}], "replicas": [{"name": "other-r-99999999"}]}`
	)
	for _, tc := range []struct {
		name     string
		list     string // "" means no -expected
		args     []string
		err      error  // a sentinel, or nil
		errText  string // a fragment, when err is nil but an error is expected
		deleted  int    // RPC deletions expected (a replica with a snapshot is two)
		outputIn string
	}{
		{name: "listing only", args: nil},
		{name: "-delete without -expected", args: []string{"-delete", "-yes"}, err: errDeleteNeedsExpected},
		{name: "-delete without -yes", list: handWritten, args: []string{"-delete"}, err: errDeleteNeedsYes},
		{name: "-yes alone is bad usage", list: handWritten, args: []string{"-yes"}, errText: "-yes confirms -delete"},
		{name: "good list", list: handWritten, args: []string{"-delete", "-yes"}, deleted: 3, outputIn: "deleted replica-instance gone-r-22222222"},
		{name: "empty hand-written list", list: empty, args: []string{"-delete", "-yes"}, err: errEmptyExpected},
		{name: "kubectl without -n", list: kubeNone, args: []string{"-delete", "-yes"}, err: errEmptyExpected},
		{name: "empty list, explicitly allowed", list: kubeNone, args: []string{"-delete", "-yes", "-allow-mass-delete"}, deleted: 6},
		{name: "every object an orphan", list: unrelated, args: []string{"-delete", "-yes"}, err: errAllOrphans},
		{name: "every object an orphan, allowed", list: unrelated, args: []string{"-delete", "-yes", "-allow-mass-delete"}, deleted: 6},
		{name: "empty list listed without -delete", list: kubeNone, args: nil, outputIn: "5 orphans"},
		{name: "a list of the wrong kind", list: `{"items": [{"kind": "Volume", "metadata": {"name": "keep"}}]}`, args: []string{"-delete", "-yes"}, errText: `kind "Volume"`},
		{name: "a typo in the hand-written form", list: `{"engine": []}`, errText: "unknown field"},
		{name: "stray argument", list: handWritten, args: []string{"-delete", "-yes", "now"}, errText: "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, dir := node(t)
			var args []string
			if tc.list != "" {
				args = append(args, "-expected", write(t, dir, "e.json", tc.list))
			}
			out, err := exec(srv, append(args, tc.args...)...)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("err = %v, want %v\n%s", err, tc.err, out)
			case tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)):
				t.Fatalf("err = %v, want %q", err, tc.errText)
			case tc.err == nil && tc.errText == "" && err != nil:
				t.Fatalf("err = %v\n%s", err, out)
			}
			if n := deletions(srv); n != tc.deleted {
				t.Fatalf("%d deletions, want %d\n%s", n, tc.deleted, out)
			}
			if !strings.Contains(out, tc.outputIn) {
				t.Fatalf("output lacks %q:\n%s", tc.outputIn, out)
			}
		})
	}
}

func TestInventoryHelpNamesTheKubectlCommand(t *testing.T) {
	var buf bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &buf, &buf)
	if !errors.Is(err, flagErrHelp()) {
		t.Fatalf("err = %v", err)
	}
	if want := "kubectl -n longhorn-system get engines.longhorn.io,replicas.longhorn.io -o json"; !strings.Contains(buf.String(), want) {
		t.Fatalf("help lacks %q:\n%s", want, buf.String())
	}
}

func flagErrHelp() error { return flag.ErrHelp }

// TestInventoryListsExposures: the deleted volume's engine is exposed and
// built on a controller to its remote replica; a controller to a live
// remote replica has no RAID bdev yet. The listing names each one's owner
// and verdict, and -delete removes the exposure and the controller with
// the engine and leaves the live remote's controller.
func TestInventoryListsExposures(t *testing.T) {
	srv, dir := node(t)
	remote := func(name string) spdkrpc.NvmeTransportID {
		return spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: "10.0.0.2", Trsvcid: "20001", Subnqn: spdk.LonghornNQN(name)}
	}
	bdev, err := srv.AttachController("gone-r-44444444", remote("gone-r-44444444"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddRaid("gone2-e-0", bdev); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AttachController("keep-r-55555555", remote("keep-r-55555555")); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddSubsystem(spdk.LonghornNQN("gone2-e-0"), spdktest.SubsystemOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddNamespace(spdk.LonghornNQN("gone2-e-0"), "gone2-e-0"); err != nil {
		t.Fatal(err)
	}
	list := `{"engines": [{"name": "keep-e-0"}], "replicas": [{"name": "keep-r-11111111"}, {"name": "stop-r-33333333", "desiredState": "stopped", "currentState": "stopped"},
	  {"name": "keep-r-55555555", "ownerID": "n2", "instanceManagerName": "im2"}]}`
	expected := write(t, dir, "e.json", list)
	out, err := exec(srv, "-expected", expected)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"subsystem nqn.2023-01.io.longhorn.spdk:gone2-e-0 serial \"\" namespaces [1=gone2-e-0] engine-instance gone2-e-0 (by relation)  orphan, goes with its engine-instance: engine-instance gone2-e-0: no engine record exists",
		"controller gone-r-44444444 -> [10.0.0.2:20001 nqn.2023-01.io.longhorn.spdk:gone-r-44444444] bdevs [gone-r-44444444n1] used by [gone2-e-0] engine-instance gone2-e-0 (by relation)  orphan, goes with its engine-instance",
		"controller keep-r-55555555 -> [10.0.0.2:20001 nqn.2023-01.io.longhorn.spdk:keep-r-55555555] bdevs [keep-r-55555555n1] used by [] replica-instance keep-r-55555555 (by name)  owned: replica record keep-r-55555555 exists",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	out, err = exec(srv, "-expected", expected, "-delete", "-yes")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Join(srv.ControllerNames(), " "); got != "keep-r-55555555" {
		t.Errorf("controllers left: %s\n%s", got, out)
	}
	for _, s := range srv.Subsystems() {
		if s.NQN == spdk.LonghornNQN("gone2-e-0") {
			t.Errorf("the deleted engine's subsystem is left\n%s", out)
		}
	}
}
