package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/fsstore"
	"github.com/caretaker-storage/caretaker/examples/internal/cli/clitest"
)

// TestFlags table-tests the command line: help, stray arguments, missing
// flags, a deletion without -yes, a bad -dir.
func TestFlags(t *testing.T) {
	dir := seed(t)
	kept := func(t *testing.T, _, _ string) {
		s, err := fsstore.New(fsstore.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if ok, err := s.BackupExists(context.Background(), backupdelete.BackupRef{Volume: "pvc-1", Name: "backup-2"}); !ok || err != nil {
			t.Fatalf("backup-2 is gone (%v)", err)
		}
	}
	missing := filepath.Join(dir, "nope")
	clitest.Run(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return runCommand(context.Background(), args, stdout, stderr)
	}, []clitest.Case{
		{Name: "-h", Args: []string{"-h"}, Code: 0,
			Stdout: []string{"lists its volumes and backups", "Usage: backup-delete", "-dir", "-volume", "-backup", "-yes", "-lock-wait"}},
		{Name: "-help", Args: []string{"-help"}, Code: 0, Stdout: []string{"Usage: backup-delete"}},
		{Name: "no -dir", Args: nil, Code: 2, Stderr: []string{"-dir is required"}},
		{Name: "stray argument", Args: []string{"-dir", dir, "backup-2"}, Code: 2, Stderr: []string{`"backup-2"`, "no positional arguments"}},
		{Name: "-backup without -volume", Args: []string{"-dir", dir, "-backup", "backup-2"}, Code: 2, Stderr: []string{"-volume"}},
		{Name: "-volume without -backup", Args: []string{"-dir", dir, "-volume", "pvc-1"}, Code: 2, Stderr: []string{"-backup"}},
		{Name: "bad -lock-wait", Args: []string{"-dir", dir, "-lock-wait", "soon"}, Code: 2, Stderr: []string{"-lock-wait"}},
		{Name: "listing", Args: []string{"-dir", dir}, Code: 0, Stdout: []string{"pvc-1: 2 backups"}},
		{Name: "-yes without a deletion", Args: []string{"-dir", dir, "-yes"}, Code: 2, Stderr: []string{"-yes confirms a deletion", "(see backup-delete -h)"}, Check: kept},
		{Name: "deletion without -yes", Args: []string{"-dir", dir, "-volume", "pvc-1", "-backup", "backup-2"}, Code: 3,
			Stdout: []string{"would free 2 block files", "pass -yes"}, Stderr: []string{"dry run", "add -yes"}, Check: kept},
		{Name: "bad backup name", Args: []string{"-dir", dir, "-volume", "pvc-1", "-backup", "../x", "-yes"}, Code: 2,
			Stderr: []string{"-volume or -backup", `"../x"`}, Check: kept},
		{Name: "-prepare with another flag", Args: []string{"-prepare", filepath.Join(dir, "p1"), "-yes"}, Code: 2, Stderr: []string{"-prepare takes no other flag"}},
		{Name: "-prepare", Args: []string{"-prepare", filepath.Join(dir, "p2")}, Code: 0, Stdout: []string{"backup-delete -dir " + filepath.Join(dir, "p2")}},
		{Name: "-prepare, then list", Args: []string{"-dir", filepath.Join(dir, "p2")}, Code: 0, Stdout: []string{"pvc-web: 3 backups, 5 block files"}},
		{Name: "-prepare, then dry run", Args: []string{"-dir", filepath.Join(dir, "p2"), "-volume", "pvc-web", "-backup", "backup-a1b2c3d4e5f60002"}, Code: 3,
			Stdout: []string{"would free 1 block file\n"}},
		{Name: "-prepare of a full directory", Args: []string{"-prepare", dir}, Code: 1, Stderr: []string{"not empty"}},
		{Name: "missing -dir", Args: []string{"-dir", missing}, Code: 1, Stderr: []string{missing}},
		{Name: "malformed -target", Args: []string{"-target", "not-a-url"}, Code: 2, Stderr: []string{"-target not-a-url", "(see backup-delete -h)"}},
	})
}
