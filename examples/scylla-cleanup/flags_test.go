package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestFlags table-tests the command line: help, stray arguments, bad
// flag values, -run-cleanup with and without -yes, a bad -baseline file.
func TestFlags(t *testing.T) {
	srv := tokenringtest.NewServer(tokenringtest.Cluster{
		Local: "10.0.0.1",
		Nodes: []tokenringtest.Node{
			{Endpoint: "10.0.0.1", HostID: "h1", Datacenter: "dc1", Rack: "r1", Tokens: []string{"10"}},
			{Endpoint: "10.0.0.2", HostID: "h2", Datacenter: "dc1", Rack: "r1", Tokens: []string{"20"}},
		},
		Keyspaces: []tokenringtest.Keyspace{{Name: "shop"}, {Name: "system", Local: true}},
	}, tokenringtest.ServerOptions{})
	defer srv.Close()
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	untouched := func(t *testing.T, _, _ string) {
		if n, cleaned := srv.Node().StopCalls(), srv.Node().Cleaned(); n != 0 || len(cleaned) != 0 {
			t.Fatalf("%d stop calls, cleaned %v, want none", n, cleaned)
		}
	}
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: []string{
			"inspects a ScyllaDB node's token ring", "Usage: scylla-cleanup",
			"-api", "-agent-token-file", "-ca-file", "-save", "-baseline", "-run-cleanup", "-yes", "-timeout", "-keyspace"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: scylla-cleanup"}},
		{Name: "stray argument", Args: []string{"-api", srv.URL, "cleanup"}, Code: 2, Stderr: []string{`"cleanup"`, "no positional arguments"}, Check: untouched},
		{Name: "-api without a scheme", Args: []string{"-api", "10.0.0.1:10000"}, Code: 2, Stderr: []string{"-api", "has no scheme"}},
		{Name: "bad -keyspace", Args: []string{"-keyspace", "shop"}, Code: 2, Stderr: []string{"-keyspace", `"shop"`}},
		{Name: "ring only", Args: []string{"-api", srv.URL}, Code: 0, Stdout: []string{"owns 1 token\n"}, Check: untouched},
		{Name: "-save with -baseline", Args: []string{"-api", srv.URL, "-save", filepath.Join(dir, "b.json"), "-baseline", broken, "-keyspace", "shop=SimpleStrategy:1"}, Code: 2,
			Stderr: []string{"-save and -baseline conflict", "(see scylla-cleanup -h)"}, Check: untouched},
		{Name: "-save without -keyspace", Args: []string{"-api", srv.URL, "-save", filepath.Join(dir, "b.json")}, Code: 2, Stderr: []string{"-save needs -keyspace"}},
		{Name: "-yes without -run-cleanup", Args: []string{"-api", srv.URL, "-yes"}, Code: 2, Stderr: []string{"-yes confirms -run-cleanup"}, Check: untouched},
		{Name: "-all without -run-cleanup", Args: []string{"-api", srv.URL, "-all"}, Code: 2, Stderr: []string{"-all only changes -run-cleanup"}, Check: untouched},
		{Name: "-run-cleanup without -yes", Args: []string{"-api", srv.URL, "-run-cleanup"}, Code: 3,
			Stdout: []string{"would stop running cleanups", "[shop]", "add -yes"}, Stderr: []string{"dry run: nothing was cleaned; add -yes"}, Check: untouched},
		{Name: "missing -baseline", Args: []string{"-api", srv.URL, "-baseline", missing}, Code: 1, Stderr: []string{"-baseline", missing}},
		{Name: "broken -baseline", Args: []string{"-api", srv.URL, "-baseline", broken}, Code: 1, Stderr: []string{"-baseline " + broken}},
		{Name: "missing -agent-token-file", Args: []string{"-api", srv.URL, "-agent-token-file", missing}, Code: 1, Stderr: []string{"-agent-token-file", missing}},
		{Name: "-run-cleanup -yes", Args: []string{"-api", srv.URL, "-run-cleanup", "-yes"}, Code: 0, Stdout: []string{"cleaned [shop]"},
			Check: func(t *testing.T, _, _ string) {
				if cleaned := srv.Node().Cleaned(); len(cleaned) != 1 || cleaned[0] != "shop" {
					t.Fatalf("cleaned %v, want [shop]", cleaned)
				}
			}},
	})
}
