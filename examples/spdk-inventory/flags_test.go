package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
)

// TestFlags table-tests the command line through runCommand, as main
// runs it: help, stray arguments, -delete without -yes, Longhorn's field
// names in the hand-written list, bad input files.
func TestFlags(t *testing.T) {
	srv, dir := node(t)
	base := []string{"-socket", srv.SocketPath(), "-node", "n1", "-instance-manager", "im1"}
	file := func(name, body string) string { return write(t, dir, name, body) }
	list := file("records.json", handWritten)
	longhornNames := file("longhorn.json", `{
  "engines": [{"name": "keep-e-0", "desireState": "running", "currentState": "running", "ownerID": "n1", "instanceManagerName": "im1"}],
  "replicas": [{"name": "keep-r-11111111"}, {"name": "stop-r-33333333", "desireState": "stopped", "currentState": "stopped"}]
}`)
	disagree := file("disagree.json", `{"replicas": [{"name": "stop-r-33333333", "desireState": "stopped", "desiredState": "running"}]}`)
	typo := file("typo.json", `{"replicas": [{"name": "stop-r-33333333", "desireStat": "stopped"}]}`)
	broken := file("broken.json", `{"engines": [`)
	missing := filepath.Join(dir, "missing.json")
	empty := file("empty.json", `{"engines": [], "replicas": []}`)
	all := file("all.json", `{"engines": [{"name": "keep-e-0"}, {"name": "gone-e-0"}], "replicas": [{"name": "keep-r-11111111"}, {"name": "gone-r-22222222"}, {"name": "stop-r-33333333", "desireState": "stopped", "currentState": "stopped"}]}`)
	nothingDeleted := func(t *testing.T, _, _ string) {
		if n := deletions(srv); n != 0 {
			t.Fatalf("%d deletions", n)
		}
	}
	with := func(args ...string) []string { return append(append([]string{}, base...), args...) }
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(context.Background(), args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: []string{
			"lists this node's Longhorn v2 engines", "Usage: spdk-inventory", kubectlRecords,
			"-socket", "-node", "-instance-manager", "-expected", "-delete", "-yes", "-allow-mass-delete", "-timeout"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: spdk-inventory"}},
		{Name: "stray argument", Args: with("-expected", list, "-delete", "-yes", "now"), Code: 2,
			Stderr: []string{`"now"`, "no positional arguments"}, Check: nothingDeleted},
		{Name: "-delete without -expected", Args: with("-delete", "-yes"), Code: 2, Stderr: []string{"-delete needs -expected"}, Check: nothingDeleted},
		{Name: "no -node", Args: []string{"-socket", srv.SocketPath(), "-instance-manager", "im1"}, Code: 2,
			Stderr: []string{"-node required", "(see spdk-inventory -h)"}, Check: nothingDeleted},
		{Name: "no -node nor -instance-manager", Args: []string{"-socket", srv.SocketPath()}, Code: 2,
			Stderr: []string{"-node, -instance-manager required"}, Check: nothingDeleted},
		{Name: "-yes without -delete", Args: with("-expected", list, "-yes"), Code: 2, Stderr: []string{"-yes confirms -delete"}, Check: nothingDeleted},
		{Name: "refused: empty list", Args: with("-expected", empty, "-delete", "-yes"), Code: 4, Stderr: []string{"refusing -delete"}, Check: nothingDeleted},
		{Name: "nothing to delete, dry run", Args: with("-expected", all, "-delete"), Code: 0, Stdout: []string{"0 orphans"}, Check: nothingDeleted},
		{Name: "-delete without -yes", Args: with("-expected", list, "-delete"), Code: 3,
			Stdout: []string{"dry run: -delete would delete 2 orphans", "gone-e-0", "gone-r-22222222", "add -yes"},
			Stderr: []string{"nothing was deleted; add -yes"}, Check: nothingDeleted},
		{Name: "Longhorn's field names", Args: with("-expected", longhornNames), Code: 0, Stdout: []string{"2 orphans"}},
		{Name: "both spellings disagree", Args: with("-expected", disagree), Code: 1,
			Stderr: []string{disagree, "stop-r-33333333", "desireState", "desiredState"}},
		{Name: "unknown field", Args: with("-expected", typo, "-delete", "-yes"), Code: 1,
			Stderr: []string{"-expected " + typo, `unknown field "desireStat"`, "desireState (or desiredState)"}, Check: nothingDeleted},
		{Name: "broken file", Args: with("-expected", broken), Code: 1, Stderr: []string{"-expected " + broken}},
		{Name: "missing file", Args: with("-expected", missing), Code: 1, Stderr: []string{"-expected", missing}},
		{Name: "bad -timeout", Args: with("-timeout", "soon"), Code: 2, Stderr: []string{"-timeout"}},
	})
}

// TestHandWrittenFieldNames: Longhorn's spellings and the older ones fill
// the same record, alone or together when they agree.
func TestHandWrittenFieldNames(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"Longhorn's", `{"replicas": [{"name": "r", "desireState": "stopped", "ownerID": "n2", "instanceManagerName": "im2"}]}`},
		{"older", `{"replicas": [{"name": "r", "desiredState": "stopped", "ownerNode": "n2", "instanceManager": "im2"}]}`},
		{"both, agreeing", `{"replicas": [{"name": "r", "desireState": "stopped", "desiredState": "stopped", "ownerID": "n2", "instanceManager": "im2"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := parseHandWritten([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			r := exp.Replicas[0]
			if r.DesiredState != "stopped" || r.OwnerNode != "n2" || r.InstanceManager != "im2" {
				t.Fatalf("record %+v", r)
			}
		})
	}
	if _, err := parseHandWritten([]byte(`{"engines": [{"desireState": "running"}]}`)); err == nil || !strings.Contains(err.Error(), "engines entry 0 has no name") {
		t.Fatalf("nameless entry: %v", err)
	}
}
