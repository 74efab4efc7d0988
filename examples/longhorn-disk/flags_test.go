package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
)

// TestFlags table-tests the command line: help, stray arguments, missing
// and bad flags, purges without -yes, bad input files.
func TestFlags(t *testing.T) {
	base := t.TempDir()
	disk := filepath.Join(base, "disk")
	if err := diskscantest.NewDisk(disk, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"} {
		if err := diskscantest.MakeReplica(disk, n, diskscantest.Replica{}); err != nil {
			t.Fatal(err)
		}
	}
	file := func(name, body string) string {
		p := filepath.Join(base, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	list := file("replicas.json", `{"kind":"List","items":[{"metadata":{"name":"pvc-1-r-1"},"spec":{"nodeID":"node-1","diskID":"uuid-1","diskPath":"`+disk+`","dataDirectoryName":"pvc-1-0a1b2c3d"}}]}`)
	broken := file("broken.json", `{"items":[`)
	missing := filepath.Join(base, "missing.json")
	noCfg := filepath.Join(base, "nocfg")
	if err := os.MkdirAll(filepath.Join(noCfg, "replicas"), 0o755); err != nil {
		t.Fatal(err)
	}
	oneDisk := filepath.Join(base, "one")
	if err := diskscantest.NewDisk(oneDisk, "disk-1", "uuid-1"); err != nil {
		t.Fatal(err)
	}
	if err := diskscantest.MakeReplica(oneDisk, "pvc-1-0a1b2c3d", diskscantest.Replica{}); err != nil {
		t.Fatal(err)
	}
	kept := func(t *testing.T, _, _ string) {
		for _, n := range []string{"pvc-1-0a1b2c3d", "pvc-2-4e5f6a7b"} {
			if _, err := os.Stat(filepath.Join(disk, "replicas", n, "volume.meta")); err != nil {
				t.Errorf("%s touched: %v", n, err)
			}
		}
	}
	args := func(extra ...string) []string {
		return append([]string{"-disk", disk, "-node", "node-1", "-replicas", list}, extra...)
	}
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(context.Background(), args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: []string{
			"lists the orphaned replica directories", "Usage: longhorn-disk", kubectlReplicas,
			"-disk", "-node", "-replicas", "-disk-name", "-disk-uuid", "-fsid", "-purge", "-purge-all", "-yes", "-allow-empty-expected", "-allow-mass"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: longhorn-disk"}},
		{Name: "stray argument", Args: args("pvc-2-4e5f6a7b"), Code: 2, Stderr: []string{`"pvc-2-4e5f6a7b"`, "no positional arguments"}, Check: kept},
		{Name: "missing flags", Args: []string{"-disk", disk}, Code: 2, Stderr: []string{"-node, -replicas required"}},
		{Name: "unknown flag", Args: args("-purgeall"), Code: 2, Stderr: []string{"-purgeall"}, Check: kept},
		{Name: "listing", Args: args(), Code: 0, Stdout: []string{"orphan   pvc-2-4e5f6a7b"}},
		{Name: "-purge-all without -yes", Args: args("-purge-all"), Code: 3,
			Stdout: []string{"would purge 1 directory (", "add -yes"}, Stderr: []string{"dry run: nothing was purged; add -yes"}, Check: kept},
		{Name: "-purge without -yes", Args: args("-purge", "pvc-2-4e5f6a7b"), Code: 3,
			Stdout: []string{"would purge 1 directory ("}, Stderr: []string{"add -yes"}, Check: kept},
		{Name: "-yes without an action", Args: args("-yes"), Code: 2, Stderr: []string{"-yes confirms -purge or -purge-all", "(see longhorn-disk -h)"}, Check: kept},
		{Name: "-purge with -purge-all", Args: args("-purge", "pvc-2-4e5f6a7b", "-purge-all", "-yes"), Code: 2, Stderr: []string{"conflict"}, Check: kept},
		{Name: "bad flag is one line", Args: args("-purgeall"), Code: 2, Check: func(t *testing.T, _, stderr string) {
			if n := strings.Count(stderr, "\n"); n != 1 || strings.Contains(stderr, "Usage:") {
				t.Errorf("stderr is %d lines, or holds the usage:\n%s", n, stderr)
			}
		}},
		{Name: "-disk-uuid given, no config", Args: []string{"-disk", noCfg, "-disk-uuid", "uuid-9", "-node", "node-1", "-replicas", list}, Code: 1,
			Check: func(t *testing.T, stdout, stderr string) {
				if strings.Contains(stderr, "no -disk-uuid given") || !strings.Contains(stdout, "UUID uuid-9") {
					t.Errorf("-disk-uuid was not taken:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
				}
			}},
		{Name: "-disk-uuid given, no config, -purge-all", Args: []string{"-disk", noCfg, "-disk-uuid", "uuid-9", "-node", "node-1", "-replicas", list, "-purge-all", "-yes"}, Code: 4,
			Stderr: []string{"nothing is purged"}},
		{Name: "one entry reads as English", Args: []string{"-disk", oneDisk, "-node", "node-1", "-replicas", list}, Code: 0, Stdout: []string{"1 entry in replicas/"}},
		{Name: "-prepare with another flag", Args: []string{"-prepare", filepath.Join(base, "p1"), "-node", "node-1"}, Code: 2, Stderr: []string{"-prepare takes no other flag"}},
		{Name: "-prepare", Args: []string{"-prepare", filepath.Join(base, "p2")}, Code: 0, Stdout: []string{"longhorn-disk -disk " + filepath.Join(base, "p2", "disk")}},
		{Name: "-prepare, then list", Args: []string{"-disk", filepath.Join(base, "p2", "disk"), "-node", "node-1", "-replicas", filepath.Join(base, "p2", "replicas.json")}, Code: 0,
			Stdout: []string{"3 entries in replicas/: 1 expected, 2 orphaned"}},
		{Name: "-prepare, then dry run", Args: []string{"-disk", filepath.Join(base, "p2", "disk"), "-node", "node-1", "-replicas", filepath.Join(base, "p2", "replicas.json"), "-purge-all"}, Code: 3,
			Stdout: []string{"would purge 2 directories"}},
		{Name: "-prepare of a full directory", Args: []string{"-prepare", filepath.Join(base, "p2")}, Code: 1, Stderr: []string{"not empty"}},
		{Name: "-purge of a non-orphan", Args: args("-purge", "pvc-1-0a1b2c3d", "-yes"), Code: 1, Stderr: []string{`"pvc-1-0a1b2c3d" is not an orphan`}, Check: kept},
		{Name: "missing -replicas file", Args: []string{"-disk", disk, "-node", "node-1", "-replicas", missing}, Code: 1, Stderr: []string{missing}},
		{Name: "broken -replicas file", Args: []string{"-disk", disk, "-node", "node-1", "-replicas", broken, "-purge-all", "-yes"}, Code: 1,
			Stderr: []string{"-replicas " + broken}, Check: kept},
	})
}
