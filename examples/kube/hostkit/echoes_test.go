package hostkit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caretaker-storage/caretaker/examples/kube/hostkit"
)

// TestEchoesTellOwnWritesFromOthers: the host's own write coming back is
// an echo, once it is known; someone else's version of the object is not,
// and neither is a write the host has forgotten.
func TestEchoesTellOwnWritesFromOthers(t *testing.T) {
	e := hostkit.NewEchoes(nil)
	e.Wrote("a", "10")
	if !e.Echo("a", "10") {
		t.Error("the host's own write is not an echo")
	}
	if e.Echo("a", "11") {
		t.Error("someone else's version is an echo")
	}
	if e.Echo("b", "10") {
		t.Error("another object's event is an echo of a's write")
	}
	var nilEchoes *hostkit.Echoes
	if nilEchoes.Echo("a", "10") || nilEchoes.Gone("a") || nilEchoes.DeletedByUs("a") {
		t.Error("a nil Echoes knows a write")
	}
}

// TestEchoesHoldEventsDuringAWrite: an event that beats its write's answer
// is held and wakes nobody when it is the write's; one of another writer
// held meanwhile wakes the host once the write has returned, and a failed
// write wakes it for every event held.
func TestEchoesHoldEventsDuringAWrite(t *testing.T) {
	var wakes atomic.Int32
	e := hostkit.NewEchoes(func() { wakes.Add(1) })

	e.Begin("a")
	if !e.Echo("a", "5") {
		t.Fatal("an event during the write is not held")
	}
	e.End("a", "5", nil)
	if n := wakes.Load(); n != 0 {
		t.Fatalf("the write's own echo woke the host %d times", n)
	}

	e.Begin("a")
	e.Echo("a", "6") // a user's change, racing the host's write
	e.End("a", "7", nil)
	if n := wakes.Load(); n != 1 {
		t.Fatalf("another writer's version held during the write woke the host %d times, want 1", n)
	}

	e.Begin("b")
	e.Echo("b", "8")
	e.End("b", "", errors.New("conflict"))
	if n := wakes.Load(); n != 2 {
		t.Fatalf("an event held during a failed write woke the host %d times in all, want 2", n)
	}
}

// TestEchoesDeletion: a deletion the host marked is its own when the
// object goes, and so is the deletion timestamp appearing; a deletion
// unmarked (the call failed) or never marked is someone else's.
func TestEchoesDeletion(t *testing.T) {
	e := hostkit.NewEchoes(nil)
	e.Deleting("a", true)
	if !e.DeletedByUs("a") {
		t.Error("a marked deletion is not the host's")
	}
	if !e.Gone("a") {
		t.Error("the host's deletion, coming back, is not an echo")
	}
	if e.Gone("a") {
		t.Error("a second deletion of the name is still the host's")
	}
	e.Deleting("b", true)
	e.Deleting("b", false)
	if e.Gone("b") {
		t.Error("an unmarked deletion is the host's")
	}
}

// TestEchoesSettleWaitsForTheWatch: Pending counts the writes and
// deletions not seen through the watch; Settle returns once they are, and
// at most after its bound when they never come.
func TestEchoesSettleWaitsForTheWatch(t *testing.T) {
	e := hostkit.NewEchoes(nil)
	e.Wrote("a", "1")
	e.Wrote("b", "2")
	e.Deleting("c", true)
	if n := e.Pending(); n != 3 {
		t.Fatalf("Pending = %d, want 3", n)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Settle(context.Background(), time.Minute)
	}()
	e.Echo("a", "1")
	e.Echo("b", "999") // someone else's version: b's write will not come back
	e.Gone("c")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Settle did not return once every write came back")
	}
	if n := e.Pending(); n != 0 {
		t.Fatalf("Pending = %d after every write came back, want 0", n)
	}
	e.Wrote("d", "3")
	start := time.Now()
	e.Settle(context.Background(), 50*time.Millisecond)
	if time.Since(start) > 10*time.Second {
		t.Error("Settle did not stop at its bound")
	}
}

// TestEchoesLaterVersionSettlesEarlierWrites: the watch shows an object's
// versions in order, so the echo of a later write means the earlier
// writes of the object will not come back (their events came first, or
// were never sent): nothing is left pending.
func TestEchoesLaterVersionSettlesEarlierWrites(t *testing.T) {
	e := hostkit.NewEchoes(nil)
	e.Wrote("a", "1")
	e.Wrote("a", "2")
	e.Wrote("a", "3")
	if !e.Echo("a", "2") {
		t.Fatal("the second write is not an echo")
	}
	if n := e.Pending(); n != 1 {
		t.Fatalf("Pending = %d after the second write's echo, want 1 (the third)", n)
	}
	if !e.Echo("a", "3") {
		t.Fatal("the third write is not an echo")
	}
	if n := e.Pending(); n != 0 {
		t.Fatalf("Pending = %d after the last write's echo, want 0", n)
	}
}
