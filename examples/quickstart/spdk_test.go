package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestSPDKPart(t *testing.T) {
	// Unix socket paths are short; t.TempDir can be too long for one.
	dir, err := os.MkdirTemp("", "qs-spdk")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	run := func() string {
		var buf bytes.Buffer
		if err := runSPDK(context.Background(), &buf, dir); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	out := run()
	for _, want := range []string{
		"engine-instance  vol-gone-e-0",
		"orphan    no engine record exists",
		"vol-moved-e-0           uuid ",
		`undecided record is owned by node "node-2"`,
		"orphan    record is stopped but the runtime object still exists",
		"Plan: 3 orphan records to create, 0 to purge",
		"purged:  vol-gone-e-0, vol-gone-r-33333333\n",
		"refused: vol-stopped-r-44444444: runtime UUID does not match the record (ErrUUIDMismatch): nothing deleted",
		"  lvol disk-1/vol-stopped-r-44444444\n",
		"  lvol disk-1/bi-ubuntu-disk-1\n",
		"  raid vol-moved-e-0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, gone := range []string{"lvol disk-1/vol-gone", "raid vol-gone-e-0", dir} {
		if strings.Contains(out, gone) {
			t.Errorf("output contains %q:\n%s", gone, out)
		}
	}
	if again := run(); again != out {
		t.Errorf("output is not deterministic:\n%s\n---\n%s", out, again)
	}
}
