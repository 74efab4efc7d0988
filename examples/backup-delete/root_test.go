//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRefusesADirThatIsNotABackupstoreRoot: any directory used to list as
// "0 volumes" and exit 0; now -dir must hold backupstore/volumes/.
func TestRefusesADirThatIsNotABackupstoreRoot(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T, dir string) string // returns the -dir to pass
		want  string                                // "" = accepted
	}{
		{"a backupstore root", func(t *testing.T, d string) string { mkdirs(t, d, "backupstore/volumes"); return d }, ""},
		{"an empty directory", func(t *testing.T, d string) string { return d }, "/backupstore (Longhorn's layout"},
		{"backupstore without volumes", func(t *testing.T, d string) string { mkdirs(t, d, "backupstore"); return d }, "backupstore/volumes"},
		{"backupstore is a file", func(t *testing.T, d string) string { writeFile(t, d, "backupstore"); return d }, "is a regular file, not a directory"},
		{"volumes is a FIFO", func(t *testing.T, d string) string {
			mkdirs(t, d, "backupstore")
			if err := syscall.Mkfifo(filepath.Join(d, "backupstore", "volumes"), 0o644); err != nil {
				t.Skip(err)
			}
			return d
		}, "is a FIFO, not a directory"},
		{"the backupstore directory itself", func(t *testing.T, d string) string {
			mkdirs(t, d, "backupstore/volumes")
			return filepath.Join(d, "backupstore")
		}, "pass its parent"},
		{"a missing directory", func(t *testing.T, d string) string { return filepath.Join(d, "nope") }, "no such file"},
		{"a file", func(t *testing.T, d string) string { writeFile(t, d, "f"); return filepath.Join(d, "f") }, "not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.build(t, t.TempDir())
			var out bytes.Buffer
			err := run(context.Background(), &out, dir, "", "", false, time.Second)
			if c.want == "" {
				if err != nil || !strings.Contains(out.String(), "0 volumes") {
					t.Fatalf("%v, output %q", err, out.String())
				}
				return
			}
			if !errors.Is(err, errNotBackupstore) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("err %v, want errNotBackupstore naming %s and saying %q", err, dir, c.want)
			}
			if out.Len() != 0 {
				t.Fatalf("printed %q before refusing", out.String())
			}
		})
	}
}

func mkdirs(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, rel), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
