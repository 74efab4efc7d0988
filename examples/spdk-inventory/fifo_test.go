//go:build unix

package main

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInventoryExpectedFIFO: a FIFO given as the expected list is refused
// at once, not opened (which would block until a writer came).
func TestInventoryExpectedFIFO(t *testing.T) {
	srv, dir := node(t)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := exec(srv, "-expected", fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocked on the FIFO")
	}
	if !slices.Contains(srv.RaidNames(), "gone-e-0") {
		t.Fatal("deleted")
	}
}
