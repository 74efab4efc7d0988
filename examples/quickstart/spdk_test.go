package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSPDKPartInALongTempDir runs the SPDK part where the temporary
// directory's path leaves no room for a Unix socket (a long $TMPDIR, as
// macOS has and as the README walkthrough test gives): the socket must go
// elsewhere, not fail with "bind: invalid argument".
func TestSPDKPartInALongTempDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := runSPDK(context.Background(), &buf, dir); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Plan: 4 orphan records to create") {
		t.Fatalf("the SPDK part did not run through:\n%s", buf.String())
	}
}

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
		"vol-moved-e-0            uuid ",
		`undecided record is owned by node "node-2"`,
		// The detached volume: its engine's RAID bdev is an orphan, its
		// replica (a stopped record) is owned and keeps its lvols.
		"engine-instance  vol-detached-e-0         uuid ",
		"orphan    record is stopped but the runtime object still exists",
		`replica-instance vol-detached-r-44444444  uuid `,
		`owned     a replica record exists (state "stopped")`,
		"Plan: 4 orphan records to create, 0 to purge",
		// The replica whose record is gone is purged with its tree.
		"purged:  vol-detached-e-0, vol-gone-e-0, vol-gone-r-33333333\n",
		"refused: vol-redo-r-55555555: runtime UUID does not match the record (ErrUUIDMismatch): nothing deleted",
		"  lvol disk-1/vol-detached-r-44444444\n",
		"  lvol disk-1/vol-detached-r-44444444-snap-daily\n",
		"  lvol disk-1/vol-redo-r-55555555\n",
		"  lvol disk-1/bi-ubuntu-disk-1\n",
		"  raid vol-moved-e-0\n",
		// The deleted volume's exposures and its engine's controller to
		// its remote replica are removed with their engine and replica;
		// the live engine's exposure and a live remote's controller stay.
		"subsystem …:vol-gone-e-0        engine-instance  vol-gone-e-0             orphan    removed by its engine's purge",
		"subsystem …:vol-gone-r-33333333 replica-instance vol-gone-r-33333333      orphan    removed by its replica's purge",
		"controller vol-gone-r-66666666  engine-instance  vol-gone-e-0             orphan    removed by its engine's purge",
		"subsystem …:vol-live-e-0        engine-instance  vol-live-e-0             owned     kept with its engine",
		"controller vol-other-r-77777777 replica-instance vol-other-r-77777777     owned     reported, kept: replica record vol-other-r-77777777 exists",
		// An older volume's leftovers, which no engine or replica here
		// holds: removed after the purges, as their records are gone.
		"subsystem …:vol-old-r-88888888  replica-instance vol-old-r-88888888       orphan    leftover: no record, no replica here",
		"controller vol-old-r-99999999   replica-instance vol-old-r-99999999       orphan    leftover: no record, no replica here",
		"  removed subsystem nqn.2023-01.io.longhorn.spdk:vol-old-r-88888888: no replica record vol-old-r-88888888 exists and this node runs none\n",
		"  removed controller vol-old-r-99999999: no replica record vol-old-r-99999999 exists and this node runs none\n",
		"  kept    controller vol-other-r-77777777: replica record vol-other-r-77777777 exists\n",
		"  subsystem nqn.2023-01.io.longhorn.spdk:vol-live-e-0\n",
		"  controller vol-other-r-77777777\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, gone := range []string{"lvol disk-1/vol-gone", "raid vol-gone-e-0", "raid vol-detached-e-0", "record orphan-", dir,
		"  subsystem nqn.2023-01.io.longhorn.spdk:vol-gone", "  controller vol-gone-r-66666666\n", "skipped",
		"  subsystem nqn.2023-01.io.longhorn.spdk:vol-old", "  controller vol-old-r-99999999\n", "removed subsystem nqn.2023-01.io.longhorn.spdk:vol-gone", "removed controller vol-gone"} {
		if gone == "record orphan-" {
			// Never a record for the detached volume's replica.
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), gone) && strings.Contains(line, "vol-detached-r") {
					t.Errorf("orphan record for the detached replica: %s", line)
				}
			}
			continue
		}
		if strings.Contains(out, gone) {
			t.Errorf("output contains %q:\n%s", gone, out)
		}
	}
	if again := run(); again != out {
		t.Errorf("output is not deterministic:\n%s\n---\n%s", out, again)
	}
}
