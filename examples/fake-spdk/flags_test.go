package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
)

// shortDir returns a directory short enough for a Unix socket path.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fspdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestFlags table-tests the command line through runCommand, as main runs
// it: help, stray arguments, conflicting and bad seeds, and a socket a
// live server holds. None of the cases serves.
func TestFlags(t *testing.T) {
	dir := shortDir(t)
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	typo := file("typo.json", `{"lvstores": [{"name": "disk-1", "lvol": []}]}`)
	orphanParent := file("parent.json", `{"lvstores": [{"name": "disk-1", "lvols": [{"name": "a", "parent": "nope"}]}]}`)
	cycle := file("cycle.json", `{"lvstores": [{"name": "disk-1", "lvols": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}]}`)
	twice := file("twice.json", `{"lvstores": [{"name": "disk-1", "lvols": [{"name": "a"}, {"name": "a"}]}]}`)
	broken := file("broken.json", `{"lvstores": [`)
	noNQN := file("nonqn.json", `{"lvstores": [], "raids": [], "subsystems": [{"namespaces": ["x"]}]}`)
	badListen := file("listen.json", `{"lvstores": [], "raids": [], "subsystems": [{"nqn": "n", "listen": "10.0.0.1"}]}`)
	ctrlNoNQN := file("ctrl.json", `{"lvstores": [], "raids": [], "controllers": [{"name": "c", "traddr": "10.0.0.2"}]}`)
	nsNoBdev := file("nsbdev.json", `{"lvstores": [], "raids": [], "subsystems": [{"nqn": "n", "namespaces": ["nope"]}]}`)
	missing := filepath.Join(dir, "missing.json")
	notSocket := file("plain-file", "")

	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sock := filepath.Join(dir, "s.sock")

	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(context.Background(), args, stdout, stderr, nil)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: []string{
			"serves a fake SPDK target", "Usage: fake-spdk", "-socket", "-scenario", "-seed", "rejoin", "empty", defaultSocket()}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: fake-spdk"}},
		{Name: "stray argument", Args: []string{"-socket", sock, "rejoin"}, Code: 2, Stderr: []string{`"rejoin"`, "no positional arguments"}},
		{Name: "-scenario and -seed", Args: []string{"-socket", sock, "-scenario", "rejoin", "-seed", typo}, Code: 2,
			Stderr: []string{"-scenario and -seed both given"}},
		{Name: "unknown scenario", Args: []string{"-socket", sock, "-scenario", "rejoyn"}, Code: 2,
			Stderr: []string{`-scenario: unknown scenario "rejoyn"`, "empty, rejoin", "(see fake-spdk -h)"}},
		{Name: "unknown field", Args: []string{"-socket", sock, "-seed", typo}, Code: 1, Stderr: []string{"-seed " + typo, `unknown field "lvol"`}},
		{Name: "missing parent", Args: []string{"-socket", sock, "-seed", orphanParent}, Code: 1,
			Stderr: []string{"-seed " + orphanParent, "lvol a: parent nope is not an lvol of this lvstore"}},
		{Name: "cycle", Args: []string{"-socket", sock, "-seed", cycle}, Code: 1, Stderr: []string{"-seed " + cycle, "cycle"}},
		{Name: "lvol twice", Args: []string{"-socket", sock, "-seed", twice}, Code: 1, Stderr: []string{"lvol a is given twice"}},
		{Name: "subsystem without nqn", Args: []string{"-socket", sock, "-seed", noNQN}, Code: 1, Stderr: []string{"subsystems[0] has no nqn"}},
		{Name: "listen without port", Args: []string{"-socket", sock, "-seed", badListen}, Code: 1, Stderr: []string{"subsystem n: listen"}},
		{Name: "controller without subnqn", Args: []string{"-socket", sock, "-seed", ctrlNoNQN}, Code: 1, Stderr: []string{"controllers[0] needs a name, a traddr and a subnqn"}},
		{Name: "namespace of no bdev", Args: []string{"-socket", sock, "-seed", nsNoBdev}, Code: 1, Stderr: []string{"seeding: subsystem n", "nope"}},
		{Name: "broken file", Args: []string{"-socket", sock, "-seed", broken}, Code: 1, Stderr: []string{"-seed " + broken}},
		{Name: "missing file", Args: []string{"-socket", sock, "-seed", missing}, Code: 1, Stderr: []string{"-seed", missing}},
		{Name: "a live server's socket", Args: []string{"-socket", live}, Code: 1,
			Stderr: []string{"-socket " + live, "a server is listening there"},
			Check: func(t *testing.T, _, _ string) {
				if fi, err := os.Lstat(live); err != nil || fi.Mode()&os.ModeSocket == 0 {
					t.Fatalf("the live socket was touched: %v", err)
				}
			}},
		{Name: "not a socket", Args: []string{"-socket", notSocket}, Code: 1, Stderr: []string{"-socket " + notSocket, "not a socket"},
			Check: func(t *testing.T, _, _ string) {
				if _, err := os.Stat(notSocket); err != nil {
					t.Fatalf("the file was removed: %v", err)
				}
			}},
	})
}
