package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDiskscanPart(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := runDiskscan(context.Background(), &buf, dir); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	out := buf.String()
	for _, want := range []string{
		`A Longhorn v1 disk "disk-1" with 9 entries in replicas/; the cluster's replica objects expect 2 of them.`,
		"disk Ready",
		"  owned     pvc-db-3b7e9a05      a replica object expects it on this disk\n",
		"  orphan    pvc-old-c4a1e7d2     no replica object expects it: volume 64.0 MiB, 2.0 MiB allocated (sparse)\n",
		"  orphan    pvc-moved-0e5d6f7a   no replica object expects it: volume 16.0 MiB, 0.5 MiB allocated (sparse)\n",
		"  skipped   pvc-scratch          not a replica: name does not end in -<8 letters or digits>\n",
		"  skipped   pvc-short-1a2b       not a replica: name does not end in -<8 letters or digits>\n",
		"  skipped   pvc-half-9c8b7a6d    not a replica: no volume.meta\n",
		"  skipped   pvc-torn-5d4c3b2a    not a replica: invalid volume.meta",
		"Plan (orphan.Decide): 3 orphan records to create, 0 to purge; the store holds 3 records, marked DataCleanable=True.",
		"Deletion requested for pvc-old-c4a1e7d2; the next sweep plans 1 purge:",
		"  purged pvc-old-c4a1e7d2: 2.0 MiB reclaimed\n",
		"purged 0, forgotten 1 (record dropped, data kept)",
		"Deletion requested for pvc-stale-7e8f9a0b while node node-1 is being evicted (disk scan: Ready): purged 0, forgotten 1; data kept.",
		"Eviction over: the next sweep creates its record again (1 created)",
		"The replica list comes back empty (read from the wrong namespace): 4 records, all deleted by a user.",
		"  the guard refuses 4 purges, purges 0: NoneExpected (records marked PurgeGuarded=True)",
		"The list is right again: 3 records forgotten (owned); the user's request for the real orphan stands: 1 purged.",
		"Records left: 0.",
		"Orphaned data left on disk-1: 0.0 MiB.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, dir) {
		t.Errorf("output shows the temporary path:\n%s", out)
	}
	// Deterministic: a second run in another directory prints the same.
	var again bytes.Buffer
	if err := runDiskscan(context.Background(), &again, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if again.String() != out {
		t.Errorf("two runs differ:\n%s\n---\n%s", out, again.String())
	}
}
