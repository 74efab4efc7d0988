package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// lastCopySHA256 is the SHA-256 of pvc-lost's data as the best copy holds
// it, built here on its own: 16 MiB of zeros, the snapshot's blocks 0 and
// 100 ('a', 'b'), the head's blocks 1 and 2000 ('z').
var lastCopySHA256 = func() string {
	img := make([]byte, 16<<20)
	for block, b := range map[int]byte{0: 'a', 100: 'b', 1: 'z', 2000: 'z'} {
		copy(img[block*4096:(block+1)*4096], bytes.Repeat([]byte{b}, 4096))
	}
	sum := sha256.Sum256(img)
	return hex.EncodeToString(sum[:])
}()

// TestLastCopyPart: with auto-deletion on, every copy of the faulted
// volume that holds its data is kept, the one whose rebuild did not
// finish (which the export refuses) too, each refusal printed with its
// reason and what the copy holds; the copy never written and the deleted
// volume's copy are purged, a user's delete of the best copy is refused
// too, and the best copy's export has the SHA-256 of the data written to
// it.
func TestLastCopyPart(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := runLastCopy(context.Background(), &buf, dir); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	out := buf.String()
	for _, want := range []string{
		"  kept    pvc-lost-a1b2c3d4  Recoverable=True Reusable        PurgeGuarded: LastCopy\n",
		"  kept    pvc-lost-c9d0e1f2  Recoverable=False NotRecoverable  PurgeGuarded: LastCopy\n",
		"  kept    pvc-lost-e5f6a7b8  Recoverable=True Reusable        PurgeGuarded: LastCopy\n",
		"  purged  pvc-gone-0a1b2c3d  Recoverable, of a deleted volume\n",
		"  purged  pvc-lost-7f8e9d0c  NoData: it holds none of the volume's data\n",
		"  refused pvc-lost-a1b2c3d4  LastCopy: it holds data of volume pvc-lost, which is faulted: it may be the last copy of the volume's data\n" +
			"                              (the copy holds data the tool can export)\n",
		"  refused pvc-lost-c9d0e1f2  LastCopy: it holds data of volume pvc-lost, which is faulted: it may be the last copy of the volume's data\n" +
			"                              (the copy holds data the tool cannot export today: rebuilding)\n",
		"  refused pvc-lost-e5f6a7b8  LastCopy: it holds data of volume pvc-lost, which is faulted",
		"volume pvc-lost: a recoverable copy, revision counter 42, rank 1 among the copies of the volume seen (1 is the best);\n",
		"dataDirectoryName=pvc-lost-a1b2c3d4 diskPath=<disk> head=volume-head-001.img size=16777216 revisionCounter=42\n",
		"A user deletes the record of pvc-lost-a1b2c3d4: purged 0, refused 3 (LastCopy).\n",
		"(One refusal is the user's request; the other 2 are the automatic purges of the other copies,\n",
		"second sweep's refusals (Result.Refused: each due purge the guard held back, with its reason):\n",
		"the best copy is pvc-lost-a1b2c3d4 (revision counter 42);\n",
		"  exported 16.0 MiB to pvc-lost.img, sha256 " + lastCopySHA256 + "\n",
		"the image is the volume's data as written to that copy, block for block.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, dir) {
		t.Errorf("output shows the temporary path:\n%s", out)
	}
	var again bytes.Buffer
	if err := runLastCopy(context.Background(), &again, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if again.String() != out {
		t.Errorf("two runs differ:\n%s\n---\n%s", out, again.String())
	}
}
