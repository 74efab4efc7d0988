package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

func TestInventoryJudgesAndDeletesOnlyWhenAsked(t *testing.T) {
	dir, err := os.MkdirTemp("", "spdkinv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := spdktest.Start(filepath.Join(dir, "s.sock"), spdktest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
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
	expected := filepath.Join(dir, "expected.json")
	if err := os.WriteFile(expected, []byte(`{
  "engines": [{"name": "keep-e-0"}],
  "replicas": [{"name": "keep-r-11111111"}, {"name": "stop-r-33333333", "desiredState": "stopped", "currentState": "stopped"}]
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"-socket", srv.SocketPath(), "-node", "n1", "-instance-manager", "im1"}
	exec := func(args ...string) (string, error) {
		var buf bytes.Buffer
		err := run(context.Background(), append(append([]string{}, base...), args...), &buf)
		return buf.String(), err
	}

	out, err := exec()
	if err != nil || strings.Count(out, "\n") != 5 || strings.Contains(out, "orphan") {
		t.Fatalf("plain listing: %v\n%s", err, out)
	}
	out, err = exec("-expected", expected)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 orphan(s)", "gone-e-0", "no engine record exists", "record is stopped but the runtime object still exists", "owned: replica-instance keep-r-11111111"} {
		if !strings.Contains(out, want) {
			t.Errorf("judged listing lacks %q:\n%s", want, out)
		}
	}
	if n := srv.CallCount("bdev_lvol_delete") + srv.CallCount("bdev_raid_delete"); n != 0 {
		t.Fatalf("%d deletions without -delete", n)
	}
	if _, err := exec("-delete"); err == nil {
		t.Fatal("-delete without -expected accepted")
	}
	out, err = exec("-expected", expected, "-delete")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Join(srv.LvolAliases(), " "); got != "disk-1/keep-r-11111111" {
		t.Fatalf("lvols left: %s\n%s", got, out)
	}
	if got := strings.Join(srv.RaidNames(), " "); got != "keep-e-0" {
		t.Fatalf("RAID bdevs left: %s", got)
	}

	// A typo in the expected file is an error, not an orphan.
	if err := os.WriteFile(expected, []byte(`{"engine": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := exec("-expected", expected); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("err = %v", err)
	}
}
