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

// TestFlags table-tests the command line through runCommand, as main runs
// it: help, stray arguments, a non-loopback or taken address, bad seeds.
// None of the cases serves.
func TestFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	typo := file("typo.json", `{"local": "10.0.0.1", "nodes": [{"endpoint": "10.0.0.1", "token": ["1"]}]}`)
	stranger := file("stranger.json", `{"local": "10.0.0.9", "nodes": [{"endpoint": "10.0.0.1", "tokens": ["1"]}]}`)
	twice := file("twice.json", `{"local": "10.0.0.1", "nodes": [{"endpoint": "10.0.0.1"}, {"endpoint": "10.0.0.1"}]}`)
	broken := file("broken.json", `{"nodes": [`)
	missing := filepath.Join(dir, "missing.json")

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(context.Background(), args, stdout, stderr, nil)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: []string{
			"serves a fake ScyllaDB REST API", "Usage: fake-scylla", "-addr", "127.0.0.1:0", "-scenario", "-seed", "six-nodes", "scaled-out"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: fake-scylla"}},
		{Name: "stray argument", Args: []string{"six-nodes"}, Code: 2, Stderr: []string{`"six-nodes"`, "no positional arguments"}},
		{Name: "-scenario and -seed", Args: []string{"-scenario", "six-nodes", "-seed", typo}, Code: 2, Stderr: []string{"-scenario and -seed both given"}},
		{Name: "not loopback", Args: []string{"-addr", "0.0.0.0:10000"}, Code: 2, Stderr: []string{`-addr "0.0.0.0:10000"`, "not a loopback address"}},
		{Name: "no port", Args: []string{"-addr", "127.0.0.1"}, Code: 2, Stderr: []string{`-addr "127.0.0.1"`, "missing port"}},
		{Name: "address taken", Args: []string{"-addr", taken.Addr().String()}, Code: 1, Stderr: []string{"-addr " + taken.Addr().String()}},
		{Name: "unknown scenario", Args: []string{"-scenario", "six"}, Code: 2, Stderr: []string{`unknown scenario "six"`, "scaled-out, six-nodes", "(see fake-scylla -h)"}},
		{Name: "unknown field", Args: []string{"-seed", typo}, Code: 1, Stderr: []string{"-seed " + typo, `unknown field "token"`}},
		{Name: "local not a node", Args: []string{"-seed", stranger}, Code: 1, Stderr: []string{"-seed " + stranger, `local "10.0.0.9" is not one of the nodes`}},
		{Name: "node twice", Args: []string{"-seed", twice}, Code: 1, Stderr: []string{"node 10.0.0.1 is given twice"}},
		{Name: "broken file", Args: []string{"-seed", broken}, Code: 1, Stderr: []string{"-seed " + broken}},
		{Name: "missing file", Args: []string{"-seed", missing}, Code: 1, Stderr: []string{"-seed", missing}},
	})
}
