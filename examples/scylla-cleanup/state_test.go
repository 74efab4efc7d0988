//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/safefile"
	"github.com/caretaker-storage/caretaker/tokenring"
)

// TestStateFileBadInput: a FIFO, a directory, broken JSON or an
// oversized file at the -state path is a descriptive error, never a hang
// or a silent fresh start (which would clean done nodes again).
func TestStateFileBadInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"done": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, make([]byte, maxStateFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		is   error
		says string
	}{
		{fifo, safefile.ErrNotRegular, "FIFO"},
		{dir, safefile.ErrNotRegular, "directory"},
		{broken, nil, broken},
		{huge, bounded.ErrTooLarge, huge},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := fileStateStore{path: tc.path, hash: "h"}.Load(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.says) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Load(%s) = %v; want an error saying %q", tc.path, err, tc.says)
		}
	}
}

// TestStateFileSaveLoad: Save replaces the file whole and leaves no
// temporary file; Load gives back what was saved, and a missing file is
// a new campaign.
func TestStateFileSaveLoad(t *testing.T) {
	dir := t.TempDir()
	s := fileStateStore{path: filepath.Join(dir, "cleanup.json"), hash: "h1", keyspaces: map[string]tokenring.Replication{"shop": {Strategy: tokenring.SimpleStrategy, ReplicationFactor: 2}}}
	st, err := s.Load(context.Background())
	if err != nil || len(st.Done)+len(st.Running) != 0 {
		t.Fatalf("Load of a missing file = %+v, %v", st, err)
	}
	for _, want := range []tokenring.CleanupState{
		{Done: []string{"10.0.0.1"}, Running: []string{"10.0.0.2", "10.0.0.3"}},
		{Done: []string{"10.0.0.1", "10.0.0.2"}},
	} {
		if err := s.Save(context.Background(), want); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(context.Background())
		if err != nil || !slices.Equal(got.Done, want.Done) || !slices.Equal(got.Running, want.Running) {
			t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want the state file alone", entries, err)
	}
	other := fileStateStore{path: s.path, hash: "h2"}
	if _, err := other.Load(context.Background()); !errors.Is(err, errOtherRing) {
		t.Fatalf("Load on another ring: %v", err)
	}
	lower := fileStateStore{path: s.path, hash: "h1", keyspaces: map[string]tokenring.Replication{"shop": {Strategy: tokenring.SimpleStrategy, ReplicationFactor: 1}}}
	if _, err := lower.Load(context.Background()); !errors.Is(err, errOtherRing) || !strings.Contains(err.Error(), "keyspace shop was SimpleStrategy:2, now SimpleStrategy:1") {
		t.Fatalf("Load under another replication: %v", err)
	}
}
