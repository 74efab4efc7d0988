package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestScenarios runs every scenario and checks that each timeline tells
// its story; the timelines are deterministic, so it also runs them twice
// and compares.
func TestScenarios(t *testing.T) {
	var first, second bytes.Buffer
	if err := run(context.Background(), &first, "all"); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), &second, "all"); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Error("two runs printed different timelines")
	}
	out := first.String()
	for _, want := range []string{
		"== lifecycle", "volume attached for volume-rebuilding-controller-vol-a (maintenance mode)", "Completed",
		"== interrupt", "Interrupted: ticket longhorn-ui (priority 1000)",
		"== delete", "VolumeDeleting", "driver: volume gone, ticket deleted, record forgotten",
		"== stuck", "CannotProgress: rebuilding failed 3 times", "BackingOff", "not attaching",
		"== hang", "CannotProgress: no progress for 10m0s", "EVENT the engine is fixed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if err := run(context.Background(), &first, "nope"); err == nil {
		t.Error("unknown scenario accepted")
	}
}
