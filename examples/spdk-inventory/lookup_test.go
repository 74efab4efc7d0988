package main

import (
	"context"
	"testing"

	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
)

// TestExpectedLookupCountsItsRecords: the -expected file's view counts
// its engines and replicas (a name listed twice once), so spdk.Orphans
// reports an empty kind as the guard's NoneExpected.
func TestExpectedLookupCountsItsRecords(t *testing.T) {
	e := &Expected{Engines: []ExpectedInstance{{Name: "vol-e-0"}},
		Replicas: []ExpectedInstance{{Name: "vol-r-1"}, {Name: "vol-r-2"}, {Name: "vol-r-2"}}}
	c, ok := e.lookup("node-1", "im-1").(spdk.RecordCounter)
	if !ok {
		t.Fatal("the -expected view is no spdk.RecordCounter")
	}
	for kind, want := range map[orphan.Kind]int{orphan.KindEngineInstance: 1, orphan.KindReplicaInstance: 2} {
		if n, err := c.CountInstances(context.Background(), kind); err != nil || n != want {
			t.Errorf("%s: %d, %v; want %d", kind, n, err, want)
		}
	}
	empty, _ := (&Expected{}).lookup("node-1", "im-1").(spdk.RecordCounter)
	if n, err := empty.CountInstances(context.Background(), orphan.KindReplicaInstance); err != nil || n != 0 {
		t.Errorf("empty file: %d, %v", n, err)
	}
}
